"""Tests of `ModelBasedAgent`'s seeding: the seed alone fixes the world model,
and a run interrupted and resumed repeats the uninterrupted run.

(The agent's phases end to end are tested by quick_run_test.py.)
"""

import dataclasses
import json
import os
import shutil
import tempfile
from unittest import mock

from absl.testing import absltest, parameterized
import numpy as np
import tensorflow as tf

from tests.world_model import fixtures
from xflowrl.agents.ppo import PPOConfig
from xflowrl.embedding import features
from xflowrl.world_model import controller_training, data
from xflowrl.world_model.agent import ModelBasedAgent
from xflowrl.world_model.config import DreamConfig
from xflowrl.world_model.parts import WorldModelParts
from xflowrl.world_model.seeds import Component, Purpose, component_seed, purpose_seed

# The separate reward network: its dropout is the world model's one random op
# of a training step. A reward ensemble of two small heads (the default's five
# of 64 add a second or more of tracing to every build's first step).
_CONFIG = dataclasses.replace(fixtures.SMALL_CONFIG, reward_model="separate",
                              reward_ensemble=2, reward_ensemble_hidden=8)


def _vocab_and_rollouts():
    rollouts = fixtures.rollouts(12, seed=0)
    return data.XferVocabulary.from_rollouts(rollouts, len(fixtures.xfers())), rollouts


def _built(seed: int, train_steps: int = 0, initial=None) -> ModelBasedAgent:
    """An agent's world model, its variables created (and trained a few steps);
    its initial weights go into the list `initial`, where given."""
    vocab, rollouts = _vocab_and_rollouts()
    env = fixtures.real_env()
    agent = ModelBasedAgent(env, tempfile.mkdtemp(), world_model=_CONFIG, seed=seed,
                            progress=lambda line: None)
    agent.world.parts = WorldModelParts.build(vocab, _CONFIG, seed, env.config.max_locations)
    agent.encoder.predict(agent.encoder(features.to_tensors(env.reset().state)))
    batch = data.make_batch(agent.world.parts.encode(rollouts))
    agent.learner.build(batch)
    if initial is not None:
        initial.extend(_weights(agent))
    for _ in range(train_steps):
        agent.learner.step(batch)
    return agent


def _weights(agent: ModelBasedAgent):
    return [(v.name, v.numpy()) for v in agent.encoder.variables + agent.model.variables]


class SeedTest(absltest.TestCase):

    def test_the_seed_alone_fixes_the_world_model_and_global_random_state_is_untouched(self):
        tf.random.set_seed(7)
        np.random.seed(7)
        expected_tf = tf.random.uniform([4]).numpy()
        expected_np = np.random.random(4)
        tf.random.set_seed(7)
        np.random.seed(7)
        initial = []
        first = _weights(_built(0, train_steps=2, initial=initial))
        # Building and training neither reseed nor draw from TensorFlow's
        # (or numpy's) global random state ...
        np.testing.assert_array_equal(tf.random.uniform([4]).numpy(), expected_tf)
        np.testing.assert_array_equal(np.random.random(4), expected_np)
        # ... nor depend on it: the same seed gives the same weights, after
        # training steps with dropout too.
        tf.random.set_seed(123)
        second = _weights(_built(0, train_steps=2))
        # Another seed draws other weights in every scope. Compared before
        # training: after it, the dropout masks (which follow the seed too)
        # would make weights differ where the initial draw did not; and the
        # build traces no training step (seconds).
        other = _weights(_built(1))
        names = [name for name, _ in first]
        self.assertTrue(any("reward_net" in n for n in names))
        self.assertTrue(any("latent_encoder" in n for n in names))
        self.assertEqual(names, [name for name, _ in second])
        for (name, a), (_, b) in zip(first, second):
            np.testing.assert_array_equal(a, b, err_msg=name)
        self.assertEqual(names, [name for name, _ in other])
        differ = {name for (name, a), (_, c) in zip(initial, other) if not np.array_equal(a, c)}
        for scope in ("latent_encoder", "lstm", "xfer_embed", "mdn_head", "reward_net"):
            self.assertTrue(any(scope in n for n in differ), f"{scope} did not change")

    def test_components_draw_from_seeds_of_their_own(self):
        # Distinct from one another, across agent seeds, and stable.
        seeds = [component_seed(0, c) for c in Component] + [component_seed(1, c)
                                                             for c in Component]
        self.assertLen(set(seeds), len(seeds))
        self.assertEqual(component_seed(0, Component.MODEL_WEIGHTS),
                         component_seed(0, Component.MODEL_WEIGHTS))

    def test_purposes_key_the_seeds_they_always_did(self):
        # A purpose's number is part of every seed it derives: [seed, keys,
        # purpose] through SeedSequence, as runs before the names drew them.
        self.assertEqual([int(p) for p in Purpose], list(range(1, 12)))
        for purpose in Purpose:
            want = int(np.random.SeedSequence([4, 2, int(purpose)]).generate_state(1)[0])
            self.assertEqual(purpose_seed(4, purpose, 2), want, purpose.name)
        seeds = {purpose_seed(0, p, 1) for p in Purpose}
        self.assertLen(seeds, len(Purpose))


# Two rounds of controller collection, a few steps of everything: the
# separate reward network (dropout), real starts, minibatches in two epochs.
_RESUME_WORLD = dataclasses.replace(
    _CONFIG, rounds=2, episodes_per_round=3, train_steps_per_round=3, batch_size=4,
    encoder_steps=3, encoder_batch_size=8, held_out_episodes=2, vocabulary_episodes=1,
    reward_ensemble=2, reward_ensemble_hidden=8)
_RESUME_DREAM = DreamConfig(batch_size=4, episodes=16, mask_threshold=0.2, count_margin=0.0)
_RESUME_PPO = PPOConfig(latent_size=8, hidden_sizes=(16,), xfer_embedding_size=4,
                        episodes_per_update=4, epochs=2, minibatch_size=8, entropy_coef=0.1)


class NotBuiltTest(absltest.TestCase):

    def test_parts_not_built_yet_say_what_to_call(self):
        agent = ModelBasedAgent(fixtures.real_env(), tempfile.mkdtemp(), world_model=_CONFIG,
                                progress=lambda line: None)
        with self.assertRaisesRegex(RuntimeError, "world model is not built yet: call "
                                    r"learn_world_model\(\)"):
            agent.initial_latents()
        with self.assertRaisesRegex(RuntimeError, "world model is not built yet"):
            agent.evaluate()
        with self.assertRaisesRegex(RuntimeError, "no controller yet"):
            _built(seed=0).evaluate()


def _resume_run(logdir: str, world=_RESUME_WORLD, snapshots=None,
                lines=None) -> ModelBasedAgent:
    """Phase 1 of a tiny agent in `logdir` (resumed where it holds a run);
    its progress lines go to `lines`.

    `snapshots` maps progress lines to folders: right after the first line
    that starts with a key, the logdir is copied to its folder, as killing
    the run there would leave it (every file is written before its line,
    and nothing is saved on the way out of a killed run)."""
    pending = dict(snapshots or {})
    lines = [] if lines is None else lines

    def progress(line):
        lines.append(line)
        for stop in [s for s in pending if line.startswith(s)]:
            shutil.copytree(logdir, pending.pop(stop))

    agent = ModelBasedAgent(fixtures.real_env(), logdir, world_model=world,
                            dream=_RESUME_DREAM, ppo=_RESUME_PPO, seed=4, progress=progress)
    agent.learn_world_model()
    assert not pending, f"the run never printed {sorted(pending)}"
    return agent


def _outcome(agent: ModelBasedAgent):
    """What a run produced, wall-clock times left out."""
    state = json.loads(json.dumps(
        {k: v for k, v in agent.state.to_state().items() if k != "seconds"}))
    history = [{k: v for k, v in row.items() if not k.endswith("_seconds")}
               for row in agent.dream_history]
    actions = [r.actions.tolist() for r in agent.world.buffer.raw]
    real = [{k: v for k, v in row.items() if k != "seconds"} for row in agent.real_history]
    return state, history, actions, real


class ResumeTest(parameterized.TestCase):
    """A run killed at a stop and resumed by a fresh agent in its logdir
    repeats the uninterrupted run to the bit. The uninterrupted run (one,
    in setUpClass) leaves a copy of its logdir at every stop, as a kill
    there would; each test resumes one copy to the end."""

    WORLD = _RESUME_WORLD
    # Progress lines a run is killed right after (the tests' parameters).
    STOPS = ("controller after round 1", "world model round 2/", "dream episode 12/")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp()
        cls.killed = {stop: os.path.join(cls.tmp, f"killed_{i}") for i, stop in
                      enumerate(cls.STOPS)}
        # A controller checkpoint after every update, so that a stretch can
        # be resumed from its middle (the resumed runs' setting too).
        with mock.patch.object(controller_training, "CONTROLLER_CHECKPOINT_EVERY", 1):
            cls.whole = _resume_run(os.path.join(cls.tmp, "whole"), cls.WORLD, cls.killed)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        patch = mock.patch.object(controller_training, "CONTROLLER_CHECKPOINT_EVERY", 1)
        patch.start()
        self.addCleanup(patch.stop)

    @parameterized.named_parameters(
        # After round 1: world model, controller and its evaluation all saved.
        ("after_round_1", "controller after round 1"),
        # Round 2's world model saved, its controller stretch not begun.
        ("before_controller_round_2", "world model round 2/"),
        # Inside round 2's controller stretch (episodes 8 to 16): resumed
        # from its checkpoint after episode 12, by a new dream object.
        ("inside_controller_round_2", "dream episode 12/"))
    def test_a_resumed_run_repeats_the_uninterrupted_run(self, stop_at):
        self._check_resume(stop_at)

    def _check_resume(self, stop_at):
        lines = []
        resumed = _resume_run(self.killed[stop_at], self.WORLD, lines=lines)  # a fresh agent
        # It resumed (a run started afresh would end the same way).
        self.assertTrue(any(": resumed " in line for line in lines), lines)
        whole = self.whole
        got, want = _outcome(resumed), _outcome(whole)
        self.assertEqual(got[3], want[3], "the controller's real episodes differ")
        self.assertEqual(got[2], want[2], "the collected real episodes differ")
        self.assertEqual(got[1], want[1], "the controller's updates differ")
        self.assertEqual(got[0], want[0], "the rounds' records differ")
        for mine, theirs in ((resumed.encoder, whole.encoder), (resumed.model, whole.model),
                             (resumed.controller.network, whole.controller.network)):
            for a, b in zip(mine.variables, theirs.variables, strict=True):
                np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)
        for a, b in zip(resumed.learner.optimizer.variables, whole.learner.optimizer.variables,
                        strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)
        self.assertEqual(resumed.controller.actor.rng.bit_generator.state,
                         whole.controller.actor.rng.bit_generator.state)
        self.assertEqual(resumed.controller.learner.rng.bit_generator.state,
                         whole.controller.learner.rng.bit_generator.state)


class RealEpisodesResumeTest(ResumeTest):
    """The controller that also learns from its real episodes
    (`real_episodes_per_round`): resumed where those episodes were learned
    from but no imagined episode of the round's stretch was checkpointed,
    it plays and learns from the same episodes again."""

    WORLD = dataclasses.replace(_RESUME_WORLD, real_episodes_per_round=3)
    STOPS = ResumeTest.STOPS + ("controller before round 2's dream",)

    def test_it_learns_from_real_episodes_every_round(self):
        rows = self.whole.real_history
        self.assertEqual([r["round"] for r in rows], [1, 2])
        self.assertEqual([r["episodes"] for r in rows], [0, 8])  # before each stretch
        self.assertEqual(self.whole.controller_real_steps, sum(r["real_steps"] for r in rows))
        self.assertGreaterEqual(self.whole.controller_real_steps, 6)  # 3 episodes a round
        # Two real updates besides the dream's four (16 episodes in fours).
        self.assertEqual(int(self.whole.controller.updates.numpy()), 6)
        self.assertEqual(int(self.whole.controller.episodes.numpy()), 16)

    @parameterized.named_parameters(
        ("after_round_1", "controller after round 1"),
        # Round 2's real episodes learned from, its stretch's first imagined
        # episodes not yet checkpointed.
        ("after_real_episodes_of_round_2", "controller before round 2's dream"),
        ("inside_controller_round_2", "dream episode 12/"))
    def test_a_resumed_run_repeats_the_uninterrupted_run(self, stop_at):
        self._check_resume(stop_at)


if __name__ == "__main__":
    absltest.main()
