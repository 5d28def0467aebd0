"""Tests of the dream (`BatchedDream`, `DreamEnv`) and the latent view of the
real environment (`LatentEnv`): the shared conformance tests, then their own
semantics."""

import functools

from absl.testing import absltest, parameterized
import numpy as np
import sonnet as snt
import tensorflow as tf

from tests.env.conformance import EnvironmentConformance
from tests.world_model import fixtures
from xflowrl.world_model import data
from xflowrl.world_model.config import DreamConfig
from xflowrl.world_model.dream import BatchedDream, DreamEnv, DreamStarts, decode_masks
from xflowrl.world_model.latent_env import LatentEnv

_L = 200  # the real environment's max_locations


def _world():
    return fixtures.untrained_world(_L)


# A scripted world model: 4 known xfers, xfer 1 never valid, 3 locations each,
# reward 0.25, never done (the mixture over z_{t+1} stays random).
_M, _SCRIPT_L, _COUNT, _REWARD = 4, 5, 3, 0.25


@functools.lru_cache(maxsize=None)
def _scripted_model(done_logit=-10.0):
    vocab = data.XferVocabulary(range(_M), 10)
    _, model = fixtures.build_world_model(vocab, _SCRIPT_L, seed=1)
    fixtures.script_model(model, [5.0, -5.0, 5.0, 5.0], _COUNT, _REWARD, done_logit)
    return model


def _config(**kwargs):
    """A dream config with the count margin resolved (the agent resolves None)."""
    return DreamConfig(count_margin=0.0, **kwargs)


def _scripted_dream(max_steps=6, done_logit=-10.0, seed=0, config=None, **kwargs):
    model = _scripted_model(done_logit)
    z0 = np.linspace(-0.5, 0.5, model.latent_size).astype(np.float32)
    return BatchedDream(model, z0, config or _config(), max_steps=max_steps,
                        max_locations=_SCRIPT_L, seed=seed, **kwargs)


# The same script with a reward ensemble that disagrees: the members predict
# _MEMBERS / scale, the head _REWARD / scale (a model of its own: the scripted
# one above is shared by the other tests).
_MEMBERS = (0.1, 0.2, 0.25, 0.4, 0.9)
_SCALE = 2.0


@functools.lru_cache(maxsize=None)
def _disagreeing_model():
    vocab = data.XferVocabulary(range(_M), 10)
    _, model = fixtures.build_world_model(vocab, _SCRIPT_L, seed=3)
    fixtures.script_model(model, [5.0, -5.0, 5.0, 5.0], _COUNT, _REWARD, -10.0)
    fixtures.set_member_rewards(model, _MEMBERS)
    model.set_reward_scale(_SCALE)
    return model


def _disagreeing_dream(max_steps=6, **config):
    model = _disagreeing_model()
    z0 = np.linspace(-0.5, 0.5, model.latent_size).astype(np.float32)
    return BatchedDream(model, z0, _config(**config), max_steps=max_steps,
                        max_locations=_SCRIPT_L, seed=0)


def _decode_masks_reference(valid_prob, log_counts, max_locations, threshold, margin=0.0):
    b, m = valid_prob.shape
    xfer_mask = np.zeros((b, m + 1), bool)
    location_mask = np.zeros((b, m + 1, max_locations), bool)
    for i in range(b):
        xfer_mask[i, m] = True
        for x in range(m):
            if valid_prob[i, x] > threshold:
                count = min(max(round(float(np.expm1(log_counts[i, x] - margin))), 1), max_locations)
                xfer_mask[i, x] = True
                location_mask[i, x, :count] = True
    return xfer_mask, location_mask


# ---------------------------------------------------------------------------
# Conformance: the dream and the latent view obey the real environment's interface.
# ---------------------------------------------------------------------------

class DreamEnvConformanceTest(EnvironmentConformance, absltest.TestCase):

    def make_env(self):
        _, _, model, z0 = _world()
        return DreamEnv(BatchedDream(model, z0, _config(), max_steps=6, max_locations=_L,
                                     seed=0))


class LatentEnvConformanceTest(EnvironmentConformance, absltest.TestCase):

    def make_env(self):
        vocab, encoder, model, _ = _world()
        return LatentEnv(fixtures.real_env(max_steps=6), encoder, model, vocab, masks="real")


# ---------------------------------------------------------------------------
# The dream's own semantics.
# ---------------------------------------------------------------------------

class DecodeMasksTest(parameterized.TestCase):

    @parameterized.parameters((0.5, 0.0), (0.3, 0.0), (0.5, 0.4))
    def test_against_numpy(self, threshold, margin):
        rng = np.random.default_rng(0)
        valid_prob = rng.random((6, 5))
        log_counts = rng.uniform(-2.0, 4.0, (6, 5))  # counts below 1 and above L
        xfer_mask, location_mask = decode_masks(valid_prob, log_counts, 7, threshold, margin)
        expected_x, expected_l = _decode_masks_reference(valid_prob, log_counts, 7, threshold,
                                                         margin)
        np.testing.assert_array_equal(xfer_mask, expected_x)
        np.testing.assert_array_equal(location_mask, expected_l)
        self.assertEqual(xfer_mask.dtype, bool)
        self.assertEqual(location_mask.shape, (6, 6, 7))
        # The input covers both clips.
        self.assertTrue((np.expm1(log_counts) > 7).any() and (np.expm1(log_counts) < 0.5).any())

    def test_noop_always_valid_and_valid_xfers_have_a_location(self):
        xfer_mask, location_mask = decode_masks(np.zeros((2, 3)), np.full((2, 3), 5.0), 4)
        np.testing.assert_array_equal(xfer_mask, [[False] * 3 + [True]] * 2)
        self.assertFalse(location_mask.any())
        xfer_mask, location_mask = decode_masks(np.ones((1, 3)), np.full((1, 3), -3.0), 4)
        np.testing.assert_array_equal(location_mask[0, :3].sum(-1), [1, 1, 1])
        self.assertFalse(location_mask[0, 3].any())


class BatchedDreamTest(absltest.TestCase):

    def test_reset(self):
        dream = _scripted_dream()
        batch = dream.reset(3)
        z, h = dream.model.latent_size, dream.model.hidden_size
        self.assertEqual(dream.state_size, z + h)
        self.assertEqual(batch.states.shape, (3, z + h))
        np.testing.assert_allclose(batch.states[:, :z], np.tile(dream._z0, (3, 1)))
        np.testing.assert_array_equal(batch.states[:, z:], 0.0)
        np.testing.assert_array_equal(batch.xfer_mask, [[True, False, True, True, True]] * 3)
        np.testing.assert_array_equal(batch.location_mask.sum(-1),
                                      [[_COUNT, 0, _COUNT, _COUNT, 0]] * 3)
        np.testing.assert_array_equal(batch.rewards, 0.0)
        self.assertFalse(batch.dones.any() or batch.truncated.any() or batch.invalid.any())

    def test_invalid_actions_get_the_penalty_and_end(self):
        dream = _scripted_dream(invalid_penalty=-7.0)
        dream.reset(5)
        # valid; xfer masked; location past the count; xfer out of range; NO-OP.
        batch = dream.step(np.array([[0, 2], [1, 0], [0, _COUNT], [-1, 0], [_M, 0]]))
        # NO-OP earns DreamConfig.noop_reward (default 0: the graph is unchanged).
        np.testing.assert_allclose(batch.rewards, [_REWARD, -7.0, -7.0, -7.0, 0.0])
        np.testing.assert_array_equal(batch.invalid, [False, True, True, True, False])
        np.testing.assert_array_equal(batch.dones, [False, True, True, True, True])
        self.assertFalse(batch.truncated.any())

    def test_noop_reward_none_uses_the_prediction(self):
        dream = _scripted_dream(config=_config(noop_reward=None))
        dream.reset(2)
        batch = dream.step(np.array([[_M, 0], [0, 0]]))
        np.testing.assert_allclose(batch.rewards, [_REWARD, _REWARD])
        np.testing.assert_array_equal(batch.dones, [True, False])

    def test_finished_episodes_stay_done_with_zero_reward_and_unchanged_state(self):
        dream = _scripted_dream()
        dream.reset(3)
        first = dream.step(np.array([[0, 0], [_M, 0], [1, 0]]))
        np.testing.assert_array_equal(first.dones, [False, True, True])
        for _ in range(2):
            batch = dream.step(np.array([[2, 1]] * 3))
            np.testing.assert_allclose(batch.rewards, [_REWARD, 0.0, 0.0])
            np.testing.assert_array_equal(batch.dones, [False, True, True])
            self.assertFalse(batch.invalid.any() or batch.truncated.any())
            np.testing.assert_array_equal(batch.states[1:], first.states[1:])
            np.testing.assert_array_equal(batch.xfer_mask[1:], first.xfer_mask[1:])
            np.testing.assert_array_equal(batch.location_mask[1:], first.location_mask[1:])
        # The live episode did move on.
        self.assertFalse(np.allclose(batch.states[0], first.states[0]))

    def test_truncated_at_the_step_limit(self):
        dream = _scripted_dream(max_steps=3)
        dream.reset(2)
        for t in range(3):
            batch = dream.step(np.array([[0, 0], [_M if t == 1 else 0, 0]]))
            if t == 0:
                self.assertFalse(batch.dones.any())
        np.testing.assert_array_equal(batch.truncated, [True, False])
        np.testing.assert_array_equal(batch.dones, [True, True])
        self.assertEqual(batch.rewards[0], _REWARD)
        self.assertTrue(batch.xfer_mask[0, :-1].any(), "truncated, yet nothing applies")
        after = dream.step(np.array([[0, 0], [0, 0]]))
        self.assertFalse(after.truncated.any())
        np.testing.assert_array_equal(after.rewards, 0.0)

    def test_predicted_done_ends_the_episode(self):
        dream = _scripted_dream(done_logit=10.0)
        dream.reset(2)
        batch = dream.step(np.array([[0, 0], [2, 1]]))
        np.testing.assert_array_equal(batch.dones, [True, True])
        self.assertFalse(batch.truncated.any() or batch.invalid.any())
        np.testing.assert_allclose(batch.rewards, _REWARD)

    def test_wrong_number_of_actions_raises(self):
        dream = _scripted_dream()
        dream.reset(2)
        with self.assertRaisesRegex(ValueError, "3 actions for a batch of 2"):
            dream.step(np.zeros((3, 2)))

    def _trajectory(self, dream, steps=3):
        states = [dream.reset(2).states]
        for _ in range(steps):
            states.append(dream.step(np.array([[0, 0], [2, 1]])).states)
        return np.stack(states)

    def test_seeded_sampling(self):
        a = self._trajectory(_scripted_dream(seed=5))
        b = self._trajectory(_scripted_dream(seed=5))
        np.testing.assert_array_equal(a, b)
        z = _scripted_model().latent_size
        self.assertFalse(np.allclose(a[1, :, :z], a[0, :, :z]), "z_1 is sampled, not z_0")
        other_seed = self._trajectory(_scripted_dream(seed=6))
        self.assertFalse(np.allclose(a[1:, :, :z], other_seed[1:, :, :z]))
        hotter = self._trajectory(_scripted_dream(seed=5, config=_config(temperature=2.0)))
        self.assertFalse(np.allclose(a[1:, :, :z], hotter[1:, :, :z]))
        # The first step's LSTM output does not depend on the sample.
        np.testing.assert_allclose(a[1, :, z:], hotter[1, :, z:], atol=1e-6)


class DreamStartsTest(absltest.TestCase):

    def _starts(self, dream, n, limits, seed=0):
        rng = np.random.default_rng(seed)
        z, h = dream.model.latent_size, dream.model.hidden_size
        return DreamStarts(rng.normal(size=(n, z)).astype(np.float32),
                           rng.normal(size=(n, h)).astype(np.float32),
                           rng.normal(size=(n, h)).astype(np.float32),
                           np.asarray(limits, np.int64), np.zeros(n, bool))

    def test_initial_starts(self):
        dream = _scripted_dream(max_steps=4)
        starts = dream.initial_starts(3)
        z, h = dream.model.latent_size, dream.model.hidden_size
        np.testing.assert_array_equal(starts.latent, np.tile(dream._z0, (3, 1)))
        self.assertEqual(starts.hidden.shape, (3, h))
        self.assertEqual(starts.cell.shape, (3, h))
        self.assertEqual(starts.latent.shape, (3, z))
        np.testing.assert_array_equal(starts.hidden, 0.0)
        np.testing.assert_array_equal(starts.cell, 0.0)
        np.testing.assert_array_equal(starts.max_steps, [4, 4, 4])
        np.testing.assert_array_equal(starts.initial, [True] * 3)
        # Resetting from them is resetting from nothing.
        a = dream.reset(3, starts)
        b = dream.reset(3)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)

    def test_reset_from_given_states(self):
        dream = _scripted_dream()
        starts = self._starts(dream, 2, [6, 6])
        batch = dream.reset(2, starts)
        z = dream.model.latent_size
        np.testing.assert_array_equal(batch.states[:, :z], starts.latent)
        np.testing.assert_array_equal(batch.states[:, z:], starts.hidden)
        self.assertFalse(batch.dones.any() or batch.truncated.any())
        # The first step continues the LSTM from the given hidden and cell state.
        actions = np.array([[0, 1], [2, 0]])
        after = dream.step(actions)
        _, state = dream.model.step(tf.constant(starts.latent), tf.constant(actions[:, 0]),
                                    tf.constant(actions[:, 1]),
                                    snt.LSTMState(hidden=tf.constant(starts.hidden),
                                                  cell=tf.constant(starts.cell)))
        np.testing.assert_allclose(after.states[:, z:], state.hidden.numpy(), atol=1e-6)
        # (The cell matters: zero cells lead elsewhere.)
        _, zero_cell = dream.model.step(tf.constant(starts.latent), tf.constant(actions[:, 0]),
                                        tf.constant(actions[:, 1]),
                                        snt.LSTMState(hidden=tf.constant(starts.hidden),
                                                      cell=tf.zeros_like(starts.cell)))
        self.assertFalse(np.allclose(after.states[:, z:], zero_cell.hidden.numpy(), atol=1e-4))
        # The given arrays are not modified by stepping.
        np.testing.assert_array_equal(starts.latent, self._starts(dream, 2, [6, 6]).latent)

    def test_each_episode_has_its_own_step_limit(self):
        dream = _scripted_dream(max_steps=6)
        dream.reset(2, self._starts(dream, 2, [1, 3]))
        expected = [([True, False], [True, False]), ([False, False], [True, False]),
                    ([False, True], [True, True])]
        for t, (truncated, dones) in enumerate(expected):
            batch = dream.step(np.array([[0, 0], [2, 1]]))
            np.testing.assert_array_equal(batch.truncated, truncated, err_msg=f"t={t}")
            np.testing.assert_array_equal(batch.dones, dones, err_msg=f"t={t}")
            np.testing.assert_allclose(batch.rewards, [_REWARD if t == 0 else 0.0, _REWARD])
        # A later reset without starts has the dream's own limit again.
        dream.reset(2)
        for _ in range(5):
            self.assertFalse(dream.step(np.array([[0, 0], [2, 1]])).dones.any())
        np.testing.assert_array_equal(dream.step(np.array([[0, 0], [2, 1]])).truncated,
                                      [True, True])

    def test_starts_of_another_batch_size_raise(self):
        dream = _scripted_dream()
        with self.assertRaisesRegex(ValueError, "3 starts for a batch of 2"):
            dream.reset(2, dream.initial_starts(3))
        with self.assertRaisesRegex(ValueError, "1 starts for a batch of 2"):
            dream.reset(2, self._starts(dream, 1, [2]))

    def test_lockstep_dream_refuses_starts(self):
        vocab, _, model, z0 = _world()
        dream = BatchedDream(model, z0, _config(lockstep=True), 6, _L,
                             lockstep=[fixtures.real_env()], vocab=vocab)
        with self.assertRaisesRegex(ValueError, "starts only from the initial graph"):
            dream.reset(1, dream.initial_starts(1))
        dream.reset(1)  # from the initial graph it works


class RewardDisagreementTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        members = np.array(_MEMBERS, np.float32) / _SCALE  # the members' rewards
        self.std = float(np.std(members))  # population std, as tf.math.reduce_std
        self.reward = _REWARD / _SCALE     # the head's reward
        self.assertGreater(self.std, 0.05)

    def test_ensemble_of_the_model(self):
        model = _disagreeing_model()
        prediction, _ = model.step(tf.zeros([2, model.latent_size]), tf.constant([0, 2]),
                                   tf.constant([0, 1]), model.initial_state(2))
        np.testing.assert_allclose(prediction.reward, [self.reward] * 2, rtol=1e-6)
        np.testing.assert_allclose(prediction.reward_members,
                                   np.tile(np.array(_MEMBERS) / _SCALE, (2, 1)), rtol=1e-6)
        # The shared scripted model's members all agree.
        scripted = _scripted_model()
        prediction, _ = scripted.step(tf.zeros([1, scripted.latent_size]), tf.constant([0]),
                                      tf.constant([0]), scripted.initial_state(1))
        np.testing.assert_allclose(prediction.reward_members, [[_REWARD] * 5], rtol=1e-6)

    def test_reward_is_lowered_by_the_penalty_times_the_std(self):
        for penalty in (1.0, 0.5, 3.0):
            dream = _disagreeing_dream(disagreement_penalty=penalty, noop_reward=None)
            dream.reset(3)
            # valid; NO-OP; invalid (xfer 1 is never valid).
            batch = dream.step(np.array([[0, 1], [_M, 0], [1, 0]]))
            np.testing.assert_allclose(
                batch.rewards, [self.reward - penalty * self.std, self.reward, -10.0],
                rtol=1e-5, err_msg=f"penalty {penalty}")
            np.testing.assert_array_equal(batch.dones, [False, True, True])
            # Only the valid non-NO-OP step's disagreement is recorded.
            np.testing.assert_allclose(dream.disagreement, [self.std], rtol=1e-5)
            batch = dream.step(np.array([[2, 0], [0, 0], [0, 0]]))
            np.testing.assert_allclose(batch.rewards, [self.reward - penalty * self.std, 0, 0],
                                       rtol=1e-5)
            np.testing.assert_allclose(dream.disagreement, [self.std] * 2, rtol=1e-5)

    def test_noop_reward_is_not_penalised(self):
        dream = _disagreeing_dream(disagreement_penalty=2.0)  # noop_reward 0
        dream.reset(2)
        batch = dream.step(np.array([[_M, 0], [3, 2]]))
        np.testing.assert_allclose(batch.rewards, [0.0, self.reward - 2.0 * self.std],
                                   rtol=1e-5, atol=1e-7)

    def test_no_penalty_leaves_the_reward_alone(self):
        dream = _disagreeing_dream(disagreement_penalty=0.0)
        dream.reset(2)
        batch = dream.step(np.array([[0, 0], [2, 2]]))
        np.testing.assert_allclose(batch.rewards, [self.reward] * 2, rtol=1e-6)
        self.assertFalse(batch.dones.any())
        np.testing.assert_allclose(dream.disagreement, [self.std] * 2, rtol=1e-5)

    def test_agreeing_members_give_no_penalty(self):
        dream = _scripted_dream(config=_config(disagreement_penalty=5.0,
                                               disagreement_limit=1e-3))
        dream.reset(1)
        batch = dream.step(np.array([[0, 0]]))
        self.assertAlmostEqual(float(batch.rewards[0]), _REWARD, places=6)
        self.assertFalse(batch.dones[0] or batch.truncated[0])

    def test_limit_cuts_episodes_where_the_members_disagree(self):
        # The cut: std > limit / reward_scale, i.e. the bias spread over the limit.
        spread = self.std * _SCALE
        cut = _disagreeing_dream(disagreement_limit=0.9 * spread, disagreement_penalty=0.5)
        cut.reset(3)
        batch = cut.step(np.array([[0, 0], [_M, 0], [1, 0]]))
        np.testing.assert_array_equal(batch.truncated, [True, False, False])
        np.testing.assert_array_equal(batch.dones, [True, True, True])
        np.testing.assert_array_equal(batch.invalid, [False, False, True])
        # The cut step still earns its (penalised) reward.
        np.testing.assert_allclose(batch.rewards[0], self.reward - 0.5 * self.std, rtol=1e-5)
        kept = _disagreeing_dream(max_steps=2, disagreement_limit=1.1 * spread)
        kept.reset(1)
        batch = kept.step(np.array([[0, 0]]))
        self.assertFalse(batch.dones[0] or batch.truncated[0])
        batch = kept.step(np.array([[0, 0]]))
        self.assertTrue(batch.truncated[0] and batch.dones[0], "the step limit still cuts")


class LockstepDreamTest(absltest.TestCase):

    def test_masks_and_ends_are_the_real_environments(self):
        vocab, _, model, z0 = _world()
        dream = BatchedDream(model, z0, _config(lockstep=True), max_steps=6,
                             max_locations=_L, seed=0,
                             lockstep=[fixtures.real_env(max_steps=6) for _ in range(3)],
                             vocab=vocab)
        references = [fixtures.real_env(max_steps=6) for _ in range(3)]
        observations = [env.reset() for env in references]
        batch = dream.reset(3)
        live = np.ones(3, bool)
        rng = np.random.default_rng(0)
        kinds = set()
        while live.any():
            for i in np.flatnonzero(live):
                expected = vocab.compact_masks(observations[i].xfer_mask,
                                               observations[i].location_mask)
                np.testing.assert_array_equal(batch.xfer_mask[i], expected[0])
                np.testing.assert_array_equal(batch.location_mask[i], expected[1])
            actions = np.zeros((3, 2), np.int64)
            for i in range(3):
                valid = np.flatnonzero(batch.xfer_mask[i, :-1])
                if live[i] and len(valid) and not (i == 2 and rng.random() < 0.3):
                    x = int(rng.choice(valid))
                    actions[i] = x, int(rng.integers(batch.location_mask[i, x].sum()))
                else:
                    actions[i] = vocab.size, 0  # NO-OP
            batch = dream.step(actions)
            for i in np.flatnonzero(live):
                observations[i], _, real_done, info = references[i].step(
                    (vocab.to_real(int(actions[i, 0])), int(actions[i, 1])))
                stuck_in_vocab = not batch.xfer_mask[i, :-1].any()
                self.assertEqual(bool(batch.dones[i]), real_done or stuck_in_vocab)
                self.assertEqual(bool(batch.truncated[i]), info["truncated"])
                kinds.add(info["truncated"])
            live = ~batch.dones
        self.assertIn(True, kinds, "the run should reach the step limit once")

    def test_needs_real_environments_and_the_vocabulary(self):
        vocab, _, model, z0 = _world()
        with self.assertRaisesRegex(ValueError, "lockstep dreams need"):
            BatchedDream(model, z0, _config(lockstep=True), 6, _L, vocab=vocab)
        dream = BatchedDream(model, z0, _config(lockstep=True), 6, _L,
                             lockstep=[fixtures.real_env()], vocab=vocab)
        with self.assertRaisesRegex(ValueError, "1 real environments for a batch of 2"):
            dream.reset(2)


# ---------------------------------------------------------------------------
# The latent view of the real environment.
# ---------------------------------------------------------------------------

class LatentEnvTest(absltest.TestCase):

    def _first_valid(self, env, obs):
        x = int(np.flatnonzero(obs.xfer_mask[:-1])[0])
        return x, 0

    def test_observations_rewards_and_predicted_rewards(self):
        vocab, encoder, model, _ = _world()
        env = LatentEnv(fixtures.real_env(), encoder, model, vocab, masks="real")
        reference = fixtures.real_env()
        real_obs = reference.reset()
        obs = env.reset()
        z0 = encoder.encode([real_obs.state])
        np.testing.assert_allclose(obs.state, np.concatenate([z0[0], np.zeros(model.hidden_size)]),
                                   atol=1e-6)
        x, l = self._first_valid(env, obs)
        real_obs, real_reward, _, real_info = reference.step((vocab.to_real(x), l))
        next_obs, reward, done, info = env.step((x, l))
        self.assertFalse(done)
        self.assertIsNone(info["invalid"])
        self.assertEqual(reward, real_reward)
        self.assertEqual(info["cost"], real_info["cost"])
        prediction, state = model.step(tf.constant(z0), tf.constant([x]), tf.constant([l]),
                                       model.initial_state(1))
        self.assertIsInstance(info["predicted_reward"], float)
        self.assertAlmostEqual(info["predicted_reward"], float(prediction.reward[0]), places=5)
        z1 = encoder.encode([real_obs.state])[0]
        np.testing.assert_allclose(next_obs.state, np.concatenate([z1, state.hidden[0]]),
                                   atol=1e-5)
        expected = vocab.compact_masks(real_obs.xfer_mask, real_obs.location_mask)
        np.testing.assert_array_equal(next_obs.xfer_mask, expected[0])
        np.testing.assert_array_equal(next_obs.location_mask, expected[1])

    def test_model_masks_are_the_decoded_predictions(self):
        vocab, encoder, model, _ = _world()
        env = LatentEnv(fixtures.real_env(), encoder, model, vocab, masks="model",
                        mask_threshold=0.45)
        reference = fixtures.real_env()
        real_obs = reference.reset()
        obs = env.reset()
        z = model.latent_size
        for _ in range(2):
            masks = model.masks(tf.constant(obs.state[None, :z]), tf.constant(obs.state[None, z:]))
            expected = decode_masks(tf.sigmoid(masks.xfer_logits).numpy(),
                                    masks.log_counts.numpy(), _L, 0.45)
            np.testing.assert_array_equal(obs.xfer_mask, expected[0][0])
            np.testing.assert_array_equal(obs.location_mask, expected[1][0])
            # Step with an action the real engine accepts.
            real_compact = vocab.compact_masks(real_obs.xfer_mask, real_obs.location_mask)[0]
            x = int(np.flatnonzero(real_compact[:-1])[0])
            real_obs, _, _, _ = reference.step((vocab.to_real(x), 0))
            obs, _, done, info = env.step((x, 0))
            self.assertIsNone(info["invalid"])
            self.assertFalse(done)
        self.assertGreater(np.abs(obs.state[z:]).max(), 0, "h_t follows the trajectory")

    def test_invalid_action_keeps_the_observation(self):
        vocab, encoder, model, _ = _world()
        env = LatentEnv(fixtures.real_env(), encoder, model, vocab, masks="real")
        obs = env.reset()
        after, reward, done, info = env.step((-1, 0))
        self.assertIsNotNone(info["invalid"])
        self.assertTrue(done)
        self.assertEqual(reward, env.env.config.invalid_penalty)
        np.testing.assert_array_equal(after.state, obs.state)

    def test_bad_masks_argument(self):
        vocab, encoder, model, _ = _world()
        with self.assertRaisesRegex(ValueError, "masks must be 'model' or 'real'"):
            LatentEnv(fixtures.real_env(), encoder, model, vocab, masks="oracle")


if __name__ == "__main__":
    absltest.main()
