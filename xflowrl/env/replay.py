"""Substitution sequences replayed in the real environment.

An episode's `applied` list, (xfer name, location) pairs, rebuilds its
graphs: `replay` applies a whole sequence from the initial graph;
`cheapest_prefix` finds the cheapest graph an episode passed through (the
graph an optimiser should hand over, not where the episode happened to
end) and the shortest prefix that builds it.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from xflowrl.engine import Graph
from xflowrl.env.environment import GraphEnv

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


def cheapest_prefix(env: GraphEnv, sequence: Sequence_) -> Tuple[float, List[Tuple[str, int]]]:
    """(cost, prefix): the cheapest graph `sequence` passes through from
    `env`'s initial graph (the initial graph included) and the shortest
    prefix of `sequence` that builds it. Replay stops at the first step the
    environment rejects or at the end of its episode."""
    env.reset()
    index = {name: i for i, name in enumerate(env.xfers.names)}
    best, length = env.initial_cost, 0
    for k, (name, location) in enumerate(sequence, 1):
        if name not in index:
            break
        _, _, done, info = env.step((index[name], location))
        if info["invalid"]:
            break
        if info["cost"] < best - 1e-12:
            best, length = info["cost"], k
        if done:
            break
    return best, [(name, loc) for name, loc in sequence[:length]]
