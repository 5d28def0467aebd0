"""Policy folders (save, load, refuse another rule set) and zero-shot evaluation."""

import os
import shutil
import tempfile

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.generalist import evaluate, report
from xflowrl.policy import PolicyInfo, load_policy, read_info, runtime, save_policy
from xflowrl.results.generalist import (
    FinetuneGraph,
    FinetunedRun,
    GeneralistRun,
    RouteSummary,
    ScratchRun,
    ZeroShotRow,
)
from xflowrl.results.records import to_plain
from xflowrl.results.runs import RoundController, WorldModelRound
from xflowrl.search import greedy_search

XFERS = XferSet.default()
COST = CostModel("analytic", profile="v100")


def _env(name="small_cnn", xfers=XFERS):
    return GraphEnv(zoo.get_graph(name), xfers, COST, EnvConfig(max_steps=20))


def _greedy_actions(agent, env):
    return agent.run_episode(env, greedy=True, learn=False).applied


class PolicyFolderTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_a_saved_policy_acts_as_the_agent_did_on_any_graph(self):
        ppo = PPOConfig.xrlflow()
        agent = PPOAgent(len(XFERS), ppo, seed=5)
        agent.build(_env())
        info = PolicyInfo(ppo=ppo.__dict__, rules="default", num_xfers=len(XFERS),
                          max_locations=200, cost_model=COST.name, graphs=["small_cnn"],
                          episodes=0, seed=5, commit="abc", command="test")
        save_policy(agent, self.dir, info)
        self.assertEqual(read_info(self.dir).graphs, ["small_cnn"])
        # A checkpoint of the network alone: no optimizer state (the NumPy
        # runtime's arrays beside it are counted apart).
        size = sum(os.path.getsize(os.path.join(self.dir, f)) for f in os.listdir(self.dir)
                   if f != runtime.ARRAYS_FILE)
        self.assertLess(size, 1_000_000)
        self.assertLess(os.path.getsize(os.path.join(self.dir, runtime.ARRAYS_FILE)), 1_000_000)
        for name in ("small_cnn", "squeezenet1_1"):
            loaded = load_policy(self.dir, _env(name), seed=5)
            self.assertEqual(_greedy_actions(loaded, _env(name)),
                             _greedy_actions(agent, _env(name)))

    def test_config_changes_change_learning_not_the_policy(self):
        ppo = PPOConfig.xrlflow()
        agent = PPOAgent(len(XFERS), ppo, seed=2)
        agent.build(_env())
        save_policy(agent, self.dir, PolicyInfo(ppo=ppo.__dict__, rules="default",
                                                num_xfers=len(XFERS), max_locations=200))
        loaded = load_policy(self.dir, _env(), seed=2,
                             config_changes={"policy_learning_rate": 1e-5})
        self.assertEqual(loaded.config.policy_learning_rate, 1e-5)
        self.assertEqual(loaded.config.value_learning_rate, ppo.value_learning_rate)
        self.assertEqual(_greedy_actions(loaded, _env()), _greedy_actions(agent, _env()))

    def test_another_rule_set_is_refused(self):
        agent = PPOAgent(len(XFERS), PPOConfig.xrlflow(), seed=0)
        agent.build(_env())
        save_policy(agent, self.dir, PolicyInfo(ppo=PPOConfig.xrlflow().__dict__,
                                                rules="default", num_xfers=len(XFERS),
                                                max_locations=200))
        builtin = XferSet.from_name("builtin")
        with self.assertRaisesRegex(ValueError, "rule set"):
            load_policy(self.dir, _env(xfers=builtin))

    def test_an_empty_folder_is_no_policy(self):
        with self.assertRaisesRegex(ValueError, "no policy checkpoint"):
            load_policy(self.dir, _env())


class ZeroShotTest(absltest.TestCase):

    def test_rows_hold_the_policy_beside_the_baselines(self):
        agent = PPOAgent(len(XFERS), PPOConfig.xrlflow(), seed=0)
        graphs = {"small": lambda: zoo.get_graph("small_cnn"),
                  "squeeze": zoo.get_graph("squeezenet1_1")}
        rows = evaluate.zero_shot(agent, graphs, XFERS, COST, EnvConfig(max_steps=5),
                                  taso_budget=5, random_episodes=2)
        self.assertEqual([r.graph for r in rows], ["small", "squeeze"])
        for row, name in zip(rows, ("small_cnn", "squeezenet1_1")):
            greedy = greedy_search(GraphEnv(zoo.get_graph(name), XFERS, COST,
                                            EnvConfig(max_steps=10_000)))
            self.assertAlmostEqual(row.greedy_ms, greedy.final_cost)
            # The step limit gives the policy greedy's steps and half again.
            self.assertGreaterEqual(row.steps, int(np.ceil(1.5 * len(greedy.applied))))
            # The policy's graph is the cheapest on its way: never above the start.
            self.assertLessEqual(row.policy_ms, row.initial_ms)
            self.assertIsNotNone(row.taso_ms)
            self.assertIsNotNone(row.random_ms)
        s = evaluate.zero_shot_summary(rows)
        self.assertEqual(s.graphs, 2)
        self.assertEqual(s.above_initial, 0.0)
        self.assertIn("| small |", evaluate.markdown(rows))

    def test_compare_runs_the_baselines_once_for_all_agents(self):
        agents = {"a": PPOAgent(len(XFERS), PPOConfig.xrlflow(), seed=0),
                  "b": PPOAgent(len(XFERS), PPOConfig.xrlflow(), seed=1)}
        graphs = {"small": zoo.get_graph("small_cnn")}
        calls = []
        real = evaluate.run_baselines

        def counted(env, **kwargs):
            calls.append(env.initial_graph.hash())
            return real(env, **kwargs)

        evaluate.run_baselines = counted
        try:
            rows = evaluate.compare(agents, graphs, XFERS, COST, EnvConfig(max_steps=5),
                                    taso_budget=5, random_episodes=2)
        finally:
            evaluate.run_baselines = real
        self.assertLen(calls, 1)
        for label, agent in agents.items():
            (alone,) = evaluate.zero_shot(agent, graphs, XFERS, COST, EnvConfig(max_steps=5),
                                          taso_budget=5, random_episodes=2)
            (row,) = rows[label]
            for field in ("initial_ms", "policy_ms", "greedy_ms", "taso_ms", "random_ms",
                          "steps", "policy_applied"):
                self.assertEqual(getattr(row, field), getattr(alone, field), (label, field))


def _round(imagined, real):
    """A model-based run's history row: one world-model round with its controller."""
    controller = RoundController(episodes=8, real_return=real, predicted_return=0.0,
                                 imagined_return=imagined, relative_cost=1.0)
    return to_plain(WorldModelRound(round=1, real_steps=10, collection="controller",
                                    collected_return=0.0, vocabulary_known=5, vocabulary_full=5,
                                    train_total=1.0, train_latent_nll=1.0, held_out={},
                                    controller=controller))


class ReportTest(absltest.TestCase):

    def _result(self, seed, policy_ms, agent="mf", interactions=0, history=()):
        rows = [ZeroShotRow(graph="g", ops=10, initial_ms=1.0, policy_ms=policy_ms,
                            greedy_ms=0.9, taso_ms=0.9, random_ms=1.1, policy_seconds=0.1,
                            greedy_seconds=0.1, taso_seconds=1.0, steps=5)]
        run = GeneralistRun(agent=agent, cost_model="analytic/v100", rules="default", seed=seed,
                            episodes=10, interactions=interactions, train_seconds=10.0,
                            eval_seconds=1.0, training_graphs=["t"], held_out=rows,
                            zero_shot=evaluate.zero_shot_summary(rows), finetune=[],
                            policy="p", commit="c",
                            history=list(history))
        # What the report reads is what a result.json holds.
        return GeneralistRun.from_json(run.to_json())

    def _mb(self, seed, policy_ms, history=()):
        return self._result(seed, policy_ms, agent="mb", interactions=500, history=history)

    def test_a_difference_needs_every_seed_beyond_greedy(self):
        better = report.markdown([self._result(0, 0.8), self._result(1, 0.85)])
        self.assertIn("-17.50% [-20.00, -15.00]", better)
        self.assertIn("| better |", better)
        spans = report.markdown([self._result(0, 0.8), self._result(1, 0.95)])
        self.assertIn("range spans greedy", spans)
        same = report.markdown([self._result(0, 0.9), self._result(1, 0.9)])
        self.assertIn("| matches |", same)

    def test_the_model_based_agent_gets_a_column_and_its_summaries(self):
        mb = [self._mb(s, c) for s, c in ((0, 0.95), (1, 1.0))]
        text = report.markdown([self._result(0, 0.8), self._result(1, 0.85)], model_based=mb)
        row = next(line for line in text.splitlines() if line.startswith("| g |"))
        # The policy better than greedy, the model-based agent worse on every seed.
        self.assertTrue(row.endswith("| better | -2.50% [-5.00, +0.00] | worse |"), row)
        self.assertIn("| model-based: within_margin_of_greedy |", text)
        self.assertIn("| model-based: real steps (collection and round evaluations) | 500", text)
        self.assertNotIn("model-based", report.markdown([self._result(0, 0.8)]))

    def test_the_per_round_controllers_imagined_and_real_returns(self):
        rounds = [_round(i, r) for i, r in ((50.0, 1.0), (10.0, 3.0), (30.0, 9.0))]
        mb = [self._mb(0, 0.95, history=rounds[:2]), self._mb(1, 1.0, history=rounds[2:])]
        text = report.markdown([self._result(0, 0.8)], model_based=mb)
        self.assertIn("| model-based: per-round controllers' return, imagined / real "
                      "(median over 3 rounds of all seeds) | +30.0 / +3.0 |", text)
        self.assertNotIn("per-round", report.markdown([self._result(0, 0.8)]))

    def test_fine_tuning_pairs_and_when_scratch_reached_its_own_result(self):
        def tuned(steps, cheapest_steps):
            return FinetunedRun(episodes=3, interactions=30, lr_scale=1.0, greedy_cost_ms=0.91,
                                best_training_cost_ms=0.91, change=-9.0,
                                cheapest_graph_ms=0.905, cheapest_graph_change=-9.5,
                                steps_to_reach=steps,
                                steps_to_reach_cheapest_graph=cheapest_steps)

        scratch = ScratchRun(episodes=30, interactions=400, greedy_cost_ms=0.9,
                             best_training_cost_ms=0.9, change=-10.0, cheapest_graph_ms=0.9,
                             cheapest_graph_change=-10.0, steps_to_own_result=250,
                             steps_to_own_cheapest_graph=200)
        results = []
        for seed, (steps, cheapest) in enumerate(((40, 30), (None, 41))):
            result = self._result(seed, 0.8)
            result.finetune = [FinetuneGraph(graph="g", initial_ms=1.0, scratch=scratch,
                                             finetuned=[tuned(steps, cheapest)])]
            results.append(result)
        text = report.markdown(results)
        self.assertIn("within 10% of its real steps in 1 of 2 (graph, seed) pairs, counting "
                      "final graphs", text)
        self.assertIn("in 1 of 2 (graph, seed) pairs, counting the cheapest graphs", text)
        self.assertIn("after this share of their real steps, per seed: g 0: 0.62 (250), "
                      "1: 0.62 (250).", text)
        # A generalist without NumPy arrays: no route.
        self.assertNotIn("route", text)
        scratch.generalist_route = RouteSummary(steps=9, log_prob=-19.81, off_greedy=4,
                                                new_xfers=[("a", -4.49), ("b", -2.17),
                                                           ("a", -0.04)], route=[])
        text = report.markdown(results)
        self.assertIn("natural log-probabilities of taking exactly those steps: g (0): 9 steps, "
                      "4 of them not its greedy action, log-probability -19.8; 3 with xfers its "
                      "own greedy episode never applies, log-probability -6.7 (a x2 (-4.5 to -0.0), "
                      "b -2.2); g (1): 9 steps", text)
        scratch.generalist_route.new_xfers = []
        self.assertIn("-19.8; 0 with xfers its own greedy episode never applies; g (1)",
                      report.markdown(results))


if __name__ == "__main__":
    absltest.main()
