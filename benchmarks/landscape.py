"""The rewrite landscape of one graph under one rule set and cost model:
its candidates (with the environment's caps), one-step greedy and random
descents. Shared by search_probe.py (the probes) and search_bench.py (random
descents as one of the compared methods); no flags here.

A random descent draws, at every step, one candidate that lowers the cost,
uniformly among all of them, and applies it, until none is left; where every
descent ends at greedy's cost, the order of the improving rewrites does not
matter (docs/benchmark.md, "Why").
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.engine import xfers as xfers_lib
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.search.greedy import greedy_walk

EPS = 1e-9  # ms: a candidate lowers the cost when it is this much cheaper


class Landscape:
    """Candidates of a graph under one rule set and cost model, with the
    environment's caps (L locations per xfer, twice the initial op count)."""

    def __init__(self, graph: Graph, xfers: XferSet, cost_model: CostModel, max_locations: int):
        self.xfers, self.cost_model = xfers, cost_model
        self.max_locations = max_locations
        # The environment of `graph`, for its caps and greedy; never stepped.
        self.env = GraphEnv(graph, xfers, cost_model, EnvConfig(max_locations=max_locations))
        self.max_ops = self.env.max_ops

    def candidates(self, graph: Graph) -> Tuple[np.ndarray, "xfers_lib.Locations"]:
        """[N, L] candidate costs (NaN: none) and the `Locations`."""
        locs = self.xfers.locations(graph, self.max_locations, self.max_ops)
        return locs.costs(self.cost_model), locs

    def greedy(self, graph: Graph, max_steps: int = NO_STEP_LIMIT
               ) -> Tuple[Graph, float, List[str]]:
        """One-step greedy (`xflowrl.search.greedy_walk`) from `graph` under
        this landscape's caps: its last graph, cost and xfer names."""
        walk = greedy_walk(self.env, max_steps=max_steps, start=graph)
        return walk.graph, walk.cost, [name for name, _ in walk.applied]


def random_descent(land: Landscape, graph: Graph, rng: np.random.Generator
                   ) -> Tuple[float, int]:
    """One random descent from `graph`: a cost-lowering candidate drawn
    uniformly (by `rng`) each step until none is left. Returns the end cost
    (ms) and the number of steps."""
    cur, cost, steps = graph, graph.cost(land.cost_model), 0
    while True:
        costs, locs = land.candidates(cur)
        better = np.argwhere(costs < cost - EPS)  # NaN compares False: no candidate
        if len(better) == 0:
            return cost, steps
        x, l = better[rng.integers(len(better))]
        cur, cost = locs.apply(int(x), int(l)), float(costs[x, l])
        steps += 1


def probe_descent(land: Landscape, graph: Graph, episodes: int, seed: int) -> dict:
    """Greedy, then `episodes` random descents drawn from one generator
    seeded with `seed`: their lowest, highest and mean end cost, and how many
    end below or above greedy."""
    rng = np.random.default_rng(seed)
    _, g_cost, g_applied = land.greedy(graph)
    ends = [random_descent(land, graph, rng) for _ in range(episodes)]
    costs_ = np.array([c for c, _ in ends])
    return {"greedy_cost_ms": g_cost, "greedy_steps": len(g_applied),
            "descent_min_ms": float(costs_.min()), "descent_max_ms": float(costs_.max()),
            "descent_mean_ms": float(costs_.mean()),
            "descents_below_greedy": int((costs_ < g_cost - EPS).sum()),
            "descents_above_greedy": int((costs_ > g_cost + EPS).sum()),
            "descent_steps": [s for _, s in ends]}
