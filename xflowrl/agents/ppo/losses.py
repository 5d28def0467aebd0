"""The maths of PPO as pure functions (tested against numpy references).

GAE runs on the host in numpy; the rest are TensorFlow functions used inside
the learner's `tf.function`. Invalid actions are masked by replacing their
logits with `MASKED_LOGIT` both when sampling and in the update (Huang &
Ontañón 2022: masked logits then get zero gradient and the update remains a
valid policy gradient); entropies are over valid actions only.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
import tensorflow as tf

MASKED_LOGIT = -1e9


class Advantages(NamedTuple):
    advantages: np.ndarray  # [T]
    returns: np.ndarray     # [T]: advantages + values, the value targets


def gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray,
        last_value: float, discount: float, lam: float,
        bootstrap: Optional[np.ndarray] = None) -> Advantages:
    """Generalised advantage estimation over one trajectory segment.

    Args:
      rewards, values, dones: [T]; `dones[t]` means the episode ended after
        step t (no advantage flows across it).
      last_value: V of the state after the last step (ignored if it is done).
      discount, lam: gamma and lambda.
      bootstrap: [T] or None; where `dones[t]`, the value of the state after
        step t: V(s_T) for an episode cut by the step limit (truncated: the
        return goes on beyond the cut), 0 for a real end. None: all 0.
    """
    rewards = np.asarray(rewards, np.float64)
    values = np.asarray(values, np.float64)
    dones = np.asarray(dones, bool)
    bootstrap = (np.zeros_like(rewards) if bootstrap is None
                 else np.asarray(bootstrap, np.float64))
    advantages = np.zeros_like(rewards)
    next_value, running = float(last_value), 0.0
    for t in reversed(range(len(rewards))):
        if dones[t]:
            next_value, running = bootstrap[t], 0.0
        delta = rewards[t] + discount * next_value - values[t]
        running = delta + discount * lam * running
        advantages[t] = running
        next_value = values[t]
    return Advantages(advantages.astype(np.float32), (advantages + values).astype(np.float32))


def masked_logits(logits: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Logits with invalid entries (mask False) set to MASKED_LOGIT."""
    return tf.where(tf.cast(mask, tf.bool), logits, tf.fill(tf.shape(logits), MASKED_LOGIT))


def masked_log_prob(logits: tf.Tensor, mask: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
    """[B] log pi(action) under the masked categorical; logits/mask [B, A]."""
    log_p = tf.nn.log_softmax(masked_logits(logits, mask), axis=-1)
    return tf.gather(log_p, tf.cast(actions, tf.int32), axis=1, batch_dims=1)


def masked_entropy(logits: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """[B] entropy of the masked categorical, over valid actions only."""
    log_p = tf.nn.log_softmax(masked_logits(logits, mask), axis=-1)
    p = tf.exp(log_p)
    return -tf.reduce_sum(tf.where(tf.cast(mask, tf.bool), p * log_p, 0.0), axis=-1)


def _weighted_mean(x: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    weights = tf.cast(weights, x.dtype)
    return tf.reduce_sum(x * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)


def clipped_surrogate(log_prob: tf.Tensor, old_log_prob: tf.Tensor, advantages: tf.Tensor,
                      clip_epsilon: float, weights: tf.Tensor) -> tf.Tensor:
    """PPO's clipped objective as a loss (to minimise), a weighted mean over [B]."""
    ratio = tf.exp(log_prob - old_log_prob)
    surrogate = tf.minimum(ratio * advantages,
                           tf.clip_by_value(ratio, 1.0 - clip_epsilon, 1.0 + clip_epsilon)
                           * advantages)
    return -_weighted_mean(surrogate, weights)


def value_loss(values: tf.Tensor, returns: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    """Half the weighted mean squared error."""
    return 0.5 * _weighted_mean(tf.square(values - returns), weights)


def normalize(x: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    """(x - mean) / std over the entries with nonzero weight."""
    mean = _weighted_mean(x, weights)
    std = tf.sqrt(_weighted_mean(tf.square(x - mean), weights))
    return (x - mean) / (std + 1e-8)
