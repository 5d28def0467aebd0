"""Tests of the baselines: one-step greedy, the random agent and the
agents' equal step budgets."""

import dataclasses

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.agents.random_agent import RandomAgent
from xflowrl.engine import CostModel, XferSet
from xflowrl.engine.cost import cost_model_from_spec
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.env.replay import replay
from xflowrl.search import (
    EQUAL_BUDGET_FACTOR,
    GreedyAgent,
    equal_step_limit,
    greedy_search,
    greedy_steps,
    greedy_walk,
    run_baselines,
    with_equal_step_limit,
)
from xflowrl.search.greedy import EVERY_LOCATION, greedy_walk_every_location

_XFERS = XferSet.default()
_COST = CostModel("analytic")


def _env(max_steps=50):
    return GraphEnv(zoo.get_graph("small_cnn"), _XFERS, _COST, EnvConfig(max_steps=max_steps))


class GreedyTest(absltest.TestCase):

    def test_each_step_takes_the_cheapest_candidate_until_none_improves(self):
        env = _env()
        episode = greedy_search(env)
        self.assertLess(episode.final_cost, episode.initial_cost)
        # Replay by brute force: every candidate graph costed directly.
        graph, cost = env.initial_graph, env.initial_cost
        for name, location in episode.applied:
            locs = _XFERS.locations(graph)
            costs = {(x, l): locs.apply(x, l).cost(_COST)
                     for x in np.flatnonzero(locs.counts) for l in range(locs.counts[x])}
            best = min(costs.values())
            self.assertLess(best, cost)
            x = _XFERS.names.index(name)
            self.assertAlmostEqual(costs[(x, location)], best, places=6)
            graph, cost = locs.apply(x, location), best
        locs = _XFERS.locations(graph)
        for x in np.flatnonzero(locs.counts):
            for l in range(locs.counts[x]):
                self.assertGreaterEqual(locs.apply(x, l).cost(_COST), cost - 1e-9)
        self.assertAlmostEqual(cost, episode.final_cost, places=6)

    def test_walk_takes_greedy_searchs_steps(self):
        # Without observations, the same steps, graph and cost as the
        # episode on the same environment without a step limit: over graphs
        # of several families, two cost models, a small L (candidates past
        # it unseen) and a tight size cap (larger candidates dropped).
        v100 = CostModel("analytic", profile="v100")
        cases = [("small_cnn", _COST, EnvConfig()), ("resnet18", v100, EnvConfig()),
                 ("bert", _COST, EnvConfig()), ("squeezenet1_1", v100, EnvConfig(max_locations=2)),
                 ("inception_v3", _COST, EnvConfig(max_ops_factor=1.0)),
                 ("nasnet_a", v100, EnvConfig(max_locations=1, max_steps=3))]
        for name, cost_model, config in cases:
            env = GraphEnv(zoo.get_graph(name), _XFERS, cost_model, config)
            episode = greedy_search(env.with_config(max_steps=NO_STEP_LIMIT))
            walk = greedy_walk(env)
            self.assertGreater(len(walk.applied), 1, name)
            self.assertEqual(walk.applied, episode.applied, name)
            self.assertEqual(walk.cost, episode.final_cost, name)
            self.assertEqual(walk.graph.hash(), replay(env.with_config(max_steps=NO_STEP_LIMIT),
                                                     walk.applied).hash(), name)
            self.assertEqual(greedy_steps(env), len(walk.applied), name)
        # A step limit: the episode's first steps.
        env = _env(max_steps=4)
        self.assertEqual(greedy_walk(env, max_steps=4).applied, greedy_search(env).applied)
        self.assertLen(greedy_walk(env, max_steps=4).applied, 4)
        steps = []
        greedy_walk(_env(), on_step=lambda k, cost: steps.append((k, cost)))
        self.assertEqual([k for k, _ in steps], list(range(1, len(steps) + 1)))
        self.assertEqual([c for _, c in steps], sorted((c for _, c in steps), reverse=True))

    def test_walk_from_another_start_keeps_the_environment_s_caps(self):
        # From the graph after greedy's first two steps: the rest of its
        # steps. From a neighbour with more ops than the initial graph, under
        # a cap of the initial graph's ops: nothing, though the neighbour's
        # own environment (the same factor of its own ops) walks on.
        env = _env()
        walk = greedy_walk(env)
        second = replay(env.with_config(max_steps=NO_STEP_LIMIT), walk.applied[:2])
        rest = greedy_walk(env, start=second)
        self.assertEqual(rest.applied, walk.applied[2:])
        self.assertEqual((rest.cost, rest.graph.hash()), (walk.cost, walk.graph.hash()))
        tight = env.with_config(max_ops_factor=1.0)
        locs = _XFERS.locations(env.initial_graph, tight.config.max_locations, env.max_ops)
        costs = locs.costs(_COST)
        grown = [(x, l) for x, l in np.argwhere(~np.isnan(costs))
                 if locs.apply(int(x), int(l)).num_ops() > tight.max_ops]
        self.assertNotEmpty(grown)
        start = locs.apply(int(grown[0][0]), int(grown[0][1]))
        self.assertEqual(greedy_walk(tight, start=start).applied, [])
        self.assertEqual(greedy_walk(tight, start=start).cost, start.cost(_COST))
        own = GraphEnv(start, _XFERS, _COST, EnvConfig(max_ops_factor=1.0))
        self.assertNotEmpty(greedy_walk(own).applied)

    def test_walk_over_every_location_goes_on_where_l_hides_the_improving_ones(self):
        # Inception-v3 under TASO's rules and the learned H100 model: on
        # one-step greedy's graph the improving merges of two relus
        # (`taso_95`) all lie past the first L=200 of its locations, so the
        # walk stops there; over every location it goes on, each step the
        # cheapest candidate of all, to a graph no candidate improves.
        h100 = cost_model_from_spec("learned/h100")
        xfers = XferSet.from_name("taso")
        env = GraphEnv(zoo.get_graph("inception_v3"), xfers, h100,
                       EnvConfig(max_steps=NO_STEP_LIMIT))
        walk = greedy_walk(env)
        tail = greedy_walk_every_location(env, walk.graph)
        self.assertNotEmpty(tail.applied)
        self.assertEqual({name for name, _ in tail.applied}, {"taso_95"})
        self.assertLess(tail.cost, walk.cost)
        self.assertTrue(all(location >= env.config.max_locations for _, location in tail.applied))
        graph = walk.graph
        for name, location in tail.applied:
            locs = xfers.locations(graph, EVERY_LOCATION, env.max_ops)
            x = xfers.names.index(name)
            self.assertEqual(locs.cheapest(h100)[:2], (x, location))
            graph = locs.apply(x, location)
        self.assertEqual(graph.hash(), tail.graph.hash())
        self.assertEqual(greedy_walk_every_location(env, tail.graph).applied, [])
        # Where L hides nothing, the walk over every location takes greedy's
        # steps (small_cnn: every xfer's locations within L).
        small = _env().with_config(max_steps=NO_STEP_LIMIT)
        self.assertEqual(greedy_walk_every_location(small, small.initial_graph).applied,
                         greedy_walk(small).applied)

    def test_needs_location_features(self):
        obs = _env().reset()._replace(locations=None)
        with self.assertRaisesRegex(ValueError, "per-location cost changes"):
            GreedyAgent().act(obs)

    def test_refuses_an_environment_without_candidate_costs(self):
        # An ablated observation shows every change as zero: greedy would
        # stop at once and look like a result.
        for features in ("no_deltas", "none"):
            env = GraphEnv(zoo.get_graph("small_cnn"), _XFERS, _COST,
                           EnvConfig(cost_features=features))
            with self.assertRaisesRegex(ValueError, "greedy needs candidate costs"):
                greedy_search(env)


class RandomAgentTest(absltest.TestCase):

    def test_thesis_collector_returns_valid_transitions(self):
        env = _env(max_steps=10)
        agent = RandomAgent.thesis_collector(seed=0)
        self.assertEqual(agent.noop_probability, 0.2)
        lengths = []
        for _ in range(20):
            episode = agent.run_episode(env, keep_transitions=True)
            self.assertEqual(len(episode.transitions), episode.steps)
            self.assertEqual(episode.invalid_actions, 0)
            self.assertTrue(episode.transitions[-1].done)
            for t in episode.transitions:
                x, l = t.action
                self.assertTrue(t.observation.xfer_mask[x])
                if x != env.noop:
                    self.assertTrue(t.observation.location_mask[x, l])
            lengths.append(episode.steps)
        # NO-OP with probability 0.2 ends episodes early: mean length ~5, not 10.
        self.assertLess(np.mean(lengths), 8)

    def test_bad_probability(self):
        with self.assertRaisesRegex(ValueError, "noop_probability"):
            RandomAgent(1.5)


class EqualBudgetTest(absltest.TestCase):
    """An agent compared with greedy gets at least 1.5 x greedy's steps."""

    def test_limit_is_the_request_or_the_factor_times_greedy(self):
        self.assertEqual(EQUAL_BUDGET_FACTOR, 1.5)
        self.assertEqual(equal_step_limit(50, 84), 126)   # ResNet-50, GPU-like
        self.assertEqual(equal_step_limit(50, 149), 224)  # 223.5 rounds up
        self.assertEqual(equal_step_limit(50, 16), 50)    # already enough
        self.assertEqual(equal_step_limit(10, 0), 10)     # greedy finds nothing
        self.assertEqual(equal_step_limit(1, 1), 2)
        self.assertEqual(equal_step_limit(5, 3, factor=2.0), 6)
        self.assertEqual(equal_step_limit(5, 3, factor=1.0), 5)

    def test_limit_refuses_bad_arguments(self):
        for args in ((0, 10), (50, -1), (50, 10, 0.9)):
            with self.assertRaisesRegex(ValueError, "need requested >= 1"):
                equal_step_limit(*args)

    def test_greedy_steps_are_run_baselines_greedy_steps(self):
        env = _env()
        steps = len(run_baselines(env, taso_budget=0, random_episodes=0,
                                  eqsat_time_limit=0).greedy.applied)
        self.assertGreater(steps, 2)
        self.assertEqual(greedy_steps(env), steps)
        # Neither the environment's step limit nor an observation ablation
        # (which greedy could not read) changes them.
        self.assertEqual(greedy_steps(_env(max_steps=2)), steps)
        ablated = GraphEnv(zoo.get_graph("small_cnn"), _XFERS, _COST,
                           EnvConfig(cost_features="no_deltas"))
        self.assertEqual(greedy_steps(ablated), steps)

    def test_raises_only_a_limit_below_the_factor_times_greedy(self):
        env = _env()
        steps = greedy_steps(env)
        self.assertGreaterEqual(env.config.max_steps, EQUAL_BUDGET_FACTOR * steps)
        self.assertIs(with_equal_step_limit(env), env)
        short = _env(max_steps=2)
        raised = with_equal_step_limit(short)
        self.assertIsNot(raised, short)
        self.assertEqual(raised.config,
                         dataclasses.replace(short.config, max_steps=equal_step_limit(2, steps)))
        self.assertIs(raised.initial_graph, short.initial_graph)
        self.assertEqual(raised.initial_cost, short.initial_cost)
        self.assertEqual(short.config.max_steps, 2)  # the original is unchanged
        self.assertIs(with_equal_step_limit(raised), raised)


if __name__ == "__main__":
    absltest.main()
