"""Tests of the world-model planner's cheapest-location actions
(`ModelConfig.single_actions`): what such an action builds on a real graph,
its harvested targets, and the planner's hand-over with them."""

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tests.planning import model_fixtures
from xflowrl.planning import EngineSimulator, PlanConfig, Planner
from xflowrl.planning.model import model_actions, xfer_actions
from xflowrl.planning.model_learning import (
    TrainConfig,
    Transitions,
    evaluate,
    harvest,
    state_key,
    train,
)
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
    return model_fixtures.tiny_model(env, seed, single_actions=True)


def _cheapest_by_hand(env, graph):
    """xfer -> (the cheapest cost of its candidates, built and costed one
    by one, and how many it has), for xfers with two or more locations."""
    locations = env.xfers.locations(graph, env.config.max_locations, env.max_ops)
    counts = locations.count_array
    out = {}
    for xfer in np.flatnonzero(counts >= 2):
        costs = [locations.apply(int(xfer), loc).cost(_COST) for loc in range(counts[xfer])]
        out[int(xfer)] = min(costs)
    return out


class ActionMappingTest(absltest.TestCase):

    def test_an_action_n_plus_x_builds_xfer_x_at_its_cheapest_location(self):
        env = _env()
        n = len(env.xfers)
        sim = EngineSimulator.of(env)
        expansion = sim.expand(env.initial_graph, everywhere=True)
        actions, rows = model_actions(expansion, n, single_actions=True)
        whole, whole_rows = xfer_actions(expansion)
        np.testing.assert_array_equal(actions[:len(whole)], whole)
        np.testing.assert_array_equal(rows[:len(whole)], whole_rows)
        by_hand = _cheapest_by_hand(env, env.initial_graph)
        self.assertNotEmpty(by_hand)
        extra = actions[len(whole):]
        self.assertEqual(sorted((extra - n).tolist()), sorted(by_hand))
        for action, row in zip(extra, rows[len(whole):]):
            xfer = int(action) - n
            self.assertEqual(int(expansion.actions[row, 0]), xfer)
            self.assertNotEqual(int(expansion.actions[row, 1]), EVERYWHERE)
            child, steps = sim.child(expansion, int(row))
            self.assertLen(steps, 1)
            self.assertAlmostEqual(child.cost(_COST), by_hand[xfer], places=9)
            # The step a route records replays to that graph.
            self.assertEqual(replay_steps(env, list(steps)).hash(), child.hash())
        # Without the option the actions are the whole-xfer ones alone.
        plain, _ = model_actions(expansion, n, single_actions=False)
        np.testing.assert_array_equal(plain, whole)


class ModelTest(absltest.TestCase):

    def test_2n_actions_and_numpy_heads_compute_what_the_model_computes(self):
        env = _env()
        n = len(env.xfers)
        model = _tiny_model(env)
        self.assertEqual(model.config.num_actions, 2 * n)
        h = np.random.default_rng(0).uniform(-1, 1, (3, 8)).astype(np.float32)
        actions = np.array([0, n + 5, 2 * n - 1])
        h_next, reward = model.dynamics(tf.constant(h), tf.constant(actions))
        prediction = model.predict(h_next)
        heads = model.numpy_heads()
        np_next, np_reward = heads.dynamics(h, actions)
        value, policy, mask = heads.predict(np_next)
        self.assertEqual(policy.shape, (3, 2 * n))
        self.assertEqual(mask.shape, (3, 2 * n))
        np.testing.assert_allclose(np_next, h_next.numpy(), atol=1e-5)
        np.testing.assert_allclose(np_reward, reward.numpy(), atol=1e-5)
        np.testing.assert_allclose(value, prediction.value.numpy(), atol=1e-5)
        np.testing.assert_allclose(policy, prediction.policy_logits.numpy(), atol=1e-5)
        # An action and its cheapest-location twin are embedded apart.
        self.assertFalse(np.allclose(heads.action_embedding[5], heads.action_embedding[n + 5]))


class HarvestTest(absltest.TestCase):

    def test_targets_of_the_cheapest_location_actions(self):
        env = _env()
        n = len(env.xfers)
        planner = Planner(env, PlanConfig(everywhere=True, max_real_steps=40, seed=0))
        planner.run()
        data = Transitions()
        harvest(planner, env, data, "small_cnn", single_actions=True)
        points = 100.0 / env.initial_cost
        # The root is the first state; its expected targets, by hand.
        by_hand = _cheapest_by_hand(env, env.initial_graph)
        whole, _ = xfer_actions(planner.root.expansion)
        np.testing.assert_array_equal(
            data.active[0], np.concatenate([whole, n + np.array(sorted(by_hand), np.int64)]))
        known = dict(zip(data.known_xfers[0].tolist(), data.known_rewards[0].tolist()))
        estimates = dict(zip(data.active[0].tolist(), data.estimates[0].tolist()))
        for xfer, cost in by_hand.items():
            expected = points * (env.initial_cost - cost)
            self.assertAlmostEqual(known[n + xfer], expected, places=4)
            self.assertAlmostEqual(estimates[n + xfer], expected, places=4)
        # Every transition of such an action, in every state: the cheapest
        # candidate's child, its reward real, its state the child's.
        keys = {state_key(state): i for i, state in enumerate(data.states)}
        single_edges = 0
        for node in _nodes(planner.root):
            if node.expansion is None:
                continue
            state = keys[state_key(env.observation_of(node.expansion.locations,
                                                      node.cost).state)]
            by_hand = _cheapest_by_hand(env, node.graph)
            children = {child.graph.hash(): child for child in node.children.values()}
            for edge in data.edges[state]:
                if edge.xfer < n:
                    continue
                single_edges += 1
                xfer = edge.xfer - n
                self.assertIn(xfer, by_hand)
                self.assertAlmostEqual(edge.reward, points * (node.cost - by_hand[xfer]),
                                       places=4)
                if edge.child >= 0:
                    child = next(c for c in children.values() if c.expansion is not None
                                 and keys[state_key(env.observation_of(
                                     c.expansion.locations, c.cost).state)] == edge.child)
                    self.assertAlmostEqual(child.cost, by_hand[xfer], places=9)
                    self.assertAlmostEqual(data.values[edge.child],
                                           points * (child.cost - child.best_cost), places=4)
        self.assertGreater(single_edges, 0)
        # Without the option no action is a cheapest-location one.
        plain = Transitions()
        harvest(planner, env, plain, single_actions=False)
        self.assertTrue(all(e.xfer < n for edges in plain.edges for e in edges))
        self.assertTrue(all((a < n).all() for a in plain.active))


class TrainingTest(absltest.TestCase):

    def test_training_with_the_cheapest_location_actions_lowers_the_loss(self):
        env = _env()
        planner = Planner(env, PlanConfig(everywhere=True, max_real_steps=40, seed=0))
        planner.run()
        data = Transitions()
        harvest(planner, env, data, single_actions=True)
        model = _tiny_model(env)
        config = TrainConfig(steps=30, batch_size=8, unroll=1, seed=0, learning_rate=3e-3)
        before = evaluate(model, data, config, batches=8)
        train(model, data, config)
        after = evaluate(model, data, config, batches=8)
        self.assertLess(sum(after.values()), 0.9 * sum(before.values()))


def _nodes(root):
    out, stack, seen = [], [root], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        stack.extend(node.children.values())
    return out


_Stub = model_fixtures.StubHeads


class SearchTest(absltest.TestCase):

    def test_the_search_can_choose_a_cheapest_location_action(self):
        env = _env()
        n = len(env.xfers)
        expansion = EngineSimulator.of(env).expand(env.initial_graph, everywhere=True)
        actions, _ = model_actions(expansion, n, single_actions=True)
        position = len(actions) - 1
        self.assertGreaterEqual(int(actions[position]), n)
        planner = ModelPlanner(env, _tiny_model(env),
                               ModelPlanConfig(real_root_rewards=False, simulations=64,
                                               root_actions=len(actions)),
                               heads=_Stub(2 * n, int(actions[position])))
        q = planner.decide(np.zeros(2 * n), actions, {})
        self.assertEqual(int(np.argmax(q)), position)
        self.assertAlmostEqual(float(q.max()), 9.0)

    def test_never_worse_than_greedy_and_the_route_builds_the_graph(self):
        for graph in ("small_cnn", "squeezenet1_1"):
            env = _env(graph)
            result = plan_with_model(env, _tiny_model(env, seed=1),
                                     ModelPlanConfig(max_decisions=4, seed=0))
            greedy = greedy_walk(env)
            self.assertLessEqual(result.cost, greedy.cost * (1 + 1e-9))
            built = replay_steps(env, result.route)
            self.assertEqual(built.hash(), result.graph.hash())
            self.assertAlmostEqual(built.cost(_COST), result.cost, places=9)
            self.assertGreater(result.decisions, 0)


if __name__ == "__main__":
    absltest.main()
