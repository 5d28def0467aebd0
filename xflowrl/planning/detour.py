"""Detours: a local look-ahead where planning stalls, its xfers then taken everywhere.

Where the planner would stop, nothing cheaper is known below the graph it
reached; a cheaper graph may still lie a few steps away, behind costlier
ones. On `squeezenet1_1` with the generated rules under `analytic/cpu`
each fire module has one (docs/planning.md, "Detours"): un-fuse the 3x3
conv's ReLU, merge the 1x1 and 3x3 convs, fuse the ReLU into the merged
conv, split it again with the ReLU fused into both halves. Simulations
spread over the whole graph rarely follow four such steps in one place,
and a breadth-first search over every candidate is swamped by the other
places' first steps (TASO's search spends its 1,000 expansions on them).

`find_detour` searches breadth first from the stalled graph, in one place
at a time:

- a first step is any candidate whose cost is at most TASO's alpha (1.05)
  times the stalled graph's: the slack TASO's search gives its queue;
- every later step must rewrite an op that an earlier step of its route
  created (one of the candidate's matched ops is newer than the stalled
  graph), under the same ceiling;
- each graph once; every graph it expands is a node of the planner's tree
  and a real step (`Planner._expand`);
- it ends at the first candidate cheaper than the stalled graph, or when
  `expansions` expansions (or a budget of the planner) are spent.

`replay_everywhere` then takes the detour's xfers, in its order, as
multi-location actions from the stalled graph (`PlanConfig.everywhere`):
where the graph repeats a block, the detour found in one place is taken in
all of them (there, all eight fire modules: TASO's -3.23% becomes -6.46%,
equality saturation's graph). The planner goes on from the cheapest graph
either end showed (`Planner._escape`).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, TYPE_CHECKING

import numpy as np

from xflowrl.engine.xfers import TASO_ALPHA
from xflowrl.env import CHEAPER
from xflowrl.planning.simulator import EVERYWHERE
from xflowrl.planning.tree import Node

if TYPE_CHECKING:  # the planner imports this module
    from xflowrl.planning.search import Planner


class Detour(NamedTuple):
    """A route from the stalled graph to a cheaper one: its nodes (the
    stalled graph's first) and the xfer of each step."""
    nodes: List[Node]
    xfers: List[int]


def find_detour(planner: "Planner", start: Node, expansions: int) -> Optional[Detour]:
    """The first detour below `start` (module docstring), or None."""
    ceiling = TASO_ALPHA * start.cost
    newest = int(start.graph.structure()["guids"].max())
    seen = {start}
    frontier: List[Detour] = [Detour([start], [])]
    spent = 0
    while frontier:
        deeper: List[Detour] = []
        for route in frontier:
            node = route.nodes[-1]
            if not node.expanded:
                if spent >= expansions or planner.out_of_budget():
                    return None
                planner.expand(node)
                spent += 1
            expansion = node.expansion
            assert expansion is not None
            matched = {}
            rows = np.flatnonzero(expansion.candidate_costs <= ceiling)
            for index, (xfer, location) in zip(rows.tolist(),
                                               expansion.actions[rows].tolist()):
                if node is not start:
                    if xfer not in matched:
                        matched[xfer] = expansion.locations.matched_ops(xfer)
                    if max(matched[xfer][location]) <= newest:
                        continue  # rewrites only ops the stalled graph has
                child = planner.child(node, index)
                if child in seen:  # the route's own nodes among them
                    continue
                seen.add(child)
                found = Detour(route.nodes + [child], route.xfers + [xfer])
                if child.cost < start.cost - CHEAPER:
                    return found
                deeper.append(found)
        frontier = deeper
    return None


def replay_everywhere(planner: "Planner", start: Node, xfers: Sequence[int]) -> List[Node]:
    """The nodes from `start` through `xfers` taken in turn as multi-location
    actions (an xfer with one location: at it), until one has no location,
    would lead back onto the path or a budget of the planner runs out; each
    node reached is expanded (a real step) while the budgets last."""
    path = [start]
    for xfer in xfers:
        node = path[-1]
        if not node.expanded:
            if planner.out_of_budget():
                return path
            planner.expand(node)
        expansion = node.expansion
        assert expansion is not None
        rows = np.flatnonzero(expansion.actions[:, 0] == xfer)
        if not len(rows):
            break
        everywhere = rows[expansion.actions[rows, 1] == EVERYWHERE]
        child = planner.child(node, int(everywhere[0] if len(everywhere) else rows[0]))
        if child in path:
            break
        path.append(child)
    if not path[-1].expanded and not planner.out_of_budget():
        planner.expand(path[-1])
    return path
