"""Learning from search: self-play's states and targets, the store, reanalyse,
the learner, the saved policy folder and one whole iteration."""

import dataclasses
import os
import tempfile

from absl.testing import absltest
import numpy as np

from xflowrl.engine.graph import graph_from_data
from xflowrl.planning import PlanConfig, PolicyPrior, plan
from xflowrl.planning.learner import LearnConfig, SearchLearner, make_batch
from xflowrl.planning.search_targets import TargetConfig, best_below_value
from xflowrl.planning.search_training import (
    SearchRun,
    SearchTrainingConfig,
    train_from_search,
)
from xflowrl.planning.self_play import (
    ReanalyseJob,
    RecordingPlanner,
    SelfPlayJob,
    environment,
    harvest,
    play,
    reanalyse,
    run_jobs,
)
from xflowrl.planning.simulator import EngineSimulator
from xflowrl.planning.target_store import TargetStore
from xflowrl.policy import SHIPPED
from xflowrl.policy.folder import read_info

_GRAPH = "squeezenet/f2w8"   # a small corpus graph of the training split
_RULES, _COST = "default", "analytic/v100"
_PLAN = PlanConfig(simulations=8, max_real_steps=20, time_limit_s=600)


def _job(**changes) -> SelfPlayJob:
    return dataclasses.replace(SelfPlayJob(_GRAPH, _RULES, _COST, f"policy:{SHIPPED}", _PLAN,
                                           TargetConfig()), **changes)


class SelfPlayTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.played = play(_job())

    def test_states_are_the_trees_expanded_graphs_with_their_targets(self):
        env = environment(_GRAPH, _RULES, _COST)
        played = self.played
        self.assertEqual(played.real_steps, 20)
        self.assertBetween(played.real_steps_to_best, 1, played.real_steps)
        # One state per expansion: every expanded node with candidates.
        self.assertLen(played.states, played.real_steps)
        self.assertTrue(played.states[0].root)
        self.assertAlmostEqual(played.states[0].cost, env.initial_cost)
        for state in played.states:
            self.assertAlmostEqual(float(state.xfer_target.sum()), 1.0, places=5)
            self.assertEqual(state.xfer_target[-1], 0.0)           # never NO-OP
            self.assertTrue(state.xfer_mask[state.xfer_target > 0].all())
            np.testing.assert_allclose(state.location_target.sum(axis=1), 1.0, rtol=1e-5)
            self.assertTrue((state.location_mask | (state.location_target == 0)).all())
            self.assertGreaterEqual(state.value_target, 0.0)
            # The stored graph is the state's graph.
            graph = graph_from_data(state.graph_data)
            self.assertAlmostEqual(graph.cost(env.cost_model), state.cost, places=12)
        # The first root's value: down to the handed-over graph (the cheapest).
        self.assertAlmostEqual(played.states[0].value_target,
                               best_below_value(env.initial_cost, played.cost, env.initial_cost))

    def test_roots_only_and_n_step_values(self):
        env = environment(_GRAPH, _RULES, _COST)
        planner = RecordingPlanner(env, dataclasses.replace(_PLAN, prior="xfer"))
        planner.run()
        config = TargetConfig(states="roots", value="n_step", n_steps=1, discount=1.0)
        states = harvest(planner, env, config, _GRAPH)
        self.assertLen(states, len(planner.roots))
        self.assertTrue(all(s.root for s in states))
        # One step: the reward of the decision plus the next root's search value.
        if len(states) >= 2:
            first, second = planner.roots[0], planner.roots[1]
            expected = (100 * (first.cost - second.cost) / env.initial_cost
                        + best_below_value(second.cost, second.best_cost, env.initial_cost))
            self.assertAlmostEqual(states[0].value_target, expected)

    def test_reanalyse_searches_again_and_counts_its_real_steps(self):
        old = tuple(self.played.states[:2])
        done = reanalyse(ReanalyseJob(_GRAPH, _RULES, _COST, "policy:" + SHIPPED,
                                      PlanConfig(simulations=4, max_real_steps=5),
                                      TargetConfig(), old))
        self.assertLen(done.states, 2)
        self.assertBetween(done.real_steps, 2, 2 * 6)
        for before, after in zip(old, done.states):
            self.assertEqual(after.cost, before.cost)
            self.assertEqual(after.root, before.root)
            self.assertGreaterEqual(after.value_target, before.value_target)

    def test_store_keeps_parts_and_rewrites_one(self):
        store = TargetStore(tempfile.mkdtemp())
        self.assertEqual(store.add(list(self.played.states[:3])), 0)
        self.assertEqual(store.add(list(self.played.states[3:5])), 1)
        again = TargetStore(store.folder)   # reopened: what a resumed run sees
        self.assertEqual(again.parts(), [0, 1])
        self.assertLen(again, 5)
        loaded = again.load()
        np.testing.assert_array_equal(loaded[4].xfer_target, self.played.states[4].xfer_target)
        again.replace(0, [loaded[0]._replace(value_target=-1.0)])
        self.assertEqual([s.value_target for s in again.read(0)], [-1.0])


class LearnerTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.states = play(_job()).states[:12]
        cls.env = environment(_GRAPH, _RULES, _COST)
        # One learner for both tests (its functions traced once): evaluated,
        # trained on a fixed batch, evaluated again.
        cls.learner = SearchLearner(SHIPPED, cls.env, LearnConfig(steps=25, batch_size=12))
        cls.before = cls.learner.evaluate(cls.states)
        cls.learner.update(cls.states)
        cls.after = cls.learner.evaluate(cls.states)

    def test_steps_on_a_fixed_batch_lower_its_loss(self):
        before, after = self.before, self.after
        self.assertLess(after["loss"], 0.8 * before["loss"])
        self.assertLess(after["policy_xfer"] + after["policy_location"],
                        before["policy_xfer"] + before["policy_location"])

    def test_saved_folder_loads_in_the_policy_prior_and_plans(self):
        learner = self.learner
        folder = os.path.join(tempfile.mkdtemp(), "policy")
        learner.save(folder, [_GRAPH])
        info = read_info(folder)
        self.assertIn(_GRAPH, info.graphs)
        self.assertEqual(info.num_xfers, read_info(SHIPPED).num_xfers)
        # The NumPy arrays are the trained network's: the prior's xfer
        # probabilities at the initial graph are the network's softmax.
        prior = PolicyPrior(folder, self.env)
        expansion = EngineSimulator.of(self.env).expand(self.env.initial_graph)
        joint = np.exp(prior.logits(expansion))
        batch = make_batch([self.states[0]])
        embedding = learner.network.encode(batch.state)
        logits = learner.network.xfer_head(embedding.globals, batch.xfer_summary,
                                           batch.xfer_mask).logits.numpy()[0]
        mask = self.states[0].xfer_mask.copy()
        mask[-1] = False
        expected = np.where(mask, np.exp(logits - logits[mask].max()), 0.0)
        expected /= expected.sum()
        xfers = expansion.actions[:, 0]
        for x in np.unique(xfers):
            self.assertAlmostEqual(joint[xfers == x].sum(), expected[x], places=4)
        self.assertNotAlmostEqual(
            joint[0], np.exp(PolicyPrior(SHIPPED, self.env).logits(expansion))[0], places=6)
        result = plan(self.env, dataclasses.replace(_PLAN, prior=f"policy:{folder}"))
        self.assertLessEqual(result.real_steps, 20)
        self.assertLess(result.cost, self.env.initial_cost)


class IterationTest(absltest.TestCase):

    def test_one_iteration_end_to_end_and_resume(self):
        out = tempfile.mkdtemp()
        config = SearchTrainingConfig(graphs=(_GRAPH,), graphs_per_iteration=1, iterations=1,
                                      plan=PlanConfig(simulations=4, max_real_steps=12),
                                      learn=LearnConfig(steps=3, batch_size=8, compiled=False))
        run = train_from_search(config, out)
        self.assertLen(run.iterations, 1)
        record = run.iterations[0]
        self.assertEqual(run.real_steps, record.self_play_real_steps)
        self.assertEqual(record.self_play_real_steps, 12)
        self.assertEqual(record.states_stored, record.states_added)
        self.assertTrue(os.path.exists(os.path.join(run.policy, "policy.npz")))
        self.assertSetEqual(set(record.losses), {"loss", "policy_xfer", "policy_location",
                                                 "value"})
        self.assertLessEqual(run.best[_GRAPH].change_pct, 0.0)
        self.assertBetween(run.best[_GRAPH].real_steps_to_best, 1, run.real_steps)
        self.assertEqual(run.spent, {_GRAPH: run.real_steps})
        # Resumed with the same config: nothing more to do, the same record.
        self.assertEqual(SearchRun.load(out), train_from_search(config, out))
        with self.assertRaisesRegex(ValueError, "another config"):
            train_from_search(dataclasses.replace(config, iterations=2, seed=1), out)


class RayTest(absltest.TestCase):

    def test_self_play_on_a_ray_actor_gives_what_it_gives_in_process(self):
        jobs = [_job(plan=dataclasses.replace(_PLAN, max_real_steps=8))]
        (local,), (remote,) = run_jobs(jobs, actors=0), run_jobs(jobs, actors=1)
        self.assertEqual((remote.real_steps, remote.cost, remote.applied),
                         (local.real_steps, local.cost, local.applied))
        self.assertLen(remote.states, len(local.states))
        for a, b in zip(local.states, remote.states):
            np.testing.assert_array_equal(a.xfer_target, b.xfer_target)


if __name__ == "__main__":
    absltest.main()
