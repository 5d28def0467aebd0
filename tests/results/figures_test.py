"""experiments/baselines.py's figures, drawn by the library from its runs
read as records (`layout.baseline_runtimes`, `layout.baseline_costs`):
Figure 4.1's bars (`figures.figure_baseline_runtimes`) and Figure 4.2's
curves (`figures.figure_taso`, the report's Figure 4.2 too), each a PNG
written and the data it plotted returned.

The runs are dicts of baselines.py's result.json shape, written here by
hand (tests.results.fixtures): no search, no timing.
"""

import math
import os
import shutil
import tempfile

from absl.testing import absltest

from tests.results import fixtures
from xflowrl.results import layout
from xflowrl.results.figures import (
    RUNTIME_CLOCKS,
    figure_baseline_runtimes,
    figure_taso,
    runtime_bars,
    taso_curve,
)
from xflowrl.results.measurement import ClockTiming

_PNG = b"\x89PNG\r\n\x1a\n"


def _spread(median, q1, q3):
    return {"median_ms": median, "q1_ms": q1, "q3_ms": q3, "min_ms": q1 - 1.0,
            "max_ms": q3 + 1.0, "rounds_ms": [median]}


def _variant(key, cost_ms, **clocks):
    """One variant of baselines.py's "variants": its clocks' spreads by
    "<runtime>_<clock>" (tf_wall=(median, q1, q3))."""
    measured = {c.replace("_", "/"): _spread(*m) for c, m in clocks.items()}
    return {"ops": 10, "cost_ms": cost_ms, "steps": 2, "search_seconds": 0.1,
            "measured": dict(measured, graph_key=key)}


def _result(variants, thesis=None):
    """A baseline run's result.json: the record's keys (fixtures.baselines)
    beside the timings."""
    return dict(fixtures.baselines(), variants=variants, thesis_gpu_ms=thesis)


# bert: the original, greedy's and TASO's graphs on both clocks (TASO found
# greedy's graph), the thesis' figures, no equality saturation (it did
# not run); tiny: a model file (no thesis figures),
# TASO not run, timed in onnxruntime only.
RESULTS = {
    "bert": _result({
        "original": _variant("a", 100.0, tf_wall=(20.0, 19.0, 22.0), ort_cpu=(10.0, 9.0, 11.0)),
        "greedy": _variant("b", 90.0, tf_wall=(18.0, 17.0, 18.5), ort_cpu=(9.0, 8.5, 9.5)),
        "taso": _variant("b", 90.0, tf_wall=(18.0, 17.0, 18.5), ort_cpu=(9.0, 8.5, 9.5)),
    }, thesis={"tf": 4.0, "trt": 3.5, "taso": 3.0}),
    "tiny": _result({
        "original": _variant("c", 5.0, ort_cpu=(2.0, 1.5, 2.5)),
        "greedy": _variant("d", 4.0, ort_cpu=(1.0, 0.5, 1.5)),
    }),
}


class FiguresTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.out = tempfile.mkdtemp(prefix="figures_test_")
        self.addCleanup(shutil.rmtree, self.out, ignore_errors=True)

    def assert_png(self, path):
        self.assertGreater(os.path.getsize(path), 1000)
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), _PNG)

    def test_baseline_runtimes_read_as_timed_graphs(self):
        bert = layout.baseline_runtimes(RESULTS["bert"])
        self.assertEqual(list(bert.variants), ["original", "greedy", "taso"])
        greedy = bert.variants["greedy"]
        self.assertEqual((greedy.graph_key, greedy.ops, greedy.estimated_ms), ("b", 10, 90.0))
        self.assertEqual(greedy.measured["tf/wall"],
                         ClockTiming(median_ms=18.0, q1_ms=17.0, q3_ms=18.5, min_ms=16.0,
                                     max_ms=19.5, rounds_ms=[18.0]))
        self.assertEqual(sorted(greedy.measured), ["ort/cpu", "tf/wall"])
        self.assertEqual(bert.thesis_gpu_ms, {"tf": 4.0, "trt": 3.5, "taso": 3.0})
        tiny = layout.baseline_runtimes(RESULTS["tiny"])
        self.assertEqual(list(tiny.variants), ["original", "greedy"])
        self.assertIsNone(tiny.thesis_gpu_ms)

    def test_figure_4_1_bars_are_runtimes_over_the_originals(self):
        runtimes = {n: layout.baseline_runtimes(r) for n, r in RESULTS.items()}
        path = os.path.join(self.out, "fig4_1.png")
        panels = figure_baseline_runtimes(runtimes, path)
        self.assert_png(path)
        self.assertEqual(panels, runtime_bars(runtimes))
        self.assertEqual([p.clock for p in panels], list(RUNTIME_CLOCKS))
        tf, ort = panels
        self.assertEqual(tf.graphs, ["bert", "tiny"])
        # bert: greedy and TASO 18 ms against 20 ms; IQR 17-18.5 over 20.
        self.assertEqual(tf.heights["original"][0], 1.0)
        self.assertAlmostEqual(tf.heights["greedy"][0], 0.9)
        self.assertAlmostEqual(tf.heights["taso"][0], 0.9)
        self.assertAlmostEqual(tf.below["greedy"][0], 0.05)
        self.assertAlmostEqual(tf.above["greedy"][0], 0.025)
        self.assertAlmostEqual(tf.below["original"][0], 0.05)
        self.assertAlmostEqual(tf.above["original"][0], 0.1)
        # tiny was not timed in TensorFlow: no bars, no original's ms.
        for v in ("original", "greedy", "taso"):
            self.assertTrue(math.isnan(tf.heights[v][1]), v)
            self.assertEqual((tf.below[v][1], tf.above[v][1]), (0, 0))
        self.assertEqual(tf.original_ms, [20.0, None])
        # The thesis' TASO / TF (3.0 / 4.0) beside bert; none for the model file.
        self.assertEqual(tf.thesis[0], 0.75)
        self.assertTrue(math.isnan(tf.thesis[1]))
        # onnxruntime: tiny's greedy at half the original; its TASO not run.
        self.assertEqual(ort.heights["greedy"], [0.9, 0.5])
        self.assertEqual(ort.below["greedy"], [0.05, 0.25])
        self.assertEqual(ort.above["greedy"], [0.05, 0.25])
        self.assertTrue(math.isnan(ort.heights["taso"][1]))
        self.assertEqual(ort.original_ms, [10.0, 2.0])
        self.assertIsNone(ort.thesis)

    def test_figure_4_1_without_equality_saturation_has_no_bars_of_it(self):
        runtimes = {n: layout.baseline_runtimes(r) for n, r in RESULTS.items()}
        for panel in runtime_bars(runtimes):
            self.assertEqual(list(panel.heights), ["original", "greedy", "taso"])
        # Nor TASO's where no graph ran it.
        panels = runtime_bars({"tiny": layout.baseline_runtimes(RESULTS["tiny"])})
        self.assertEqual(list(panels[0].heights), ["original", "greedy"])

    def test_figure_4_1_equality_saturation_beside_the_others(self):
        # small: all four on onnxruntime, equality saturation's graph faster
        # than greedy's; bert (where it did not run) has none: no bar of it.
        small = dict(_result({
            "original": _variant("a", 10.0, ort_cpu=(10.0, 9.0, 11.0)),
            "greedy": _variant("b", 9.0, ort_cpu=(9.0, 8.5, 9.5)),
            "taso": _variant("b", 9.0, ort_cpu=(9.0, 8.5, 9.5)),
            "eqsat": _variant("e", 8.0, ort_cpu=(8.0, 7.0, 8.5)),
        }), eqsat=fixtures.eqsat(8.0))
        runtimes = {"small": layout.baseline_runtimes(small),
                    "bert": layout.baseline_runtimes(RESULTS["bert"])}
        self.assertEqual(list(runtimes["small"].variants),
                         ["original", "greedy", "taso", "eqsat"])
        path = os.path.join(self.out, "fig4_1.png")
        panels = figure_baseline_runtimes(runtimes, path)
        self.assert_png(path)
        tf, ort = panels
        self.assertEqual(list(ort.heights), ["original", "greedy", "taso", "eqsat"])
        self.assertEqual(ort.heights["eqsat"][0], 0.8)
        self.assertAlmostEqual(ort.below["eqsat"][0], 0.1)
        self.assertAlmostEqual(ort.above["eqsat"][0], 0.05)
        self.assertTrue(math.isnan(ort.heights["eqsat"][1]))
        self.assertEqual((ort.below["eqsat"][1], ort.above["eqsat"][1]), (0, 0))
        # small was not timed in TensorFlow: its bars there are NaN.
        self.assertTrue(math.isnan(tf.heights["eqsat"][0]))

    def test_figure_4_1_only_the_clocks_timed_and_no_thesis_without_figures(self):
        runtimes = {"tiny": layout.baseline_runtimes(RESULTS["tiny"])}
        path = os.path.join(self.out, "fig4_1.png")
        panels = figure_baseline_runtimes(runtimes, path)
        self.assert_png(path)
        self.assertEqual([p.clock for p in panels], ["ort/cpu"])
        self.assertIsNone(panels[0].thesis)
        # TensorFlow timed, but no graph with the thesis' figures: no diamonds.
        timed = dict(RESULTS["bert"], thesis_gpu_ms=None)
        panels = runtime_bars({"bert": layout.baseline_runtimes(timed)})
        self.assertEqual(panels[0].clock, "tf/wall")
        self.assertIsNone(panels[0].thesis)

    def test_figure_4_2_curves_are_the_searches(self):
        costs = {"bert": layout.baseline_costs(fixtures.baselines(greedy_ms=90.0)),
                 "resnet18": layout.baseline_costs(fixtures.baselines(greedy_ms=80.0)),
                 "untraced": layout.baseline_costs(dict(fixtures.baselines(), taso=None))}
        path = os.path.join(self.out, "fig4_2.png")
        drawn = figure_taso({"analytic/cpu": costs}, path, "Figure 4.2",
                            by=("expansions", "seconds"))
        self.assert_png(path)
        self.assertEqual(list(drawn), ["analytic/cpu"])
        self.assertEqual(list(drawn["analytic/cpu"]), ["expansions", "seconds"])
        by_exp, by_sec = drawn["analytic/cpu"]["expansions"], drawn["analytic/cpu"]["seconds"]
        # A graph whose search did not run has no line.
        self.assertEqual(list(by_exp), ["bert", "resnet18"])
        self.assertEqual(by_exp["bert"], ([1, 5, 20], [1.0, 0.9, 0.9]))
        self.assertEqual(by_sec["resnet18"], ([0.1, 0.5, 1.0], [1.0, 0.8, 0.8]))
        for g in ("bert", "resnet18"):
            self.assertEqual(by_exp[g], taso_curve(costs[g], "expansions"))
            self.assertEqual(by_sec[g], taso_curve(costs[g], "seconds"))

    def test_figure_4_2_one_panel_per_setting_by_default(self):
        b = layout.baseline_costs(fixtures.baselines())
        path = os.path.join(self.out, "fig4_2.png")
        drawn = figure_taso({"this CPU": {"bert": b}, "GPU-like": {"bert": b}}, path, "4.2")
        self.assert_png(path)
        self.assertEqual({k: list(v) for k, v in drawn.items()},
                         {"this CPU": ["expansions"], "GPU-like": ["expansions"]})
        self.assertEqual(drawn["GPU-like"]["expansions"]["bert"], taso_curve(b))


if __name__ == "__main__":
    absltest.main()
