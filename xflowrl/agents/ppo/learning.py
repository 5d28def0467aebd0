"""The learner: PPO updates of both heads, the values and the encoder.

`Learner.update(steps)` takes the transitions of whole episodes, computes GAE
advantages for each head from its own value (the xfer head from V_x(s), the
location head from V_l(s, x)), and runs `epochs` passes of minibatch steps.
An episode cut by the step limit is bootstrapped from V_x of its last state
(for both heads: V_l(s, x) averaged over the policy's x is V_x(s)); a real
end bootstraps from 0. After NO-OP nothing follows, so its location value is
stored as 0 rather than the untrained V_l(s, NO-OP). States are graphs or
vectors, as the network's `state_kind` says.
One step minimises

  L = clip_x + clip_l + value_coef * (value_x + value_l)
      - entropy_coef * (H_x + H_l)

where the location terms count only for transitions whose xfer is not
NO-OP. The gradient of L updates the encoder, the policies and the xfer
embedding with the policy optimizer, and the two value MLPs with the value
optimizer (the thesis' two Adams), after an optional global-norm clip.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np
import sonnet as snt
import tensorflow as tf

from xflowrl.agents.ppo import losses
from xflowrl.agents.ppo.config import PPOConfig
from xflowrl.agents.ppo.networks import PolicyValueNetwork
from xflowrl.embedding import features
from xflowrl.embedding.encoder import Embedding
from xflowrl.nn import apply_adam, build_adam
from xflowrl.tracing import traced_once


class Step(NamedTuple):
    """One transition, with only the chosen xfer's location features."""
    state: Any                  # numpy GraphsTuple of one graph, or a [D] vector
    xfer_summary: Optional[np.ndarray]    # [N+1, S]; None without location features
    xfer_mask: np.ndarray       # [N+1]
    location_nodes: Optional[np.ndarray]  # [L, K] of the chosen xfer; None likewise
    cost_delta: Optional[np.ndarray]      # [L]; None likewise
    location_mask: np.ndarray   # [L]
    xfer: int
    location: int
    xfer_log_prob: float
    location_log_prob: float
    xfer_value: float
    location_value: float
    reward: float
    done: bool
    bootstrap_value: float = 0.0  # V_x(s_T) where the step limit cut the episode here


class Batch(NamedTuple):
    state: Any                 # GraphsTuple or [B, D]
    xfer_summary: Optional[tf.Tensor]
    xfer_mask: tf.Tensor
    location_nodes: Optional[tf.Tensor]  # indices into the batch's nodes
    cost_delta: Optional[tf.Tensor]
    location_mask: tf.Tensor
    xfer: tf.Tensor
    location: tf.Tensor
    old_xfer_log_prob: tf.Tensor
    old_location_log_prob: tf.Tensor
    xfer_advantage: tf.Tensor
    location_advantage: tf.Tensor
    xfer_return: tf.Tensor
    location_return: tf.Tensor
    has_location: tf.Tensor    # 1.0 where the xfer is not NO-OP


class Targets(NamedTuple):
    """Per head, the GAE advantages and value targets (returns), [T] each."""
    xfer: losses.Advantages      # from V_x(s)
    location: losses.Advantages  # from V_l(s, x)

    def take(self, index: np.ndarray) -> "Targets":
        """The rows `index` of every array (a minibatch)."""
        return Targets(*(losses.Advantages(h.advantages[index], h.returns[index]) for h in self))


def _stack_present(arrays: Sequence[Optional[np.ndarray]], name: str) -> np.ndarray:
    """np.stack of the steps' `name` arrays, which a batch has for every step
    (location features) or for none."""
    present = [a for a in arrays if a is not None]
    if len(present) != len(arrays):
        raise ValueError(f"a batch mixes steps with and without {name}")
    return np.stack(present)


def make_batch(steps: Sequence[Step], targets: Targets, noop: int) -> Batch:
    """Stacks transitions (and their advantages/returns) into tensors."""
    xfer = np.array([s.xfer for s in steps], np.int32)
    f32 = lambda x: tf.constant(np.asarray(x, np.float32))
    xfer_summary = location_nodes = cost_delta = None
    if isinstance(steps[0].state, np.ndarray):
        state = f32(np.stack([s.state for s in steps]))
    else:
        graph_tuples = [s.state for s in steps]
        state = features.to_tensors(features.batch(graph_tuples))
    if steps[0].location_nodes is not None:
        offsets = features.node_offsets([s.state for s in steps])
        nodes = _stack_present([s.location_nodes for s in steps], "location_nodes")
        nodes = np.where(nodes >= 0, nodes + offsets[:, None, None], -1).astype(np.int32)
        location_nodes = tf.constant(nodes)
        cost_delta = f32(_stack_present([s.cost_delta for s in steps], "cost_delta"))
    if steps[0].xfer_summary is not None:  # graph states; vector states with summaries
        xfer_summary = f32(_stack_present([s.xfer_summary for s in steps], "xfer_summary"))
    return Batch(
        state=state,
        xfer_summary=xfer_summary,
        xfer_mask=tf.constant(np.stack([s.xfer_mask for s in steps])),
        location_nodes=location_nodes,
        cost_delta=cost_delta,
        location_mask=tf.constant(np.stack([s.location_mask for s in steps])),
        xfer=tf.constant(xfer),
        location=tf.constant(np.array([s.location for s in steps], np.int32)),
        old_xfer_log_prob=f32([s.xfer_log_prob for s in steps]),
        old_location_log_prob=f32([s.location_log_prob for s in steps]),
        xfer_advantage=f32(targets.xfer.advantages),
        location_advantage=f32(targets.location.advantages),
        xfer_return=f32(targets.xfer.returns),
        location_return=f32(targets.location.returns),
        has_location=f32(xfer != noop))


def compute_advantages(steps: Sequence[Step], config: PPOConfig) -> Targets:
    """GAE per head over consecutive whole episodes (the last step is done)."""
    rewards = np.array([s.reward for s in steps])
    dones = np.array([s.done for s in steps])
    bootstrap = np.array([s.bootstrap_value for s in steps])
    if len(steps) and not dones[-1]:
        raise ValueError("compute_advantages needs whole episodes; the last step is not done")

    def head(values: List[float]) -> losses.Advantages:
        return losses.gae(rewards, np.array(values), dones, 0.0, config.discount,
                          config.gae_lambda, bootstrap)

    return Targets(xfer=head([s.xfer_value for s in steps]),
                   location=head([s.location_value for s in steps]))


class Learner:
    """Owns the optimizers and runs PPO updates on a `PolicyValueNetwork`."""

    def __init__(self, network: PolicyValueNetwork, config: PPOConfig, seed: int = 0):
        self.network = network
        self.config = config
        self.rng = np.random.default_rng(seed)
        self.policy_optimizer = snt.optimizers.Adam(config.policy_learning_rate,
                                                    epsilon=config.adam_epsilon)
        self.value_optimizer = snt.optimizers.Adam(config.value_learning_rate,
                                                   epsilon=config.adam_epsilon)
        self._step = traced_once(self._step_impl)

    def _losses(self, b: Batch) -> Dict[str, tf.Tensor]:
        cfg = self.config
        embedding: Embedding = self.network.encode(b.state)
        xfer_out = self.network.xfer_head(embedding.globals, b.xfer_summary, b.xfer_mask)
        loc_out = self.network.location_head(embedding, b.xfer, b.location_nodes, b.cost_delta,
                                             tf.shape(b.location_mask)[1], b.location_mask)
        ones = tf.ones_like(b.has_location)
        adv_x, adv_l = b.xfer_advantage, b.location_advantage
        if cfg.normalize_advantages:
            adv_x, adv_l = losses.normalize(adv_x, ones), losses.normalize(adv_l, b.has_location)
        lp_x = losses.masked_log_prob(xfer_out.logits, b.xfer_mask, b.xfer)
        lp_l = losses.masked_log_prob(loc_out.logits, b.location_mask, b.location)
        m = {
            "policy_loss_xfer": losses.clipped_surrogate(
                lp_x, b.old_xfer_log_prob, adv_x, cfg.clip_epsilon, ones),
            "policy_loss_location": losses.clipped_surrogate(
                lp_l, b.old_location_log_prob, adv_l, cfg.clip_epsilon, b.has_location),
            "value_loss_xfer": losses.value_loss(xfer_out.value, b.xfer_return, ones),
            "value_loss_location": losses.value_loss(loc_out.value, b.location_return,
                                                     b.has_location),
            "entropy_xfer": tf.reduce_mean(losses.masked_entropy(xfer_out.logits, b.xfer_mask)),
            "entropy_location": tf.reduce_sum(
                losses.masked_entropy(loc_out.logits, b.location_mask) * b.has_location)
                / tf.maximum(tf.reduce_sum(b.has_location), 1.0),
            "approx_kl": tf.reduce_mean(b.old_xfer_log_prob - lp_x),
        }
        m["loss"] = (m["policy_loss_xfer"] + m["policy_loss_location"]
                     + cfg.value_coef * (m["value_loss_xfer"] + m["value_loss_location"])
                     - cfg.entropy_coef * (m["entropy_xfer"] + m["entropy_location"]))
        return m

    def _step_impl(self, batch: Batch) -> Dict[str, tf.Tensor]:
        policy_vars = self.network.policy_variables()
        value_vars = self.network.value_variables()
        with tf.GradientTape() as tape:
            metrics = self._losses(batch)
        grads = tape.gradient(metrics["loss"], policy_vars + value_vars)
        grads = [tf.zeros_like(v) if g is None else g for g, v in zip(grads, policy_vars + value_vars)]
        metrics["grad_norm"] = tf.linalg.global_norm(grads)
        if self.config.max_grad_norm:
            grads, _ = tf.clip_by_global_norm(grads, self.config.max_grad_norm,
                                              use_norm=metrics["grad_norm"])
        apply_adam(self.policy_optimizer, grads[:len(policy_vars)], policy_vars)
        apply_adam(self.value_optimizer, grads[len(policy_vars):], value_vars)
        return metrics

    def build(self) -> None:
        """Creates the optimizers' slot variables (the network's must exist)."""
        build_adam(self.policy_optimizer, self.network.policy_variables())
        build_adam(self.value_optimizer, self.network.value_variables())

    def update(self, steps: List[Step]) -> Dict[str, float]:
        """One PPO update on whole episodes; returns mean metrics."""
        cfg = self.config
        targets = compute_advantages(steps, cfg)
        noop = self.network.num_xfers
        size = cfg.minibatch_size or len(steps)
        if not self.policy_optimizer.m:
            # Adam's moments made outside the trace (acting has made the
            # network's variables): a traced call that creates variables is
            # traced twice.
            self.build()
        history: Dict[str, List[float]] = {}
        for _ in range(cfg.epochs):
            order = self.rng.permutation(len(steps)) if cfg.minibatch_size else np.arange(len(steps))
            for start in range(0, len(steps), size):
                idx = order[start:start + size]
                batch = make_batch([steps[i] for i in idx], targets.take(idx), noop)
                for k, v in self._step(batch).items():
                    history.setdefault(k, []).append(float(v))
        return {k: float(np.mean(v)) for k, v in history.items()}
