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
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.engine.xfers import Locations
from xflowrl.env import GraphEnv


class Expansion(NamedTuple):
    """A graph's candidates: what one real step tells about it.

    Candidates are listed xfer by xfer, location by location (the order of
    `Locations.active_costs`' valid entries), so that index i is always
    the same action of this graph."""
    graph: Graph
    cost: float               # ms
    locations: Locations
    actions: np.ndarray       # [M, 2] int64: (xfer, location) of each candidate
    costs: np.ndarray         # [M] float64: each candidate graph's cost (ms), exact


class EngineSimulator:
    """Expands graphs and builds candidates with the engine, counting both.

    Attributes:
      real_steps: expansions so far (the unit of an agent's real steps).
      applies: candidate graphs built so far.
    """

    def __init__(self, xfers: XferSet, cost_model: CostModel, max_locations: int,
                 max_ops: int, initial_cost: float):
        self.xfers = xfers
        self.cost_model = cost_model
        self.max_locations = max_locations
        self.max_ops = max_ops
        self.initial_cost = initial_cost
        self.real_steps = 0
        self.applies = 0

    @classmethod
    def of(cls, env: GraphEnv) -> "EngineSimulator":
        """The simulator of `env`'s initial graph under its rules, cost
        model, L and size cap."""
        return cls(env.xfers, env.cost_model, env.config.max_locations, env.max_ops,
                   env.initial_cost)

    def expand(self, graph: Graph, cost: Optional[float] = None) -> Expansion:
        """Every candidate of `graph` with its exact cost: one real step."""
        self.real_steps += 1
        cost = graph.cost(self.cost_model) if cost is None else cost
        locs = self.xfers.locations(graph, self.max_locations, self.max_ops)
        active = locs.active_xfers()
        if len(active) == 0:
            return Expansion(graph, cost, locs, np.zeros((0, 2), np.int64), np.zeros(0))
        counts = locs.count_array[active]
        valid = np.arange(self.max_locations) < counts[:, None]
        rows, columns = np.nonzero(valid)
        actions = np.stack([active[rows], columns], axis=1).astype(np.int64)
        costs = locs.active_costs(self.cost_model)[valid]
        return Expansion(graph, cost, locs, actions, costs)

    def child(self, expansion: Expansion, index: int) -> Graph:
        """The graph that candidate `index` of `expansion` builds."""
        self.applies += 1
        xfer, location = expansion.actions[index]
        return expansion.locations.apply(int(xfer), int(location))

    def points(self, cost_ms: float) -> float:
        """`cost_ms` in points (%) of the initial cost: the unit of rewards
        and of every value the planner compares."""
        return 100.0 * cost_ms / self.initial_cost
