"""The MDN-RNN world model (thesis §3.4.1, Figure 3.3; Ha & Schmidhuber 2018).

`MDNRNN` models P(z_{t+1} | a_t, z_t, h_t) with an LSTM (256 units) whose
input is [z_t, xfer embedding, location embedding] (actions enter as learned
embeddings, not the thesis code's scalar ids) and whose output h_{t+1}
feeds a mixture density head (K = 8 diagonal Gaussians over z_{t+1}), a
reward head and a done-logit head, and an ensemble of small reward heads
whose disagreement marks what the model has not learnt. A mask decoder
predicts, from [z_t, h_t], which of the M known xfers are valid in s_t and
how many locations each has (location masks are prefixes, so a count per
xfer suffices), and with `WorldModelConfig.xfer_summaries` each xfer's best
and mean cost change there (the real observation's xfer summary, in percent
of the initial cost). Optionally a
separate reward network (thesis §4.3.4: an MLP of 5 x 32 with dropout) on
[z_t, h_t, action embedding] replaces the reward head.

`unroll` serves training (teacher forcing over padded sequences, time-major
inside) and `unroll_real` the same on the real steps only (what the learner
trains on: padding is skipped); `step` advances a batch of imagined
episodes by one step (the dream).

Randomness is explicit: every weight is drawn by stateless ops from the
`seed` given to `MDNRNN` (`xflowrl.nn.initializers`, Sonnet's default
distributions), and the separate reward network's dropout masks from the
`dropout_seed` given to `unroll`; nothing reads TensorFlow's global seed.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence, Tuple

import sonnet as snt
import tensorflow as tf

from xflowrl.nn import SeededInitializers
from xflowrl.world_model.config import WorldModelConfig


class Prediction(NamedTuple):
    logits: tf.Tensor      # [..., K]      mixture logits for z_{t+1}
    mu: tf.Tensor          # [..., K, Z]
    log_sigma: tf.Tensor   # [..., K, Z]
    reward: tf.Tensor      # [...]         r_t
    done_logit: tf.Tensor  # [...]         d_t
    hidden: tf.Tensor      # [..., H]      h_{t+1}
    reward_members: tf.Tensor  # [..., E]  the reward ensemble's r_t (E may be 0)


class Masks(NamedTuple):
    xfer_logits: tf.Tensor  # [..., M]  valid known xfers of the state
    log_counts: tf.Tensor   # [..., M]  predicted log1p(location count)
    # [..., M, 2] the (min, mean) cost change of each xfer's candidates, in
    # percent of the initial cost; zeros unless the model predicts summaries.
    gains: Optional[tf.Tensor] = None


class DropoutMLP(snt.Module):
    """`snt.nets.MLP` (ReLU) with dropout drawn from an explicit seed.

    As Sonnet's MLP with `dropout_rate`: in training, dropout before each
    hidden layer's activation (none after the output layer), with the
    same distribution (keep with probability 1 - rate, kept units scaled by
    1 / (1 - rate)); but the masks come from `tf.nn.experimental.stateless_dropout`
    on a seed the caller passes, not from TensorFlow's global random state.
    The layers keep the MLP's variable names (`linear_0`, ...).
    """

    def __init__(self, output_sizes: Sequence[int], dropout_rate: float,
                 w_init: snt.initializers.Initializer, name: str = "mlp"):
        super().__init__(name=name)
        self._dropout_rate = float(dropout_rate)
        self._layers = [snt.Linear(size, w_init=w_init, name=f"linear_{i}")
                        for i, size in enumerate(output_sizes)]

    def __call__(self, inputs: tf.Tensor, is_training: bool,
                 seed: Optional[tf.Tensor] = None) -> tf.Tensor:
        """`seed`: shape [2] integer tensor, required when training with dropout."""
        dropout = is_training and self._dropout_rate > 0
        if dropout and seed is None:
            raise ValueError("training with dropout needs a seed")
        out = inputs
        for i, layer in enumerate(self._layers):
            out = layer(out)
            if i < len(self._layers) - 1:
                if dropout:
                    out = tf.nn.experimental.stateless_dropout(
                        out, self._dropout_rate,
                        seed=tf.random.experimental.stateless_fold_in(seed, i))
                out = tf.nn.relu(out)
        return out


class MDNRNN(snt.Module):
    """LSTM + mixture density, reward, done and mask heads."""

    def __init__(self, config: WorldModelConfig, num_known_xfers: int, max_locations: int,
                 seed: int = 0, name: str = "mdn_rnn"):
        """
        Args:
          config: sizes (latent, LSTM, mixtures, embeddings, reward model).
          num_known_xfers: M; xfer ids 0..M, M being NO-OP.
          max_locations: L, locations per xfer.
          seed: seeds every weight's initialisation (`SeededInitializers`).
        """
        super().__init__(name=name)
        self.latent_size = z = config.latent_size
        self.mixtures = k = config.mixtures
        self.num_known_xfers = num_known_xfers
        self.hidden_size = config.lstm_size
        init = SeededInitializers(seed)
        # fan_in() is Sonnet's LSTM default too: 1/sqrt(input size) for w_i,
        # 1/sqrt(hidden size) for w_h.
        self.lstm = snt.LSTM(config.lstm_size, w_i_init=init.fan_in(), w_h_init=init.fan_in(),
                             name="lstm")
        self._xfer_embed = snt.Embed(num_known_xfers + 1, config.action_embedding_size,
                                     initializer=init.unit(), name="xfer_embed")
        self._location_embed = snt.Embed(max_locations, config.action_embedding_size,
                                         initializer=init.unit(), name="location_embed")
        self._head = snt.Linear(k + 2 * k * z + 2, w_init=init.fan_in(), name="mdn_head")
        m = max(num_known_xfers, 1)
        self.xfer_summaries = config.xfer_summaries
        self._mask_decoder = snt.nets.MLP([config.mask_hidden_size,
                                           (4 if self.xfer_summaries else 2) * m],
                                          w_init=init.fan_in(), name="mask_decoder")
        # Rewards are small (an episode's return is its total speed-up in %,
        # often well under 1): the reward outputs are in units of the reward's
        # standard deviation in the first round's rollouts, set by
        # `set_reward_scale`, so the reward term carries weight in the loss.
        self.reward_scale = tf.Variable(1.0, trainable=False, name="reward_scale")
        # A small ensemble of reward heads on h_{t+1}, each from its own
        # initial weights: where they disagree the model has not seen the
        # like, and the dream penalises (or ends) imagined steps there.
        self.reward_ensemble = config.reward_ensemble
        self._reward_members = [
            snt.nets.MLP([config.reward_ensemble_hidden, 1],
                         w_init=SeededInitializers(seed + 1 + i).fan_in(),
                         name=f"reward_member_{i}")
            for i in range(config.reward_ensemble)]
        self.separate_reward = config.reward_model == "separate"
        if self.separate_reward:
            self._reward_net = DropoutMLP(list(config.reward_hidden) + [1],
                                          config.reward_dropout, w_init=init.fan_in(),
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

    def _reward(self, head_reward, latent, hidden_before, action, training, dropout_seed):
        if self.separate_reward:
            inputs = tf.concat([latent, hidden_before, action], -1)
            head_reward = self._reward_net(inputs, is_training=training,
                                           seed=dropout_seed)[..., 0]
        return head_reward / self.reward_scale

    def _members(self, hidden: tf.Tensor) -> tf.Tensor:
        """[..., E] the ensemble's rewards (raw units) from h_{t+1}."""
        if not self._reward_members:
            return tf.zeros(tf.concat([tf.shape(hidden)[:-1], [0]], 0), hidden.dtype)
        return tf.concat([m(hidden) for m in self._reward_members], -1) / self.reward_scale

    def masks(self, latent: tf.Tensor, hidden: tf.Tensor) -> Masks:
        """Mask decoder on [z_t, h_t]; the gains are predicted in the
        reward's units (`reward_scale`), returned in the observation's."""
        m = max(self.num_known_xfers, 1)
        out = self._mask_decoder(tf.concat([latent, hidden], -1))
        lead = tf.shape(out)[:-1]
        if not self.xfer_summaries:
            return Masks(out[..., :m], out[..., m:],
                         tf.zeros(tf.concat([lead, [m, 2]], 0), out.dtype))
        gains = tf.reshape(out[..., 2 * m:], tf.concat([lead, [m, 2]], 0))
        return Masks(out[..., :m], out[..., m:2 * m], gains / self.reward_scale)

    def unroll(self, latents: tf.Tensor, xfers: tf.Tensor, locations: tf.Tensor,
               training: bool = False, dropout_seed: Optional[tf.Tensor] = None
               ) -> Tuple[Prediction, Masks]:
        """Teacher-forced pass over batch-major sequences.

        Args:
          latents: [B, T, Z] z_t; xfers, locations: [B, T] a_t.
          training: applies the separate reward network's dropout.
          dropout_seed: shape [2] integer tensor, the dropout masks' seed;
            required when training a separate reward network.
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
        reward = self._reward(reward, latents, hidden_before, action, training, dropout_seed)
        return (Prediction(logits, mu, log_sigma, reward, done, hidden, self._members(hidden)),
                self.masks(latents, hidden_before))

    def unroll_real(self, latents: tf.Tensor, xfers: tf.Tensor, locations: tf.Tensor,
                    weights: tf.Tensor, training: bool = False,
                    dropout_seed: Optional[tf.Tensor] = None
                    ) -> Tuple[Prediction, Masks, tf.Tensor]:
        """`unroll` computed on the real steps of padded sequences only.

        The same predictions as `unroll` at every step whose weight is > 0
        (each sequence's real steps are a prefix of its row, as
        `xflowrl.world_model.data.make_batch` pads them), without the work
        on padding: sorted by length, the LSTM advances at step t only the
        sequences longer than t, and the heads see only real steps. A
        training step on padded batches spends most of its time on padding
        otherwise (a batch is as long as its longest episode).

        Args:
          latents, xfers, locations, training, dropout_seed: as `unroll`.
          weights: [B, T] 1 for real steps, 0 for padding.
        Returns:
          predictions and masks of the N real steps ([N, ...], in time-major
          order, sequences by decreasing length within a step) and their
          [N, 2] (row, step) indices into the batch (for `tf.gather_nd` of
          targets).
        """
        lengths = tf.cast(tf.reduce_sum(tf.cast(weights > 0, tf.int32), 1), tf.int32)  # [B]
        order = tf.argsort(-lengths, stable=True)                                    # [B]
        steps = tf.shape(weights)[1]
        batch = tf.shape(weights)[0]
        time = tf.range(steps)
        alive = time[:, None] < tf.gather(lengths, order)[None, :]           # [T, B] prefixes
        counts = tf.reduce_sum(tf.cast(alive, tf.int32), 1)                  # [T]
        offsets = tf.cumsum(counts, exclusive=True)
        grid = tf.stack([tf.broadcast_to(order[None, :], [steps, batch]),
                         tf.broadcast_to(time[:, None], [steps, batch])], -1)  # (row, step)
        index = tf.boolean_mask(grid, alive)                                  # [N, 2]
        latent = tf.gather_nd(latents, index)                                 # [N, Z]
        action = self._action(tf.gather_nd(xfers, index), tf.gather_nd(locations, index))
        inputs = tf.concat([latent, action], -1)                              # [N, Z+2E]
        # Step 0 by the LSTM core itself (it makes its variables on first use),
        # every later one on the sequences still running; the LSTM's maths as
        # in snt.LSTM (input projections of all steps in one product).
        first = counts[0]
        hidden_0, state = self.lstm(inputs[:first], self.initial_state(first))
        gates_x = tf.matmul(inputs, self.lstm.input_to_hidden)                # [N, 4H]
        w_h, b = self.lstm.hidden_to_hidden, self.lstm.b
        size = self.hidden_size
        outputs = tf.TensorArray(hidden_0.dtype, size=steps, infer_shape=False,
                                 element_shape=tf.TensorShape([None, size]))
        outputs = outputs.write(0, hidden_0)

        def body(t, hidden, cell, outputs):
            n = counts[t]
            gates = (gates_x[offsets[t]:offsets[t] + n] + tf.matmul(hidden[:n], w_h) + b)
            i, f, g, o = tf.split(gates, num_or_size_splits=4, axis=1)
            cell = tf.sigmoid(f) * cell[:n]
            cell += tf.sigmoid(i) * tf.tanh(g)
            hidden = tf.sigmoid(o) * tf.tanh(cell)
            return t + 1, hidden, cell, outputs.write(t, hidden)

        shape = tf.TensorShape([None, size])
        _, _, _, outputs = tf.while_loop(
            lambda t, *_: t < steps, body, (tf.constant(1), state.hidden, state.cell, outputs),
            shape_invariants=(tf.TensorShape([]), shape, shape, None))
        hidden = outputs.concat()                                             # [N, H]: h_{t+1}
        # h_t: the previous step's output of the same sequence (zeros at t = 0).
        before = tf.concat([tf.fill([first], -1),
                            tf.boolean_mask(tf.broadcast_to(
                                tf.gather(offsets, tf.maximum(time - 1, 0))[:, None]
                                + tf.range(batch)[None, :], [steps, batch]), alive)[first:]], 0)
        hidden_before = tf.gather(tf.concat([hidden, tf.zeros([1, size], hidden.dtype)], 0),
                                  tf.where(before < 0, tf.shape(hidden)[0], before))
        logits, mu, log_sigma, reward, done = self._split(self._head(hidden))
        if self.separate_reward:
            # On the padded batch, as `unroll`: the dropout masks are drawn for
            # its shape, so both draw the same ones.
            padded = tf.scatter_nd(index, hidden_before,
                                   tf.stack([batch, steps, tf.constant(size)]))
            full_action = self._action(xfers, locations)
            reward = tf.gather_nd(self._reward(None, latents, padded, full_action, training,
                                               dropout_seed), index)
        else:
            reward = self._reward(reward, latent, hidden_before, action, training,
                                  dropout_seed)
        return (Prediction(logits, mu, log_sigma, reward, done, hidden, self._members(hidden)),
                self.masks(latent, hidden_before), index)

    def recurrent_states(self, latents: tf.Tensor, xfers: tf.Tensor, locations: tf.Tensor
                         ) -> snt.LSTMState:
        """The LSTM's state before each step of teacher-forced sequences.

        Args:
          latents: [B, T, Z] z_t; xfers, locations: [B, T] a_t.
        Returns:
          hidden and cell [B, T, H]: at t, the state the real prefix
          a_0..a_{t-1} led to (zeros at t = 0): where an imagined episode
          started at s_t resumes.
        """
        batch = tf.shape(latents)[0]
        inputs = tf.transpose(tf.concat([latents, self._action(xfers, locations)], -1),
                              [1, 0, 2])
        initial = self.initial_state(batch)
        after = tf.scan(lambda state, x: self.lstm(x, state)[1], inputs, initializer=initial)

        def before(states, first):  # [T, B, H] after each step -> [B, T, H] before it
            return tf.transpose(tf.concat([first[None], states[:-1]], 0), [1, 0, 2])

        return snt.LSTMState(hidden=before(after.hidden, initial.hidden),
                             cell=before(after.cell, initial.cell))

    def step(self, latent: tf.Tensor, xfer: tf.Tensor, location: tf.Tensor,
             state: snt.LSTMState) -> Tuple[Prediction, snt.LSTMState]:
        """One step for a batch: latent [B, Z], xfer/location [B]."""
        action = self._action(xfer, location)
        hidden, new_state = self.lstm(tf.concat([latent, action], -1), state)
        logits, mu, log_sigma, reward, done = self._split(self._head(hidden))
        reward = self._reward(reward, latent, state.hidden, action, False, None)
        return (Prediction(logits, mu, log_sigma, reward, done, hidden, self._members(hidden)),
                new_state)
