"""Hyper-parameters of the model-based agent (thesis §3.4; its code's
world-model agent; Ha & Schmidhuber's World Models, 2018).

`WorldModelConfig` holds the latent encoder, the MDN-RNN, its data
collection and its training; `DreamConfig` the controller's training inside
the world model. Defaults are sized so that `experiments/train_mb.py` finishes
on BERT on a 2-core CPU in minutes; the thesis' own sizes are noted where they
differ. Derive variants with `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from xflowrl.agents.ppo.config import PPOConfig

# Who collects the world model's real episodes after the first round.
COLLECTIONS = ("controller", "random")


@dataclasses.dataclass(frozen=True)
class WorldModelConfig:
    """World model settings.

    Attributes:
      latent_size: Z, the graph latent (thesis: 32).
      encoder_message_passing_steps: K of the latent encoder's GNN.
      encoder_steps: Adam steps that train the latent encoder (then frozen).
      encoder_batch_size: graphs per encoder step.
      encoder_learning_rate: its Adam learning rate.
      lstm_size: the MDN-RNN's LSTM (thesis: 256).
      mixtures: Gaussians of the mixture density head (thesis: 8).
      action_embedding_size: width of the learned xfer and location embeddings.
      mask_hidden_size: hidden layer of the mask decoder.
      rounds: collection rounds; each collects `episodes_per_round` random
        episodes online, then trains `train_steps_per_round` steps.
      episodes_per_round: random-agent episodes per round (thesis: 10).
      train_steps_per_round: world-model Adam steps per round.
      batch_size: sequences per world-model step.
      replay: train on every episode collected so far (True) or, as the
        thesis did, only on the latest round's (False).
      learning_rate, final_learning_rate, decay_steps: the 2nd-degree
        polynomial decay (thesis: 8e-3 -> 2e-4 over 200 steps).
      max_grad_norm: global-norm clip of the world model's gradients.
      reward_model: "mdn" (reward from the MDN-RNN's output) or "separate"
        (the composite reward network of thesis §4.3.4 on [z_t, h_t, a_t]).
      reward_hidden: layers of the separate reward network (thesis: 5 x 32).
      reward_dropout: its dropout rate (thesis: 0.2).
      reward_ensemble: E, reward heads of their own initial weights on
        h_{t+1}, trained like the reward head; their standard deviation is
        the dream's measure of model error (0: none).
      reward_ensemble_hidden: the hidden layer of each such head.
      noop_probability: the collector's NO-OP probability (thesis: 0.2).
      vocabulary_episodes: extra first-round episodes that never take NO-OP
        and so walk to the step limit: the thesis' collector ends episodes
        after ~5 steps, so xfers that only become valid deeper in an episode
        would never enter the (then fixed) vocabulary. They are training data
        too, and their real steps are counted.
      held_out_episodes: random episodes kept out of training to measure the
        world model's accuracy (NLL, reward MSE, mask accuracy).
      collection: who collects after the first (random) round: "controller"
        (Ha & Schmidhuber's iterative training, Dyna: the controller trains
        in the dream after every round and collects the next round's real
        episodes, so the world model learns the states the controller
        visits) or "random" (the thesis: every round random, the
        controller trains once, on the last world model).
      explore: with "controller" collection, the probability per step of
        a uniformly random valid known action instead of the policy's.
      real_episodes_per_round: with "controller" collection, real
        episodes the controller plays on the real environment (its own
        samples, no exploration, real masks) and learns from with PPO at
        the start of every round's dream stretch, one update per
        `DreamConfig.batch_size` of them: Dyna's controller, which learns
        from real and imagined experience (MBPO mixes them likewise). The
        dream flatters a controller on graphs the world model knows
        poorly; real episodes give it the true returns. Their steps are
        real steps (`ModelBasedAgent.controller_real_steps`), and the world
        model does not train on them. 0: the controller learns in the
        dream only (the thesis).
      vocabulary_headroom: free compact xfer slots beyond the first round's
        xfers, which the vocabulary fills when later rounds visit states
        where other xfers apply (0: fixed after the first round).
      xfer_summaries: the mask decoder also predicts each known xfer's best
        and mean cost change in s_t (what the real observation's xfer
        summary says), and the controller reads a per-xfer summary (log
        location count, best and mean cost change): predicted in the
        dream, the real environment's in the real one, as with the masks.
        Without it the controller sees [z_t, h_t] and the masks only, and
        cannot tell which valid xfer pays on a graph it never saw
        (docs/world_model.md, "Over a distribution of graphs").
      gain_weight: the weight of the cost-change term in the loss.
      ranked_locations: the world model and the controller name a
        location by its rank among the xfer's candidates, cheapest first
        (their cost change; ties by position), not by its position in the
        engine's list: rank 0 is the same kind of choice on every graph,
        where position 0 is whatever the enumeration met first. The real
        views map a rank to the real location; rollouts record ranks.
    """
    latent_size: int = 32
    encoder_message_passing_steps: int = 3
    encoder_steps: int = 300
    encoder_batch_size: int = 32
    encoder_learning_rate: float = 2e-3
    lstm_size: int = 256
    mixtures: int = 8
    action_embedding_size: int = 16
    mask_hidden_size: int = 128
    rounds: int = 8
    episodes_per_round: int = 50
    train_steps_per_round: int = 150
    batch_size: int = 32
    replay: bool = True
    learning_rate: float = 8e-3
    final_learning_rate: float = 2e-4
    decay_steps: int = 1200
    max_grad_norm: float = 1.0
    reward_model: str = "mdn"
    reward_hidden: tuple = (32, 32, 32, 32, 32)
    reward_dropout: float = 0.2
    reward_ensemble: int = 5
    reward_ensemble_hidden: int = 64
    noop_probability: float = 0.2
    vocabulary_episodes: int = 10
    held_out_episodes: int = 20
    collection: str = "controller"
    explore: float = 0.1
    real_episodes_per_round: int = 0
    vocabulary_headroom: int = 16
    xfer_summaries: bool = False
    gain_weight: float = 1.0
    ranked_locations: bool = False

    def __post_init__(self):
        if self.collection not in COLLECTIONS:
            raise ValueError(f"collection must be one of {COLLECTIONS}, got "
                             f"{self.collection!r}")
        if not 0.0 <= self.explore <= 1.0:
            raise ValueError(f"explore must lie in [0, 1], got {self.explore}")
        if self.real_episodes_per_round < 0:
            raise ValueError(f"real_episodes_per_round must be >= 0, got "
                             f"{self.real_episodes_per_round}")
        if self.real_episodes_per_round and self.collection != "controller":
            raise ValueError("real_episodes_per_round needs collection='controller' (the "
                             "controller learns from real episodes round by round)")
        if self.vocabulary_headroom < 0:
            raise ValueError(f"vocabulary_headroom must be >= 0, got "
                             f"{self.vocabulary_headroom}")
        if self.reward_model not in ("mdn", "separate"):
            raise ValueError(f"reward_model must be 'mdn' or 'separate', got "
                             f"{self.reward_model!r}")
        if self.reward_ensemble < 0:
            raise ValueError(f"reward_ensemble must be >= 0, got {self.reward_ensemble}")
        if self.reward_ensemble_hidden < 1:
            raise ValueError(f"reward_ensemble_hidden must be >= 1, got "
                             f"{self.reward_ensemble_hidden}")
        for name in ("latent_size", "lstm_size", "mixtures", "rounds", "episodes_per_round",
                     "batch_size", "decay_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


@dataclasses.dataclass(frozen=True)
class DreamConfig:
    """Controller training inside the world model.

    Attributes:
      temperature: tau; divides the mixture logits and scales its stds by
        sqrt(tau) when the dream samples z_{t+1} (thesis §3.4.1).
      batch_size: imagined episodes per dream call (one `tf.function` step
        advances all of them).
      episodes: imagined episodes the controller trains on (thesis: 2200).
      lockstep: the thesis code's ablation: real environments stepped in
        lockstep supply the masks and terminal flags. Off: a pure dream.
      done_threshold: the predicted done probability above which an
        imagined episode ends.
      mask_threshold: the predicted probability above which an xfer is valid
        (high: an xfer offered but invalid makes an invalid action, one
        hidden only narrows the choice).
      count_margin: subtracted from the predicted log1p location counts
        before rounding, in the dream and in evaluation (a lower confidence
        bound: an overestimated count offers locations the real graph lacks).
        None: `ModelBasedAgent` fills in twice the world model's held-out RMSE
        of the log counts (a dream built directly takes it as 0).
      noop_reward: the reward of NO-OP where the environment defines it
        (0 for the per-step rewards `relative`, `delta` and `sqrt`: NO-OP
        leaves the graph unchanged), so the dream need not learn a known
        fact; None: predicted like any action (the `terminal` reward).
      real_starts: the fraction of imagined episodes that start from real
        states of the collected episodes (their z_t and the LSTM's state
        after the real prefix) instead of the initial graph (Dreamer, MBPO;
        0: the thesis, every episode from the initial graph).
      start_horizon: the step limit of an episode started from a real
        state (the value function bootstraps the rest).
      disagreement_penalty: lambda; an imagined reward is lowered by lambda
        times the reward ensemble's standard deviation, so the controller
        gains nothing from steps where the model is unsure (MOPO's
        uncertainty penalty; 0: off).
      disagreement_limit: an imagined episode is cut (bootstrapped, as at
        the step limit) where the ensemble's standard deviation exceeds
        this many times the reward scale (the std of the first round's
        rewards); None: never.
    """
    temperature: float = 1.0
    batch_size: int = 64
    episodes: int = 3200
    lockstep: bool = False
    done_threshold: float = 0.5
    mask_threshold: float = 0.8
    count_margin: Optional[float] = None
    noop_reward: Optional[float] = 0.0
    real_starts: float = 0.5
    start_horizon: int = 10
    disagreement_penalty: float = 1.0
    disagreement_limit: Optional[float] = None

    def __post_init__(self):
        if self.disagreement_limit is not None and self.disagreement_limit <= 0:
            raise ValueError(f"disagreement_limit must be > 0 (or None), got "
                             f"{self.disagreement_limit}")
        if self.disagreement_penalty < 0:
            raise ValueError(f"disagreement_penalty must be >= 0, got "
                             f"{self.disagreement_penalty}")
        if not 0.0 <= self.real_starts <= 1.0:
            raise ValueError(f"real_starts must lie in [0, 1], got {self.real_starts}")
        if self.start_horizon < 1:
            raise ValueError(f"start_horizon must be >= 1, got {self.start_horizon}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.done_threshold < 0 or self.mask_threshold < 0:
            raise ValueError("done_threshold and mask_threshold must be >= 0 (a threshold "
                             "above 1 switches the prediction off)")
        if self.batch_size < 1 or self.episodes < 1:
            raise ValueError("batch_size and episodes must be >= 1")


def controller_ppo_config(batch_size: int = 64, entropy_coef: float = 0.1) -> PPOConfig:
    """The controller's PPO: X-RLflow's preset with one update per batch of
    imagined episodes, minibatches of 64, and a larger entropy bonus (in the
    dream a random policy's first episodes are net negative, and at
    X-RLflow's 0.01 PPO collapses onto NO-OP: docs/world_model.md)."""
    return dataclasses.replace(PPOConfig.xrlflow(), minibatch_size=64,
                               episodes_per_update=batch_size, entropy_coef=entropy_coef)
