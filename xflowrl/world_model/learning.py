"""Training and evaluation of the MDN-RNN.

`WorldModelLearner.step(batch)` is one `tf.function` Adam step on a padded
`xflowrl.world_model.data.Batch` (computed on its real steps only,
`MDNRNN.unroll_real`: the loss terms are masked means over them), with the learning rate following the
thesis' 2nd-degree polynomial decay and a global-norm gradient clip; it
returns every loss term (the reward term in units of the reward's standard
deviation, `MDNRNN.reward_scale`). `evaluate(batch)` measures the world model on
held-out rollouts: the same loss terms, the reward MSE, the accuracy of the
predicted xfer masks and of the location counts (rounded), and the terminal
accuracy.

The separate reward network's dropout (the only randomness of a step) is
seeded by [seed, step]: the learner's `seed` and its checkpointed step
counter, so a resumed run draws the masks an uninterrupted one would.
"""

from __future__ import annotations

from typing import Dict

import sonnet as snt
import tensorflow as tf

from xflowrl.nn import apply_adam, build_adam
from xflowrl.tracing import sequence_spec, traced_once
from xflowrl.world_model import losses
from xflowrl.world_model.config import WorldModelConfig
from xflowrl.world_model.data import Batch
from xflowrl.world_model.networks import MDNRNN


def _tensors(batch: Batch):
    return tuple(tf.constant(x) for x in batch)


class WorldModelLearner:
    """Owns the optimizer and the step counter of an `MDNRNN`."""

    def __init__(self, model: MDNRNN, config: WorldModelConfig, seed: int = 0):
        """`seed` seeds the dropout masks of training steps (see the module)."""
        self.model = model
        self.config = config
        self.seed = int(seed)
        self.learning_rate = tf.Variable(config.learning_rate, trainable=False,
                                         dtype=tf.float32, name="learning_rate")
        self.optimizer = snt.optimizers.Adam(self.learning_rate)
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="wm_steps")
        # Batches are padded to their longest sequence: any length, one trace.
        self._step = traced_once(self._step_impl, sequence_spec)
        self._evaluate = traced_once(self._evaluate_impl, sequence_spec)

    def _losses(self, b, training: bool) -> losses.WorldModelLosses:
        return self._predict(b, training)[0]

    def _predict(self, b, training: bool):
        """The loss terms over the batch's real steps, the predictions and
        masks there, and those steps' targets (`MDNRNN.unroll_real`: padding
        is skipped, which leaves every masked mean as it is)."""
        b = Batch(*b)
        latents, xfers, locations, weights = b.latents, b.xfers, b.locations, b.weights
        dropout_seed = tf.stack([tf.constant(self.seed, tf.int64), self.steps])
        prediction, masks, index = self.model.unroll_real(
            latents, xfers, locations, weights, training=training, dropout_seed=dropout_seed)
        real = Batch(*(tf.gather_nd(x, index) for x in b))  # [N, ...] each
        scale = self.model.reward_scale  # the reward term in units of the reward's std
        terms = losses.world_model_losses(
            logits=prediction.logits, mu=prediction.mu, log_sigma=prediction.log_sigma,
            next_latent=real.next_latents, reward_pred=prediction.reward * scale,
            reward=real.rewards * scale,
            done_logit=prediction.done_logit, done=real.terminals,
            xfer_logits=masks.xfer_logits, xfer_valid=real.xfer_valid,
            count_pred=masks.log_counts, count=real.counts, step_weights=real.weights,
            reward_members=prediction.reward_members * scale,
            # Cost changes are percent, as rewards: in the reward's units too.
            gain_pred=masks.gains * scale if self.model.xfer_summaries else None,
            gain=real.gains * scale, gain_weight=self.config.gain_weight)
        return terms, prediction, masks, real

    def _step_impl(self, b) -> Dict[str, tf.Tensor]:
        with tf.GradientTape() as tape:
            terms = self._losses(b, training=True)
        variables = self.model.trainable_variables
        grads = tape.gradient(terms.total, variables)
        grads = [tf.zeros_like(v) if g is None else g for g, v in zip(grads, variables)]
        grads, norm = tf.clip_by_global_norm(grads, self.config.max_grad_norm)
        apply_adam(self.optimizer, grads, variables)
        out = terms._asdict()
        out["grad_norm"] = norm
        return out

    def step(self, batch: Batch) -> Dict[str, float]:
        """One training step; returns the loss terms and the learning rate."""
        cfg = self.config
        lr = losses.polynomial_decay(int(self.steps.numpy()), cfg.learning_rate,
                                     cfg.final_learning_rate, cfg.decay_steps)
        self.learning_rate.assign(lr)
        if not self.optimizer.m:
            self.build(batch)  # variables made outside the trace: it then traces once
        metrics = {k: float(v) for k, v in self._step(_tensors(batch)).items()}
        self.steps.assign_add(1)
        metrics["learning_rate"] = lr
        return metrics

    def _evaluate_impl(self, b) -> Dict[str, tf.Tensor]:
        terms, prediction, masks, real = self._predict(b, training=False)
        valid, counts, terminals, weights = real.xfer_valid, real.counts, real.terminals, real.weights
        predicted_valid = tf.cast(masks.xfer_logits > 0, tf.float32)
        mask_right = tf.reduce_all(tf.equal(predicted_valid, valid), axis=-1)
        predicted_counts = tf.round(tf.math.expm1(masks.log_counts))
        counts_right = tf.reduce_all(tf.logical_or(valid < 0.5,
                                                   tf.equal(predicted_counts, counts)), axis=-1)
        terminal_right = tf.equal(tf.cast(prediction.done_logit > 0, tf.float32), terminals)
        out = terms._asdict()
        out["reward_mse"] = terms.reward / tf.square(self.model.reward_scale)  # raw units
        out["xfer_mask_accuracy"] = losses.masked_mean(tf.cast(mask_right, tf.float32), weights)
        out["location_mask_accuracy"] = losses.masked_mean(
            tf.cast(tf.logical_and(mask_right, counts_right), tf.float32), weights)
        out["terminal_accuracy"] = losses.masked_mean(tf.cast(terminal_right, tf.float32),
                                                      weights)
        # Per valid xfer rather than per state: how often its rounded count
        # is right (the location-mask accuracy above asks every one of a
        # state's at once, and is near 0 while most are right).
        out["location_count_accuracy"] = losses.masked_mean(
            tf.cast(tf.equal(predicted_counts, counts), tf.float32),
            weights[..., None] * valid)
        return out

    def evaluate(self, batch: Batch) -> Dict[str, float]:
        """Loss terms and accuracies on a (held-out) batch; masks are judged
        per state: all M xfer flags right, and for the location mask also
        every valid xfer's rounded count."""
        return {k: float(v) for k, v in self._evaluate(_tensors(batch)).items()}

    def build(self, batch: Batch) -> None:
        """Creates the model's and optimizer's variables without training."""
        self._losses(_tensors(batch), training=False)
        build_adam(self.optimizer, self.model.trainable_variables)
