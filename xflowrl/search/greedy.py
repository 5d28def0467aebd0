"""One-step greedy: apply the cheapest candidate each step until none improves
(docs/agents.md). A learned agent that only matches it has learned nothing
that search needed.

`GreedyAgent` acts on any environment whose observations carry per-location
cost changes (`Observation.locations.cost_delta`, the real environment's);
`greedy_search(env)` plays its one (deterministic) episode.
"""

from __future__ import annotations

import numpy as np

from xflowrl.env import Action, Environment, Episode, Observation, run_episode


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
        if not np.isfinite(delta).any():
            return noop, 0
        row, location = np.unravel_index(int(np.argmin(delta)), delta.shape)
        if delta[row, location] >= -self.min_improvement:
            return noop, 0
        return int(locations.active[row]), int(location)


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
