"""Tests of the model-based agent's configurations: their validation, and
that they (the PPO agent's too) import without TensorFlow."""

import dataclasses
import os
import subprocess
import sys
import textwrap

from absl.testing import absltest, parameterized

from xflowrl.world_model.config import COLLECTIONS, DreamConfig, WorldModelConfig


class WorldModelConfigTest(parameterized.TestCase):

    def test_defaults_are_valid(self):
        config = WorldModelConfig()
        self.assertIn(config.collection, COLLECTIONS)
        self.assertBetween(config.explore, 0.0, 1.0)

    @parameterized.parameters(
        dict(collection="random"), dict(collection="controller"), dict(explore=0.0),
        dict(explore=1.0), dict(vocabulary_headroom=0), dict(reward_ensemble=0),
        dict(reward_ensemble=1), dict(reward_model="separate"))
    def test_boundary_values_are_accepted(self, **kwargs):
        config = WorldModelConfig(**kwargs)
        for name, value in kwargs.items():
            self.assertEqual(getattr(config, name), value)

    @parameterized.parameters(
        (dict(collection="greedy"), r"collection must be one of \('controller', 'random'\), "
                                    r"got 'greedy'"),
        (dict(collection="Random"), "collection must be one of"),
        (dict(explore=-0.01), r"explore must lie in \[0, 1\], got -0.01"),
        (dict(explore=1.5), r"explore must lie in \[0, 1\], got 1.5"),
        (dict(vocabulary_headroom=-1), "vocabulary_headroom must be >= 0, got -1"),
        (dict(reward_ensemble=-1), "reward_ensemble must be >= 0, got -1"),
        (dict(reward_model="ensemble"), "reward_model must be 'mdn' or 'separate'"),
        (dict(lstm_size=0), "lstm_size must be >= 1, got 0"),
        (dict(rounds=0), "rounds must be >= 1, got 0"))
    def test_bad_values_raise(self, kwargs, message):
        with self.assertRaisesRegex(ValueError, message):
            WorldModelConfig(**kwargs)

    def test_replace_validates_too(self):
        with self.assertRaisesRegex(ValueError, "explore must lie in"):
            dataclasses.replace(WorldModelConfig(), explore=2.0)


class DreamConfigTest(parameterized.TestCase):

    def test_defaults_are_valid(self):
        config = DreamConfig()
        self.assertBetween(config.real_starts, 0.0, 1.0)
        self.assertGreaterEqual(config.start_horizon, 1)
        self.assertGreaterEqual(config.disagreement_penalty, 0.0)

    @parameterized.parameters(
        dict(real_starts=0.0), dict(real_starts=1.0), dict(start_horizon=1),
        dict(disagreement_penalty=0.0), dict(disagreement_limit=0.5),
        dict(disagreement_limit=None))
    def test_boundary_values_are_accepted(self, **kwargs):
        config = DreamConfig(**kwargs)
        for name, value in kwargs.items():
            self.assertEqual(getattr(config, name), value)

    @parameterized.parameters(
        (dict(real_starts=-0.1), r"real_starts must lie in \[0, 1\], got -0.1"),
        (dict(real_starts=1.01), r"real_starts must lie in \[0, 1\], got 1.01"),
        (dict(start_horizon=0), "start_horizon must be >= 1, got 0"),
        (dict(start_horizon=-3), "start_horizon must be >= 1, got -3"),
        (dict(disagreement_penalty=-0.5), "disagreement_penalty must be >= 0, got -0.5"),
        (dict(temperature=0.0), "temperature must be > 0, got 0.0"),
        (dict(mask_threshold=-0.1), "done_threshold and mask_threshold must be >= 0"),
        (dict(batch_size=0), "batch_size and episodes must be >= 1"),
        (dict(episodes=0), "batch_size and episodes must be >= 1"))
    def test_bad_values_raise(self, kwargs, message):
        with self.assertRaisesRegex(ValueError, message):
            DreamConfig(**kwargs)


class ImportTest(absltest.TestCase):

    def test_the_configs_and_the_sweep_s_process_import_without_tensorflow(self):
        # The packages export their names lazily: the configs load alone, the
        # agent with TensorFlow on first use. The temperature sweep's process
        # only hands seeds out, so its script imports without TensorFlow too.
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = textwrap.dedent("""
            import sys
            sys.path.insert(0, "experiments")
            from xflowrl.agents.ppo import PPOConfig
            from xflowrl.world_model import DreamConfig, WorldModelConfig, controller_ppo_config
            import temperature_sweep
            print("tensorflow" in sys.modules)
            from xflowrl.world_model import ModelBasedAgent
            print("tensorflow" in sys.modules, ModelBasedAgent.__module__)
        """)
        out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                             text=True, check=True, timeout=300,
                             env=dict(os.environ, PYTHONPATH=root))
        self.assertEqual(out.stdout.split(), ["False", "True", "xflowrl.world_model.agent"])


if __name__ == "__main__":
    absltest.main()
