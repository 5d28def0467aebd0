"""Rollouts in Ray actors: training with them, and resuming it to the bit.

The entry point on actors (`train_mf.py --rollout_actors`) is run by
tests/experiments/onnx_flag_test.py, on a user's ONNX model."""

import os
import shutil
import tempfile

from absl.testing import absltest
import numpy as np

from tests.local_ray import LocalRayTestCase
from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.agents.ppo.rollouts import RolloutActors
from xflowrl.agents.ppo.training import TrainConfig, train
from xflowrl.entry_points import RunSettings

# A library factory, so that the actors' processes can import it.
_RUN = RunSettings(graph="small_cnn", max_steps=4)


def _weights(agent):
    return [v.numpy() for v in agent.network.variables]


class RolloutActorsTest(LocalRayTestCase):

    def _run(self, episodes, logdir, killed_after=None, killed_dir=None, then=None):
        """Trains a fresh agent (seed 3) with two actors for `episodes`; with
        `killed_after`, copies the logdir to `killed_dir` right after that
        episode's progress line, as killing the run there would leave it
        (the checkpoint and progress file, the actors' generators in it, are
        written before the line), and returns the weights it had then.
        `then(actors, agent)` runs after training, before the actors close."""
        config = PPOConfig(episodes_per_update=2, epochs=2, minibatch_size=3)
        env = _RUN.make_env()
        agent = PPOAgent(env.num_xfers, config, seed=3)
        agent.build(env)
        actors = RolloutActors(_RUN.make_env, agent, 2, seed=3)
        killed, self.lines = [], []

        def progress(line):
            self.lines.append(line)
            if killed_after is not None and line.startswith(f"episode {killed_after}/"):
                shutil.copytree(logdir, killed_dir)
                killed.append(_weights(agent))
        try:
            result = train(env, agent, TrainConfig(episodes=episodes, checkpoint_every=1,
                                                   eval_every=2), logdir,
                           progress=progress, actors=actors)
            if then is not None:
                then(actors, agent)
        finally:
            actors.close()
        return agent, result, killed

    def test_a_resumed_run_repeats_the_uninterrupted_run(self):
        # The uninterrupted run, killed (a copy of its logdir) after episode 4;
        # the actors' generators moved on from their seeds and are in the file.
        interrupted = os.path.join(tempfile.mkdtemp(), "killed")
        whole, whole_result, [before] = self._run(8, tempfile.mkdtemp(), 4, interrupted)
        resumed, resumed_result, _ = self._run(8, interrupted, then=self._share_out)
        self.assertStartsWith(self.lines[0], "resumed from ")
        self.assertEndsWith(self.lines[0], " at episode 4")
        self.assertEqual(int(whole.episodes.numpy()), 8)
        self.assertEqual(int(whole.updates.numpy()), 4)
        self.assertGreater(whole_result.interactions, 8)  # actors played them
        self.assertEqual(resumed_result.history, whole_result.history)
        self.assertEqual((resumed_result.best_final_cost, resumed_result.best_sequence,
                          resumed_result.interactions),
                         (whole_result.best_final_cost, whole_result.best_sequence,
                          whole_result.interactions))
        for got, want in zip(_weights(resumed), _weights(whole), strict=True):
            np.testing.assert_array_equal(got, want)
        # Training changed the policy (the updates used the actors' episodes).
        self.assertTrue(any(not np.array_equal(a, b) for a, b in
                            zip(before, _weights(whole), strict=True)))

    def test_the_agent_must_be_built(self):
        env = _RUN.make_env()
        with self.assertRaisesRegex(ValueError, "agent.build"):
            RolloutActors(_RUN.make_env, PPOAgent(env.num_xfers, PPOConfig(), seed=0), 1)

    def _share_out(self, actors, agent):
        """Episodes are shared out among the actors, and a resume must bring
        one generator state per actor (on the resumed run's actors, after
        everything compared above was recorded)."""
        self.assertEqual(actors.shares(5), [3, 2])
        self.assertEqual(actors.shares(1), [1, 0])
        buffered = agent.buffered_episodes
        played = actors.run_episodes(agent, 5)
        self.assertLen(played, 5)
        self.assertEqual(agent.buffered_episodes, buffered + 5)
        states = actors.generator_states()
        self.assertLen(states, 2)
        self.assertNotEqual(states[0]["actor"], states[1]["actor"])
        with self.assertRaisesRegex(ValueError, "1 actors' generators; this run has 2"):
            actors.restore_generators(states[:1])


if __name__ == "__main__":
    absltest.main()
