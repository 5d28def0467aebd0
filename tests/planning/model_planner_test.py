"""Tests of the world-model planner: the latent model, its data and training,
and the search that acts in the real environment."""

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tests.planning import model_fixtures
from xflowrl.planning import EngineSimulator, PlanConfig, Planner
from xflowrl.planning.model import xfer_actions
from xflowrl.planning.model_learning import TrainConfig, Transitions, evaluate, harvest, train
from xflowrl.planning.model_search import (
    ModelPlanConfig,
    ModelPlanner,
    plan_with_model,
    replay_steps,
)
from xflowrl.planning.simulator import EVERYWHERE
from xflowrl.search.greedy import greedy_walk

_COST = model_fixtures.COST
_env = model_fixtures.env


def _tiny_model(env, seed=0):
    return model_fixtures.tiny_model(env, seed)


def _planner_tree(env, real_steps=40):
    planner = Planner(env, PlanConfig(everywhere=True, max_real_steps=real_steps, seed=0))
    planner.run()
    return planner


class XferActionsTest(absltest.TestCase):

    def test_each_active_xfer_once_at_all_its_locations(self):
        kinds = set()
        for graph in ("small_cnn", "squeezenet1_1"):
            env = _env(graph)
            expansion = EngineSimulator.of(env).expand(env.initial_graph, everywhere=True)
            xfers, rows = xfer_actions(expansion)
            counts = expansion.locations.count_array
            np.testing.assert_array_equal(xfers, np.flatnonzero(counts))
            for xfer, row in zip(xfers, rows):
                self.assertEqual(expansion.actions[row, 0], xfer)
                several = counts[xfer] >= 2
                kinds.add(bool(several))
                self.assertEqual(expansion.actions[row, 1], EVERYWHERE if several else 0)
        self.assertEqual(kinds, {False, True})


class ModelTest(absltest.TestCase):

    def test_numpy_heads_compute_what_the_model_computes(self):
        env = _env()
        model = _tiny_model(env)
        h = np.random.default_rng(0).uniform(-1, 1, (3, 8)).astype(np.float32)
        xfers = np.array([0, 5, 2])
        h_next, reward = model.dynamics(tf.constant(h), tf.constant(xfers))
        prediction = model.predict(h_next)
        heads = model.numpy_heads()
        np_next, np_reward = heads.dynamics(h, xfers)
        value, policy, mask = heads.predict(np_next)
        np.testing.assert_allclose(np_next, h_next.numpy(), atol=1e-5)
        np.testing.assert_allclose(np_reward, reward.numpy(), atol=1e-5)
        np.testing.assert_allclose(value, prediction.value.numpy(), atol=1e-5)
        np.testing.assert_allclose(policy, prediction.policy_logits.numpy(), atol=1e-5)
        np.testing.assert_allclose(mask, prediction.mask_logits.numpy(), atol=1e-5)


class LearningTest(absltest.TestCase):

    def test_harvest_keeps_every_expanded_node_with_real_targets(self):
        env = _env()
        planner = _planner_tree(env)
        data = Transitions()
        added = harvest(planner, env, data, "small_cnn")
        self.assertEqual(added, len(data))
        self.assertEqual(data.graphs, {"small_cnn": added})
        self.assertGreater(data.transitions(), 0)
        points = 100.0 / env.initial_cost
        # The root is the first state: its value is what the planner found.
        self.assertAlmostEqual(data.values[0],
                               points * (env.initial_cost - planner.best.cost), places=6)
        sim = EngineSimulator.of(env)
        root_expansion = sim.expand(env.initial_graph, everywhere=True)
        xfers, rows = xfer_actions(root_expansion)
        row_of = dict(zip(xfers.tolist(), rows.tolist()))
        for edge in data.edges[0]:
            child, _ = sim.child(root_expansion, row_of[edge.xfer])
            self.assertAlmostEqual(edge.reward, points * (env.initial_cost - child.cost(_COST)),
                                   places=6)
        np.testing.assert_array_equal(data.active[0], xfers)

    def test_training_lowers_the_loss(self):
        env = _env()
        data = Transitions()
        harvest(_planner_tree(env), env, data)
        model = _tiny_model(env)
        config = TrainConfig(steps=30, batch_size=8, unroll=1, seed=0, learning_rate=3e-3)
        before = evaluate(model, data, config, batches=8)
        train(model, data, config)
        after = evaluate(model, data, config, batches=8)
        self.assertLess(sum(after.values()), 0.9 * sum(before.values()))


_Stub = model_fixtures.StubHeads


class SearchTest(absltest.TestCase):

    def test_the_search_takes_the_action_whose_future_the_model_values(self):
        env = _env()
        expansion = EngineSimulator.of(env).expand(env.initial_graph, everywhere=True)
        xfers, _ = xfer_actions(expansion)
        for target_position in (0, len(xfers) - 1):
            target = int(xfers[target_position])
            planner = ModelPlanner(env, _tiny_model(env),
                                   ModelPlanConfig(real_root_rewards=False, simulations=64,
                                                   root_actions=len(xfers)),
                                   heads=_Stub(len(env.xfers), target))
            q = planner.decide(np.zeros(len(env.xfers)), xfers, {})
            self.assertEqual(int(np.argmax(q)), target_position)
            self.assertAlmostEqual(float(q.max()), 9.0)
            self.assertGreater(planner.model_steps, 0)

    def test_never_worse_than_greedy_and_the_route_builds_the_graph(self):
        for graph in ("small_cnn", "squeezenet1_1"):
            env = _env(graph)
            model = _tiny_model(env, seed=1)
            result = plan_with_model(env, model, ModelPlanConfig(max_decisions=4, seed=0))
            greedy = greedy_walk(env)
            self.assertLessEqual(result.cost, greedy.cost * (1 + 1e-9))
            built = replay_steps(env, result.route)
            self.assertEqual(built.hash(), result.graph.hash())
            self.assertAlmostEqual(built.cost(_COST), result.cost, places=9)
            self.assertLessEqual(result.real_steps_to_best, result.real_steps)
            self.assertGreaterEqual(result.real_steps, result.planner_real_steps)
            self.assertGreaterEqual(result.representations, result.decisions)


if __name__ == "__main__":
    absltest.main()
