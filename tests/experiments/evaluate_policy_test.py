"""`experiments/evaluate_policy.py` plays a policy folder on the graphs named
(zoo models, corpus graphs) beside the baselines, estimated and measured;
it refuses what it cannot find."""

import json
import os
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point
from xflowrl import corpus, zoo
from xflowrl.engine import XferSet
from xflowrl.engine.cost import GPU_COST_SPEC
from xflowrl.entry_points import cost_model_from_spec
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.policy import runtime, shipped_policy
from xflowrl.search import greedy_search, with_equal_step_limit

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCRIPT = os.path.join(_REPO, "experiments", "evaluate_policy.py")


class EvaluatePolicyScriptTest(absltest.TestCase):

    def test_shipped_policy_on_a_zoo_model_and_a_corpus_graph(self):
        out = os.path.join(tempfile.mkdtemp(), "eval.json")
        proc = entry_point.run(
            [sys.executable, _SCRIPT, "--graphs=small_cnn,vit/l1h64p16", "--random_episodes=1",
             "--taso_budget=20", "--measure_rounds=1", f"--out={out}"],
            capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        with open(out) as f:
            result = json.load(f)
        rows = result["policies"]["policy"]["rows"]
        self.assertEqual([r["graph"] for r in rows], ["small_cnn", "vit/l1h64p16"])
        xfers, cost = XferSet.default(), cost_model_from_spec(GPU_COST_SPEC)
        policy = runtime.NumpyPolicy.load(shipped_policy())
        for row, graph in zip(rows, (zoo.get_graph("small_cnn"),
                                               corpus.get("vit/l1h64p16"))):
            env = with_equal_step_limit(GraphEnv(graph, xfers, cost, EnvConfig()))
            # The policy's own cheapest graph (greedy's is not handed over here).
            policy.run_episode(env)
            self.assertAlmostEqual(row["policy_ms"], env.cheapest_prefix.cost, places=9)
            self.assertAlmostEqual(row["greedy_ms"], greedy_search(env).final_cost, places=9)
            self.assertIsNotNone(row["taso_ms"])
            self.assertIsNotNone(row["random_ms"])
        summary = result["policies"]["policy"]["summary"]
        self.assertAlmostEqual(summary["mean_cost_vs_initial"],
                               sum(r["policy_ms"] / r["initial_ms"] for r in rows) / 2)
        self.assertAlmostEqual(summary["greedy_mean_cost_vs_initial"],
                               sum(r["greedy_ms"] / r["initial_ms"] for r in rows) / 2)
        self.assertEqual([m["graph"] for m in result["measured"]],
                         ["small_cnn", "vit/l1h64p16"])
        self.assertEqual(set(result["measured"][0]["variants"]), {"initial", "greedy", "policy/0"})
        with open(os.path.splitext(out)[0] + ".md") as f:
            text = f.read()
        self.assertIn("| small_cnn | 27 |", text)
        self.assertIn("greedy: estimated / measured", text)

    def test_two_policies_side_by_side(self):
        out = os.path.join(tempfile.mkdtemp(), "eval.json")
        folder = shipped_policy()
        proc = entry_point.run(
            [sys.executable, _SCRIPT, "--graphs=small_cnn", f"--policy={folder},{folder}",
             "--random_episodes=1", "--taso_budget=5", "--measure_rounds=1", f"--out={out}"],
            capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        with open(out) as f:
            result = json.load(f)
        self.assertEqual(sorted(result["policies"]), ["p1", "p2"])
        costs = [{k: v for k, v in r.items() if not k.endswith("seconds")}
                 for label in ("p1", "p2") for r in result["policies"][label]["rows"]]
        self.assertEqual(costs[0], costs[1])  # the same policy twice
        self.assertEqual(set(result["measured"][0]["variants"]),
                         {"initial", "greedy", "p1/0", "p2/0"})
        with open(os.path.splitext(out)[0] + ".md") as f:
            text = f.read()
        self.assertIn("p1: estimated / measured | p2: estimated / measured |", text)
        self.assertIn(f"p2: policy {folder} on 1 graphs", text)

    def test_refuses_unknown_graphs_and_folders(self):
        for flag, message in (("--graphs=no_such_graph", "neither 'zoo'"),
                              (f"--policy={tempfile.mkdtemp()}", "not a policy folder")):
            proc = entry_point.run([sys.executable, _SCRIPT, flag, "--nomeasure"],
                                   capture_output=True, text=True, timeout=300)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn(message, proc.stderr)


class NumpyRunEpisodeTest(absltest.TestCase):

    def test_only_greedy_and_never_learning(self):
        env = GraphEnv(zoo.get_graph("small_cnn"), XferSet.default(),
                       cost_model_from_spec(GPU_COST_SPEC), EnvConfig(max_steps=5))
        policy = runtime.NumpyPolicy.load(shipped_policy())
        episode = policy.run_episode(env)
        self.assertEqual(episode.applied, runtime.greedy_episode(policy, env).applied)
        for kwargs in ({"greedy": False}, {"learn": True}):
            with self.assertRaisesRegex(ValueError, "only plays greedy"):
                policy.run_episode(env, **kwargs)


if __name__ == "__main__":
    absltest.main()
