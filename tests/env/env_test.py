"""Tests of the real environment and its rewards."""

from absl.testing import absltest, parameterized
import numpy as np

from tests.env.conformance import EnvironmentConformance
from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT, rewards
from xflowrl.env.replay import cheapest_prefix, replay, trace
from xflowrl.search import greedy_search

_XFERS = XferSet.default()
_COST = CostModel("analytic")


def _env(**config):
    return GraphEnv(zoo.get_graph("small_cnn"), _XFERS, _COST, EnvConfig(**config))


def _first_valid(obs):
    x = int(np.flatnonzero(obs.xfer_mask[:-1])[0])
    return x, 0


class EnvTest(parameterized.TestCase):

    def test_observation_shapes_and_masks(self):
        env = _env(max_locations=7)
        obs = env.reset()
        n = len(_XFERS)
        self.assertEqual(obs.location_mask.shape, (n + 1, 7))
        self.assertEqual(obs.xfer_mask.shape, (n + 1,))
        self.assertTrue(obs.xfer_mask[n])
        self.assertFalse(obs.location_mask[n].any())
        np.testing.assert_array_equal(obs.xfer_mask[:n], obs.location_mask[:n].any(axis=1))
        active = obs.locations.active
        self.assertEqual(obs.locations.nodes.shape, (len(active), 7, env.max_pattern_ops))
        self.assertEqual(obs.state.nodes.shape[0], int(obs.state.n_node[0]))
        # Padding is -1 exactly where there is no location, in the compact
        # rows and in the dense view.
        has_any = (obs.locations.nodes >= 0).any(axis=2)
        np.testing.assert_array_equal(has_any, obs.location_mask[active])
        dense = obs.locations.dense_nodes()
        np.testing.assert_array_equal((dense >= 0).any(axis=2), obs.location_mask)
        np.testing.assert_array_equal(dense[active], obs.locations.nodes)

    def test_rows_of_xfers_without_locations_are_padding(self):
        obs = _env(max_locations=7).reset()
        locations = obs.locations
        idle = int(np.flatnonzero(~obs.xfer_mask[:-1])[0])
        busy = int(locations.active[0])
        self.assertEqual(locations.row(idle), -1)
        self.assertEqual(locations.row(busy), 0)
        self.assertTrue((locations.nodes_of(idle) == -1).all())
        self.assertFalse(locations.cost_delta_of(idle).any())
        np.testing.assert_array_equal(locations.nodes_of(busy), locations.nodes[0])
        np.testing.assert_array_equal(locations.cost_delta_of(busy), locations.cost_delta[0])
        self.assertFalse(locations.dense_cost_delta()[idle].any())

    def test_location_features_name_matched_ops_and_cost_changes(self):
        env = _env()
        obs = env.reset()
        types = [op.type for op in env.graph.ops()]
        locs = _XFERS.locations(env.graph)
        for x in np.flatnonzero(obs.xfer_mask[:-1]):
            rule = _XFERS.rules[x]
            for l in range(locs.counts[x]):
                k = len(rule.src)
                self.assertEqual([types[i] for i in obs.locations.nodes_of(x)[l, :k]],
                                 [op.type for op in rule.src])
                expected = 100 * (locs.apply(x, l).cost(_COST) - env.cost) / env.initial_cost
                self.assertAlmostEqual(obs.locations.cost_delta_of(x)[l], expected, places=4)
        # The compact rows are the xfers with locations, and nothing else.
        np.testing.assert_array_equal(obs.locations.active, np.flatnonzero(obs.xfer_mask[:-1]))

    def test_step_applies_and_rewards_the_relative_drop(self):
        env = _env()
        obs = env.reset()
        delta = obs.locations.dense_cost_delta()
        x = int(np.argmin(np.where(obs.location_mask, delta, np.inf)) // 200)
        l = int(np.argmin(np.where(obs.location_mask[x], delta[x], np.inf)))
        before = env.graph
        _, reward, done, info = env.step((x, l))
        self.assertFalse(done)
        self.assertEqual(info["applied"], _XFERS.names[x])
        self.assertNotEqual(env.graph.hash(), before.hash())
        self.assertAlmostEqual(reward, 100 * (env.initial_cost - env.cost) / env.initial_cost)
        self.assertAlmostEqual(reward, -delta[x, l], places=4)
        self.assertGreater(reward, 0)

    def test_noop_ends_the_episode(self):
        env = _env()
        env.reset()
        _, reward, done, info = env.step((env.noop, 0))
        self.assertTrue(done)
        self.assertEqual(reward, 0.0)
        self.assertEqual(info["applied"], "NO-OP")
        with self.assertRaisesRegex(RuntimeError, "finished episode"):
            env.step((env.noop, 0))

    def test_step_limit(self):
        env = _env(max_steps=2)
        obs = env.reset()
        _, _, done, _ = env.step(_first_valid(obs))
        self.assertFalse(done)
        obs = env._observation
        _, _, done, _ = env.step(_first_valid(obs))
        self.assertTrue(done)

    def test_with_config_replaces_only_the_config(self):
        env = _env(max_steps=2, max_locations=7)
        unlimited = env.with_config(max_steps=NO_STEP_LIMIT)
        self.assertEqual(unlimited.config, EnvConfig(max_steps=NO_STEP_LIMIT, max_locations=7))
        self.assertEqual(env.config.max_steps, 2)
        self.assertIs(unlimited.initial_graph, env.initial_graph)
        self.assertIs(unlimited.xfers, env.xfers)
        self.assertIs(unlimited.cost_model, env.cost_model)
        self.assertEqual(env.clone().config, env.config)

    def test_no_step_limit_never_ends_greedy(self):
        # Greedy stops when nothing improves, not at the limit.
        episode = greedy_search(_env(max_steps=NO_STEP_LIMIT))
        self.assertLess(len(episode.applied), NO_STEP_LIMIT)
        self.assertEqual(greedy_search(_env(max_steps=10_000)).applied, episode.applied)

    @parameterized.parameters((-1, 0), (10**6, 0), (0, 10**6))
    def test_invalid_actions_end_with_a_penalty(self, x, l):
        env = _env(invalid_penalty=-5.0)
        env.reset()
        _, reward, done, info = env.step((x, l))
        self.assertTrue(done)
        self.assertEqual(reward, -5.0)
        self.assertIsNotNone(info["invalid"])
        self.assertEqual(env.cost, env.initial_cost)

    def test_invalid_action_can_be_ignored(self):
        env = _env(invalid_action="ignore")
        obs = env.reset()
        masked = int(np.flatnonzero(~obs.xfer_mask)[0])
        obs2, reward, done, info = env.step((masked, 0))
        self.assertFalse(done)
        self.assertIn("has no location", info["invalid"])
        self.assertEqual(env.graph.hash(), env.initial_graph.hash())
        env.step(_first_valid(obs2))  # the episode goes on

    def test_cheapest_is_the_replayed_cheapest_prefix(self):
        # Random episodes (some with invalid actions ignored) pass through
        # costlier and cheaper graphs; what the environment kept as it went
        # is what replaying the episode finds.
        rng = np.random.default_rng(0)
        env = GraphEnv(zoo.get_graph("small_cnn"), _XFERS, _COST,
                       EnvConfig(max_steps=12, invalid_action="ignore"))
        prefix_lengths = set()
        for _ in range(8):
            obs, done = env.reset(), False
            self.assertEqual(env.cheapest_prefix.applied, [])
            self.assertIs(env.cheapest_prefix.graph, env.initial_graph)
            while not done:
                valid = np.flatnonzero(obs.xfer_mask[:-1])
                x = int(rng.choice(valid)) if rng.random() < 0.9 else int(np.flatnonzero(
                    ~obs.xfer_mask)[0])
                obs, _, done, _ = env.step((x, int(rng.integers(max(1, obs.location_mask[x].sum())))))
            cheapest = env.cheapest_prefix
            cost, prefix = cheapest_prefix(env.clone(), env.history)
            self.assertEqual(cheapest.applied, prefix)
            self.assertEqual(cheapest.cost, cost)
            self.assertEqual(cheapest.graph.hash(), replay(env.clone(), prefix).hash())
            self.assertEqual(cheapest.cost, min([env.initial_cost] + [
                c for _, _, c in trace(env.clone(), env.history)]))
            prefix_lengths.add(len(prefix))
        # Not all episodes end at their cheapest graph or at the initial one.
        self.assertGreater(len(prefix_lengths), 2)

    def test_bad_config(self):
        with self.assertRaisesRegex(ValueError, "unknown reward 'speed'"):
            EnvConfig(reward="speed")
        with self.assertRaisesRegex(ValueError, "invalid_action"):
            EnvConfig(invalid_action="crash")
        with self.assertRaisesRegex(ValueError, "cost_features"):
            EnvConfig(cost_features="some")


def _observations(cost_features, cost_model, steps=3):
    """The observations of a fixed action sequence (the first valid action,
    `steps` times) under one cost model."""
    env = GraphEnv(zoo.get_graph("small_cnn"), _XFERS, cost_model,
                   EnvConfig(cost_features=cost_features))
    out = [env.reset()]
    for _ in range(steps):
        out.append(env.step(_first_valid(out[-1])).observation)
    return out


class CostFeaturesTest(parameterized.TestCase):
    """The observation ablation (`EnvConfig.cost_features`): two cost models
    price the same candidates differently; without cost features the agent
    cannot tell them apart, while masks and locations never change."""

    _OTHER_COST = CostModel("analytic", profile="v100")

    def test_cost_models_differ(self):
        # Guard: under full features the two cost models' observations differ,
        # so the equalities below are not vacuous.
        cpu, v100 = _observations("full", _COST), _observations("full", self._OTHER_COST)
        for a, b in zip(cpu, v100):
            self.assertFalse(np.allclose(a.locations.cost_delta, b.locations.cost_delta))
            self.assertFalse(np.allclose(a.state.nodes, b.state.nodes))
            self.assertFalse(np.allclose(a.state.globals, b.state.globals))

    @parameterized.parameters("no_deltas", "none")
    def test_no_candidate_cost_in_location_features(self, cost_features):
        cpu = _observations(cost_features, _COST)
        v100 = _observations(cost_features, self._OTHER_COST)
        for a, b in zip(cpu, v100):
            self.assertFalse(a.locations.cost_delta.any())
            self.assertFalse(a.locations.xfer_summary[:, 1:].any())
            for field in ("active", "nodes", "cost_delta", "xfer_summary"):
                np.testing.assert_array_equal(getattr(a.locations, field),
                                              getattr(b.locations, field))

    def test_none_leaves_no_cost_in_the_state(self):
        for a, b in zip(_observations("none", _COST), _observations("none", self._OTHER_COST)):
            for field in ("nodes", "edges", "globals", "senders", "receivers"):
                np.testing.assert_array_equal(getattr(a.state, field), getattr(b.state, field))

    def test_no_deltas_keeps_op_costs(self):
        full, ablated = _observations("full", _COST), _observations("no_deltas", _COST)
        for a, b in zip(full, ablated):
            np.testing.assert_array_equal(a.state.nodes, b.state.nodes)
            np.testing.assert_array_equal(a.state.globals, b.state.globals)

    @parameterized.parameters("no_deltas", "none")
    def test_masks_locations_and_rewards_unchanged(self, cost_features):
        full, ablated = _observations("full", _COST), _observations(cost_features, _COST)
        for a, b in zip(full, ablated):
            np.testing.assert_array_equal(a.location_mask, b.location_mask)
            np.testing.assert_array_equal(a.xfer_mask, b.xfer_mask)
            np.testing.assert_array_equal(a.locations.nodes, b.locations.nodes)
            np.testing.assert_array_equal(a.locations.xfer_summary[:, 0],
                                          b.locations.xfer_summary[:, 0])
            self.assertEqual(a.state.nodes.shape, b.state.nodes.shape)
        # The reward still carries the cost: same actions, same rewards.
        envs = [GraphEnv(zoo.get_graph("small_cnn"), _XFERS, _COST, EnvConfig(cost_features=c))
                for c in ("full", cost_features)]
        steps = [[], []]
        for i, env in enumerate(envs):
            obs = env.reset()
            for _ in range(3):
                step = env.step(_first_valid(obs))
                steps[i].append((step.reward, env.cost))
                obs = step.observation
        self.assertEqual(steps[0], steps[1])
        self.assertNotEqual(steps[0][0][0], 0.0)


class GraphEnvConformanceTest(EnvironmentConformance, absltest.TestCase):

    def make_env(self):
        return _env(max_steps=6)


class RewardsTest(absltest.TestCase):

    def test_values(self):
        t = rewards.Transition(initial_cost=10.0, previous_cost=8.0, new_cost=6.0, done=False)
        self.assertAlmostEqual(rewards.relative(t), 20.0)
        self.assertAlmostEqual(rewards.delta(t), 2.0)
        self.assertEqual(rewards.terminal(t), 0.0)
        self.assertAlmostEqual(rewards.terminal(t._replace(done=True)), 40.0)
        self.assertAlmostEqual(rewards.sqrt(t), np.sqrt(8) - np.sqrt(6))


if __name__ == "__main__":
    absltest.main()
