"""Hyper-parameters of the hierarchical PPO agent (thesis Algorithm 3).

`PPOConfig()` holds the thesis code's choices (its run script,
`examples/run_onnx_xflowrl.py`: two
Adams with learning rates 0.0025 / 0.01, clip 0.3, discount 0.99, GAE lambda
0.97, 10 episodes per update, one full-batch gradient step per update, no
entropy bonus, no advantage normalisation, no gradient clipping).
`PPOConfig.xrlflow()` holds X-RLflow's / CleanRL's (Adam 5e-4 with eps 1e-5,
clip 0.2, lambda 0.95, 4 epochs of minibatches of 16, per-minibatch advantage
normalisation, value coefficient 0.5, entropy 0.01, global-norm clip 0.5).
Derive variants with `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO settings; defaults are the thesis code's.

    Attributes:
      latent_size: width of the graph embedding (node and global).
      message_passing_steps: K rounds of the GraphNetwork core.
      hidden_sizes: hidden layers of every policy/value MLP.
      xfer_embedding_size: width of the learned xfer embedding fed to the
        location head.
      policy_learning_rate: Adam learning rate of the encoder and both policies.
      value_learning_rate: Adam learning rate of both value networks.
      adam_epsilon: Adam's epsilon.
      discount: gamma.
      gae_lambda: GAE lambda.
      clip_epsilon: PPO ratio clip.
      episodes_per_update: episodes collected between updates.
      epochs: passes over the collected batch per update.
      minibatch_size: transitions per gradient step (None: the whole batch).
      value_coef: weight of the value losses.
      entropy_coef: weight of the entropy bonus (masked entropies of both heads).
      normalize_advantages: normalise advantages per minibatch.
      max_grad_norm: global-norm gradient clip (None: none).
      relative_location_cost: the location head also reads, per candidate,
        where its cost change lies between its xfer's cheapest and
        costliest candidates, (delta - min) / (max - min) over the valid
        locations (0 where they are all equal): which location is the
        cheapest, whatever the scale of the differences (graph states
        only; docs/agents.md, "The relative location cost": tried, no
        difference, off by default).
    """
    latent_size: int = 32
    message_passing_steps: int = 3
    hidden_sizes: Tuple[int, ...] = (32, 32)
    xfer_embedding_size: int = 16
    policy_learning_rate: float = 0.0025
    value_learning_rate: float = 0.01
    adam_epsilon: float = 1e-7
    discount: float = 0.99
    gae_lambda: float = 0.97
    clip_epsilon: float = 0.3
    episodes_per_update: int = 10
    epochs: int = 1
    minibatch_size: Optional[int] = None
    value_coef: float = 1.0
    entropy_coef: float = 0.0
    normalize_advantages: bool = False
    max_grad_norm: Optional[float] = None
    relative_location_cost: bool = False

    @classmethod
    def thesis(cls) -> "PPOConfig":
        return cls()

    @classmethod
    def xrlflow(cls) -> "PPOConfig":
        return cls(policy_learning_rate=5e-4, value_learning_rate=5e-4, adam_epsilon=1e-5,
                   gae_lambda=0.95, clip_epsilon=0.2, epochs=4, minibatch_size=16,
                   value_coef=0.5, entropy_coef=0.01, normalize_advantages=True,
                   max_grad_norm=0.5)

    @classmethod
    def named(cls, name: str) -> "PPOConfig":
        presets = {"thesis": cls.thesis, "xrlflow": cls.xrlflow}
        if name not in presets:
            raise ValueError(f"unknown PPO preset {name!r}; choose one of {sorted(presets)}")
        return presets[name]()
