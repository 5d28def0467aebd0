"""`experiments/baselines.py` writes the per-graph result, the summary table
and Figures 4.1/4.2, with greedy's, TASO's and equality saturation's
figures the real searches'; results written before equality saturation was
a baseline still render, and `--eqsat_time_limit=0` skips it.

Equality saturation runs for 1 s here; its ILP extraction adds up to 15 s
(`EqsatConfig.ilp_time_limit_s`), most of the time this test adds."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

from absl.testing import absltest
import numpy as np

from tests import entry_point
from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet, graph_from_data
from xflowrl.entry_points import RunSettings
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.measure.ort_runtime import run_onnx
from xflowrl.onnx_io import to_onnx
from xflowrl.results import RecordError
from xflowrl.results.figures import figure_baseline_runtimes
from xflowrl.results.layout import baseline_costs, baseline_runtimes
from xflowrl.results.tables import baselines_markdown
from xflowrl.search import Baselines, greedy_search

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BUDGET = 30
_EQSAT_SECONDS = 1.0


def _run(results: str, *extra: str, eqsat_seconds: float = _EQSAT_SECONDS,
         taso_budget: int = _BUDGET) -> subprocess.CompletedProcess:
    return entry_point.run(
        [sys.executable, os.path.join(_REPO, "experiments", "baselines.py"),
         "--graphs=small_cnn", f"--taso_budget={taso_budget}",
         f"--eqsat_time_limit={eqsat_seconds}", "--rounds=1", "--warmup=1",
         "--repeats=2", f"--results_dir={results}", *extra],
        capture_output=True, text=True, timeout=300)


def _load(results: str) -> dict:
    with open(os.path.join(results, "small_cnn", "baselines", "result.json")) as f:
        return json.load(f)


class BaselinesScriptTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.results = tempfile.mkdtemp()
        cls.proc = _run(cls.results)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.results, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr[-3000:])
        self.result = _load(self.results)

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

    def test_eqsat_is_a_baseline_and_a_timed_variant(self):
        eqsat = self.result["eqsat"]
        self.assertEqual(eqsat["time_limit_s"], _EQSAT_SECONDS)
        self.assertEqual(self.result["settings"]["eqsat_time_limit"], _EQSAT_SECONDS)
        self.assertLessEqual(eqsat["cost_ms"], self.result["initial_cost_ms"])
        self.assertIn(eqsat["handed_over"], ("ilp", "greedy", "descent", "original"))
        self.assertGreater(eqsat["e_nodes"], 0)
        # The record reads back, and its graph is the one estimated and timed.
        record = Baselines.from_json(self.result)
        self.assertIsNotNone(record.eqsat)
        graph = graph_from_data(eqsat["graph"])
        self.assertAlmostEqual(graph.cost(CostModel("analytic")), eqsat["cost_ms"], places=9)
        variant = self.result["variants"]["eqsat"]
        self.assertEqual(variant["cost_ms"], eqsat["cost_ms"])
        self.assertIsNone(variant["steps"])
        self.assertEqual(variant["ops"], graph.num_ops())
        self.assertEqual(variant["measured"]["graph_key"], f"{graph.hash():x}")
        # Its outputs are the original's (same weights and inputs as timed).
        source = RunSettings(graph="small_cnn").source()
        weights, feeds = source.weights(0), source.inputs(0)
        want = run_onnx(to_onnx(zoo.get_graph("small_cnn"), weights, check=False), feeds)
        got = run_onnx(to_onnx(graph, weights, check=False), feeds)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5)

    def test_every_variant_is_timed_in_both_runtimes(self):
        for name in ("original", "greedy", "taso", "eqsat"):
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
        self.assertIn("| small_cnn | eqsat", table)
        self.assertIn("eqsat vs greedy |", table)
        row = next(line for line in table.splitlines()
                   if line.startswith(f"| small_cnn | {self.result['ops']} |"))
        self.assertIn(f"{self.result['eqsat']['cost_ms']:.4f} ({_EQSAT_SECONDS:g} s, ", row)
        self.assertIn("TensorRT", table)
        self.assertIn("not run", table)
        self.assertFalse(self.result["tensorrt"]["run"])
        self.assertIn("GPU", self.result["tensorrt"]["reason"])
        for png in ("fig4_1_runtimes.png", "fig4_2_taso_search.png"):
            path = os.path.join(out, png)
            self.assertGreater(os.path.getsize(path), 1000, png)
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_a_result_from_before_eqsat_is_refused(self):
        old = dict(self.result)
        del old["eqsat"]
        with self.assertRaisesRegex(RecordError, r"^r.json: a baselines record without "
                                                 r"\['eqsat'\]$"):
            Baselines.from_json(old, where="r.json")
        with self.assertRaises(KeyError):
            baseline_costs(old)

    def test_result_where_eqsat_did_not_run_renders_without_it(self):
        # --eqsat_time_limit=0: its record null, no variant of it.
        skipped = dict(self.result, eqsat=None, variants=dict(self.result["variants"]))
        del skipped["variants"]["eqsat"]
        self.assertIsNone(Baselines.from_json(skipped).eqsat)
        costs = {"small_cnn": baseline_costs(skipped)}
        runtimes = {"small_cnn": baseline_runtimes(skipped)}
        self.assertIsNone(costs["small_cnn"].eqsat_ms)
        table = baselines_markdown(costs, runtimes, "not run")
        self.assertIn("| small_cnn | taso", table)
        self.assertNotIn("eqsat", table)
        out = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, out, ignore_errors=True)
        panels = figure_baseline_runtimes(runtimes, os.path.join(out, "fig4_1.png"))
        self.assertEqual([list(p.heights) for p in panels],
                         [["original", "greedy", "taso"]] * len(panels))
        self.assertGreater(os.path.getsize(os.path.join(out, "fig4_1.png")), 1000)

    def test_eqsat_time_limit_0_skips_it_and_is_a_setting_to_match(self):
        results = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, results, ignore_errors=True)
        # A saved result that matches every setting of the run below but
        # equality saturation's time limit: not reused.
        saved = dict(self.result, settings=dict(self.result["settings"], taso_budget=0,
                                                runtimes=["ort"]))
        os.makedirs(os.path.join(results, "small_cnn", "baselines"))
        with open(os.path.join(results, "small_cnn", "baselines", "result.json"), "w") as f:
            json.dump(saved, f)
        proc = _run(results, "--runtimes=ort", eqsat_seconds=0, taso_budget=0)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("has other settings", proc.stderr)
        result = _load(results)
        self.assertIsNone(result["eqsat"])
        self.assertEqual(list(result["variants"]), ["original", "greedy"])
        self.assertEqual(result["settings"]["eqsat_time_limit"], 0)
        with open(os.path.join(results, "baselines", "baselines.md")) as f:
            self.assertNotIn("eqsat", f.read())

    def test_saved_result_is_reused(self):
        path = os.path.join(self.results, "small_cnn", "baselines", "result.json")
        before = os.path.getmtime(path)
        proc = _run(self.results)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertEqual(os.path.getmtime(path), before)
        self.assertIn("reusing", proc.stderr)


if __name__ == "__main__":
    absltest.main()
