"""What lets the model-based agent's inputs mean the same on every graph.

- Per-xfer summaries (`WorldModelConfig.xfer_summaries`): recorded from the
  real observations, learnt by the mask decoder, decoded in the dream, read
  from the real environment in the real one, fed to the controller's xfer
  head.
- Ranked locations (`WorldModelConfig.ranked_locations`): a location named by
  its rank among the xfer's candidates, cheapest first.
"""

import dataclasses
import functools
import tempfile

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tests.world_model import agent_test, fixtures
from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.agents.random_agent import RandomAgent
from xflowrl.world_model import data, losses
from xflowrl.world_model.agent import ModelBasedAgent
from xflowrl.world_model.config import DreamConfig
from xflowrl.world_model.controller import imagine_batch, train_in_dream
from xflowrl.world_model.dream import BatchedDream, DreamEnv, decode_summaries
from xflowrl.world_model.latent_env import LatentEnv
from xflowrl.world_model.learning import WorldModelLearner

_M, _L, _COUNT, _REWARD = 4, 5, 3, 0.5
_GAINS = np.array([[-1.0, -0.5], [0.0, 0.0], [2.0, 3.0], [-0.25, 0.5]], np.float32)
_VALID = [5.0, -5.0, 5.0, 5.0]  # xfer 1 never valid
_PPO = PPOConfig(latent_size=16, hidden_sizes=(16,), xfer_embedding_size=4,
                 episodes_per_update=4)


@functools.lru_cache(maxsize=None)
def _scripted_model(scale=1.0):
    _, model = fixtures.build_world_model(data.XferVocabulary(range(_M), 10), _L, seed=5,
                                          xfer_summaries=True)
    model.set_reward_scale(scale)
    fixtures.script_model(model, _VALID, _COUNT, _REWARD, -10.0, gains=_GAINS)
    return model


def _dream(scale=1.0):
    model = _scripted_model(scale)
    return BatchedDream(model, np.zeros(model.latent_size, np.float32),
                        DreamConfig(count_margin=0.0), max_steps=3, max_locations=_L, seed=0)


class RecordingTest(absltest.TestCase):

    def test_rollouts_hold_each_valid_xfers_min_and_mean_cost_change(self):
        env = fixtures.real_env()
        obs = env.reset()
        gains = data.xfer_gains(obs)
        self.assertEqual(sorted(gains), sorted(data.valid_xfers(obs)))
        locations = obs.location_features()
        for x, (low, mean) in gains.items():
            deltas = locations.cost_delta_of(x)[obs.location_mask[x]]
            self.assertAlmostEqual(low, float(deltas.min()), places=5)
            self.assertAlmostEqual(mean, float(deltas.mean()), places=5)
        for rollout in fixtures.rollouts(3):
            self.assertLen(rollout.gains, len(rollout.states))
            for valid, gains in zip(rollout.valid, rollout.gains):
                self.assertEqual(sorted(valid), sorted(gains))

    def test_sequences_and_batches_carry_the_gains_in_compact_ids(self):
        rollout = fixtures.rollouts(3)[0]
        vocab = data.XferVocabulary.from_rollouts([rollout], len(fixtures.xfers()), headroom=2)
        s = data.to_sequences(rollout, np.zeros((len(rollout.states), 2)), vocab)
        self.assertEqual(s.gains.shape, (len(rollout.states), vocab.size, 2))
        for t, gains in enumerate(rollout.gains):
            for real, pair in gains.items():
                np.testing.assert_allclose(s.gains[t, vocab.to_compact(real)], pair)
            self.assertEqual(np.count_nonzero(s.gains[t].any(-1) & (s.xfer_valid[t] == 0)), 0)
        batch = data.make_batch([s])
        np.testing.assert_array_equal(batch.gains[0], s.gains[:-1])

    def test_no_location_features_no_gains(self):
        obs = fixtures.real_env().reset()._replace(locations=None)
        self.assertIsNone(data.xfer_gains(obs))


class LossTest(absltest.TestCase):

    def test_gain_term_is_the_mse_over_valid_xfers_of_real_steps(self):
        rng = np.random.default_rng(0)
        b, t, m, k, z = 2, 3, 4, 2, 3
        valid = (rng.random((b, t, m)) < 0.5).astype(np.float32)
        weights = np.array([[1, 1, 0], [1, 0, 0]], np.float32)
        pred, target = rng.normal(size=(b, t, m, 2)), rng.normal(size=(b, t, m, 2))
        common = dict(logits=np.zeros((b, t, k)), mu=np.zeros((b, t, k, z)),
                      log_sigma=np.zeros((b, t, k, z)), next_latent=np.zeros((b, t, z)),
                      reward_pred=np.zeros((b, t)), reward=np.zeros((b, t)),
                      done_logit=np.zeros((b, t)), done=np.zeros((b, t)),
                      xfer_logits=np.zeros((b, t, m)), xfer_valid=valid,
                      count_pred=np.zeros((b, t, m)), count=np.zeros((b, t, m)),
                      step_weights=weights)
        without = losses.world_model_losses(**common)
        with_gain = losses.world_model_losses(**common, gain_pred=pred, gain=target,
                                              gain_weight=2.0)
        w = weights[..., None] * valid
        expected = float((((pred - target) ** 2).mean(-1) * w).sum() / w.sum())
        self.assertAlmostEqual(float(with_gain.xfer_gain), expected, places=5)
        self.assertAlmostEqual(float(with_gain.total - without.total), 2.0 * expected, places=4)
        self.assertEqual(float(without.xfer_gain), 0.0)

    def test_the_learner_trains_the_gains_only_with_summaries(self):
        rollouts = fixtures.rollouts(6)
        vocab = data.XferVocabulary.from_rollouts(rollouts, len(fixtures.xfers()))
        results = {}
        for summaries in (False, True):
            encoder, model = fixtures.build_world_model(vocab, 200, xfer_summaries=summaries)
            config = dataclasses.replace(fixtures.SMALL_CONFIG, xfer_summaries=summaries)
            learner = WorldModelLearner(model, config)
            batch = data.make_batch([data.to_sequences(r, encoder.encode(r.states), vocab)
                                     for r in rollouts])
            first = learner.step(batch)["xfer_gain"]
            for _ in range(30):
                last = learner.step(batch)["xfer_gain"]
            results[summaries] = (first, last)
        self.assertEqual(results[False], (0.0, 0.0))
        self.assertLess(results[True][1], results[True][0])


class DreamTest(absltest.TestCase):

    def test_decode_summaries_lays_out_the_real_environments_summary(self):
        xfer_mask = np.array([[True, False, True, True]])
        location_mask = np.zeros((1, 4, 6), bool)
        location_mask[0, 0, :2] = location_mask[0, 2, :5] = True
        gains = np.array([[[-1.0, 1.0], [7.0, 7.0], [2.0, 3.0]]], np.float32)
        out = decode_summaries(xfer_mask, location_mask, gains)
        np.testing.assert_allclose(out[0], [[np.log1p(2), -1.0, 1.0], [0, 0, 0],
                                            [np.log1p(5), 2.0, 3.0], [0, 0, 0]], rtol=1e-6)

    def test_imagined_states_carry_the_predicted_summaries(self):
        for scale in (1.0, 4.0):  # gains come back in the observation's units
            dream = _dream(scale)
            batch = dream.reset(2)
            expected = np.zeros((_M + 1, 3), np.float32)
            for x in (0, 2, 3):
                expected[x] = [np.log1p(_COUNT), *_GAINS[x]]
            for step in range(2):
                np.testing.assert_allclose(batch.xfer_summary, np.stack([expected] * 2),
                                           rtol=1e-5, atol=1e-6)
                batch = dream.step(np.array([[0, 0], [2, 1]]))
            obs = DreamEnv(dream).reset()
            np.testing.assert_allclose(obs.xfer_summary, expected, rtol=1e-5, atol=1e-6)

    def test_a_lockstep_dream_shows_its_real_environments_summaries(self):
        rollouts = fixtures.rollouts(12)
        vocab = data.XferVocabulary.from_rollouts(rollouts, len(fixtures.xfers()))
        encoder, model = fixtures.build_world_model(vocab, 200, xfer_summaries=True)
        z0 = encoder.encode([fixtures.real_env().reset().state])[0]
        dream = BatchedDream(model, z0, DreamConfig(count_margin=0.0, lockstep=True),
                             max_steps=6, max_locations=200,
                             lockstep=[fixtures.real_env() for _ in range(2)], vocab=vocab)
        reference = fixtures.real_env()
        real = reference.reset()
        batch = dream.reset(2)
        for _ in range(2):
            expected = vocab.compact_summary(real.location_features().xfer_summary)
            np.testing.assert_array_equal(batch.xfer_summary, np.stack([expected] * 2))
            x = int(np.flatnonzero(batch.xfer_mask[0, :-1])[0])
            batch = dream.step(np.array([[x, 0], [x, 0]]))
            real, _, _, _ = reference.step((vocab.to_real(x), 0))

    def test_a_model_without_summaries_gives_none(self):
        _, _, model, z0 = fixtures.untrained_world(200)
        batch = BatchedDream(model, z0, DreamConfig(count_margin=0.0), max_steps=3,
                             max_locations=200).reset(2)
        self.assertIsNone(batch.xfer_summary)


class LatentEnvTest(absltest.TestCase):

    def _view(self, masks):
        rollouts = fixtures.rollouts(12)
        vocab = data.XferVocabulary.from_rollouts(rollouts, len(fixtures.xfers()))
        encoder, model = fixtures.build_world_model(vocab, 200, xfer_summaries=True)
        return vocab, LatentEnv(fixtures.real_env(), encoder, model, vocab, masks=masks)

    def test_the_real_view_shows_the_real_summary(self):
        vocab, view = self._view("real")
        reference = fixtures.real_env()
        real, obs = reference.reset(), view.reset()
        for _ in range(2):
            expected = vocab.compact_summary(real.location_features().xfer_summary)
            np.testing.assert_array_equal(obs.xfer_summary, expected)
            x = int(np.flatnonzero(obs.xfer_mask[:-1])[0])
            real, _, _, _ = reference.step((vocab.to_real(x), 0))
            obs, _, _, info = view.step((x, 0))
            self.assertIsNone(info["invalid"])

    def test_the_model_view_shows_the_decoded_prediction(self):
        _, view = self._view("model")
        obs = view.reset()
        z = view.model.latent_size
        masks = view.model.masks(tf.constant(obs.state[None, :z]),
                                 tf.constant(obs.state[None, z:]))
        expected = decode_summaries(obs.xfer_mask[None], obs.location_mask[None],
                                    masks.gains.numpy())[0]
        np.testing.assert_allclose(obs.xfer_summary, expected, rtol=1e-5, atol=1e-6)


class ControllerTest(absltest.TestCase):

    def test_imagined_steps_keep_the_summaries_and_the_controller_trains_on_them(self):
        dream = _dream()
        agent = PPOAgent(_M, _PPO, seed=0, state="vector", max_locations=_L)
        agent.build(DreamEnv(dream))
        episodes = imagine_batch(dream, agent, 3)
        for steps in episodes:
            for step in steps:
                self.assertEqual(step.xfer_summary.shape, (_M + 1, 3))
        scorer = [v for v in agent.network.trainable_variables if "xfer_scorer" in v.name]
        self.assertNotEmpty(scorer, "the per-xfer scorer reads the summaries")
        before = [v.numpy().copy() for v in scorer]
        train_in_dream(dream, agent, DreamConfig(count_margin=0.0, batch_size=4, episodes=8))
        self.assertTrue(any(not np.array_equal(b, v.numpy()) for b, v in zip(before, scorer)))

    def test_the_scorer_moves_the_logits_of_the_xfers_by_their_summary(self):
        agent = PPOAgent(_M, _PPO, seed=0, state="vector", max_locations=_L)
        env = DreamEnv(_dream())
        agent.build(env)
        obs = env.reset()
        logits = []
        for summary in (obs.xfer_summary, np.zeros_like(obs.xfer_summary)):
            state = tf.constant(obs.state[None])
            embedding = agent.network.encode(state)
            logits.append(agent.network.xfer_head(
                embedding.globals, tf.constant(summary[None]),
                tf.constant(obs.xfer_mask[None])).logits.numpy())
        self.assertFalse(np.allclose(logits[0], logits[1]))


class RankedLocationsTest(absltest.TestCase):

    def _state_with_choices(self):
        """A real state where some xfer's candidates differ in cost."""
        env = fixtures.real_env(max_steps=20)
        obs = env.reset()
        agent = RandomAgent(0.0, seed=0)
        for _ in range(20):
            for x in np.flatnonzero(obs.xfer_mask[:-1]):
                deltas = obs.location_features().cost_delta_of(x)[obs.location_mask[x]]
                if len(np.unique(deltas)) > 1:
                    return env, obs, int(x)
            obs, _, done, _ = env.step(agent.act(obs))
            if done:
                obs = env.reset()
        self.fail("no state with candidates of different costs")

    def test_ranks_order_the_candidates_cheapest_first(self):
        _, obs, x = self._state_with_choices()
        order = data.location_order(obs, x)
        deltas = obs.location_features().cost_delta_of(x)
        count = int(obs.location_mask[x].sum())
        self.assertEqual(sorted(order.tolist()), list(range(count)))
        self.assertTrue(np.all(np.diff(deltas[order]) >= 0))
        for rank in range(count):
            self.assertEqual(data.to_rank(obs, x, data.from_rank(obs, x, rank)), rank)
        noop = len(obs.xfer_mask) - 1
        self.assertEqual(data.from_rank(obs, noop, 0), 0)
        self.assertEqual(data.to_rank(obs, -1, 3), 3)

    def test_the_ranked_view_applies_the_ranked_candidate(self):
        rollouts = fixtures.rollouts(12)
        vocab = data.XferVocabulary.from_rollouts(rollouts, len(fixtures.xfers()))
        encoder, model = fixtures.build_world_model(vocab, 200)
        view = LatentEnv(fixtures.real_env(), encoder, model, vocab, masks="real", ranked=True)
        reference = fixtures.real_env()
        real = reference.reset()
        obs = view.reset()
        reordered = 0
        for _ in range(3):
            # An xfer whose cheapest candidate is not its first, where there is one.
            valid = np.flatnonzero(obs.xfer_mask[:-1])
            orders = {int(x): data.location_order(real, vocab.to_real(int(x))) for x in valid}
            x = next((x for x, o in orders.items() if o[0] != 0), int(valid[0]))
            reordered += orders[x][0] != 0
            real_x = vocab.to_real(x)
            real, _, _, expected = reference.step((real_x, int(orders[x][0])))
            obs, _, _, info = view.step((x, 0))
            self.assertIsNone(info["invalid"])
            self.assertEqual(info["cost"], expected["cost"])
            self.assertEqual(view.env.graph.hash(), reference.graph.hash())
        self.assertGreater(reordered, 0, "no step where rank 0 is not position 0")

    def test_ranked_rollouts_record_the_ranks_of_the_same_episodes(self):
        real = data.collect_rollouts(fixtures.real_env(), 3, RandomAgent.thesis_collector(4))
        ranked = data.collect_rollouts(fixtures.real_env(), 3, RandomAgent.thesis_collector(4),
                                       ranked=True)
        replay = fixtures.real_env()
        for a, b in zip(real, ranked):
            np.testing.assert_array_equal(a.rewards, b.rewards)
            np.testing.assert_array_equal(a.actions[:, 0], b.actions[:, 0])
            obs = replay.reset()
            for (x, l), (_, rank) in zip(a.actions, b.actions):
                self.assertEqual(rank, data.to_rank(obs, int(x), int(l)))
                obs, _, _, _ = replay.step((int(x), int(l)))


class AgentTest(absltest.TestCase):
    """The model-based agent end to end with both options, and a run resumed
    with other options."""

    def _agent(self, logdir, **inputs):
        world = dataclasses.replace(agent_test._RESUME_WORLD,  # pylint: disable=protected-access
                                    **inputs)
        return ModelBasedAgent(fixtures.real_env(), logdir, world_model=world,
                               dream=agent_test._RESUME_DREAM,  # pylint: disable=protected-access
                               ppo=agent_test._RESUME_PPO,  # pylint: disable=protected-access
                               seed=4, progress=lambda line: None)

    def test_rounds_evaluation_and_a_resume_with_other_inputs(self):
        logdir = tempfile.mkdtemp()
        agent = self._agent(logdir, xfer_summaries=True, ranked_locations=True)
        state = agent.learn_world_model()
        self.assertEqual(state["inputs"], {"xfer_summaries": True, "ranked_locations": True})
        self.assertGreater(state["rounds"][-1]["held_out_xfer_gain"], 0.0)
        evaluation = agent.evaluate()
        self.assertEqual(evaluation.invalid_actions, 0)
        self.assertLessEqual(evaluation.cheapest_cost, fixtures.real_env().initial_cost)
        with self.assertRaisesRegex(ValueError, "resume it with the same settings "
                                    r"\(--xfer_summaries --ranked_locations\)"):
            self._agent(logdir).learn_world_model()


if __name__ == "__main__":
    absltest.main()
