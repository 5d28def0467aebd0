"""Conformance tests every `xflowrl.env.Environment` must pass: the real and
the dream environments obey one interface and share these tests (as dm_env's test mixin).

Mix `EnvironmentConformance` into an `absltest.TestCase` and define
`make_env()` returning a fresh environment whose step limit is small (at
most 10 steps). The real environment, the latent view of it and the dream
environment all run these same tests.
"""

from typing import Any

import numpy as np

from xflowrl.env import Environment, Observation, TimeStep, location_counts, prefix_mask


class EnvironmentConformance:
    """Tests of the shared interface; the host class defines make_env()."""

    def make_env(self) -> Environment:
        raise NotImplementedError

    # -- helpers --------------------------------------------------------------
    def _check_observation(self, env: Environment, obs: Any) -> None:
        spec = env.observation_spec()
        n, num_l = spec.num_xfers, spec.max_locations
        self.assertIsInstance(obs, Observation)
        self.assertEqual(obs.xfer_mask.shape, (n + 1,))
        self.assertEqual(obs.xfer_mask.dtype, bool)
        self.assertEqual(obs.location_mask.shape, (n + 1, num_l))
        self.assertEqual(obs.location_mask.dtype, bool)
        self.assertTrue(obs.xfer_mask[n], "NO-OP must always be valid")
        self.assertFalse(obs.location_mask[n].any(), "NO-OP has no locations")
        np.testing.assert_array_equal(obs.xfer_mask[:n], obs.location_mask[:n].any(axis=1))
        # Location masks are prefixes: l valid iff l < count[x].
        np.testing.assert_array_equal(
            obs.location_mask, prefix_mask(location_counts(obs.location_mask), num_l))
        if spec.state == "vector":
            self.assertEqual(np.asarray(obs.state).shape, (spec.state_size,))
            self.assertTrue(np.isfinite(obs.state).all())
        else:
            self.assertEqual(obs.state.nodes.shape[0], int(obs.state.n_node[0]))
        if spec.location_features:
            locations = obs.locations
            active = len(locations.active)
            np.testing.assert_array_equal(locations.active, np.flatnonzero(obs.xfer_mask[:-1]))
            self.assertEqual(locations.nodes.shape, (active, num_l, spec.max_pattern_ops))
            self.assertEqual(locations.cost_delta.shape, (active, num_l))
            self.assertEqual(locations.xfer_summary.shape[0], n + 1)
            self.assertEqual(locations.dense_nodes().shape, (n + 1, num_l, spec.max_pattern_ops))
            self.assertEqual(locations.dense_cost_delta().shape, (n + 1, num_l))
        else:
            self.assertIsNone(obs.locations)

    def _valid_action(self, obs, rng):
        valid = np.flatnonzero(obs.xfer_mask[:-1])
        if not len(valid):
            return len(obs.xfer_mask) - 1, 0
        x = int(rng.choice(valid))
        return x, int(rng.integers(obs.location_mask[x].sum()))

    # -- tests ----------------------------------------------------------------
    def test_specs_agree_with_observations(self):
        env = self.make_env()
        spec, action_spec = env.observation_spec(), env.action_spec()
        self.assertEqual(action_spec.num_xfers, spec.num_xfers)
        self.assertEqual(action_spec.max_locations, spec.max_locations)
        self.assertEqual(env.noop, spec.num_xfers)
        self.assertIn(spec.state, ("graph", "vector"))
        self._check_observation(env, env.reset())

    def test_noop_ends_the_episode(self):
        env = self.make_env()
        env.reset()
        step = env.step((env.noop, 0))
        self.assertIsInstance(step, TimeStep)
        self.assertTrue(step.done)
        self.assertIsNone(step.info["invalid"])
        self.assertFalse(step.info["truncated"])
        with self.assertRaisesRegex(RuntimeError, "finished episode"):
            env.step((env.noop, 0))

    def test_valid_actions_run_to_an_end_within_the_step_limit(self):
        env = self.make_env()
        rng = np.random.default_rng(0)
        for _ in range(2):
            obs, done, steps = env.reset(), False, 0
            while not done:
                obs, reward, done, info = env.step(self._valid_action(obs, rng))
                steps += 1
                self._check_observation(env, obs)
                self.assertIsInstance(reward, float)
                self.assertTrue(np.isfinite(reward))
                self.assertIsNone(info["invalid"])
                self.assertLessEqual(steps, 10)
            if info["truncated"]:
                self.assertTrue(obs.xfer_mask[:-1].any(), "truncated, yet nothing applies")

    def test_invalid_actions_never_raise(self):
        env = self.make_env()
        obs = env.reset()
        counts = location_counts(obs.location_mask)
        for action in [(env.noop + 5, 0), (-1, 0),
                       (int(np.argmin(counts[:-1])) if (counts[:-1] == 0).any() else env.noop + 1, 0),
                       (int(np.argmax(counts[:-1])), env.observation_spec().max_locations + 3)]:
            obs = env.reset()
            _, reward, done, info = env.step(action)
            self.assertIsNotNone(info["invalid"], f"{action} should be invalid")
            self.assertIsInstance(reward, float)

    def test_reset_starts_over(self):
        env = self.make_env()
        first = env.reset()
        rng = np.random.default_rng(1)
        env.step(self._valid_action(first, rng))
        again = env.reset()
        np.testing.assert_array_equal(first.xfer_mask, again.xfer_mask)
        np.testing.assert_array_equal(first.location_mask, again.location_mask)
