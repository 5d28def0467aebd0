"""The search tree: graphs the engine has built, and what lies below them.

Every node is a real graph (the engine's simulator is exact), reached from
the original by the actions on its parent links. The objective is the
cheapest graph, and stopping is always allowed, so a node's value is the
cheapest cost known to be reachable from it (`best_cost`, itself
included): a max backup, not a mean, since transitions and costs are
deterministic. An action's value in points of the initial cost is
`node.cost - child.best_cost`; an action no simulation has taken yet is
valued by its exact immediate change (`Expansion.costs`).

Graphs reached twice (by two orders of commuting rewrites) are one node:
`Tree.node_of` finds them by the graph's canonical hash, so that no graph
is expanded twice. An action that leads back to a node on the current
simulation's path closes a cycle and is marked dead in that node.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from xflowrl.engine import Graph
from xflowrl.planning.simulator import Expansion, Step

_NO_ACTIONS = np.zeros(0)
_NO_ACTIONS.flags.writeable = False


class Node:
    """One graph of the tree."""

    __slots__ = ("graph", "cost", "parent", "action", "expansion", "_prior", "_prior_of",
                 "children", "edge_visits", "dead", "root_only", "visits", "best_cost")

    def __init__(self, graph: Graph, cost: float, parent: Optional["Node"],
                 action: Tuple[Step, ...] = ()):
        self.graph = graph
        self.cost = cost
        self.parent = parent      # the node it was first reached from
        self.action = action      # the steps from `parent` (several: a multi-location action)
        self.expansion: Optional[Expansion] = None
        self._prior = _NO_ACTIONS
        # What gives the prior's logits, until they are first asked for.
        self._prior_of: Optional[Callable[[Expansion], np.ndarray]] = None
        self.children: Dict[int, "Node"] = {}
        self.edge_visits = np.zeros(0, np.int64)
        self.dead = np.zeros(0, bool)
        # Actions the search takes only while the node is the decision's
        # root (`PlanConfig.neutral_everywhere`).
        self.root_only = np.zeros(0, bool)
        self.visits = 0
        self.best_cost = cost

    @property
    def expanded(self) -> bool:
        return self.expansion is not None

    def attach(self, expansion: Expansion,
               logits: Callable[[Expansion], np.ndarray]) -> None:
        """Records the node's expansion and what gives its prior's logits
        (`Prior.logits`). The prior is computed when first asked for: most
        leaves are never selected from."""
        self.expansion = expansion
        count = len(expansion.actions)
        if count:
            self._prior_of = logits
            if expansion.singles:
                self.best_cost = min(self.best_cost, float(expansion.candidate_costs.min()))
        self.edge_visits = np.zeros(count, np.int64)
        self.dead = np.zeros(count, bool)
        self.root_only = np.zeros(count, bool)

    @property
    def prior(self) -> np.ndarray:
        """[M] the prior's probabilities of the node's actions (a softmax of
        its logits); empty before the expansion or where it has none."""
        if self._prior_of is not None:
            assert self.expansion is not None
            logits = self._prior_of(self.expansion)
            shifted = np.exp(logits - logits.max())
            self._prior, self._prior_of = shifted / shifted.sum(), None
        return self._prior

    @prior.setter
    def prior(self, value: np.ndarray) -> None:
        self._prior, self._prior_of = value, None

    def action_values(self) -> np.ndarray:
        """[M] the cost change (ms, positive is cheaper) each action is known
        to lead to: the child's best cost where it has a node, the candidate's
        own cost elsewhere.
        A multi-location action's estimate gives way to its child's value
        once it is built."""
        assert self.expansion is not None
        below = self.expansion.costs.copy()
        singles = self.expansion.singles
        for index, child in self.children.items():
            below[index] = (min(below[index], child.best_cost) if index < singles
                            else child.best_cost)
        return self.cost - below

    def path(self) -> List[Step]:
        """The steps from the tree's first root to here."""
        parts: List[Tuple[Step, ...]] = []
        node: Optional[Node] = self
        while node is not None and node.parent is not None:
            parts.append(node.action)
            node = node.parent
        return [step for part in reversed(parts) for step in part]


class Tree:
    """The nodes by graph hash."""

    def __init__(self):
        self._nodes: Dict[int, Node] = {}

    def __len__(self) -> int:
        return len(self._nodes)

    def nodes(self) -> List[Node]:
        """Every node, in the order they were made."""
        return list(self._nodes.values())

    def release(self) -> None:
        """Empties the tree and unlinks its nodes (parents and children),
        so that reference counting frees them, with their graphs and
        locations, as soon as nothing else holds them. Linked, they are
        reference cycles, freed only by a later pass of Python's cyclic
        collector, whose cost then falls on whatever runs then."""
        for node in self._nodes.values():
            node.parent = None
            node.children = {}
        self._nodes = {}

    def node_of(self, graph: Graph, cost: float, parent: Optional[Node],
                action: Tuple[Step, ...] = ()) -> Node:
        """The node of `graph`, made if the tree has none."""
        key = graph.hash()
        node = self._nodes.get(key)
        if node is None:
            node = self._nodes[key] = Node(graph, cost, parent, action)
        return node
