"""The random agent: the baseline the learned agents must beat, and the data
collector of the world model (thesis §3.4: NO-OP with probability 0.2, else
uniform over valid actions)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from xflowrl.agents.ppo.agent import Episode
from xflowrl.env import GraphEnv, Observation


class RandomAgent:
    """Picks NO-OP with probability `noop_probability`, otherwise a valid
    xfer uniformly and then one of its locations uniformly."""

    def __init__(self, noop_probability: float = 0.0, seed: Optional[int] = None):
        if not 0.0 <= noop_probability <= 1.0:
            raise ValueError(f"noop_probability must be in [0, 1], got {noop_probability}")
        self.noop_probability = noop_probability
        self.rng = np.random.default_rng(seed)

    def act(self, observation: Observation):
        noop = len(observation.xfer_mask) - 1
        valid = np.flatnonzero(observation.xfer_mask[:noop])
        if len(valid) == 0 or self.rng.random() < self.noop_probability:
            return noop, 0
        xfer = int(self.rng.choice(valid))
        return xfer, int(self.rng.choice(np.flatnonzero(observation.location_mask[xfer])))

    def run_episode(self, env: GraphEnv) -> Episode:
        obs = env.reset()
        done, total, invalid, steps = False, 0.0, 0, 0
        while not done:
            obs, reward, done, info = env.step(self.act(obs))
            total += reward
            steps += 1
            invalid += info["invalid"] is not None
        return Episode(total, env.initial_cost, env.cost, steps, list(env.history), invalid)
