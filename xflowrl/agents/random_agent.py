"""The random agent: the baseline the learned agents must beat, and the data
collector of the world model (thesis §3.4.1: NO-OP with probability 0.2, else
uniform over the valid actions).

It acts on any `xflowrl.env.Environment` and needs only the masks.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from xflowrl.env import Action, Environment, Episode, Observation, run_episode

THESIS_NOOP_PROBABILITY = 0.2


class RandomAgent:
    """Picks NO-OP with probability `noop_probability`, otherwise a valid
    xfer uniformly and then one of its locations uniformly."""

    def __init__(self, noop_probability: float = 0.0, seed: Optional[int] = None):
        if not 0.0 <= noop_probability <= 1.0:
            raise ValueError(f"noop_probability must be in [0, 1], got {noop_probability}")
        self.noop_probability = noop_probability
        self.rng = np.random.default_rng(seed)

    @classmethod
    def thesis_collector(cls, seed: Optional[int] = None) -> "RandomAgent":
        """The world model's data collection policy (thesis §3.4.1)."""
        return cls(THESIS_NOOP_PROBABILITY, seed)

    def act(self, observation: Observation) -> Action:
        noop = len(observation.xfer_mask) - 1
        valid = np.flatnonzero(observation.xfer_mask[:noop])
        if len(valid) == 0 or self.rng.random() < self.noop_probability:
            return noop, 0
        xfer = int(self.rng.choice(valid))
        return xfer, int(self.rng.choice(np.flatnonzero(observation.location_mask[xfer])))

    def run_episode(self, env: Environment, keep_transitions: bool = False) -> Episode:
        """One episode; with `keep_transitions`, its `Transition`s too."""
        return run_episode(env, self.act, keep_transitions)
