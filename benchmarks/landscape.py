"""The rewrite landscape of one graph under one rule set and cost model:
its candidates (with the environment's caps), one-step greedy and random
descents, and the probes that search from greedy's graph (`probe_escape`,
`probe_detour`; search_probe.py's module docstring says what each finds).
Shared by search_probe.py (the probes) and search_bench.py (random descents
as one of the compared methods); no flags here.

A random descent draws, at every step, one candidate that lowers the cost,
uniformly among all of them, and applies it, until none is left; where every
descent ends at greedy's cost, the order of the improving rewrites does not
matter (docs/benchmark.md, "Why").
"""

from __future__ import annotations

import time
from typing import Dict, List, Tuple

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


def probe_escape(land: Landscape, graph: Graph, depth: int, time_limit: float) -> dict:
    start = time.time()
    initial = graph.cost(land.cost_model)
    g_graph, g_cost, g_applied = land.greedy(graph)
    seen = {g_graph.hash()}
    frontier = [(g_graph, [])]
    best = (g_cost, [])
    uphill_by_rule: Dict[str, int] = {}
    tried, escapes, timed_out = 0, 0, False
    for level in range(depth):
        next_frontier = []
        for cur, path in frontier:
            costs, locs = land.candidates(cur)
            for x, l in np.argwhere(~np.isnan(costs)):
                if time.time() - start > time_limit:
                    timed_out = True
                    break
                cand = locs.apply(int(x), int(l))
                if cand.hash() in seen:
                    continue
                seen.add(cand.hash())
                name = land.xfers.names[x]
                step_path = path + [(name, float(costs[x, l]))]
                if level == 0:
                    uphill_by_rule[name] = uphill_by_rule.get(name, 0) + 1
                _, end_cost, end_applied = land.greedy(cand)
                tried += 1
                if end_cost < g_cost - EPS:
                    escapes += 1
                if end_cost < best[0] - EPS:
                    best = (end_cost, step_path + [(n, None) for n in end_applied])
                next_frontier.append((cand, step_path))
        frontier = next_frontier
    return {"initial_cost_ms": initial, "greedy_cost_ms": g_cost,
            "greedy_steps": len(g_applied), "depth": depth, "neighbours_tried": tried,
            "escapes_below_greedy": escapes, "best_escape_ms": best[0],
            "best_escape_gain_pct": 100 * (g_cost - best[0]) / initial,
            "best_escape_path": best[1][:30], "first_step_rules": uphill_by_rule,
            "timed_out": timed_out, "seconds": time.time() - start}


def probe_detour(land: Landscape, graph: Graph, depth: int, slack: float,
                 time_limit: float) -> dict:
    start = time.time()
    initial = graph.cost(land.cost_model)
    g_graph, g_cost, g_applied = land.greedy(graph)
    ceiling = g_cost + slack * initial / 100
    seen = {g_graph.hash()}
    # (graph, its cost, the route to it: (xfer, location, change in points))
    frontier: List[tuple] = [(g_graph, g_cost, [])]
    expanded, found, timed_out, by_level = 0, None, False, []
    while frontier and len(by_level) < depth and found is None and not timed_out:
        next_frontier = []
        for cur, cur_cost, route in frontier:
            if time.time() - start > time_limit:
                timed_out = True
                break
            costs, locs = land.candidates(cur)
            expanded += 1
            for x, l in np.argwhere(costs <= ceiling):  # NaN compares False
                cand = locs.apply(int(x), int(l))
                if cand.hash() in seen:
                    continue
                seen.add(cand.hash())
                cost = float(costs[x, l])
                step = (land.xfers.names[x], int(l), round(100 * (cost - cur_cost) / initial, 4))
                if cost < g_cost - EPS:
                    found = (cost, route + [step])
                    break
                next_frontier.append((cand, cost, route + [step]))
            if found is not None:
                break
        by_level.append(len(next_frontier))
        frontier = next_frontier
    route = None if found is None else found[1]
    return {"initial_cost_ms": initial, "greedy_cost_ms": g_cost,
            "greedy_steps": len(g_applied), "depth": depth, "slack_pct": slack,
            "graphs_seen": len(seen), "graphs_expanded": expanded,
            "frontier_by_level": by_level,
            "found_ms": None if found is None else found[0],
            "found_gain_pct": None if found is None else 100 * (g_cost - found[0]) / initial,
            "route": route,
            "route_peak_pct": None if route is None else float(
                np.max(np.cumsum([step[2] for step in route]))),
            "timed_out": timed_out, "seconds": time.time() - start}
