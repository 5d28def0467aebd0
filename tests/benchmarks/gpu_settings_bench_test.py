"""benchmarks/gpu_settings_bench.py, the GPU check of the settings where
looking ahead pays, on synthetic exports of small_cnn (no GPU needed):

- the dry run as a user types it (a subprocess): every graph rebuilt and
  checked by the reference executor, the report's fields, a graph that
  computes something else reported as a failed check, identical graphs
  checked once;
- the timed path with a stand-in for TorchProgram (the module's functions):
  rounds interleave the graphs, identical graphs are timed once, the
  verdict, the time guard, the table;
- reading .json.gz, refusing a batch the files lack, and
  experiments/lookahead_settings.py refusing an unknown `--only` name before
  writing anything.
"""

import copy
import gzip
import json
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, DEFAULT_MAX_LOCATIONS, Graph, XferSet, graph_from_data
from xflowrl.executor.reference import execute
from xflowrl.ops import ACTIVATIONS

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BENCHMARKS = os.path.join(_ROOT, "benchmarks")
sys.path.insert(0, _BENCHMARKS)

import gpu_settings  # noqa: E402  pylint: disable=wrong-import-position
from tests import entry_point

GOOD = "small_cnn/default/analytic-v100"
BROKEN = "small_cnn/broken/analytic-v100"


def _greedy_step(graph: Graph, xfers: XferSet, model: CostModel) -> Graph:
    """The cheapest one-substitution rewrite of `graph`."""
    locations = xfers.locations(graph, DEFAULT_MAX_LOCATIONS, 2 * graph.num_ops())
    costs = locations.costs(model)
    xfer, location = np.unravel_index(int(np.nanargmin(costs)), costs.shape)
    return locations.apply(int(xfer), int(location))


def _entry(graph: Graph, model: CostModel) -> Dict:
    return {"estimated_ms": graph.cost(model), "graph": graph.to_data()}


def _broken(data: Dict) -> Dict:
    """The graph with its first convolution's activation changed: another
    function of the same inputs, with the same shapes."""
    data = copy.deepcopy(data)
    conv = next(op for op in data["ops"] if op[0] == "conv2d")
    conv[1]["activation"] = (conv[1]["activation"] + 1) % len(ACTIVATIONS)
    return data


def write_exports(folder: str) -> None:
    """Two settings as experiments/lookahead_settings.py --export_graphs
    writes them. GOOD: greedy's graph one step, TASO's the search's (also
    eqsat's: identical graphs). BROKEN: eqsat's graph computes something
    else, with the lowest estimate, so that it is the setting's best."""
    model = CostModel("analytic", profile="v100")
    xfers = XferSet.default()
    original = zoo.get_graph("small_cnn")
    greedy = _greedy_step(original, xfers, model)
    searched = xfers.search(original, model, budget=20, time_limit_s=10).graph
    assert searched.to_data() != greedy.to_data()
    assert searched.cost(model) < greedy.cost(model)
    good: Dict[str, Any] = {
        "setting": GOOD, "cost_model": "analytic/v100",
        "graphs": {"original": _entry(original, model), "greedy": _entry(greedy, model),
                   "taso": _entry(searched, model), "eqsat": _entry(searched, model)}}
    broken = copy.deepcopy(good)
    broken["setting"] = BROKEN
    broken["graphs"]["eqsat"] = {"estimated_ms": 0.5 * searched.cost(model),
                                 "graph": _broken(searched.to_data())}
    for data in (good, broken):
        with open(os.path.join(folder, data["setting"].replace("/", "__") + ".json"), "w") as f:
            json.dump(data, f)


def _tempdir(test: absltest.TestCase) -> str:
    folder = tempfile.mkdtemp()
    test.addCleanup(shutil.rmtree, folder)
    return folder


class FakeProgram:
    """TorchProgram's interface on the reference executor: `check` as
    TorchProgram's, `time` a fixed time per graph (1 µs per op, plus a
    tiny drift per call) recording the order of the timed calls."""

    calls: List[str] = []

    def __init__(self, graph: Graph, feeds: Dict[str, np.ndarray]):
        self.graph, self.feeds = graph, feeds
        self.label = f"{graph.num_ops()} ops"
        self.count = 0

    def check(self, expected: List[np.ndarray]) -> float:
        return gpu_settings.relative_error(execute(self.graph, self.feeds), expected)

    def time(self, mode: str, warmup: int, repeats: int) -> Dict:
        del warmup
        self.count += 1
        if repeats > 1:
            FakeProgram.calls.append(f"{self.graph.hash()}/{mode}")
        ms = 1e-3 * self.graph.num_ops() * (1.0 if mode == "graph" else 3.0)
        return {"median_ms": ms * (1.0 + 1e-4 * (self.count % 3)), "min_ms": ms, "max_ms": ms,
                "repeats": repeats}


class DryRunTest(absltest.TestCase):
    """The command, as a session runs it here."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp()
        cls.graphs = os.path.join(cls.dir, "graphs")
        os.makedirs(cls.graphs)
        write_exports(cls.graphs)
        out = os.path.join(cls.dir, "report.json")
        cls.result = entry_point.run(
            [sys.executable, os.path.join(_BENCHMARKS, "gpu_settings_bench.py"),
             f"--graphs_dir={cls.graphs}", f"--out={out}", "--dry_run"],
            capture_output=True, text=True, cwd=_ROOT, timeout=120)
        if cls.result.returncode == 0:
            with open(out) as f:
                cls.report = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)
        super().tearDownClass()

    def test_runs(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr[-3000:])

    def test_report_fields(self):
        r = self.report
        self.assertEqual((r["format"], r["version"], r["mode"]),
                         ("xflowrl-gpu-settings-check", 1, "dry_run"))
        self.assertContainsSubset({"device", "date", "commit"}, r["environment"])
        self.assertEqual(r["config"]["batch"], 0)  # every batch
        self.assertEqual(set(r["settings"]), {GOOD, BROKEN})
        self.assertEqual(set(r["files"]), {GOOD, BROKEN})
        self.assertLen(r["files"][GOOD]["sha256"], 64)
        self.assertEqual(r["summary"]["settings"], 2)
        row = r["settings"][GOOD]
        self.assertEqual(list(row["graphs"]), ["original", "greedy", "taso", "eqsat"])
        for g in row["graphs"].values():
            self.assertContainsSubset({"ops", "estimated_ms", "estimated_change_pct",
                                       "same_as", "check"}, g)
            self.assertNotIn("graph", g)  # nothing timed
        self.assertEqual(row["graphs"]["original"]["estimated_change_pct"], 0.0)
        self.assertLess(row["graphs"]["taso"]["estimated_change_pct"],
                        row["graphs"]["greedy"]["estimated_change_pct"])

    def test_outputs_check_passes(self):
        row = self.report["settings"][GOOD]
        for label, g in row["graphs"].items():
            self.assertTrue(g["check"]["passed"], (label, g["check"]))
            self.assertLess(g["check"]["max_relative_error"], 1e-9)
        self.assertEqual(self.report["summary"]["outputs_ok"], 1)

    def test_identical_graphs_checked_once(self):
        graphs = self.report["settings"][GOOD]["graphs"]
        self.assertEqual(graphs["eqsat"]["same_as"], "taso")
        self.assertIsNone(graphs["taso"]["same_as"])

    def test_a_graph_computing_something_else_fails(self):
        row = self.report["settings"][BROKEN]
        check = row["graphs"]["eqsat"]["check"]
        self.assertFalse(check["passed"])
        self.assertGreater(check["max_relative_error"], 1e-3)
        self.assertIn("relative error", check["error"])
        self.assertTrue(row["graphs"]["taso"]["check"]["passed"])
        # The best graph failed: no verdict, and the reason says why.
        self.assertEqual(row["best"], "eqsat")
        self.assertIsNone(row["confirmed"])
        self.assertEqual(row["reason"], "an output check failed")

    def test_table(self):
        table = self.result.stdout[self.result.stdout.index("| setting |"):]
        self.assertIn(f"| `{BROKEN}` | eqsat | -", table)
        self.assertIn("FAILED", table)
        self.assertIn("| eqsat (= taso) |", table)


class TimedPathTest(absltest.TestCase):
    """The CUDA path with FakeProgram standing in for TorchProgram."""

    def setUp(self):
        super().setUp()
        self.dir = _tempdir(self)
        write_exports(self.dir)
        FakeProgram.calls = []
        self.config = gpu_settings.CheckConfig(rounds=3, repeats=5, warmup=1)
        self.env = {"device": "fake", "commit": "test", "date": "today"}

    def _check(self, **kwargs):
        exports = gpu_settings.load_exports(self.dir)
        return gpu_settings.check_all(exports, self.config, environment_info=self.env,
                                      make_program=FakeProgram, **kwargs)

    def test_interleaved_and_deduplicated(self):
        report = self._check(only=[GOOD])
        row = report["settings"][GOOD]
        self.assertEqual(row["rounds"], 3)
        hashes = [graph_from_data(d).hash()
                  for d in self._graph_data(GOOD, ("original", "greedy", "taso"))]
        one_round = [f"{h}/{m}" for h in hashes for m in ("graph", "eager")]
        self.assertEqual(FakeProgram.calls, one_round * 3)  # eqsat = taso: timed once
        graphs = row["graphs"]
        self.assertEqual(graphs["eqsat"]["graph"], graphs["taso"]["graph"])
        self.assertLen(graphs["original"]["graph"]["rounds_ms"], 3)
        self.assertEqual(graphs["original"]["measured_change_pct_graph"], 0.0)
        self.assertAlmostEqual(graphs["greedy"]["measured_change_pct_graph"],
                               100.0 * (26 / 27 - 1), delta=0.1)
        self.assertIn("measured_change_pct_eager", graphs["taso"])
        # TASO's graph: two ops fewer than the original, one fewer than greedy's,
        # far beyond a spread of 0.02%.
        self.assertEqual(row["best"], "taso")
        self.assertTrue(row["confirmed"])
        self.assertGreater(row["measured_gap_pts"], row["noise_pts"])
        self.assertEqual(row["rounds_best_faster"], 3)
        table = gpu_settings.markdown(report)
        self.assertRegex(table, r"\| taso \| -\d+\.\d% \| -7\.\d% \| 0\.0% \| ok \| yes \|")

    def test_a_setting_of_a_cpu_cost_model_is_timed_not_judged(self):
        # The same graphs, their gain estimated for a CPU: the GPU is not
        # the device that estimate is about, so its times confirm nothing.
        path = os.path.join(self.dir, GOOD.replace("/", "__") + ".json")
        with open(path) as f:
            data = json.load(f)
        data["cost_model"] = "analytic/cpu"
        with open(path, "w") as f:
            json.dump(data, f)
        row = self._check(only=[GOOD])["settings"][GOOD]
        self.assertIn("median_ms", row["graphs"]["taso"]["graph"])  # timed
        self.assertIsNone(row["confirmed"])
        self.assertIn("its estimates are for a CPU (analytic/cpu)", row["reason"])
        self.assertFalse(gpu_settings.targets_a_gpu("fitted/cpu"))
        self.assertTrue(gpu_settings.targets_a_gpu("learned/h200"))
        self.assertTrue(gpu_settings.targets_a_gpu("analytic/v100"))

    def test_failed_check_is_not_timed(self):
        row = self._check(only=[BROKEN])["settings"][BROKEN]
        self.assertFalse(row["graphs"]["eqsat"]["check"]["passed"])
        self.assertNotIn("graph", row["graphs"]["eqsat"])
        self.assertIn("graph", row["graphs"]["taso"])
        self.assertIsNone(row["confirmed"])
        self.assertIn(f"- `{BROKEN}`: an output check failed",
                      gpu_settings.markdown(self._check()))

    def test_time_guard(self):
        report = self._check(max_seconds=0.0)
        self.assertEqual(report["settings"], {})
        self.assertEqual(set(report["skipped"]), {GOOD, BROKEN})
        self.assertEqual(report["summary"]["skipped"], 2)
        # A setting under way stops after its second round once time is up.
        data = gpu_settings.read_export(os.path.join(self.dir, GOOD.replace("/", "__")
                                                     + ".json"))
        row = gpu_settings.run_setting(data, self.config, {}, deadline=0.0,
                                       make_program=FakeProgram)
        self.assertEqual(row["rounds"], 2)

    def test_report_file_rewritten(self):
        out = os.path.join(self.dir, "out", "report.json")
        self._check(out=out)
        with open(out) as f:
            self.assertEqual(set(json.load(f)["settings"]), {GOOD, BROKEN})

    def _graph_data(self, setting: str, labels):
        data = gpu_settings.read_export(os.path.join(self.dir, setting.replace("/", "__")
                                                     + ".json"))
        return [data["graphs"][k]["graph"] for k in labels]


class FilesTest(absltest.TestCase):

    def test_gzip_and_batch(self):
        folder = _tempdir(self)
        write_exports(folder)
        path = os.path.join(folder, GOOD.replace("/", "__") + ".json")
        with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
            g.write(f.read())
        os.remove(path)
        exports = gpu_settings.load_exports(folder)
        self.assertEqual([os.path.basename(p) for p, _ in exports],
                         [BROKEN.replace("/", "__") + ".json", GOOD.replace("/", "__")
                          + ".json.gz"])
        self.assertEqual(exports[1][1]["setting"], GOOD)
        self.assertEqual(gpu_settings.file_setting_name(exports[1][0]), GOOD)
        with self.assertRaisesRegex(ValueError, r"batch \[1\], none at 16"):
            gpu_settings.load_exports(folder, batch=16)
        with self.assertRaisesRegex(ValueError, "no file for the settings"):
            gpu_settings.load_exports(folder, only=["nope/default/analytic-cpu"])
        self.assertEqual(gpu_settings.setting_batch({"setting": "a/b/c@b16"}), 16)
        self.assertEqual(gpu_settings.setting_batch({"setting": "a/b/c", "batch": 4}), 4)

    def test_export_only_refuses_unknown_names_before_writing(self):
        folder = _tempdir(self)
        out = os.path.join(folder, "list.json")
        run = entry_point.run(
            [sys.executable, os.path.join(_ROOT, "experiments", "lookahead_settings.py"),
             "--bench_json=" + os.path.join(_ROOT, "reports", "data",
                                            "2026-11-28_search_bench_v100.json"),
             f"--out={out}", f"--export_graphs={os.path.join(folder, 'graphs')}",
             "--only=nope/default/analytic-v100"],
            capture_output=True, text=True, cwd=_ROOT, timeout=120)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("--only: no setting ['nope/default/analytic-v100']", run.stderr)
        self.assertIn("squeezenet1_1/tensat/analytic-v100", run.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertFalse(os.path.exists(os.path.join(folder, "graphs")))


if __name__ == "__main__":
    absltest.main()
