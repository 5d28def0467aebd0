"""Diagnostics of a trained model-based agent, for benchmarks and tests."""

from __future__ import annotations

import dataclasses
from typing import Dict, Sequence, TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from xflowrl.world_model.agent import ModelBasedAgent


def dream_start_masks(agent: "ModelBasedAgent", thresholds: Sequence[float], starts: int = 256,
                      seed: int = 0) -> Dict[str, object]:
    """How many xfers the dream offers where episodes start, per mask
    threshold.

    A threshold that offers nothing leaves the controller nothing to learn
    in the dream (every imagined episode ends at once); over many graphs
    the mask decoder is less sure than on one, so the single graph's
    threshold can be too high.

    Args:
      agent: an agent whose world model is built (trained or restored).
      thresholds: the mask thresholds to try.
      starts: imagined episodes started from the initial graphs.
      seed: the dream's seed.

    Returns:
      per threshold (formatted with `g`), the share of `starts` starts with
      at least one predicted-valid known xfer ("starts_with_a_valid_xfer")
      and the mean number offered ("mean_valid_xfers"); and under
      "real_valid_xfers" the mean number of known xfers the real engine
      finds valid at the initial graphs.
    """
    out: Dict[str, object] = {}
    for threshold in thresholds:
        config = dataclasses.replace(agent.resolve(agent.dream_config),
                                     mask_threshold=float(threshold), lockstep=False,
                                     real_starts=0.0)
        batch = agent.make_dream(config, seed=seed).reset(starts)
        offered = batch.xfer_mask[:, :-1]
        out[f"{threshold:g}"] = {"starts_with_a_valid_xfer": float(offered.any(1).mean()),
                                 "mean_valid_xfers": float(offered.sum(1).mean())}
    vocab = agent.world.built.vocab
    real = [np.count_nonzero(vocab.compact_masks(obs.xfer_mask, obs.location_mask)[0][:-1])
            for obs in (env.reset() for env in agent.collector.graph_envs())]
    out["real_valid_xfers"] = float(np.mean(real))
    return out
