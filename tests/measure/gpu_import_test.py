"""Tests of importing committed GPU timings into the learned model's data."""

import json
import os
import tempfile

from absl.testing import absltest

from xflowrl.engine import CostModel
from xflowrl.measure import gpu_import

_REPORT = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "data",
                       "cudnn_bench_h200_graph_timing.json")


def _one_graph_report(folder: str, name: str, **changes) -> str:
    with open(_REPORT) as f:
        report = json.load(f)
    report["graphs"] = {name: report["graphs"][name]}
    report.update(changes)
    path = os.path.join(folder, "report.json")
    with open(path, "w") as f:
        json.dump(report, f)
    return path


class ImportTest(absltest.TestCase):

    def test_rebuilt_graphs_carry_the_reports_times(self):
        path = _one_graph_report(tempfile.mkdtemp(), "squeezenet1_1")
        records, info = gpu_import.import_report(path, taso=False)
        with open(_REPORT) as f:
            entry = json.load(f)["graphs"]["squeezenet1_1"]
        by = {(r["variant"], r["mode"]): r for r in records}
        self.assertEqual(sorted(by), [("greedy_analytic_v100", "eager"),
                                      ("greedy_analytic_v100", "graph"),
                                      ("original", "eager"), ("original", "graph")])
        self.assertEqual(by[("original", "graph")]["median_ms"],
                         entry["runtime"]["original"]["graph"]["median_ms"])
        greedy = by[("greedy_analytic_v100", "graph")]
        self.assertEqual(greedy["median_ms"],
                         entry["runtime"]["greedy_analytic_v100"]["graph"]["median_ms"])
        v100 = CostModel("analytic/v100")
        self.assertAlmostEqual(greedy["graph_obj"].cost(v100),
                               entry["search"]["greedy"]["optimising_analytic_v100"]["final_ms"],
                               places=9)
        self.assertIn("squeezenet1_1/greedy_cudnn",
                      info["skipped"]["not rebuildable (cudnn cost or policy)"])

    def test_a_graph_that_does_not_rebuild_is_skipped(self):
        folder = tempfile.mkdtemp()
        path = _one_graph_report(folder, "squeezenet1_1")
        with open(path) as f:
            report = json.load(f)
        report["graphs"]["squeezenet1_1"]["search"]["greedy"]["optimising_analytic_v100"][
            "final_ms"] *= 1.01
        with open(path, "w") as f:
            json.dump(report, f)
        records, info = gpu_import.import_report(path, taso=False)
        self.assertEqual({r["variant"] for r in records}, {"original"})
        self.assertIn("squeezenet1_1/greedy_analytic_v100", info["skipped"]["greedy's graph differs"])

    def test_unfused_reports_are_refused(self):
        path = _one_graph_report(tempfile.mkdtemp(), "squeezenet1_1", fuse_conv_relu=False)
        with self.assertRaisesRegex(ValueError, "fused"):
            gpu_import.import_report(path, taso=False)


if __name__ == "__main__":
    absltest.main()
