"""The engine as a planner's simulator: exact transitions, every call counted.

A planner that searches with the real engine (AlphaZero-style) sees exactly
what an agent acting in the real environment would: the same rules,
location limit L, size cap and cost model (`EngineSimulator.of(env)` takes
them from a `GraphEnv`). What it costs is counted in the environment's own
unit, the real step: one expansion (enumerating a graph's locations and
costing every candidate, what `GraphEnv.step` does after applying an
action) is one real step, whether the planner expands a node of its tree
or takes a step of a rollout. Building a candidate graph (`child`) is
counted apart (`applies`); the candidates' costs and hashes come without
building them (`xflowrl.engine.xfers.Locations`).

**Multi-location actions** (`expand(..., everywhere=True)`): besides its
candidates, a graph then offers, for every xfer with two or more
locations, the action "this xfer everywhere": the xfer applied again and
again, each time at its cheapest location, as many times as it had
locations (or until it has none), in one step of the planner. Its steps
enumerate that one rule only (`rule_enumerations`, an engine call far
cheaper than a real step, counted apart), and are named by the graph they
lead to (`Step.after`), since a single rule's locations are numbered
without the other rules' duplicates; `full_route` turns a route into the
rule set's own locations with one real step per step.

**Merging identical ops** (`merge_identical=True`): every graph the
simulator builds is then canonicalised by `xflowrl.engine.dedupe`
(common-subexpression elimination), as an e-graph stores each e-node
once. A route then holds `MERGE` steps where merging changed the graph;
`replay_route` replays such a route.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.engine.dedupe import merge_identical_ops
from xflowrl.engine.xfers import Locations
from xflowrl.env import GraphEnv
from xflowrl.planning import _inner

EVERYWHERE = -1  # the location of a multi-location action
MERGE = -1       # the xfer of a step that merged identical ops
MERGE_NAME = "merge_identical_ops"  # its name in a route of (name, location)


class Step(NamedTuple):
    """One substitution of a route: xfer `xfer` at `location` of the rule
    set's enumeration, or, where `location` is -1, at the location that
    leads to the graph of hash `after` (a multi-location action's step)."""
    xfer: int
    location: int
    after: int = 0


class Expansion(NamedTuple):
    """A graph's actions: what one real step tells about it.

    The first `singles` actions are its candidates, listed xfer by xfer,
    location by location (the order of `Locations.active_costs`' valid
    entries), with their exact costs; the rest, where asked for, are
    multi-location actions `(xfer, EVERYWHERE)`, whose cost is estimated,
    until one is built, as if the gains of their xfer's cheaper candidates
    added up (the graph's cost plus the sum of its candidates' negative
    changes)."""
    graph: Graph
    cost: float               # ms
    locations: Locations
    actions: np.ndarray       # [M, 2] int64: (xfer, location or EVERYWHERE)
    costs: np.ndarray         # [M] float64: each candidate graph's cost (ms)
    singles: int              # the candidates come first, then the multi-location actions

    @property
    def candidate_costs(self) -> np.ndarray:
        """The candidates' exact costs (the multi-location actions' left out)."""
        return self.costs[:self.singles]


class EngineSimulator:
    """Expands graphs and builds candidates with the engine, counting both.

    Attributes:
      real_steps: expansions so far (the unit of an agent's real steps).
      applies: candidate graphs built so far.
      rule_enumerations: single-rule enumerations of multi-location actions.
      merges: graphs that merging identical ops changed (`canonical`).
    """

    def __init__(self, xfers: XferSet, cost_model: CostModel, max_locations: int,
                 max_ops: int, initial_cost: float, merge_identical: bool = False):
        self.xfers = xfers
        self.merge_identical = merge_identical
        self.cost_model = cost_model
        self.max_locations = max_locations
        self.max_ops = max_ops
        self.initial_cost = initial_cost
        self.real_steps = 0
        self.applies = 0
        self.rule_enumerations = 0
        self.merges = 0

    @classmethod
    def of(cls, env: GraphEnv, merge_identical: bool = False) -> "EngineSimulator":
        """The simulator of `env`'s initial graph under its rules, cost
        model, L and size cap."""
        return cls(env.xfers, env.cost_model, env.config.max_locations, env.max_ops,
                   env.initial_cost, merge_identical)

    def canonical(self, graph: Graph) -> Tuple[Graph, Tuple[Step, ...]]:
        """`graph` with identical ops merged where the simulator merges
        them, and the `MERGE` step where that changed it."""
        if not self.merge_identical:
            return graph, ()
        merged = merge_identical_ops(graph)
        if merged is graph:
            return graph, ()
        self.merges += 1
        return merged, (Step(MERGE, EVERYWHERE),)

    def expand(self, graph: Graph, cost: Optional[float] = None,
               everywhere: bool = False) -> Expansion:
        """Every candidate of `graph` with its exact cost (and, with
        `everywhere`, the multi-location actions): one real step."""
        self.real_steps += 1
        cost = graph.cost(self.cost_model) if cost is None else cost
        locs = self.xfers.locations(graph, self.max_locations, self.max_ops)
        # The active xfers, their counts and costs in one native call.
        arrays = locs.step_arrays(None, cost_model=self.cost_model)
        active, counts, per_xfer = arrays.active, arrays.counts, arrays.costs
        assert per_xfer is not None  # a cost model was given
        # The candidates and multi-location actions in C
        # (`xflowrl.planning._inner.expansion_arrays`).
        actions, costs, singles = _inner.expansion_arrays(active, counts, per_xfer, cost,
                                                          everywhere)
        return Expansion(graph, cost, locs, actions, costs, singles)

    def child(self, expansion: Expansion, index: int) -> Tuple[Graph, Tuple[Step, ...]]:
        """The graph that action `index` of `expansion` builds (identical
        ops merged, where the simulator merges them), and its steps."""
        xfer, location = (int(a) for a in expansion.actions[index])
        steps: Tuple[Step, ...]
        if location != EVERYWHERE:
            self.applies += 1
            graph, steps = expansion.locations.apply(xfer, location), (Step(xfer, location),)
        else:
            graph, steps = self._everywhere(expansion.graph, xfer,
                                            expansion.locations.counts[xfer])
        graph, merged = self.canonical(graph)
        return graph, steps + merged

    def _everywhere(self, graph: Graph, xfer: int, times: int
                    ) -> Tuple[Graph, Tuple[Step, ...]]:
        """`xfer` applied `times` times (or until it has no location), each
        time at its cheapest location (the first among equals), in one
        native call (`XferSet.apply_everywhere`)."""
        graph, hashes, enumerations = self.xfers.apply_everywhere(
            graph, xfer, times, self.cost_model, self.max_locations, self.max_ops)
        self.rule_enumerations += enumerations
        self.applies += len(hashes)
        return graph, tuple(Step(xfer, EVERYWHERE, h) for h in hashes)

    def full_route(self, graph: Graph, route: Sequence[Step]) -> List[Tuple[int, int]]:
        """`route` from `graph` as (xfer, location) of the rule set's own
        enumeration; a multi-location action's steps are looked up by the
        graph they lead to (one real step each), and `MERGE` steps are
        kept as `(MERGE, EVERYWHERE)`. Routes without multi-location or
        merge steps are returned as they are, without any engine call.

        A step of xfer x enumerates xfers 0..x only (`XferSet.locations`'
        `through`), whose locations are the full enumeration's; where the
        graph a multi-location step leads to is no candidate of those
        (a later xfer's only), the step enumerates every xfer. Either way
        it counts as one real step.

        Raises:
          RuntimeError: a step leads to no candidate of its graph (a bug).
        """
        if all(step.location != EVERYWHERE for step in route):
            return [(step.xfer, step.location) for step in route]
        out: List[Tuple[int, int]] = []
        for step in route:
            if step.xfer == MERGE:
                graph = merge_identical_ops(graph)
                out.append((MERGE, EVERYWHERE))
                continue
            locs = self.xfers.locations(graph, self.max_locations, self.max_ops,
                                        through=step.xfer)
            self.real_steps += 1
            xfer, location = step.xfer, step.location
            if location == EVERYWHERE:
                found = _by_hash(locs, step)
                if found is None:  # only a later xfer's candidate leads there
                    locs = self.xfers.locations(graph, self.max_locations, self.max_ops)
                    found = _by_hash(locs, step)
                if found is None:
                    raise RuntimeError("no candidate leads to the graph of a step of "
                                       f"xfer {step.xfer}")
                xfer, location = found
            graph = locs.apply(xfer, location)
            out.append((xfer, location))
        return out

    def points(self, cost_ms: float) -> float:
        """`cost_ms` in points (%) of the initial cost: the unit of rewards
        and of every value the planner compares."""
        return 100.0 * cost_ms / self.initial_cost


def _by_hash(locs: Locations, step: Step) -> Optional[Tuple[int, int]]:
    """The (xfer, location) of `locs` whose candidate has hash `step.after`,
    `step.xfer`'s first; another xfer's where the rule set's enumeration
    kept that graph under an earlier rule only (duplicates are dropped);
    None where no candidate of `locs` has it. Only `step.xfer`'s candidates
    are hashed unless it lacks the graph."""
    own = locs.hashes_of(step.xfer) if locs.counts[step.xfer] else []
    if step.after in own:
        return step.xfer, own.index(step.after)
    for xfer in locs.active_xfers():
        if xfer == step.xfer:
            continue
        hashes = locs.hashes_of(int(xfer))
        if step.after in hashes:
            return int(xfer), hashes.index(step.after)
    return None


def replay_route(env: GraphEnv, applied: Sequence[Tuple[str, int]]) -> Graph:
    """The graph a route of (xfer name, location) builds from `env`'s
    initial graph, `MERGE_NAME` steps merging identical ops
    (`xflowrl.env.replay.replay` for routes without them).

    Raises:
      ValueError: an unknown name or a location the graph lacks.
    """
    index = {name: i for i, name in enumerate(env.xfers.names)}
    graph = env.initial_graph
    for name, location in applied:
        if name == MERGE_NAME:
            graph = merge_identical_ops(graph)
            continue
        if name not in index:
            raise ValueError(f"unknown xfer {name!r}")
        graph = env.xfers.locations(graph, env.config.max_locations,
                                    env.max_ops).apply(index[name], location)
    return graph
