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
from xflowrl.world_model.controller import (
    Evaluation,
    collect_in_lockstep,
    collect_with_controller,
    evaluate,
    imagine_batch,
    play_in_lockstep,
    train_in_dream,
)
from xflowrl.world_model.dream import BatchedDream, DreamEnv, DreamStarts
from xflowrl.world_model.latent_env import LatentEnv, LatentEnvBatch

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


# The scripted world model with a reward ensemble that disagrees (a model of
# its own: the scripted one is shared): members _MEMBERS, std _MEMBERS_STD.
_MEMBERS = (0.3, 0.5, 0.5, 0.6, 1.1)
_MEMBERS_STD = float(np.std(np.array(_MEMBERS, np.float32)))


@functools.lru_cache(maxsize=None)
def _disagreeing_model():
    _, model = fixtures.build_world_model(data.XferVocabulary(range(_M), 10), _SCRIPT_L,
                                          seed=4)
    fixtures.script_model(model, [5.0] * _M, _COUNT, _REWARD, done_logit=-10.0)
    fixtures.set_member_rewards(model, _MEMBERS)
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

        self.resets = []  # (starts, batches, actions) of every reset

    @property
    def disagreement(self):
        return self.dream.disagreement

    @disagreement.setter
    def disagreement(self, value):
        self.dream.disagreement = value

    def initial_starts(self, batch_size):
        return self.dream.initial_starts(batch_size)

    def reset(self, batch_size, starts=None):
        self.batches, self.actions = [self.dream.reset(batch_size, starts)], []
        self.resets.append((starts, self.batches, self.actions))
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


    def _real_start_sampler(self, dream, initial_every=2):
        """Starts of which every `initial_every`-th is the initial graph (the
        dream's step limit), the others other states with a step limit of 1."""
        calls = []

        def sample(n):
            calls.append(n)
            starts = dream.initial_starts(n)
            initial = np.arange(n) % initial_every == 0 if initial_every else np.zeros(n, bool)
            latent = np.where(initial[:, None], starts.latent, 0.3)
            return DreamStarts(latent.astype(np.float32), starts.hidden, starts.cell,
                               np.where(initial, starts.max_steps, 1), initial)
        return sample, calls

    def test_starts_until_and_the_returns_reported(self):
        model = _disagreeing_model()
        inner = BatchedDream(model, np.zeros(model.latent_size, np.float32),
                             _config(noop_reward=None, disagreement_penalty=0.5),
                             max_steps=3, max_locations=_SCRIPT_L, seed=0)
        dream = _RecordingDream(inner)
        sampler, calls = self._real_start_sampler(inner)
        agent = _agent(_M, _SCRIPT_L)
        rows = train_in_dream(dream, agent, _config(batch_size=4, episodes=100),
                              starts=sampler, until=6)
        self.assertEqual(calls, [4, 2])
        self.assertEqual([r["episodes"] for r in rows], [4, 6])
        self.assertEqual(int(agent.episodes.numpy()), 6)
        self.assertLen(dream.resets, 2)
        penalised = _REWARD - 0.5 * _MEMBERS_STD
        longest = 0
        for row, (starts, batches, actions) in zip(rows, dream.resets):
            self.assertIsNotNone(starts)
            initial = starts.initial
            self.assertTrue(initial.any() and not initial.all())
            rewards = np.stack([b.rewards for b in batches[1:]])  # [steps, n]
            returns = rewards.sum(0)
            lengths = (np.stack([b.dones for b in batches[1:]]) == 0).sum(0) + 1
            # Episodes from other states stop at their own limit of one step.
            np.testing.assert_array_equal(lengths[~initial], 1)
            first_noop = actions[0][:, 0] == _M
            np.testing.assert_array_equal(batches[1].truncated[~initial], ~first_noop[~initial])
            longest = max(longest, lengths[initial].max())
            self.assertAlmostEqual(row["dream_return"], returns[initial].mean(), places=5)
            self.assertAlmostEqual(row["dream_return_all"], returns.mean(), places=5)
            self.assertAlmostEqual(row["dream_length"], lengths.mean(), places=5)
            # Every step earns the head's reward, less the penalty unless NO-OP.
            for t, a in enumerate(actions):
                live = ~batches[t].dones
                expected = np.where(a[:, 0] == _M, _REWARD, penalised)
                np.testing.assert_allclose(rewards[t][live], expected[live], rtol=1e-5)
                np.testing.assert_array_equal(rewards[t][~live], 0.0)
            self.assertAlmostEqual(row["dream_disagreement"],
                                   _MEMBERS_STD if (np.concatenate(actions)[:, 0] != _M).any()
                                   else 0.0, places=5)
        self.assertGreater(longest, 1, "episodes from the initial graph run longer")
        # (so that the two returns differ: the test tells them apart)
        self.assertNotAlmostEqual(rows[0]["dream_return"], rows[0]["dream_return_all"], places=4)
        # The first batch had some non-NO-OP step: the disagreement was measured.
        self.assertAlmostEqual(rows[0]["dream_disagreement"], _MEMBERS_STD, places=5)
        # A controller past `until` trains no further.
        self.assertEmpty(train_in_dream(dream, agent, _config(batch_size=4, episodes=100),
                                        starts=sampler, until=6))
        self.assertEqual(calls, [4, 2])

    def test_dream_return_is_nan_without_initial_starts(self):
        dream = _scripted_dream(max_steps=3, config=_config(noop_reward=None))
        sampler, _ = self._real_start_sampler(dream, initial_every=0)
        rows = train_in_dream(dream, _agent(_M, _SCRIPT_L), _config(batch_size=4, episodes=4),
                              starts=sampler)
        self.assertLen(rows, 1)
        self.assertTrue(math.isnan(rows[0]["dream_return"]))
        # Each episode is one step, scripted reward, agreeing members.
        self.assertAlmostEqual(rows[0]["dream_return_all"], _REWARD, places=6)
        self.assertEqual(rows[0]["dream_length"], 1.0)
        self.assertAlmostEqual(rows[0]["dream_disagreement"], 0.0, places=6)


class CollectWithControllerTest(absltest.TestCase):

    def _collect(self, explore, episodes=3, seed=0, world=None, agent_seed=0):
        vocab, encoder, model, _ = world or _world()
        view = LatentEnv(fixtures.real_env(max_steps=6), encoder, model, vocab, masks="real")
        agent = _agent(vocab.size, _L, seed=agent_seed)
        rollouts = collect_with_controller(view, agent, episodes, explore,
                                           np.random.default_rng(seed))
        return vocab, rollouts

    def _check_rollouts(self, vocab, rollouts):
        """Structure, real ids, and every step replayed in a fresh real environment."""
        env = fixtures.real_env(max_steps=6)
        noop = env.noop
        self.assertEqual(noop, vocab.num_real_xfers)
        for r in rollouts:
            fixtures.check_rollout_structure(self, r, max_steps=6)
            obs = env.reset()
            self.assertEqual(r.valid[0], data.valid_xfers(obs))
            info = {}
            for i, (x, l) in enumerate(r.actions):
                self.assertTrue(x == noop or int(x) in vocab.xfer_ids.tolist(), x)
                if x != noop:
                    self.assertIn(int(x), r.valid[i])
                    self.assertLess(l, r.valid[i][int(x)])
                self.assertNotEqual(r.rewards[i], env.config.invalid_penalty)
                obs, reward, done, info = env.step((int(x), int(l)))
                self.assertIsNone(info["invalid"])
                self.assertAlmostEqual(float(r.rewards[i]), reward, places=5)
                self.assertEqual(bool(r.dones[i]), done)
                self.assertEqual(r.valid[i + 1], data.valid_xfers(obs))
                np.testing.assert_array_equal(r.states[i + 1].nodes, obs.state.nodes)
            self.assertEqual(r.truncated, info["truncated"])
            self.assertEqual(r.final_cost, info["cost"])

    def test_rollouts_are_real_episodes_of_known_xfers(self):
        vocab, rollouts = self._collect(explore=0.0, episodes=4)
        self.assertLen(rollouts, 4)
        self._check_rollouts(vocab, rollouts)

    def test_explore_always_takes_a_known_xfer(self):
        vocab, rollouts = self._collect(explore=1.0, episodes=4, seed=1)
        self._check_rollouts(vocab, rollouts)
        known = set(vocab.xfer_ids.tolist())
        steps = 0
        for r in rollouts:
            for i, (x, _) in enumerate(r.actions):
                steps += 1
                if x == vocab.num_real_xfers:
                    self.assertFalse(known & set(r.valid[i]), "NO-OP with a known xfer valid")
        self.assertGreater(steps, 4)
        # Every action is the generator's: another controller takes the same ones...
        _, again = self._collect(explore=1.0, episodes=4, seed=1, agent_seed=7)
        for a, b in zip(rollouts, again):
            np.testing.assert_array_equal(a.actions, b.actions)
        # ...whereas without exploring the controllers' own choices differ.
        _, first = self._collect(explore=0.0, episodes=4, seed=1)
        _, second = self._collect(explore=0.0, episodes=4, seed=1, agent_seed=7)
        self.assertFalse(all(np.array_equal(a.actions, b.actions)
                             for a, b in zip(first, second)))

    def test_valid_dicts_hold_xfers_the_vocabulary_lacks(self):
        rollouts = fixtures.rollouts(12, seed=0)
        full = data.XferVocabulary.from_rollouts(rollouts, len(fixtures.xfers()))
        # Every other xfer known, and free slots for the rest.
        vocab = data.XferVocabulary(full.xfer_ids[::2], full.num_real_xfers,
                                    capacity=full.known)
        encoder, model = fixtures.build_world_model(vocab, _L)
        z0 = encoder.encode([fixtures.real_env().reset().state])[0]
        _, collected = self._collect(explore=0.5, episodes=3, world=(vocab, encoder, model, z0))
        self._check_rollouts(vocab, collected)
        seen = set(data.visited_xfers(collected))
        self.assertTrue(seen - set(vocab.xfer_ids.tolist()), "unknown xfers are recorded")
        grown, dropped = vocab.grow(data.visited_xfers(collected))
        self.assertGreater(grown.known, vocab.known)
        self.assertTrue(seen <= set(grown.xfer_ids.tolist()) | set(dropped))

    def test_explore_outside_the_unit_interval_raises(self):
        for explore in (-0.1, 1.5):
            with self.assertRaisesRegex(ValueError, "explore must lie in"):
                self._collect(explore=explore, episodes=1)

class CollectInLockstepTest(CollectWithControllerTest):
    """`collect_in_lockstep` passes `CollectWithControllerTest`'s checks (its
    `_collect` is lockstep collection), and more."""

    def _collect(self, explore, episodes=3, seed=0, world=None, agent_seed=0, width=None):
        vocab, encoder, model, _ = world or _world()
        agent = _agent(vocab.size, _L, seed=agent_seed)
        rng = np.random.default_rng(seed)
        width = width or episodes
        env = fixtures.real_env(max_steps=6)
        rollouts = []
        for start in range(0, episodes, width):
            envs = [env.clone() for _ in range(min(width, episodes - start))]
            views = LatentEnvBatch(envs, encoder, model, vocab, masks="real")
            rollouts += collect_in_lockstep(views, agent, explore, rng)
        return vocab, rollouts

    def test_one_episode_at_a_time_repeats_collect_with_controller(self):
        # Lockstep over one environment draws what the one-at-a-time
        # collector draws, in its order: the same rollouts, field by field.
        world = _world()
        for explore in (0.0, 0.3):
            _, lockstep = self._collect(explore, episodes=3, seed=5, world=world, width=1)
            _, single = CollectWithControllerTest._collect(self, explore, episodes=3, seed=5,
                                                          world=world)
            self.assertLen(lockstep, 3)
            for a, b in zip(lockstep, single, strict=True):
                self._assert_same_rollout(a, b)

    def _assert_same_rollout(self, a, b):
        self.assertEqual(type(a), type(b))
        for name in ("actions", "rewards", "dones"):
            x, y = getattr(a, name), getattr(b, name)
            self.assertEqual(x.dtype, y.dtype, name)
            np.testing.assert_array_equal(x, y, err_msg=name)
        self.assertEqual(a.valid, b.valid)
        self.assertEqual((a.truncated, a.final_cost), (b.truncated, b.final_cost))
        self.assertLen(a.states, len(b.states))
        for x, y in zip(a.states, b.states):
            self.assertEqual(type(x), type(y))
            np.testing.assert_array_equal(x.nodes, y.nodes)
            np.testing.assert_array_equal(x.senders, y.senders)
            np.testing.assert_array_equal(x.globals, y.globals)

    def test_many_at_once_match_one_at_a_time_in_structure_and_repeat_per_seed(self):
        world = _world()
        vocab, lockstep = self._collect(0.1, episodes=6, seed=3, world=world)
        _, single = CollectWithControllerTest._collect(self, 0.1, episodes=6, seed=3,
                                                      world=world)
        self.assertLen(lockstep, 6)
        self._check_rollouts(vocab, lockstep)
        for a, b in zip(lockstep, single):
            for name in ("actions", "rewards", "dones"):
                self.assertEqual(getattr(a, name).dtype, getattr(b, name).dtype)
                self.assertEqual(getattr(a, name).shape[1:], getattr(b, name).shape[1:])
            self.assertEqual(type(a.states[0]), type(b.states[0]))
            self.assertEqual((type(a.truncated), type(a.final_cost)),
                             (type(b.truncated), type(b.final_cost)))
        # The world model's data pipeline takes them as it takes the others.
        batch = data.make_batch([data.to_sequences(r, world[1].encode(r.states), vocab)
                                 for r in lockstep])
        self.assertEqual(batch.weights.sum(), data.real_steps(lockstep))
        # A seed fixes them; another seed draws others.
        _, again = self._collect(0.1, episodes=6, seed=3, world=world)
        for a, b in zip(lockstep, again, strict=True):
            self._assert_same_rollout(a, b)
        _, other = self._collect(0.1, episodes=6, seed=4, world=world)
        self.assertFalse(all(np.array_equal(a.actions, b.actions)
                             for a, b in zip(lockstep, other)))


class PlayInLockstepTest(absltest.TestCase):
    """The controller's own real episodes as PPO transitions."""

    def _play(self, seed=3, max_steps=6, agent=None):
        vocab, encoder, model, _ = _world()
        agent = agent or _agent(vocab.size, _L)
        env = fixtures.real_env(max_steps=max_steps)
        views = LatentEnvBatch([env.clone() for _ in range(4)], encoder, model, vocab,
                               masks="real")
        return vocab, agent, play_in_lockstep(views, agent, np.random.default_rng(seed))

    def test_transitions_are_the_real_episodes_the_policy_played(self):
        vocab, agent, episodes = self._play()
        self.assertLen(episodes, 4)
        env = fixtures.real_env(max_steps=6)
        cut = 0
        for steps in episodes:
            self.assertTrue(steps[-1].done)
            self.assertFalse(any(s.done for s in steps[:-1]))
            env.reset()
            info = {}
            for s in steps:
                # A vector state [z, h], the real masks in the vocabulary's ids.
                self.assertEqual(s.state.ndim, 1)
                self.assertTrue(s.xfer_mask[s.xfer])
                if s.xfer != vocab.size:
                    self.assertTrue(s.location_mask[s.location])
                _, reward, done, info = env.step((vocab.to_real(s.xfer), s.location))
                self.assertIsNone(info["invalid"])
                self.assertAlmostEqual(s.reward, reward, places=5)
                self.assertEqual(s.done, done)
                self.assertLessEqual(s.xfer_log_prob, 0.0)
            last = steps[-1]
            if info["truncated"]:
                cut += 1
                self.assertNotEqual(last.bootstrap_value, 0.0)
            else:
                self.assertEqual(last.bootstrap_value, 0.0)
        self.assertGreater(cut, 0, "no episode reached the step limit")

    def test_log_probabilities_and_values_are_the_policys(self):
        # The greedy action in the same state has the policy's highest
        # log-probability; where the sample was that action, the recorded
        # log-probability and values are the policy's own.
        vocab, agent, episodes = self._play(seed=4)
        same = 0
        for steps in episodes:
            for s in steps:
                best = agent.actor.act_batch(s.state[None], s.xfer_mask[None],
                                             np.ones((1, vocab.size + 1, _L), bool),
                                             greedy=True)[0]
                self.assertLessEqual(s.xfer_log_prob, best.xfer_log_prob + 1e-5)
                self.assertAlmostEqual(s.xfer_value, best.xfer_value, places=4)
                if s.xfer == best.xfer:
                    same += 1
                    self.assertAlmostEqual(s.xfer_log_prob, best.xfer_log_prob, places=4)
        self.assertGreater(same, 0)

    def test_a_seed_fixes_them_and_update_on_learns_without_counting_episodes(self):
        _, agent, first = self._play(seed=5)
        _, _, again = self._play(seed=5, agent=agent)
        self.assertEqual([[(s.xfer, s.location) for s in e] for e in first],
                         [[(s.xfer, s.location) for s in e] for e in again])
        before = [v.numpy().copy() for v in agent.network.trainable_variables]
        agent.update_on([s for e in first for s in e])
        self.assertEqual(int(agent.episodes.numpy()), 0)
        self.assertEqual(int(agent.updates.numpy()), 1)
        self.assertTrue(any(not np.array_equal(b, v.numpy())
                            for b, v in zip(before, agent.network.trainable_variables)))
        longest = max(first, key=len)
        self.assertGreater(len(longest), 1)
        with self.assertRaisesRegex(ValueError, "whole episodes"):
            agent.update_on(longest[:-1])
        with self.assertRaisesRegex(ValueError, "no episodes"):
            agent.update_on([])
        agent.add_steps(first[0])
        with self.assertRaisesRegex(ValueError, "buffered"):
            agent.update_on(first[1])


class LatentEnvBatchTest(absltest.TestCase):

    def test_a_batch_shows_what_single_views_show(self):
        vocab, encoder, model, _ = _world()
        for masks in ("real", "model"):
            env = fixtures.real_env(max_steps=4)
            singles = [LatentEnv(env.clone(), encoder, model, vocab, masks=masks)
                       for _ in range(3)]
            batch = LatentEnvBatch([env.clone() for _ in range(3)], encoder, model, vocab,
                                   masks=masks)
            want = [v.reset() for v in singles]
            got = batch.reset()
            rng = np.random.default_rng(0)
            while batch.live:
                for i, (g, w) in enumerate(zip(got, want)):
                    np.testing.assert_allclose(g.state, w.state, atol=1e-5, err_msg=str(i))
                    np.testing.assert_array_equal(g.xfer_mask, w.xfer_mask)
                    np.testing.assert_array_equal(g.location_mask, w.location_mask)
                actions = []
                for i in batch.live:
                    obs = want[i]
                    x = int(rng.choice(np.flatnonzero(obs.xfer_mask)))
                    locations = np.flatnonzero(obs.location_mask[x])
                    actions.append((x, int(locations[0]) if len(locations) else 0))
                live = list(batch.live)
                steps = batch.step(actions)
                self.assertLen(steps, len(live))
                got = list(got)
                for i, a, (obs, reward, done, info) in zip(live, actions, steps):
                    w_obs, w_reward, w_done, w_info = singles[i].step(a)
                    self.assertAlmostEqual(reward, w_reward, places=5)
                    self.assertEqual(done, w_done)
                    self.assertEqual(info["invalid"], w_info["invalid"])
                    self.assertAlmostEqual(info["predicted_reward"], w_info["predicted_reward"],
                                           places=4)
                    np.testing.assert_array_equal(batch.real_observation(i).state.nodes,
                                                  singles[i].real_observation.state.nodes)
                    got[i], want[i] = obs, w_obs
                self.assertEqual(batch.live, [i for i, (*_, d, _) in zip(live, steps)
                                              if not d])

    def test_actions_must_match_the_live_episodes(self):
        vocab, encoder, model, _ = _world()
        batch = LatentEnvBatch([fixtures.real_env(), fixtures.real_env()], encoder, model,
                               vocab, masks="real")
        batch.reset()
        with self.assertRaisesRegex(ValueError, "1 actions for 2 live"):
            batch.step([(vocab.size, 0)])
        batch.step([(vocab.size, 0), (vocab.size, 0)])  # NO-OP ends both
        self.assertEqual(batch.live, [])
        with self.assertRaisesRegex(RuntimeError, "no live episode"):
            batch.step([])


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
