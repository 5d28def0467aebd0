"""Tests of `ModelBasedAgent`'s seeding: the seed alone fixes the world model.

(The agent's phases end to end are tested by quick_run_test.py.)
"""

import dataclasses
import tempfile

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tests.world_model import fixtures
from xflowrl.embedding import features
from xflowrl.world_model import data
from xflowrl.world_model.agent import Component, ModelBasedAgent, component_seed

# The separate reward network: its dropout is the world model's one random op
# of a training step.
_CONFIG = dataclasses.replace(fixtures.SMALL_CONFIG, reward_model="separate")


def _vocab_and_rollouts():
    rollouts = fixtures.rollouts(12, seed=0)
    return data.XferVocabulary.from_rollouts(rollouts, len(fixtures.xfers())), rollouts


def _built(seed: int, train_steps: int = 0) -> ModelBasedAgent:
    """An agent's world model, its variables created (and trained a few steps)."""
    vocab, rollouts = _vocab_and_rollouts()
    env = fixtures.real_env()
    agent = ModelBasedAgent(env, tempfile.mkdtemp(), world_model=_CONFIG, seed=seed,
                            progress=lambda line: None)
    agent._build_world_model(vocab)  # pylint: disable=protected-access
    agent.encoder.predict(agent.encoder(features.to_tensors(env.reset().state)))
    batch = data.make_batch(agent._encode(rollouts))  # pylint: disable=protected-access
    agent.learner.build(batch)
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
        first = _weights(_built(0, train_steps=2))
        # Building and training neither reseed nor draw from TensorFlow's
        # (or numpy's) global random state ...
        np.testing.assert_array_equal(tf.random.uniform([4]).numpy(), expected_tf)
        np.testing.assert_array_equal(np.random.random(4), expected_np)
        # ... nor depend on it: the same seed gives the same weights, after
        # training steps with dropout too.
        tf.random.set_seed(123)
        second = _weights(_built(0, train_steps=2))
        other = _weights(_built(1, train_steps=2))
        names = [name for name, _ in first]
        self.assertTrue(any("reward_net" in n for n in names))
        self.assertTrue(any("latent_encoder" in n for n in names))
        self.assertEqual(names, [name for name, _ in second])
        for (name, a), (_, b) in zip(first, second):
            np.testing.assert_array_equal(a, b, err_msg=name)
        differ = {name for (name, a), (_, c) in zip(first, other) if not np.array_equal(a, c)}
        for scope in ("latent_encoder", "lstm", "xfer_embed", "mdn_head", "reward_net"):
            self.assertTrue(any(scope in n for n in differ), f"{scope} did not change")

    def test_components_draw_from_seeds_of_their_own(self):
        # Distinct from one another, across agent seeds, and stable.
        seeds = [component_seed(0, c) for c in Component] + [component_seed(1, c)
                                                             for c in Component]
        self.assertLen(set(seeds), len(seeds))
        self.assertEqual(component_seed(0, Component.MODEL_WEIGHTS),
                         component_seed(0, Component.MODEL_WEIGHTS))


if __name__ == "__main__":
    absltest.main()
