"""`GeneratorStates` and `PPOAgent.restore`: sampling generators in checkpoints."""

import os
import tempfile

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from xflowrl import zoo
from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.agents.ppo.random_state import GeneratorStates
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv

_XFERS = XferSet.default()


class GeneratorStatesTest(absltest.TestCase):

    def test_restore_puts_generators_back_in_place(self):
        a, b = np.random.default_rng(1), np.random.default_rng(2)
        a.random(3)
        path = tf.train.Checkpoint(g=GeneratorStates({"a": a, "b": b})).write(
            os.path.join(tempfile.mkdtemp(), "ckpt"))
        want = (a.random(4), b.integers(100, size=4))
        fresh_a, fresh_b = np.random.default_rng(9), np.random.default_rng(9)
        tf.train.Checkpoint(g=GeneratorStates({"a": fresh_a, "b": fresh_b})).read(
            path).assert_consumed()
        np.testing.assert_array_equal(fresh_a.random(4), want[0])  # the same objects
        np.testing.assert_array_equal(fresh_b.integers(100, size=4), want[1])

    def test_other_generators_are_refused(self):
        path = tf.train.Checkpoint(g=GeneratorStates({"a": np.random.default_rng(1)})).write(
            os.path.join(tempfile.mkdtemp(), "ckpt"))
        with self.assertRaisesRegex(ValueError, r"holds the generators \['a'\], this "
                                                r"program has \['b'\]"):
            tf.train.Checkpoint(g=GeneratorStates({"b": np.random.default_rng(1)})).read(path)
        other = np.random.Generator(np.random.MT19937(1))
        with self.assertRaisesRegex(ValueError, "generator 'a': the checkpoint holds a PCG64 "
                                                "state, this program a MT19937"):
            tf.train.Checkpoint(g=GeneratorStates({"a": other})).read(path)


class AgentRestoreTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.env = GraphEnv(zoo.get_graph("small_cnn"), _XFERS, CostModel("analytic"),
                            EnvConfig(max_steps=3))

    def _agent(self, seed):
        agent = PPOAgent(len(_XFERS), PPOConfig(), seed=seed)
        agent.build(self.env)
        return agent

    def test_generators_restored_or_kept(self):
        saved = self._agent(0)
        saved.actor.rng.random(5)
        path = saved.checkpoint.save(os.path.join(tempfile.mkdtemp(), "ckpt"))
        want = saved.actor.rng.random()
        resumed = self._agent(1)
        resumed.restore(path)
        self.assertEqual(resumed.actor.rng.random(), want)
        # A policy loaded to act with a seed of its own keeps its generators.
        loaded = self._agent(1)
        loaded.restore(path, generators=False)
        self.assertEqual(loaded.actor.rng.random(), np.random.default_rng(1).random())
        for a, b in zip(loaded.network.variables, saved.network.variables, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())

    def test_a_checkpoint_without_generators_is_refused_for_resuming(self):
        saved = self._agent(0)
        old = tf.train.Checkpoint(  # what PPOAgent.checkpoint held before the generators
            network=saved.network, policy_optimizer=saved.learner.policy_optimizer,
            value_optimizer=saved.learner.value_optimizer, episodes=saved.episodes,
            updates=saved.updates)
        path = old.save(os.path.join(tempfile.mkdtemp(), "ckpt"))
        resumed = self._agent(1)
        with self.assertRaisesRegex(ValueError, f"{path}: a checkpoint without the sampling "
                                                "generators .* run again in a fresh folder"):
            resumed.restore(path)
        # To act with a seed of its own, its network still loads.
        resumed.restore(path, generators=False)
        for a, b in zip(resumed.network.variables, saved.network.variables, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


if __name__ == "__main__":
    absltest.main()
