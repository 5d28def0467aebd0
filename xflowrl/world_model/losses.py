"""The maths of the MDN-RNN world model as pure TensorFlow functions.

The world model predicts, from the recurrent state at step t, a mixture of K
diagonal Gaussians over the next graph latent z_{t+1} (a mixture density
network), the reward, the done flag, which xfers are valid next and (in
log1p space) how many locations each valid xfer has. This module provides:

- `mixture`, `mixture_nll`, `sample_mixture`: the Gaussian mixture, its
  negative log-likelihood and stateless temperature-controlled sampling;
- `masked_mean`, `sigmoid_cross_entropy`: helpers for padded sequences;
- `world_model_losses`: every loss term of one training step, as a
  `WorldModelLosses` named tuple;
- `polynomial_decay`: the learning-rate schedule (a Python float).

All TensorFlow functions work inside `tf.function`; they are tested against
slow numpy references in tests/world_model/losses_test.py.

References:
  - Ha & Schmidhuber, "World Models" (2018): MDN-RNN; the temperature tau
    divides the mixture logits and scales each std by sqrt(tau).
  - "Model-based Reinforcement Learning in Computer Systems" (thesis), §3.4:
    the xflowrl world model, its loss terms, temperature (§3.4.1) and its
    2nd-degree polynomial learning-rate decay.
  - ctallec/world-models, `models/mdrnn.py` (`gmm_loss`): the mixture NLL.
    That code scales (GMM + BCE + MSE) by 1 / (latent + 2); we follow the
    thesis and scale only the mixture term.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple, Optional, Union

import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions

# Clip of the predicted log std: keeps the NLL finite when the network
# predicts extreme scales (exp(-7) ~ 1e-3, exp(2) ~ 7.4).
LOG_SIGMA_MIN, LOG_SIGMA_MAX = -7.0, 2.0

Temperature = Union[float, tf.Tensor]


def _check_temperature(temperature: Temperature) -> None:
    """Raises ValueError for a Python (or numpy) number <= 0; tensors pass."""
    if isinstance(temperature, numbers.Real) and not float(temperature) > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")


def _as_tau(temperature: Temperature, dtype: tf.DType) -> tf.Tensor:
    # dtype_hint keeps a Python float exact in float64 (tf.cast alone would
    # round it through float32 first).
    return tf.cast(tf.convert_to_tensor(temperature, dtype_hint=dtype), dtype)


def _mixture_inputs(logits, mu, log_sigma, temperature: Temperature):
    """Checks tau and converts the mixture parameters to tensors of one dtype."""
    _check_temperature(temperature)
    logits = tf.convert_to_tensor(logits)
    dtype = logits.dtype
    return (logits, tf.convert_to_tensor(mu, dtype), tf.convert_to_tensor(log_sigma, dtype),
            _as_tau(temperature, dtype))


def _clipped_log_sigma(log_sigma: tf.Tensor) -> tf.Tensor:
    return tf.clip_by_value(log_sigma, LOG_SIGMA_MIN, LOG_SIGMA_MAX)


def mixture(logits: tf.Tensor, mu: tf.Tensor, log_sigma: tf.Tensor,
            temperature: Temperature = 1.0) -> tfp.distributions.MixtureSameFamily:
    """Mixture of K diagonal Gaussians over a Z-dimensional latent.

    At temperature tau the mixture weights are softmax(logits / tau) (thesis
    §3.4.1) and each component's std is exp(log_sigma) * sqrt(tau) (Ha &
    Schmidhuber), so tau -> 0 approaches the mean of the most likely component
    and tau = 1 is the trained model.

    Args:
      logits: [..., K] unnormalised log mixture weights.
      mu: [..., K, Z] component means.
      log_sigma: [..., K, Z] component log stds, clipped to
        [LOG_SIGMA_MIN, LOG_SIGMA_MAX].
      temperature: tau > 0, a Python float or a scalar tensor.

    Returns:
      A distribution with batch shape [...] and event shape [Z].

    Raises:
      ValueError: if `temperature` is a Python number <= 0.
    """
    logits, mu, log_sigma, tau = _mixture_inputs(logits, mu, log_sigma, temperature)
    sigma = tf.exp(_clipped_log_sigma(log_sigma)) * tf.sqrt(tau)
    return tfd.MixtureSameFamily(
        mixture_distribution=tfd.Categorical(logits=logits / tau),
        components_distribution=tfd.MultivariateNormalDiag(loc=mu, scale_diag=sigma))


def mixture_nll(logits: tf.Tensor, mu: tf.Tensor, log_sigma: tf.Tensor,
                target: tf.Tensor) -> tf.Tensor:
    """Negative log-likelihood of `target` under `mixture(...)` at tau = 1.

    Args:
      logits: [..., K]; mu, log_sigma: [..., K, Z] (see `mixture`).
      target: [..., Z] observed latents.

    Returns:
      [...] the per-element NLL, -log sum_k pi_k N(target; mu_k, sigma_k^2).
    """
    logits = tf.convert_to_tensor(logits)
    target = tf.convert_to_tensor(target, logits.dtype)
    return -mixture(logits, mu, log_sigma).log_prob(target)


def sample_mixture(logits: tf.Tensor, mu: tf.Tensor, log_sigma: tf.Tensor,
                   temperature: Temperature, seed: tf.Tensor) -> tf.Tensor:
    """Stateless samples of the mixture at temperature tau.

    Picks a component k ~ Categorical(softmax(logits / tau)), then returns
    z = mu_k + sigma_k * sqrt(tau) * eps with eps ~ N(0, I): the same
    distribution as `mixture(..., temperature).sample()`, but reproducible for
    a given `seed` inside and outside `tf.function`.

    Args:
      logits: [..., K]; mu, log_sigma: [..., K, Z] (see `mixture`).
      temperature: tau > 0, a Python float or a scalar tensor.
      seed: shape [2] int32 or int64 tensor.

    Returns:
      [..., Z] one sample per batch element.

    Raises:
      ValueError: if `temperature` is a Python number <= 0.
    """
    logits, mu, log_sigma, tau = _mixture_inputs(logits, mu, log_sigma, temperature)
    component_seed, noise_seed = tf.unstack(
        tf.random.experimental.stateless_split(tf.convert_to_tensor(seed), num=2))

    num_components = tf.shape(logits)[-1]
    # stateless_categorical wants [batch, K]; flatten the leading dims.
    flat_logits = tf.reshape(logits / tau, [-1, num_components])
    component = tf.random.stateless_categorical(flat_logits, 1, seed=component_seed,
                                                dtype=tf.int32)
    component = tf.reshape(component, tf.shape(logits)[:-1])              # [...]
    chosen = tf.one_hot(component, num_components, dtype=logits.dtype)[..., None]  # [..., K, 1]
    mu_k = tf.reduce_sum(chosen * mu, axis=-2)                             # [..., Z]
    sigma_k = tf.reduce_sum(chosen * tf.exp(_clipped_log_sigma(log_sigma)), axis=-2)
    eps = tf.random.stateless_normal(tf.shape(mu_k), seed=noise_seed, dtype=logits.dtype)
    return mu_k + sigma_k * tf.sqrt(tau) * eps


def masked_mean(values: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
    """sum(values * weights) / max(sum(weights), 1), weights broadcast to values.

    Entries with zero weight contribute exactly 0, even if their value is
    inf or NaN (as padded steps may produce), and all-zero weights give 0.

    Args:
      values: [...] with a statically known rank.
      weights: the same shape as `values`, or a prefix of it (e.g. values
        [B, T, N] and weights [B, T]); trailing dims are broadcast, so the
        denominator counts every broadcast entry.

    Returns:
      A scalar.

    Raises:
      ValueError: if the ranks are unknown or `weights` has a higher rank.
    """
    values = tf.convert_to_tensor(values)
    weights = tf.cast(weights, values.dtype)
    values_rank, weights_rank = values.shape.rank, weights.shape.rank
    if values_rank is None or weights_rank is None:
        raise ValueError("masked_mean needs statically known ranks, got values "
                         f"{values.shape} and weights {weights.shape}")
    if weights_rank > values_rank:
        raise ValueError(f"weights {weights.shape} have a higher rank than values "
                         f"{values.shape}")
    weights = tf.reshape(weights, tf.concat(
        [tf.shape(weights), tf.ones([values_rank - weights_rank], tf.int32)], axis=0))
    weights = tf.broadcast_to(weights, tf.shape(values))
    weighted = tf.where(tf.not_equal(weights, 0), values * weights, tf.zeros_like(values))
    return tf.reduce_sum(weighted) / tf.maximum(tf.reduce_sum(weights), 1.0)


def sigmoid_cross_entropy(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Elementwise binary cross-entropy of `labels` in [0, 1] given `logits`.

    Computed as max(x, 0) - x * y + log1p(exp(-|x|)), stable for any logit.
    """
    logits = tf.convert_to_tensor(logits)
    return tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(labels, logits.dtype), logits=logits)


class WorldModelLosses(NamedTuple):
    """The world model's loss terms (scalars) for one batch of sequences."""
    latent_nll: tf.Tensor      # mixture NLL of z_{t+1} / (Z + 2), as the thesis
    reward: tf.Tensor          # MSE of the reward
    terminal: tf.Tensor        # BCE of the done flag
    xfer_mask: tf.Tensor       # BCE of the per-xfer valid flag
    location_count: tf.Tensor  # MSE of log1p(location count), valid xfers only
    total: tf.Tensor           # weighted sum of the five terms above and the next two
    reward_ensemble: tf.Tensor = 0.0  # MSE of the reward ensemble's members (mean)
    xfer_gain: tf.Tensor = 0.0  # MSE of the valid xfers' (min, mean) cost change


def world_model_losses(*, logits: tf.Tensor, mu: tf.Tensor, log_sigma: tf.Tensor,
                       next_latent: tf.Tensor, reward_pred: tf.Tensor, reward: tf.Tensor,
                       done_logit: tf.Tensor, done: tf.Tensor, xfer_logits: tf.Tensor,
                       xfer_valid: tf.Tensor, count_pred: tf.Tensor, count: tf.Tensor,
                       step_weights: tf.Tensor, terminal_weight: float = 1.0,
                       mask_weight: float = 1.0, count_weight: float = 1.0,
                       reward_weight: float = 1.0,
                       reward_members: Optional[tf.Tensor] = None,
                       gain_pred: Optional[tf.Tensor] = None,
                       gain: Optional[tf.Tensor] = None,
                       gain_weight: float = 1.0) -> WorldModelLosses:
    """All loss terms of the world model over padded sequences.

    Every term is a masked mean over real steps (`step_weights` == 1); the
    [B, T, M] terms average over all M xfers of a real step, except the
    location-count term, which averages only over xfers that are valid
    (`xfer_valid` == 1) at real steps: an invalid xfer has no locations to
    predict.

    Args:
      logits: [B, T, K] mixture logits for z_{t+1}.
      mu, log_sigma: [B, T, K, Z] mixture means and log stds.
      next_latent: [B, T, Z] the observed z_{t+1}.
      reward_pred, reward: [B, T] predicted and observed reward.
      done_logit: [B, T] logit of the done flag; done: [B, T] float 0/1.
      xfer_logits: [B, T, M] logits of each xfer being valid next.
      xfer_valid: [B, T, M] float 0/1, whether each xfer is valid next.
      count_pred: [B, T, M] predicted log1p(location count).
      count: [B, T, M] observed raw location counts (float).
      step_weights: [B, T] 1 for real steps, 0 for padding.
      terminal_weight, mask_weight, count_weight, reward_weight: the weights of
        the terminal, xfer-mask, location-count and reward terms in `total`
        (the latent term has weight 1; the ensemble's has the reward's).
      reward_members: [B, T, E] the reward ensemble's predictions, each
        trained like `reward_pred` (the term is their mean MSE); None or
        E = 0: no such term.
      gain_pred, gain: [B, T, M, 2] predicted and observed (min, mean) cost
        change of each xfer's candidates; the term averages over valid
        xfers at real steps, as the count term. None: no such term.
      gain_weight: its weight in `total`.

    Returns:
      A `WorldModelLosses` of scalars.
    """
    nll = mixture_nll(logits, mu, log_sigma, next_latent)                  # [B, T]
    latent_dim = tf.cast(tf.shape(next_latent)[-1], nll.dtype)
    # Thesis: only the mixture term is divided by (Z + 2) (ctallec divides all).
    latent_nll = masked_mean(nll, step_weights) / (latent_dim + 2.0)

    reward_pred = tf.convert_to_tensor(reward_pred)
    reward_loss = masked_mean(
        tf.square(reward_pred - tf.cast(reward, reward_pred.dtype)), step_weights)
    terminal_loss = masked_mean(sigmoid_cross_entropy(done_logit, done), step_weights)
    xfer_mask_loss = masked_mean(sigmoid_cross_entropy(xfer_logits, xfer_valid),
                                 step_weights)

    count_pred = tf.convert_to_tensor(count_pred)
    count_target = tf.math.log1p(tf.cast(count, count_pred.dtype))
    count_weights = (tf.cast(step_weights, count_pred.dtype)[..., None]
                     * tf.cast(xfer_valid, count_pred.dtype))               # [B, T, M]
    count_loss = masked_mean(tf.square(count_pred - count_target), count_weights)

    ensemble_loss = tf.zeros((), reward_pred.dtype)
    if reward_members is not None and reward_members.shape[-1] != 0:
        members = tf.convert_to_tensor(reward_members)
        errors = tf.reduce_mean(
            tf.square(members - tf.cast(reward, members.dtype)[..., None]), -1)
        ensemble_loss = masked_mean(errors, step_weights)

    gain_loss = tf.zeros((), count_pred.dtype)
    if gain_pred is not None:
        gain_pred = tf.convert_to_tensor(gain_pred)
        errors = tf.reduce_mean(tf.square(gain_pred - tf.cast(gain, gain_pred.dtype)), -1)
        gain_loss = masked_mean(errors, count_weights)

    total = (latent_nll + reward_weight * (reward_loss + ensemble_loss)
             + terminal_weight * terminal_loss + mask_weight * xfer_mask_loss
             + count_weight * count_loss + gain_weight * gain_loss)
    return WorldModelLosses(latent_nll=latent_nll, reward=reward_loss,
                            terminal=terminal_loss, xfer_mask=xfer_mask_loss,
                            location_count=count_loss, total=total,
                            reward_ensemble=ensemble_loss, xfer_gain=gain_loss)


def polynomial_decay(step: int, initial: float, final: float, decay_steps: int,
                     power: float = 2.0) -> float:
    """Polynomial decay from `initial` to `final` over `decay_steps` steps.

    (initial - final) * (1 - min(step, decay_steps) / decay_steps) ** power
    + final; the thesis uses power 2, e.g. 8e-3 -> 2e-4 over 200 steps.
    A negative step is treated as 0.

    Args:
      step: the current step.
      initial: the value at step 0.
      final: the value from `decay_steps` on.
      decay_steps: the length of the decay, >= 1.
      power: the degree of the polynomial.

    Returns:
      The value at `step`, a Python float.

    Raises:
      ValueError: if `decay_steps` < 1.
    """
    if decay_steps < 1:
        raise ValueError(f"decay_steps must be >= 1, got {decay_steps}")
    fraction = min(max(step, 0), decay_steps) / decay_steps
    return float((initial - final) * (1.0 - fraction) ** power + final)
