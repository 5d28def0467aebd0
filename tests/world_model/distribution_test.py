"""The model-based agent over a distribution of graphs (`SampledGraphEnv`):
imagined episodes from every training graph's initial state, per-round
evaluation on several graphs, zero-shot episodes on a graph it never saw,
and a resumed run that repeats the uninterrupted one."""

import dataclasses
import json
import os
import shutil
import tempfile

from absl.testing import absltest
import numpy as np

from tests.world_model import fixtures
from xflowrl import corpus
from xflowrl.agents.ppo import PPOConfig
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.env.replay import cheapest_prefix
from xflowrl.env.sampled import SampledGraphEnv
from xflowrl.generalist import evaluate
from xflowrl.world_model import data, dream_start_masks
from xflowrl.world_model.agent import ModelBasedAgent
from xflowrl.world_model.config import DreamConfig
from xflowrl.world_model.dream import BatchedDream

# Three small training graphs of different families, one held out.
_TRAIN = ("squeezenet/f2w8", "mlp/s0", "bert/l1h64a2s16")
_HELD_OUT = "resnet/d8w16"

# One message-passing step of the latent encoder, whose graph network runs on
# every real state of the three graphs (a tenth of the class's time with
# two); distinct graphs still get distinct latents, and a resumed run
# repeats the uninterrupted one whatever the encoder's size.
_WORLD = dataclasses.replace(
    fixtures.SMALL_CONFIG, rounds=2, episodes_per_round=4, train_steps_per_round=3,
    batch_size=4, encoder_steps=3, encoder_batch_size=8, held_out_episodes=2,
    vocabulary_episodes=1, reward_ensemble=2, reward_ensemble_hidden=8,
    encoder_message_passing_steps=1)
_DREAM = DreamConfig(batch_size=4, episodes=16, mask_threshold=0.2, count_margin=0.0)
_PPO = PPOConfig(latent_size=8, hidden_sizes=(16,), xfer_embedding_size=4,
                 episodes_per_update=4, epochs=2, minibatch_size=8, entropy_coef=0.1)


def _env(max_steps=4, equal_budget=False) -> SampledGraphEnv:
    return SampledGraphEnv({name: corpus.get(name) for name in _TRAIN}, fixtures.xfers(),
                           fixtures.cost_model(), EnvConfig(max_steps=max_steps), seed=3,
                           equal_budget=equal_budget)


def _run(logdir, snapshots=None, lines=None) -> ModelBasedAgent:
    """The agent's phase 1 in `logdir` (resumed where it holds a run); its
    progress lines go to `lines`. `snapshots` maps progress lines to
    folders: right after the first line that starts with a key, the logdir
    is copied to its folder, as killing the run there would leave it
    (every file is written before its line, and nothing is saved on the way
    out of a killed run)."""
    pending = dict(snapshots or {})
    lines = [] if lines is None else lines

    def progress(line):
        lines.append(line)
        for stop in [s for s in pending if line.startswith(s)]:
            shutil.copytree(logdir, pending.pop(stop))

    agent = ModelBasedAgent(_env(), logdir, world_model=_WORLD, dream=_DREAM, ppo=_PPO,
                            seed=5, progress=progress)
    agent.learn_world_model()
    assert not pending, f"the run never printed {sorted(pending)}"
    return agent


class DreamStartsTest(absltest.TestCase):

    def _dream(self, latents, limits=None, seed=0, **config):
        vocab = data.XferVocabulary.from_rollouts(fixtures.rollouts(6), len(fixtures.xfers()))
        _, model = fixtures.build_world_model(vocab, 8)
        return BatchedDream(model, latents, DreamConfig(batch_size=8, **config), 9, 8,
                            seed=seed, initial_max_steps=limits)

    def test_one_initial_graph_starts_every_episode_there(self):
        z0 = np.arange(8, dtype=np.float32)
        starts = self._dream(z0).initial_starts(5)
        np.testing.assert_array_equal(starts.latent, np.tile(z0, (5, 1)))
        np.testing.assert_array_equal(starts.max_steps, np.full(5, 9))
        self.assertTrue(starts.initial.all())

    def test_several_initial_graphs_each_with_its_step_limit(self):
        latents = np.stack([np.full(8, g, np.float32) for g in range(3)])
        dream = self._dream(latents, limits=[4, 7, 11], seed=2)
        self.assertEqual(dream.initial_graphs, 3)
        starts = dream.initial_starts(60)
        which = starts.latent[:, 0].astype(int)
        self.assertEqual(set(which.tolist()), {0, 1, 2})
        np.testing.assert_array_equal(starts.max_steps, np.array([4, 7, 11])[which])
        np.testing.assert_array_equal(starts.latent, latents[which])
        # The draw is keyed by the seed: a dream reseeded alike draws alike.
        dream.reseed(2)
        again = dream.initial_starts(60)
        np.testing.assert_array_equal(again.latent, starts.latent)
        dream.reseed(3)
        self.assertFalse(np.array_equal(dream.initial_starts(60).latent, starts.latent))

    def test_mismatched_limits_and_lockstep_over_graphs_are_refused(self):
        latents = np.zeros((2, 8), np.float32)
        with self.assertRaisesRegex(ValueError, "do not match"):
            self._dream(latents, limits=[3])
        with self.assertRaisesRegex(ValueError, "lockstep"):
            vocab = data.XferVocabulary.from_rollouts(fixtures.rollouts(6),
                                                      len(fixtures.xfers()))
            _, model = fixtures.build_world_model(vocab, 8)
            BatchedDream(model, latents, DreamConfig(lockstep=True), 9, 8,
                         lockstep=[fixtures.real_env()], vocab=vocab)


class DistributionTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp()
        # The uninterrupted run leaves a copy of its logdir where a kill
        # after round 1's controller (before round 2 collects) would leave
        # it, for the resume test: one run is both the reference and the
        # killed run, whose part up to the kill is the same computation.
        cls.killed = os.path.join(cls.tmp, "killed")
        cls.agent = _run(os.path.join(cls.tmp, "whole"),
                         {"controller after round 1": cls.killed})

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def test_the_world_model_learns_from_every_graph(self):
        latents, limits = self.agent.initial_latents()
        self.assertEqual(latents.shape[0], len(_TRAIN))
        self.assertEqual(limits.tolist(), [4] * len(_TRAIN))
        # Distinct graphs, distinct latents.
        self.assertLen({tuple(np.round(z, 5)) for z in latents}, len(_TRAIN))
        # The collected episodes start from several of the graphs (their
        # first latents are those graphs' initial latents).
        sequences = self.agent.world.buffer.sequences
        first_latents = {tuple(np.round(s.latents[0], 5)) for s in sequences}
        self.assertGreater(len(first_latents & {tuple(np.round(z, 5)) for z in latents}), 1,
                           "the collected episodes start from one graph only")

    def test_rounds_are_evaluated_on_every_training_graph(self):
        for row in self.agent.state.rounds:
            self.assertEqual(row.controller.graphs, len(_TRAIN))
            self.assertIsNone(row.controller.cost_ms)  # no one graph's cost
            self.assertGreater(row.controller.relative_cost, 0.0)
            self.assertLessEqual(row.controller.relative_cost, 1.0 + 1e-9)
        best = self.agent.state.best_round
        self.assertEqual(best.relative_cost, min(
            r.controller.relative_cost for r in self.agent.state.rounds))

    def test_a_zero_shot_episode_on_a_graph_it_never_saw(self):
        env = GraphEnv(corpus.get(_HELD_OUT), fixtures.xfers(), fixtures.cost_model(),
                       EnvConfig(max_steps=5))
        episode = self.agent.run_episode(env, greedy=True)
        self.assertEqual(episode.invalid_actions, 0)  # real masks
        self.assertLessEqual(episode.steps, 5)
        cost, prefix = cheapest_prefix(env, episode.applied)
        self.assertAlmostEqual(cost, episode.cheapest_cost, places=9)
        self.assertLen(prefix, episode.cheapest_prefix_length)
        with self.assertRaisesRegex(ValueError, "learns in rounds"):
            self.agent.run_episode(env, learn=True)
        rows = evaluate.zero_shot(self.agent, {_HELD_OUT: corpus.get(_HELD_OUT)},
                                  fixtures.xfers(), fixtures.cost_model(),
                                  EnvConfig(max_steps=5), taso_budget=5, random_episodes=1)
        # The zero-shot row reports the model-based agent's own episode.
        self.assertAlmostEqual(rows[0].policy_ms, episode.cheapest_cost, places=9)
        self.assertEqual([tuple(a) for a in rows[0].policy_applied], prefix)

    def test_what_the_dream_offers_at_its_starts_falls_with_the_threshold(self):
        got = dream_start_masks(self.agent, [0.0, 0.5, 1.0], starts=32)
        # Above every probability, nothing is offered; the shares fall with it.
        self.assertEqual(got["1"]["starts_with_a_valid_xfer"], 0.0)
        self.assertEqual(got["1"]["mean_valid_xfers"], 0.0)
        self.assertGreaterEqual(got["0"]["mean_valid_xfers"], got["0.5"]["mean_valid_xfers"])
        self.assertGreater(got["0"]["mean_valid_xfers"], 0.0)
        self.assertGreater(got["real_valid_xfers"], 0.0)

    def test_a_resumed_run_repeats_the_uninterrupted_run(self):
        lines = []
        resumed = _run(self.killed, lines=lines)  # a fresh agent in the killed logdir
        # It resumed (a run started afresh would end the same way).
        self.assertTrue(any(": resumed " in line for line in lines), lines)
        strip = lambda a: json.loads(json.dumps(  # noqa: E731
            {k: v for k, v in a.state.to_state().items() if k != "seconds"}))
        self.assertEqual(strip(resumed), strip(self.agent))
        self.assertEqual([r.actions.tolist() for r in resumed.world.buffer.raw],
                         [r.actions.tolist() for r in self.agent.world.buffer.raw])


if __name__ == "__main__":
    absltest.main()
