"""Tests of the MDN-RNN and its learner."""

import dataclasses

from absl.testing import absltest, parameterized
import numpy as np
import sonnet as snt
import tensorflow as tf

from tests.world_model import fixtures
from xflowrl.world_model import data
from xflowrl.world_model.learning import WorldModelLearner
from xflowrl.world_model.networks import DropoutMLP, MDNRNN

_M, _L = 5, 7
_CONFIG = fixtures.SMALL_CONFIG
_Z, _H, _K, _E = (_CONFIG.latent_size, _CONFIG.lstm_size, _CONFIG.mixtures,
                  _CONFIG.action_embedding_size)


def _model(reward_model="mdn", seed=0):
    return MDNRNN(dataclasses.replace(_CONFIG, reward_model=reward_model), _M, _L, seed=seed)


def _inputs(b=3, t=4, seed=0):
    rng = np.random.default_rng(seed)
    return (tf.constant(rng.uniform(-1, 1, (b, t, _Z)), tf.float32),
            tf.constant(rng.integers(0, _M + 1, (b, t)), tf.int32),
            tf.constant(rng.integers(0, _L, (b, t)), tf.int32))


_REAL = {}


def _real_batch():
    """A fixed batch of real small_cnn latent sequences (untrained encoder), cached."""
    if not _REAL:
        rollouts = fixtures.rollouts(16, seed=0, max_steps=6)
        vocab = data.XferVocabulary.from_rollouts(rollouts, len(fixtures.xfers()))
        encoder, _ = fixtures.build_world_model(vocab, 200)
        latents = encoder.encode([s for r in rollouts for s in r.states])
        sequences, start = [], 0
        for r in rollouts:
            sequences.append(data.to_sequences(r, latents[start:start + len(r.states)], vocab))
            start += len(r.states)
        _REAL.update(vocab=vocab, batch=data.make_batch(sequences))
    return _REAL["vocab"], _REAL["batch"]


class MDNRNNTest(parameterized.TestCase):

    def test_unroll_shapes(self):
        model = _model()
        prediction, masks = model.unroll(*_inputs(b=3, t=4))
        self.assertEqual(prediction.logits.shape, (3, 4, _K))
        self.assertEqual(prediction.mu.shape, (3, 4, _K, _Z))
        self.assertEqual(prediction.log_sigma.shape, (3, 4, _K, _Z))
        self.assertEqual(prediction.reward.shape, (3, 4))
        self.assertEqual(prediction.done_logit.shape, (3, 4))
        self.assertEqual(prediction.hidden.shape, (3, 4, _H))
        self.assertEqual(masks.xfer_logits.shape, (3, 4, _M))
        self.assertEqual(masks.log_counts.shape, (3, 4, _M))

    def test_step_shapes(self):
        model = _model()
        latents, xfers, locations = _inputs(b=3, t=1)
        prediction, state = model.step(latents[:, 0], xfers[:, 0], locations[:, 0],
                                       model.initial_state(3))
        self.assertEqual(prediction.logits.shape, (3, _K))
        self.assertEqual(prediction.mu.shape, (3, _K, _Z))
        self.assertEqual(prediction.log_sigma.shape, (3, _K, _Z))
        self.assertEqual(prediction.reward.shape, (3,))
        self.assertEqual(prediction.done_logit.shape, (3,))
        self.assertEqual(prediction.hidden.shape, (3, _H))
        self.assertEqual(state.hidden.shape, (3, _H))
        self.assertEqual(state.cell.shape, (3, _H))
        np.testing.assert_array_equal(prediction.hidden, state.hidden)

    @parameterized.parameters("mdn", "separate")
    def test_unroll_agrees_with_a_loop_of_steps(self, reward_model):
        model = _model(reward_model)
        latents, xfers, locations = _inputs(b=2, t=5)
        prediction, masks = model.unroll(latents, xfers, locations, training=False)
        state = model.initial_state(2)
        for t in range(5):
            step_masks = model.masks(latents[:, t], state.hidden)  # masks of s_t from h_t
            step, state = model.step(latents[:, t], xfers[:, t], locations[:, t], state)
            for name in ("logits", "mu", "log_sigma", "reward", "done_logit", "hidden",
                         "reward_members"):
                np.testing.assert_allclose(getattr(step, name), getattr(prediction, name)[:, t],
                                           atol=1e-5, err_msg=f"{name} at t={t}")
            np.testing.assert_allclose(step_masks.xfer_logits, masks.xfer_logits[:, t],
                                       atol=1e-5)
            np.testing.assert_allclose(step_masks.log_counts, masks.log_counts[:, t], atol=1e-5)

    def test_recurrent_states_are_those_a_loop_of_steps_reaches(self):
        model = _model()
        latents, xfers, locations = _inputs(b=3, t=5, seed=4)
        states = model.recurrent_states(latents, xfers, locations)
        self.assertEqual(states.hidden.shape, (3, 5, _H))
        self.assertEqual(states.cell.shape, (3, 5, _H))
        np.testing.assert_array_equal(states.hidden[:, 0], 0.0)
        np.testing.assert_array_equal(states.cell[:, 0], 0.0)
        state = model.initial_state(3)
        for t in range(5):
            np.testing.assert_allclose(states.hidden[:, t], state.hidden, atol=1e-5,
                                       err_msg=f"hidden at t={t}")
            np.testing.assert_allclose(states.cell[:, t], state.cell, atol=1e-5,
                                       err_msg=f"cell at t={t}")
            _, state = model.step(latents[:, t], xfers[:, t], locations[:, t], state)
        self.assertGreater(np.abs(states.hidden[:, 1:]).min(), 0.0)
        # The state before step t is the unroll's hidden output of step t - 1.
        prediction, _ = model.unroll(latents, xfers, locations)
        np.testing.assert_allclose(states.hidden[:, 1:], prediction.hidden[:, :-1], atol=1e-5)
        # Step t's own action does not enter the state before it.
        changed = tf.concat([xfers[:, :-1], (xfers[:, -1:] + 1) % (_M + 1)], 1)
        again = model.recurrent_states(latents, changed, locations)
        np.testing.assert_array_equal(again.hidden, states.hidden)

    def test_recurrent_states_inside_tf_function(self):
        model = _model()
        inputs = _inputs(b=2, t=3, seed=5)
        eager = model.recurrent_states(*inputs)
        compiled = tf.function(model.recurrent_states)(*inputs)
        np.testing.assert_allclose(compiled.hidden, eager.hidden, atol=1e-6)
        np.testing.assert_allclose(compiled.cell, eager.cell, atol=1e-6)

    @parameterized.parameters(0, 1, 3)
    def test_reward_members_shapes(self, members):
        model = MDNRNN(dataclasses.replace(_CONFIG, reward_ensemble=members), _M, _L)
        self.assertEqual(model.reward_ensemble, members)
        prediction, _ = model.unroll(*_inputs(b=3, t=4))
        self.assertEqual(prediction.reward_members.shape, (3, 4, members))
        latents, xfers, locations = _inputs(b=2, t=1)
        step, _ = model.step(latents[:, 0], xfers[:, 0], locations[:, 0],
                             model.initial_state(2))
        self.assertEqual(step.reward_members.shape, (2, members))
        self.assertEqual(step.reward_members.dtype, tf.float32)
        names = {v.name.split("/")[1] for v in model.trainable_variables}
        self.assertEqual({n for n in names if n.startswith("reward_member")},
                         {f"reward_member_{i}" for i in range(members)})

    def test_reward_members_differ_and_follow_the_reward_scale(self):
        model = MDNRNN(dataclasses.replace(_CONFIG, reward_ensemble=3), _M, _L)
        inputs = _inputs(b=2, t=3)
        before = model.unroll(*inputs)[0].reward_members.numpy()
        # Each member starts from its own weights.
        for i in range(3):
            for j in range(i):
                self.assertFalse(np.allclose(before[..., i], before[..., j]), (i, j))
        model.set_reward_scale(4.0)
        after = model.unroll(*inputs)[0]
        np.testing.assert_allclose(after.reward_members, before / 4.0, atol=1e-6)
        # They read h_{t+1}: each is its MLP on the unroll's hidden output.
        members = model._reward_members  # pylint: disable=protected-access
        for i, member in enumerate(members):
            np.testing.assert_allclose(after.reward_members[..., i],
                                       member(after.hidden)[..., 0] / 4.0, atol=1e-6)

    def test_separate_reward_net_has_dropout_in_training_only(self):
        model = _model("separate")
        inputs = _inputs(b=4, t=6)
        inference = [model.unroll(*inputs, training=False)[0].reward.numpy() for _ in range(2)]
        seed = tf.constant([3, 0], tf.int64)
        training = model.unroll(*inputs, training=True, dropout_seed=seed)[0].reward.numpy()
        np.testing.assert_array_equal(inference[0], inference[1])
        self.assertFalse(np.allclose(training, inference[0]))
        # The masks follow the seed alone.
        again = model.unroll(*inputs, training=True, dropout_seed=seed)[0].reward.numpy()
        np.testing.assert_array_equal(training, again)
        other = model.unroll(*inputs, training=True,
                             dropout_seed=tf.constant([3, 1], tf.int64))[0].reward.numpy()
        self.assertFalse(np.allclose(training, other))
        with self.assertRaisesRegex(ValueError, "seed"):
            model.unroll(*inputs, training=True)

    def test_dropout_keeps_units_with_probability_one_minus_rate(self):
        # As snt.nets.MLP's dropout: each hidden unit kept with probability
        # 1 - rate and then scaled by 1 / (1 - rate); none on the output.
        # With unit weights and input 1, every hidden unit is 1 before dropout,
        # so the output is (kept units) / (1 - rate).
        n, rate = 4000, 0.5  # 1 / (1 - rate) = 2: the sum stays exact in float32
        net = DropoutMLP([n, 1], rate, w_init=snt.initializers.Constant(1.0))
        x = tf.ones([1, 1])
        self.assertEqual(float(net(x, is_training=False)[0, 0]), n)
        out = float(net(x, is_training=True, seed=tf.constant([0, 0]))[0, 0])
        kept = out * (1.0 - rate)
        self.assertEqual(kept, round(kept))
        self.assertBetween(kept / n, 0.47, 0.53)  # std of the fraction: 0.008

    @parameterized.parameters("mdn", "separate")
    def test_reward_comes_from_the_head_or_the_separate_net(self, reward_model):
        model = _model(reward_model)
        before, _ = model.unroll(*_inputs())
        model.set_reward_scale(4.0)  # outputs are in units of the reward's std
        prediction, _ = model.unroll(*_inputs())
        np.testing.assert_allclose(prediction.reward, before.reward / 4.0, atol=1e-6)
        head = model._head  # pylint: disable=protected-access
        head_reward = head(prediction.hidden)[..., -2] / 4.0
        has_net = any("reward_net" in v.name for v in model.trainable_variables)
        if reward_model == "mdn":
            np.testing.assert_allclose(prediction.reward, head_reward, atol=1e-6)
            self.assertFalse(has_net)
        else:
            self.assertFalse(np.allclose(prediction.reward, head_reward, atol=1e-3))
            self.assertTrue(has_net)

    @parameterized.parameters("mdn", "separate")
    def test_unroll_real_is_unroll_at_the_real_steps(self, reward_model):
        # Sequences of different lengths (one of a single step), padded; the
        # real-step unroll gives unroll's predictions at every real step,
        # dropout included, and the (row, step) of each.
        lengths = [4, 1, 6, 3, 6]
        latents, xfers, locations = _inputs(b=5, t=6, seed=3)
        weights = tf.constant([[1.0] * n + [0.0] * (6 - n) for n in lengths])
        model = _model(reward_model)
        seed = tf.constant([5, 9], tf.int64)
        for training in (False, True):
            want, want_masks = model.unroll(latents, xfers, locations, training=training,
                                            dropout_seed=seed)
            got, masks, index = model.unroll_real(latents, xfers, locations, weights,
                                                  training=training, dropout_seed=seed)
            index = index.numpy()
            self.assertEqual(sorted(map(tuple, index.tolist())),
                             [(b, t) for b, n in enumerate(lengths) for t in range(n)])
            for name, value in got._asdict().items():
                np.testing.assert_allclose(
                    value.numpy(), tf.gather_nd(getattr(want, name), index).numpy(),
                    rtol=1e-5, atol=1e-5, err_msg=name)
            for name, value in masks._asdict().items():
                np.testing.assert_allclose(
                    value.numpy(), tf.gather_nd(getattr(want_masks, name), index).numpy(),
                    rtol=1e-5, atol=1e-5, err_msg=name)
        # Traced, for any batch and length.
        traced = tf.function(lambda *a: model.unroll_real(*a)[0].hidden, autograph=False,
                             reduce_retracing=True)
        np.testing.assert_allclose(traced(latents, xfers, locations, weights).numpy(),
                                   got.hidden.numpy(), rtol=1e-5, atol=1e-6)

    def test_actions_enter_as_embeddings(self):
        model = _model()
        latents, _, _ = _inputs(b=1, t=1)
        state = model.initial_state(1)

        def hidden(xfer, location):
            prediction, _ = model.step(latents[:, 0], tf.constant([xfer]),
                                       tf.constant([location]), state)
            return prediction.hidden.numpy()

        base = hidden(1, 2)
        self.assertFalse(np.allclose(base, hidden(1, 3)), "the location must matter")
        self.assertFalse(np.allclose(base, hidden(2, 2)), "the xfer must matter")
        np.testing.assert_array_equal(base, hidden(1, 2))
        shapes = {v.name: tuple(v.shape) for v in model.variables}
        self.assertEqual(shapes["mdn_rnn/xfer_embed/embeddings:0"], (_M + 1, _E))
        self.assertEqual(shapes["mdn_rnn/location_embed/embeddings:0"], (_L, _E))
        # The LSTM reads [z_t, xfer embedding, location embedding].
        self.assertEqual(shapes["mdn_rnn/lstm/w_i:0"], (_Z + 2 * _E, 4 * _H))


class WorldModelLearnerTest(absltest.TestCase):

    def test_training_lowers_the_loss_and_evaluate_reports_accuracies(self):
        vocab, batch = _real_batch()
        model = MDNRNN(_CONFIG, vocab.size, 200)
        learner = WorldModelLearner(model, _CONFIG)
        before = learner.evaluate(batch)
        history = [learner.step(batch) for _ in range(60)]
        after = learner.evaluate(batch)
        self.assertEqual(int(learner.steps.numpy()), 60)
        self.assertLess(after["total"], 0.5 * before["total"])
        self.assertLess(np.mean([m["total"] for m in history[-5:]]), history[0]["total"])
        self.assertLess(after["latent_nll"], before["latent_nll"])
        # The learning rate decays from its initial value.
        self.assertAlmostEqual(history[0]["learning_rate"], _CONFIG.learning_rate)
        self.assertLess(history[-1]["learning_rate"], history[0]["learning_rate"])
        for name in ("xfer_mask_accuracy", "location_mask_accuracy", "terminal_accuracy",
                     "location_count_accuracy"):
            self.assertBetween(after[name], 0.0, 1.0)
        self.assertLessEqual(after["location_mask_accuracy"], after["xfer_mask_accuracy"])
        scale = float(model.reward_scale.numpy())
        self.assertAlmostEqual(after["reward_mse"], after["reward"] / scale**2, places=5)
        # Fitting one small batch, the masks are learnt.
        self.assertGreater(after["xfer_mask_accuracy"], before["xfer_mask_accuracy"])

    def test_evaluate_accuracies_against_numpy(self):
        vocab, batch = _real_batch()
        model = MDNRNN(_CONFIG, vocab.size, 200, seed=1)
        learner = WorldModelLearner(model, _CONFIG)
        for _ in range(5):
            learner.step(batch)
        metrics = learner.evaluate(batch)
        prediction, masks = model.unroll(tf.constant(batch.latents), tf.constant(batch.xfers),
                                         tf.constant(batch.locations))
        w = batch.weights
        valid_right = ((masks.xfer_logits.numpy() > 0) == (batch.xfer_valid > 0.5)).all(-1)
        counts = np.round(np.expm1(masks.log_counts.numpy()))
        counts_right = ((batch.xfer_valid < 0.5) | (counts == batch.counts)).all(-1)
        terminal_right = (prediction.done_logit.numpy() > 0) == (batch.terminals > 0.5)
        self.assertAlmostEqual(metrics["xfer_mask_accuracy"],
                               (valid_right * w).sum() / w.sum(), places=5)
        self.assertAlmostEqual(metrics["location_mask_accuracy"],
                               (valid_right * counts_right * w).sum() / w.sum(), places=5)
        self.assertAlmostEqual(metrics["terminal_accuracy"],
                               (terminal_right * w).sum() / w.sum(), places=5)
        # Per valid xfer of every (unpadded) state: its count right.
        pair_weight = w[..., None] * (batch.xfer_valid > 0.5)
        self.assertAlmostEqual(metrics["location_count_accuracy"],
                               ((counts == batch.counts) * pair_weight).sum() / pair_weight.sum(),
                               places=5)

    def test_padded_steps_do_not_affect_the_losses(self):
        vocab, batch = _real_batch()
        lengths = batch.weights.sum(axis=1)
        self.assertLess(lengths.min(), lengths.max(), "the batch needs padding")
        model = MDNRNN(dataclasses.replace(_CONFIG, reward_model="separate"), vocab.size, 200)
        learner = WorldModelLearner(model, _CONFIG)
        reference = learner.evaluate(batch)

        pad = batch.weights == 0
        rng = np.random.default_rng(0)

        def scramble(x, high=None):
            x = x.copy()
            noise = (rng.integers(0, high, x.shape) if high is not None
                     else rng.normal(3.0, 5.0, x.shape))
            x[pad] = noise.astype(x.dtype)[pad]
            return x

        changed = batch._replace(
            latents=scramble(batch.latents), next_latents=scramble(batch.next_latents),
            xfers=scramble(batch.xfers, vocab.size + 1), locations=scramble(batch.locations, 200),
            rewards=scramble(batch.rewards), terminals=scramble(batch.terminals, 2),
            xfer_valid=scramble(batch.xfer_valid, 2), counts=scramble(batch.counts, 9))
        self.assertFalse(np.array_equal(changed.latents, batch.latents))
        metrics = learner.evaluate(changed)
        for name, value in reference.items():
            self.assertAlmostEqual(metrics[name], value, places=5, msg=name)
        # A real step, by contrast, does change the loss.
        real = batch._replace(rewards=batch.rewards + 1.0 * batch.weights)
        self.assertGreater(abs(learner.evaluate(real)["reward"] - reference["reward"]), 0.1)


if __name__ == "__main__":
    absltest.main()
