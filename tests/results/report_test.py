"""The reproduction report from a results folder (xflowrl.results: layout,
rows, report): over seeds, the median and range per agent cell, the median
seed's run for everything else, and differences called only where ranges
over seeds do not overlap; report.json read back as the record it is.

The runs are records written here by hand (tests.results.fixtures): no
training in this test.
"""

import json
import os
import re
import shutil
import tempfile

from absl.testing import absltest, parameterized

from tests.results import fixtures
from tests.results.fixtures import GRAPH
from xflowrl.results import RecordError, ReproductionReport, layout, rows, write_report
from xflowrl.results.figures import FIGURES, taso_curve
from xflowrl.results.measurement import ClockTiming, Measurement, SweepTiming, TimedGraph


class SpreadTest(parameterized.TestCase):

    def test_over_seeds(self):
        self.assertEqual(rows.over_seeds([3.0, 1.0, 2.0]), rows.Spread(2.0, 1.0, 3.0, 3))
        self.assertEqual(rows.over_seeds([4.0, 1.0]).median, 2.5)

    @parameterized.parameters(
        # a's range entirely below b's: better; above: worse.
        ([80.0, 85.0], [90.0, 95.0], "better than greedy"),
        ([96.0, 99.0], [90.0, 95.0], "worse than greedy"),
        # overlapping ranges, a point inside a range, touching ranges: no difference.
        ([80.0, 92.0], [90.0, 95.0], "within the range of greedy"),
        ([85.0, 95.0], [90.0, 90.0], "within the range of greedy"),
        ([85.0, 90.0], [90.0, 95.0], "within the range of greedy"),
        # one and the same value on both sides.
        ([90.0, 90.0], [90.0, 90.0], "only matches greedy"))
    def test_compare_calls_a_difference_only_without_overlap(self, a, b, want):
        self.assertEqual(rows.compare(rows.over_seeds(a), rows.over_seeds(b), "greedy"), want)

    def test_one_seed_keeps_the_old_wording(self):
        self.assertEqual(rows.versus(89.0, 90.0), "better than greedy")
        self.assertEqual(rows.versus(90.0, 90.0 * (1 + 1e-9)), "only matches greedy")
        self.assertEqual(rows.versus(91.0, 90.0), "worse than greedy")

    def test_median_seed(self):
        def cost(r):
            return r["c"]
        by_seed = {0: {"c": 3.0}, 1: {"c": 1.0}, 2: {"c": 2.0}}
        self.assertEqual(layout.median_seed(by_seed, cost), 2)
        # An even count: the cheaper of the two middle runs; ties: the smaller seed.
        self.assertEqual(layout.median_seed({0: {"c": 4.0}, 1: {"c": 1.0}, 2: {"c": 2.0},
                                             3: {"c": 3.0}}, cost), 2)
        self.assertEqual(layout.median_seed({5: {"c": 1.0}, 4: {"c": 1.0}}, cost), 4)

    def test_seed_root(self):
        self.assertEqual(layout.seed_root("r", [3, 4], 3), "r")
        self.assertEqual(layout.seed_root("r", [3, 4], 4), os.path.join("r", "seed_4"))


def _timed(key, ms):
    return TimedGraph(graph_key=key, ops=3, estimated_ms=1.0, measured={
        "ort/cpu": ClockTiming(median_ms=ms, q1_ms=ms - 0.5, q3_ms=ms + 0.5, min_ms=ms - 1,
                               max_ms=ms + 1, rounds_ms=[ms])})


class ReportOverSeedsTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.results = tempfile.mkdtemp(prefix="reproduce_report_test_")
        self.addCleanup(shutil.rmtree, self.results, ignore_errors=True)
        self.root = os.path.join(self.results, "gpu")

    def test_cells_are_median_and_range_and_runs_the_median_seeds(self):
        seeds = [0, 1, 2]
        fixtures.write_runs(self.root, seeds, mf_costs=[95.0, 92.0, 99.0],
                            mb_costs=[85.0, 91.0, 88.0])
        runs = layout.load_runs(self.root, GRAPH, seeds)
        self.assertEqual(sorted(runs.mf_seeds), seeds)
        # Median seeds: model-free 95.0 is seed 0; model-based 88.0 is seed 2.
        self.assertEqual(runs.mf.seed, 0)
        self.assertEqual(runs.mb.seed, 2)
        row = rows.graph_row("gpu", GRAPH, runs)
        self.assertEqual(row.seeds, seeds)
        self.assertEqual(row.mf_ms, 95.0)
        self.assertEqual(row.mf_range, [92.0, 99.0])
        self.assertEqual(row.mb_ms, 88.0)
        self.assertEqual(row.mb_range, [85.0, 91.0])
        self.assertEqual(row.mf_seed_ms, {"0": 95.0, "1": 92.0, "2": 99.0})
        # Everything else is the median seed's run.
        self.assertEqual(row.mf_interactions, 100)
        self.assertEqual(row.mb_applied, [["mb", 2]])
        self.assertEqual(row.mb_real_steps, 300 + 10 + 5)
        # Greedy (90) lies inside model-based's range: not "better", though
        # its median is; model-free's range is all above greedy's.
        self.assertEqual(row.mb_vs_greedy, "within the range of greedy")
        self.assertEqual(row.mf_vs_greedy, "worse than greedy")
        self.assertEqual(row.mb_vs_mf, "better than model-free")
        stamps = layout.run_stamps(self.root, GRAPH, seeds)
        self.assertEqual(stamps["mf"], [["mf", 0]])
        self.assertEqual(stamps["mb"], [["mb", 2]])

    def test_tables_and_summary_show_ranges(self):
        seeds = [0, 1, 2]
        fixtures.write_runs(self.root, seeds, mf_costs=[95.0, 89.0, 99.0],
                            mb_costs=[85.0, 91.0, 88.0], separate_costs=[80.0, 82.0, 81.0])
        out = os.path.join(self.results, "report")
        write_report(self.results, out, [GRAPH], ["gpu"], [GRAPH], "", [],
                     meta={"mode": "quick"}, seeds=seeds)
        with open(os.path.join(out, "report.md")) as f:
            text = f.read()
        self.assertIn("Agents over 3 seeds (0, 1, 2): median [min, max].", text)
        self.assertIn("Agents: median [min, max] over 3 seeds (0, 1, 2)", text)
        # model-free -5% [-11%, -1%], model-based -12% [-15%, -9%].
        self.assertIn("| -5.00% [-11.00%, -1.00%] | -12.00% [-15.00%, -9.00%] | "
                      "within the range of greedy | within the range of greedy |", text)
        self.assertIn("- GPU-like (analytic/v100), model-based against model-free: better "
                      "than model-free on 0 (-); only matches model-free on 0 (-); worse than "
                      "model-free on 0 (-); within the range of model-free on 1 (bert).", text)
        self.assertIn("- GPU-like (analytic/v100), model-free: better than greedy on 0 (-); "
                      "only matches greedy on 0 (-); worse than greedy on 0 (-); within the "
                      "range of greedy on 1 (bert).", text)
        self.assertIn("| bert | separate | -19.000% [-20.000%, -18.000%] |", text)
        with open(os.path.join(out, "report.json")) as f:
            row = json.load(f)["rows"]["gpu"][GRAPH]
        self.assertEqual(row["mf_range"], [89.0, 99.0])
        self.assertEqual(row["mb_separate_range"], [80.0, 82.0])

    def test_one_seed_reads_and_writes_as_before(self):
        fixtures.write_runs(self.root, [0], mf_costs=[95.0], mb_costs=[85.0])
        out = os.path.join(self.results, "report")
        write_report(self.results, out, [GRAPH], ["gpu"], [], "", [], meta={"mode": "quick"})
        with open(os.path.join(out, "report.md")) as f:
            text = f.read()
        self.assertIn("| -5.00% | -15.00% | worse than greedy | better than greedy |", text)
        self.assertNotIn("median [min, max]", text)
        self.assertNotIn("within the range", text)

    def test_report_json_is_the_record_of_the_rows_and_the_figures_are_written(self):
        fixtures.write_runs(self.root, [0], mf_costs=[95.0], mb_costs=[85.0])
        Measurement(graph=GRAPH, setting="gpu", cost_model="analytic/v100", settings={},
                    seconds=1.0, variants={"original": _timed("a", 10.0),
                                           "greedy": _timed("b", 9.0),
                                           "taso": _timed("b", 9.0)}).save(
            os.path.join(self.root, GRAPH, "measured", "result.json"))
        out = os.path.join(self.results, "report")
        meta = {"mode": "quick", "seeds": [0], "commit": "abc"}
        write_report(self.results, out, [GRAPH], ["gpu"], [], "", [], meta=meta)
        report = ReproductionReport.load_dir(out)
        row = rows.graph_row("gpu", GRAPH, layout.load_runs(self.root, GRAPH))
        self.assertEqual(report.rows, {"gpu": {GRAPH: row}})
        self.assertEqual(report.meta, meta)
        self.assertEqual(report.settings, {"gpu": layout.SETTINGS["gpu"]})
        # The measured medians and which variants share a graph.
        self.assertEqual(row.measured["greedy"], {"ort/cpu": 9.0})
        self.assertEqual(row.measured_iqr["greedy"], {"ort/cpu": [8.5, 9.5]})
        self.assertEqual(row.same_graph["taso"], "greedy")
        self.assertEqual(report.figures, FIGURES)
        for name in FIGURES.values():
            with open(os.path.join(out, name), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", name)
        with open(os.path.join(out, "report.md")) as f:
            text = f.read()
        self.assertIn("| bert | greedy | -10.00% | 9.00 (8.50-9.50) | -10.00% |", text)
        self.assertIn("| bert | taso (= greedy) |", text)

    def test_a_sweep_from_before_the_record_is_refused(self):
        # temperature_sweep.py's result.json of an older sweep: a plain object
        # without `rules`, `max_locations`, `cost_model` or the rows' `applied`.
        fixtures.write_runs(self.root, [0], mf_costs=[95.0], mb_costs=[85.0])
        sweep = {"graph": GRAPH, "seeds": 2, "dream_episodes": 8, "initial_cost_ms": 10.0,
                 "seconds": 3.0,
                 "rows": [{"temperature": 0.5, "world_model_mean": -1.0,
                           "world_model_std": 0.5, "real_mean": -2.0, "real_std": 1.0,
                           "world_model": [-1.5, -0.5], "real": [-3.0, -1.0]}],
                 "world_model": {"hidden": 8}}
        path = os.path.join(self.results, "temperature_gpu", GRAPH, "temperature_sweep",
                            "result.json")
        fixtures.write_json(path, sweep)
        out = os.path.join(self.results, "report")
        with self.assertRaisesRegex(RecordError, f"^{re.escape(path)}: no 'schema' or "
                                    r"'schema_version' \(version 0.*run again"):
            write_report(self.results, out, [GRAPH], ["gpu"], [], GRAPH, ["gpu"], meta={})
        # A file that is not a sweep's result is refused, naming it.
        fixtures.write_json(path, dict(sweep, schema="temperature_sweep_seed",
                                       schema_version=1))
        with self.assertRaisesRegex(RecordError, f"{path}: a 'temperature_sweep_seed' record"):
            write_report(self.results, out, [GRAPH], ["gpu"], [], GRAPH, ["gpu"], meta={})

class SweepTest(absltest.TestCase):

    def test_measured_changes_per_temperature(self):
        m = Measurement(graph=GRAPH, setting="gpu", cost_model="analytic/v100", settings={},
                        seconds=1.0, variants={"original": _timed("a", 10.0)},
                        sweep=[SweepTiming(0.5, [_timed("b", 9.0), _timed("c", 11.0)])])
        changes = layout.sweep_measured_changes(m)
        self.assertEqual(list(changes), [0.5])
        self.assertAlmostEqual(changes[0.5][0], -10.0)
        self.assertAlmostEqual(changes[0.5][1], 10.0)
        m.sweep = None
        self.assertEqual(layout.sweep_measured_changes(m), {})
        self.assertEqual(layout.sweep_measured_changes(None), {})

    def test_sweep_folders(self):
        self.assertEqual(layout.sweep_folder("cpu"), "temperature")
        self.assertEqual(layout.sweep_folder("gpu"), "temperature_gpu")


class BaselineCostsTest(absltest.TestCase):

    def test_the_reports_view_of_a_baseline_run(self):
        b = layout.baseline_costs(fixtures.baselines(greedy_ms=80.0))
        self.assertEqual((b.initial_ms, b.greedy_ms, b.greedy_steps, b.taso_ms, b.taso_budget),
                         (100.0, 80.0, 4, 80.0, 20))
        self.assertLen(b.taso_trace, 2)
        without_taso = dict(fixtures.baselines(), taso=None)
        b = layout.baseline_costs(without_taso)
        self.assertIsNone(b.taso_ms)
        self.assertEqual((b.taso_applied, b.taso_trace), ([], []))
        self.assertEqual(layout.random_cost_ms(fixtures.agent_baselines()), 101.0)
        self.assertIsNone(layout.random_cost_ms({"random": None}))
        self.assertEqual(layout.greedy_cost_ms(fixtures.agent_baselines(70.0)), 70.0)

    def test_equality_saturation_where_it_ran(self):
        b = layout.baseline_costs(dict(fixtures.baselines(), eqsat=fixtures.eqsat(85.0)))
        self.assertEqual((b.eqsat_ms, b.eqsat_seconds, b.eqsat_time_limit_s,
                          b.eqsat_stop_reason, b.eqsat_e_nodes, b.eqsat_handed_over),
                         (85.0, 17.0, 1.0, "time_limit", 7288, "ilp"))
        # Skipped (None); a result written before it was a baseline (no key)
        # is not read.
        b = layout.baseline_costs(dict(fixtures.baselines(), eqsat=None))
        self.assertIsNone(b.eqsat_ms)
        self.assertIsNone(b.eqsat_stop_reason)
        without = fixtures.baselines()
        del without["eqsat"]
        with self.assertRaises(KeyError):
            layout.baseline_costs(without)

    def test_a_row_shares_the_summary_fields(self):
        b = layout.baseline_costs(fixtures.baselines(greedy_ms=80.0))
        row = rows.graph_row("gpu", GRAPH, layout.Runs(
            fixtures.baselines(greedy_ms=80.0), fixtures.mf_run(), fixtures.mb_run(), None, [],
            None))
        self.assertEqual({k: getattr(row, k) for k in b.summary()}, b.summary())
        self.assertEqual(list(b.summary()), ["cost_model", "ops", "initial_ms", "greedy_ms",
                                             "greedy_steps", "greedy_seconds", "taso_ms",
                                             "taso_budget", "taso_expansions", "taso_seconds"])

    def test_taso_curve_is_a_step_function_to_the_end(self):
        b = layout.baseline_costs(fixtures.baselines(greedy_ms=90.0))
        self.assertEqual(taso_curve(b), ([1, 5, 20], [1.0, 0.9, 0.9]))
        self.assertEqual(taso_curve(b, "seconds"), ([0.1, 0.5, 1.0], [1.0, 0.9, 0.9]))
        self.assertEqual(taso_curve(layout.baseline_costs(dict(fixtures.baselines(), taso=None))),
                         ([], []))


if __name__ == "__main__":
    absltest.main()
