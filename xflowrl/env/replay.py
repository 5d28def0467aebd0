"""Substitution sequences replayed in the real environment.

An episode's `applied` list, (xfer name, location) pairs, rebuilds its
graphs: `replay` applies a whole sequence from the initial graph;
`cheapest_prefix` finds the cheapest graph an episode passed through (the
graph an optimiser should hand over, not where the episode happened to
end) and the shortest prefix that builds it; `trace` gives the cost after
every step.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from xflowrl.engine import Graph
from xflowrl.env.environment import CHEAPER, GraphEnv

Sequence_ = Sequence[Tuple[str, int]]


def replay(env: GraphEnv, sequence: Sequence_) -> Graph:
    """Re-applies a substitution sequence (xfer names, locations) from reset.

    Raises:
      ValueError: an unknown xfer, or a step the environment rejects.
    """
    env.reset()
    index = {name: i for i, name in enumerate(env.xfers.names)}
    for name, location in sequence:
        if name not in index:
            raise ValueError(f"replay: unknown xfer {name!r}")
        _, _, _, info = env.step((index[name], location))
        if info["invalid"]:
            raise ValueError(f"replay: step ({name}, {location}) is invalid: {info['invalid']}")
    return env.graph


def trace(env: GraphEnv, sequence: Sequence_) -> List[Tuple[str, int, float]]:
    """(xfer name, location, cost after it) for each step of `sequence`
    replayed from `env`'s initial graph, up to the first step the
    environment rejects or the end of its episode: what an episode did, step
    by step (`experiments/trace_generalist.py`)."""
    env.reset()
    index = {name: i for i, name in enumerate(env.xfers.names)}
    steps = []
    for name, location in sequence:
        if name not in index:
            break
        _, _, done, info = env.step((index[name], location))
        if info["invalid"]:
            break
        steps.append((name, location, float(info["cost"])))
        if done:
            break
    return steps


def cheapest_prefix(env: GraphEnv, sequence: Sequence_) -> Tuple[float, List[Tuple[str, int]]]:
    """(cost, prefix): the cheapest graph `sequence` passes through from
    `env`'s initial graph (the initial graph included) and the shortest
    prefix of `sequence` that builds it. Replay stops at the first step the
    environment rejects or at the end of its episode. (An episode played
    in a `GraphEnv` has this without a replay: `GraphEnv.cheapest_prefix`.)"""
    steps = trace(env, sequence)
    best, length = env.initial_cost, 0
    for k, (_, _, cost) in enumerate(steps, 1):
        if cost < best - CHEAPER:
            best, length = cost, k
    return best, [(name, loc) for name, loc, _ in steps[:length]]
