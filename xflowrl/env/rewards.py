"""Reward functions of the environment (thesis §3.2.4 and the reward
variants in the git history of its code's `hierarchical.py`).

Each reward maps a `Transition` of costs to a float. Costs are the engine's
estimated graph runtimes in ms.

- `relative` (default): 100 * (previous - new) / initial, the drop in
  estimated runtime as a percentage of the initial runtime (X-RLflow's form,
  comparable across graphs: an episode's return is the total speed-up in %).
- `delta`: previous - new, in ms (the thesis code's documented default).
- `terminal`: 0 on every step but the last, which gets
  100 * (initial - final) / initial (the thesis' terminal-only variant).
- `sqrt`: sqrt(previous) - sqrt(new) (the thesis' square-root variant).
"""

from __future__ import annotations

import math
from typing import Callable, Dict, NamedTuple


class Transition(NamedTuple):
    initial_cost: float
    previous_cost: float
    new_cost: float
    done: bool


def relative(t: Transition) -> float:
    return 100.0 * (t.previous_cost - t.new_cost) / t.initial_cost


def delta(t: Transition) -> float:
    return t.previous_cost - t.new_cost


def terminal(t: Transition) -> float:
    return 100.0 * (t.initial_cost - t.new_cost) / t.initial_cost if t.done else 0.0


def sqrt(t: Transition) -> float:
    return math.sqrt(t.previous_cost) - math.sqrt(t.new_cost)


REWARDS: Dict[str, Callable[[Transition], float]] = {
    "relative": relative, "delta": delta, "terminal": terminal, "sqrt": sqrt,
}


def get(name: str) -> Callable[[Transition], float]:
    """The reward function called `name`; ValueError listing the choices."""
    if name not in REWARDS:
        raise ValueError(f"unknown reward {name!r}; choose one of {sorted(REWARDS)}")
    return REWARDS[name]
