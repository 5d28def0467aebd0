"""`experiments/baselines.py` writes the per-graph result, the summary table
and Figures 4.1/4.2, with greedy's and TASO's figures the real searches'."""

import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.search import greedy_search

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BUDGET = 30


def _run(results: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, os.path.join(_REPO, "experiments", "baselines.py"),
         "--graphs=small_cnn", f"--taso_budget={_BUDGET}", "--rounds=1", "--warmup=1",
         "--repeats=2", f"--results_dir={results}", *extra],
        capture_output=True, text=True, timeout=300)


class BaselinesScriptTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.results = tempfile.mkdtemp()
        cls.proc = _run(cls.results)

    def setUp(self):
        super().setUp()
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr[-3000:])
        with open(os.path.join(self.results, "small_cnn", "baselines", "result.json")) as f:
            self.result = json.load(f)

    def test_greedy_and_taso_are_the_real_searches(self):
        graph = zoo.get_graph("small_cnn")
        xfers, cost_model = XferSet.from_name("default"), CostModel("analytic")
        env = GraphEnv(graph, xfers, cost_model, EnvConfig(max_steps=NO_STEP_LIMIT))
        episode = greedy_search(env)
        greedy = self.result["greedy"]
        self.assertAlmostEqual(greedy["cost_ms"], episode.final_cost, places=9)
        self.assertEqual(greedy["applied"], [list(a) for a in episode.applied])
        self.assertLess(greedy["cost_ms"], self.result["initial_cost_ms"])
        search = xfers.search(graph, cost_model, alpha=1.05, budget=_BUDGET)
        taso = self.result["taso"]
        self.assertAlmostEqual(taso["cost_ms"], search.best_cost, places=9)
        self.assertEqual(taso["applied"], [list(a) for a in search.applied])
        self.assertEqual(taso["expansions"], search.expansions)
        self.assertEqual([p["best_cost_ms"] for p in taso["trace"]],
                         [c for _, _, c in search.trace])
        # The timed graphs are these graphs.
        variants = self.result["variants"]
        self.assertEqual(variants["greedy"]["measured"]["graph_key"], f"{env.graph.hash():x}")
        self.assertEqual(variants["taso"]["measured"]["graph_key"],
                         f"{search.graph.hash():x}")
        self.assertEqual(variants["original"]["measured"]["graph_key"], f"{graph.hash():x}")

    def test_every_variant_is_timed_in_both_runtimes(self):
        for name in ("original", "greedy", "taso"):
            measured = self.result["variants"][name]["measured"]
            for clock in ("tf/wall", "tf/cpu", "ort/wall", "ort/cpu"):
                self.assertGreater(measured[clock]["median_ms"], 0, (name, clock))
                self.assertLen(measured[clock]["rounds_ms"], 1)

    def test_summary_and_figures(self):
        out = os.path.join(self.results, "baselines")
        with open(os.path.join(out, "baselines.md")) as f:
            table = f.read()
        self.assertIn("| small_cnn | original |", table)
        self.assertIn("| small_cnn | taso", table)
        self.assertIn("TensorRT", table)
        self.assertIn("not run", table)
        self.assertFalse(self.result["tensorrt"]["run"])
        self.assertIn("GPU", self.result["tensorrt"]["reason"])
        for png in ("fig4_1_runtimes.png", "fig4_2_taso_search.png"):
            path = os.path.join(out, png)
            self.assertGreater(os.path.getsize(path), 1000, png)
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_saved_result_is_reused(self):
        path = os.path.join(self.results, "small_cnn", "baselines", "result.json")
        before = os.path.getmtime(path)
        proc = _run(self.results)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertEqual(os.path.getmtime(path), before)
        self.assertIn("reusing", proc.stderr)


if __name__ == "__main__":
    absltest.main()
