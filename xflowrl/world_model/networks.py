"""The MDN-RNN world model (thesis §3.4.1, Figure 3.3; Ha & Schmidhuber 2018).

`MDNRNN` models P(z_{t+1} | a_t, z_t, h_t) with an LSTM (256 units) whose
input is [z_t, xfer embedding, location embedding] (actions enter as learned
embeddings, not the thesis code's scalar ids) and whose output h_{t+1}
feeds a mixture density head (K = 8 diagonal Gaussians over z_{t+1}), a
reward head and a done-logit head. A mask decoder predicts, from [z_t, h_t],
which of the M known xfers are valid in s_t and how many locations each has
(location masks are prefixes, so a count per xfer suffices). Optionally a
separate reward network (thesis §4.3.4: an MLP of 5 x 32 with dropout) on
[z_t, h_t, action embedding] replaces the reward head.

`unroll` serves training (teacher forcing over padded sequences, time-major
inside); `step` advances a batch of imagined episodes by one step (the dream).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import sonnet as snt
import tensorflow as tf

from xflowrl.world_model.config import WorldModelConfig


class Prediction(NamedTuple):
    logits: tf.Tensor      # [..., K]      mixture logits for z_{t+1}
    mu: tf.Tensor          # [..., K, Z]
    log_sigma: tf.Tensor   # [..., K, Z]
    reward: tf.Tensor      # [...]         r_t
    done_logit: tf.Tensor  # [...]         d_t
    hidden: tf.Tensor      # [..., H]      h_{t+1}


class Masks(NamedTuple):
    xfer_logits: tf.Tensor  # [..., M]  valid known xfers of the state
    log_counts: tf.Tensor   # [..., M]  predicted log1p(location count)


class MDNRNN(snt.Module):
    """LSTM + mixture density, reward, done and mask heads."""

    def __init__(self, config: WorldModelConfig, num_known_xfers: int, max_locations: int,
                 name: str = "mdn_rnn"):
        """
        Args:
          config: sizes (latent, LSTM, mixtures, embeddings, reward model).
          num_known_xfers: M; xfer ids 0..M, M being NO-OP.
          max_locations: L, locations per xfer.
        """
        super().__init__(name=name)
        self.latent_size = z = config.latent_size
        self.mixtures = k = config.mixtures
        self.num_known_xfers = num_known_xfers
        self.hidden_size = config.lstm_size
        self.lstm = snt.LSTM(config.lstm_size, name="lstm")
        self._xfer_embed = snt.Embed(num_known_xfers + 1, config.action_embedding_size,
                                     name="xfer_embed")
        self._location_embed = snt.Embed(max_locations, config.action_embedding_size,
                                         name="location_embed")
        self._head = snt.Linear(k + 2 * k * z + 2, name="mdn_head")
        m = max(num_known_xfers, 1)
        self._mask_decoder = snt.nets.MLP([config.mask_hidden_size, 2 * m], name="mask_decoder")
        # Rewards are small (an episode's return is its total speed-up in %,
        # often well under 1): the reward outputs are in units of the reward's
        # standard deviation in the first round's rollouts, set by
        # `set_reward_scale`, so the reward term carries weight in the loss.
        self.reward_scale = tf.Variable(1.0, trainable=False, name="reward_scale")
        self.separate_reward = config.reward_model == "separate"
        if self.separate_reward:
            self._reward_net = snt.nets.MLP(list(config.reward_hidden) + [1],
                                            dropout_rate=config.reward_dropout,
                                            name="reward_net")

    def initial_state(self, batch_size: int) -> snt.LSTMState:
        return self.lstm.initial_state(batch_size)

    def _action(self, xfer: tf.Tensor, location: tf.Tensor) -> tf.Tensor:
        return tf.concat([self._xfer_embed(tf.cast(xfer, tf.int32)),
                          self._location_embed(tf.cast(location, tf.int32))], -1)

    def _split(self, out: tf.Tensor) -> Tuple[tf.Tensor, ...]:
        k, z = self.mixtures, self.latent_size
        lead = tf.shape(out)[:-1]
        logits = out[..., :k]
        mu = tf.reshape(out[..., k:k + k * z], tf.concat([lead, [k, z]], 0))
        log_sigma = tf.reshape(out[..., k + k * z:k + 2 * k * z], tf.concat([lead, [k, z]], 0))
        return logits, mu, log_sigma, out[..., -2], out[..., -1]

    def set_reward_scale(self, scale: float) -> None:
        """Outputs / scale are rewards: scale = 1 / std of the observed rewards."""
        self.reward_scale.assign(scale)

    def _reward(self, head_reward, latent, hidden_before, action, training):
        if self.separate_reward:
            inputs = tf.concat([latent, hidden_before, action], -1)
            head_reward = self._reward_net(inputs, is_training=training)[..., 0]
        return head_reward / self.reward_scale

    def masks(self, latent: tf.Tensor, hidden: tf.Tensor) -> Masks:
        """Mask decoder on [z_t, h_t]."""
        m = max(self.num_known_xfers, 1)
        out = self._mask_decoder(tf.concat([latent, hidden], -1))
        return Masks(out[..., :m], out[..., m:])

    def unroll(self, latents: tf.Tensor, xfers: tf.Tensor, locations: tf.Tensor,
               training: bool = False) -> Tuple[Prediction, Masks]:
        """Teacher-forced pass over batch-major sequences.

        Args:
          latents: [B, T, Z] z_t; xfers, locations: [B, T] a_t.
        Returns:
          predictions of z_{t+1}, r_t, d_t ([B, T, ...]) and the masks of
          s_t from [z_t, h_t] ([B, T, M]).
        """
        batch = tf.shape(latents)[0]
        action = self._action(xfers, locations)                         # [B, T, 2E]
        inputs = tf.transpose(tf.concat([latents, action], -1), [1, 0, 2])
        hidden, _ = snt.dynamic_unroll(self.lstm, inputs, self.initial_state(batch))
        hidden = tf.transpose(hidden, [1, 0, 2])                        # [B, T, H]: h_{t+1}
        hidden_before = tf.concat([tf.zeros_like(hidden[:, :1]), hidden[:, :-1]], 1)  # h_t
        logits, mu, log_sigma, reward, done = self._split(self._head(hidden))
        reward = self._reward(reward, latents, hidden_before, action, training)
        return (Prediction(logits, mu, log_sigma, reward, done, hidden),
                self.masks(latents, hidden_before))

    def step(self, latent: tf.Tensor, xfer: tf.Tensor, location: tf.Tensor,
             state: snt.LSTMState) -> Tuple[Prediction, snt.LSTMState]:
        """One step for a batch: latent [B, Z], xfer/location [B]."""
        action = self._action(xfer, location)
        hidden, new_state = self.lstm(tf.concat([latent, action], -1), state)
        logits, mu, log_sigma, reward, done = self._split(self._head(hidden))
        reward = self._reward(reward, latent, state.hidden, action, False)
        return Prediction(logits, mu, log_sigma, reward, done, hidden), new_state
