"""One-step greedy: apply the cheapest candidate each step until none improves
(docs/agents.md). A learned agent that only matches it has learned nothing
that search needed.

`GreedyAgent` acts on any environment whose observations carry per-location
cost changes (`Observation.locations.cost_delta`, the real environment's);
`greedy_search(env)` plays its one (deterministic) episode. `greedy_walk(env)`
takes the same steps on a real environment's graph without building
observations (no graph features, no matched nodes): what only needs
greedy's steps or graph (the step limit of the learned methods, `xflowrl
optimize --method=greedy`) pays for enumeration and costs alone.
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Tuple

import numpy as np

from xflowrl.engine import Graph
from xflowrl.env import (
    Action,
    Environment,
    Episode,
    GraphEnv,
    NO_STEP_LIMIT,
    Observation,
    run_episode,
)
from xflowrl.env.environment import candidate_deltas


class GreedyAgent:
    """Takes the valid (xfer, location) with the lowest cost change; NO-OP
    once no candidate lowers the cost by more than `min_improvement` (in %
    of the initial cost, the unit of `cost_delta`). Ties go to the lowest
    xfer id, then location, so the result is reproducible."""

    def __init__(self, min_improvement: float = 1e-9):
        self.min_improvement = min_improvement

    def act(self, observation: Observation) -> Action:
        if observation.locations is None:
            raise ValueError("GreedyAgent needs per-location cost changes; this environment "
                             "provides no location features")
        noop = len(observation.xfer_mask) - 1
        locations = observation.locations
        # Rows of the xfers with locations, ascending: argmin's first hit is
        # the lowest xfer id, then location.
        delta = np.where(observation.location_mask[locations.active], locations.cost_delta,
                         np.inf)
        choice = _cheapest(delta, self.min_improvement)
        if choice is None:
            return noop, 0
        return int(locations.active[choice[0]]), choice[1]


def _cheapest(delta: np.ndarray, min_improvement: float) -> Optional[Tuple[int, int]]:
    """(row, location) of the lowest entry of `delta` (inf where masked;
    ties to the first, row-major), or None when it does not improve by more
    than `min_improvement`."""
    if not np.isfinite(delta).any():
        return None
    row, location = np.unravel_index(int(np.argmin(delta)), delta.shape)
    if delta[row, location] >= -min_improvement:
        return None
    return int(row), int(location)


def greedy_search(env: Environment, min_improvement: float = 1e-9) -> Episode:
    """The greedy episode from the environment's initial graph.

    Raises:
      ValueError: the environment withholds candidate costs (an observation
        ablation, `EnvConfig(cost_features=...)`): greedy would see every
        change as zero and stop at once.
    """
    cost_features = getattr(getattr(env, "config", None), "cost_features", "full")
    if cost_features != "full":
        raise ValueError(f"greedy needs candidate costs; this environment's observations "
                         f"carry cost_features={cost_features!r} (use 'full')")
    return run_episode(env, GreedyAgent(min_improvement).act)


class GreedyWalk(NamedTuple):
    """What `greedy_walk` returns: greedy's last graph (its cheapest: every
    step lowers the cost), its cost and its substitutions."""
    graph: Graph
    cost: float                     # ms
    applied: List[Tuple[str, int]]  # (xfer name, location) in order


def greedy_walk(env: GraphEnv, min_improvement: float = 1e-9, max_steps: int = NO_STEP_LIMIT,
                on_step: Optional[Callable[[int, float], None]] = None,
                start: Optional[Graph] = None) -> GreedyWalk:
    """One-step greedy from `env`'s initial graph under its rules, cost
    model, L and size cap, for at most `max_steps` substitutions (not
    `env`'s step limit): the substitutions `greedy_search` takes on the same
    environment with that step limit (tests/search/baselines_test.py checks
    that they are the same), computed from each graph's locations and
    candidate costs alone, with no observation built. `env` itself is not
    stepped.

    Args:
      on_step: called after each substitution with the steps so far and the
        cost (ms), e.g. for a progress line.
      start: walk from this graph instead of `env`'s initial one, under the
        same caps (`env.max_ops` comes from the initial graph) and with
        `min_improvement` still in % of the initial cost: greedy from a
        neighbour of the initial graph (benchmarks/search_probe.py's escapes).
    """
    def choose(locs, cost: float) -> Optional[Tuple[int, int]]:
        active = locs.active_xfers()
        if len(active) == 0:
            return None
        valid = locs.location_mask()[active]
        delta = candidate_deltas(locs, env.cost_model, cost, env.initial_cost, active, valid)[0]
        choice = _cheapest(np.where(valid, delta, np.inf), min_improvement)
        return None if choice is None else (int(active[choice[0]]), choice[1])
    return _walk(env, start, env.config.max_locations, choose, max_steps, on_step)


# An L that keeps every location (the engine's limit is a C int). Locations
# enumerated with it are read through `Locations.cheapest` or `flat_costs`:
# their masks and `costs` would be [N, L] arrays.
EVERY_LOCATION = 2**31 - 1


def greedy_walk_every_location(env: GraphEnv, start: Graph, min_improvement: float = 1e-9,
                               max_steps: int = NO_STEP_LIMIT) -> GreedyWalk:
    """One-step greedy from `start` under `env`'s rules, cost model and size
    cap, over every location of every xfer, not the first L: the candidates
    TASO's search weighs at each graph it expands (its L only numbers them).
    Where an xfer has more than L locations, the improving ones may all lie
    past the first L (on Inception-v3 under the learned H100 model, the
    relu merges of TASO's `taso_95` on one-step greedy's graph:
    benchmarks/descent_tail_bench.py), so this goes on where `greedy_walk`
    stops. `min_improvement` is in % of `env`'s initial cost, as there;
    `applied` numbers each location in the enumeration that keeps them
    all."""
    def choose(locs, cost: float) -> Optional[Tuple[int, int]]:
        best = locs.cheapest(env.cost_model)
        if best is None or 100.0 * (best[2] - cost) / env.initial_cost >= -min_improvement:
            return None
        return best[0], best[1]
    return _walk(env, start, EVERY_LOCATION, choose, max_steps, None)


def _walk(env: GraphEnv, start: Optional[Graph], max_locations: int,
          choose: Callable[..., Optional[Tuple[int, int]]], max_steps: int,
          on_step: Optional[Callable[[int, float], None]]) -> GreedyWalk:
    """The walk both greedy walks take: from `start` (None: `env`'s initial
    graph), the locations of at most `max_locations` per xfer under `env`'s
    size cap, `choose(locations, cost)`'s (xfer, location) applied until it
    returns None or `max_steps` are taken."""
    names = env.xfers.names
    if start is None:
        graph, cost = env.initial_graph, env.initial_cost
    else:
        graph, cost = start, start.cost(env.cost_model)
    applied: List[Tuple[str, int]] = []
    while len(applied) < max_steps:
        locs = env.xfers.locations(graph, max_locations, env.max_ops)
        choice = choose(locs, cost)
        if choice is None:
            break
        xfer, location = choice
        graph = locs.apply(xfer, location)
        cost = graph.cost(env.cost_model)
        applied.append((names[xfer], location))
        if on_step is not None:
            on_step(len(applied), cost)
    return GreedyWalk(graph, cost, applied)
