"""Tests of the controller: imagined episodes, training in the dream, real evaluation."""

import functools
import math

from absl.testing import absltest
import numpy as np

from tests.world_model import fixtures
from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.env import Observation
from xflowrl.world_model import data
from xflowrl.world_model.config import DreamConfig
from xflowrl.world_model.controller import Evaluation, evaluate, imagine_batch, train_in_dream
from xflowrl.world_model.dream import BatchedDream, DreamEnv
from xflowrl.world_model.latent_env import LatentEnv

_PPO = PPOConfig(latent_size=16, hidden_sizes=(16,), xfer_embedding_size=4,
                 episodes_per_update=4)
_L = 200  # the real environment's max_locations

# A scripted world model: 4 known xfers, all valid with 3 locations, reward
# 0.5 per step, never done, so only NO-OP or the step limit end an episode.
_M, _SCRIPT_L, _COUNT, _REWARD = 4, 5, 3, 0.5


def _world():
    return fixtures.untrained_world(_L)


@functools.lru_cache(maxsize=None)
def _scripted_model():
    _, model = fixtures.build_world_model(data.XferVocabulary(range(_M), 10), _SCRIPT_L,
                                          seed=2)
    fixtures.script_model(model, [5.0] * _M, _COUNT, _REWARD, done_logit=-10.0)
    return model


def _config(**kwargs):
    """A dream config with the count margin resolved (the agent resolves None)."""
    return DreamConfig(count_margin=0.0, **kwargs)


def _scripted_dream(max_steps=3, config=None):
    model = _scripted_model()
    return BatchedDream(model, np.zeros(model.latent_size, np.float32), config or _config(),
                        max_steps=max_steps, max_locations=_SCRIPT_L, seed=0)


def _agent(num_xfers, max_locations, seed=0):
    return PPOAgent(num_xfers, _PPO, seed=seed, state="vector", max_locations=max_locations)


class _RecordingDream:
    """Forwards to a `BatchedDream` and keeps every batch and action."""

    def __init__(self, dream):
        self.dream = dream
        self.batches, self.actions = [], []

    def initial_starts(self, batch_size):
        return self.dream.initial_starts(batch_size)

    def reset(self, batch_size, starts=None):
        self.batches, self.actions = [self.dream.reset(batch_size, starts)], []
        return self.batches[0]

    def step(self, actions):
        self.actions.append(np.array(actions))
        self.batches.append(self.dream.step(actions))
        return self.batches[-1]


class ImagineBatchTest(absltest.TestCase):

    def test_whole_episodes_of_the_dream(self):
        _, _, model, z0 = _world()
        dream = _RecordingDream(BatchedDream(model, z0, _config(), max_steps=6,
                                             max_locations=_L, seed=0))
        episodes = imagine_batch(dream, _agent(model.num_known_xfers, _L), 6)
        self.assertLen(episodes, 6)
        batches = dream.batches
        for i, steps in enumerate(episodes):
            self.assertBetween(len(steps), 1, 6)
            self.assertEqual([s.done for s in steps], [False] * (len(steps) - 1) + [True])
            for t, s in enumerate(steps):
                self.assertEqual(s.state.shape, (model.latent_size + model.hidden_size,))
                self.assertIsNone(s.xfer_summary)
                self.assertIsNone(s.location_nodes)
                self.assertIsNone(s.cost_delta)
                # The step holds the state acted in and the outcome of the action.
                np.testing.assert_array_equal(s.state, batches[t].states[i])
                np.testing.assert_array_equal(s.xfer_mask, batches[t].xfer_mask[i])
                self.assertEqual((s.xfer, s.location), tuple(dream.actions[t][i]))
                np.testing.assert_array_equal(s.location_mask,
                                              batches[t].location_mask[i, s.xfer])
                self.assertEqual(s.reward, float(batches[t + 1].rewards[i]))
                self.assertTrue(s.xfer_mask[s.xfer], "the actor respects the masks")
                self.assertLessEqual(s.xfer_log_prob, 0.0)
        # Every episode ended where the dream said so.
        self.assertTrue(batches[-1].dones.all())

    def test_truncated_episodes_bootstrap_from_the_final_state_value(self):
        dream = _RecordingDream(_scripted_dream(max_steps=3))
        agent = _agent(_M, _SCRIPT_L)
        episodes = imagine_batch(dream, agent, 8)
        kinds = set()
        for i, steps in enumerate(episodes):
            final = dream.batches[len(steps)]
            truncated = bool(final.truncated[i])
            kinds.add(truncated)
            # NO-OP earns DreamConfig.noop_reward (0), any other valid step the prediction.
            self.assertEqual([s.reward for s in steps],
                             [0.0 if s.xfer == _M else _REWARD for s in steps])
            for s in steps[:-1]:
                self.assertEqual(s.bootstrap_value, 0.0)
            if truncated:
                self.assertLen(steps, 3)
                expected = agent.actor.value(Observation(
                    state=final.states[i], locations=None,
                    location_mask=final.location_mask[i], xfer_mask=final.xfer_mask[i]))
                self.assertNotEqual(steps[-1].bootstrap_value, 0.0)
                self.assertAlmostEqual(steps[-1].bootstrap_value, expected, places=5)
            else:
                self.assertEqual(steps[-1].xfer, _M, "only NO-OP ends it early")
                self.assertEqual(steps[-1].bootstrap_value, 0.0)
        self.assertEqual(kinds, {True, False}, "the sample should hold both kinds")


class TrainInDreamTest(absltest.TestCase):

    def test_two_updates_change_the_controller(self):
        # NO-OP's reward predicted too: every imagined step earns _REWARD.
        dream = _scripted_dream(max_steps=3, config=_config(noop_reward=None))
        agent = _agent(_M, _SCRIPT_L)
        agent.build(DreamEnv(dream))
        before = {v.name: v.numpy().copy() for v in agent.network.trainable_variables}
        seen = []
        rows = train_in_dream(dream, agent, _config(batch_size=4, episodes=8), seen.append)
        self.assertLen(rows, 2)
        self.assertEqual(seen, rows)
        self.assertEqual([r["episodes"] for r in rows], [4, 8])
        self.assertEqual(int(agent.episodes.numpy()), 8)
        self.assertEqual(int(agent.updates.numpy()), 2)
        for row in rows:
            self.assertTrue(math.isfinite(row["dream_return"]))
            self.assertBetween(row["dream_length"], 1.0, 3.0)
            # Every imagined step is valid and earns the scripted reward.
            self.assertAlmostEqual(row["dream_return"], _REWARD * row["dream_length"], places=5)
        after = {v.name: v.numpy() for v in agent.network.trainable_variables}
        changed = [n for n in before if not np.array_equal(before[n], after[n])]
        self.assertNotEmpty(changed)
        self.assertTrue(any("xfer_value" in n for n in changed), changed)
        # A controller that has seen its episodes trains no further.
        self.assertEmpty(train_in_dream(dream, agent, _config(batch_size=4, episodes=8)))


class EvaluateTest(absltest.TestCase):

    def _evaluate(self, masks, greedy=True):
        vocab, encoder, model, _ = _world()
        env = LatentEnv(fixtures.real_env(), encoder, model, vocab, masks=masks)
        result = evaluate(env, _agent(vocab.size, _L), greedy=greedy)
        return env, result

    def test_final_cost_is_the_real_environments(self):
        env, result = self._evaluate("real")
        self.assertIsInstance(result, Evaluation)
        self.assertEqual(result.final_cost, env.env.cost)
        self.assertEqual(result.applied, env.env.history)
        self.assertEqual(result.invalid_actions, 0)
        self.assertBetween(result.steps, 1, 6)
        self.assertTrue(math.isfinite(result.predicted_return))
        self.assertAlmostEqual(result.real_return,
                               100 * (env.initial_cost - env.env.cost) / env.initial_cost,
                               places=4)

    def test_greedy_evaluation_repeats(self):
        _, first = self._evaluate("real")
        _, again = self._evaluate("real")
        self.assertEqual(first, again)

    def test_model_masks(self):
        env, result = self._evaluate("model", greedy=False)
        self.assertEqual(result.final_cost, env.env.cost)
        self.assertBetween(result.invalid_actions, 0, 1)  # a rejected action ends it


if __name__ == "__main__":
    absltest.main()
