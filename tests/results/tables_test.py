"""xflowrl.results.tables and thesis: the report's tables from rows, with
the thesis' figures beside ours."""

from absl.testing import absltest

from tests.results import fixtures
from xflowrl.results import tables, thesis
from xflowrl.results.layout import BaselineCosts, BaselineRuntimes
from xflowrl.results.measurement import ClockTiming, TimedGraph
from xflowrl.results.sweep import SweepResult, SweepRow


class CellsTest(absltest.TestCase):

    def test_numbers_and_changes(self):
        self.assertEqual(tables.number(None), "-")
        self.assertEqual(tables.number(1.234, ".1f", " ms"), "1.2 ms")
        self.assertEqual(tables.change(9.0, 10.0), "-10.00%")
        self.assertEqual(tables.change(11.0, 10.0, 1), "+10.0%")
        self.assertEqual(tables.change(None, 10.0), "-")
        self.assertEqual(tables.change(1.0, None), "-")

    def test_change_over_seeds(self):
        self.assertEqual(tables.change_over_seeds(9.0, [8.0, 9.5], 3, 10.0),
                         "-10.00% [-20.00%, -5.00%]")
        # One seed: the change alone.
        self.assertEqual(tables.change_over_seeds(9.0, [9.0, 9.0], 1, 10.0), "-10.00%")


class TablesTest(absltest.TestCase):

    def test_agents_table_with_the_thesis_columns(self):
        text = tables.table_agents({"bert": fixtures.graph_row(
            initial_ms=2.0, greedy_ms=1.0, greedy_steps=7, taso_ms=0.9, taso_budget=20,
            random_ms=2.5, mf_ms=1.5, mb_ms=1.02)})
        # Thesis BERT: MF 3.01 and MB 2.98 ms against TASO's 3.06 ms.
        self.assertIn("| bert | 2.000 | -50.00% (7) | -55.00% (20) | +25.00% | -25.00% | "
                      "-49.00% | worse than greedy | worse than greedy | -1.6% | -2.6% |", text)
        self.assertNotIn("median [min, max]", text)

    def test_each_agent_over_its_own_seeds(self):
        # A partial report: two model-free seeds, one model-based seed so far.
        text = tables.table_agents({"bert": fixtures.graph_row(
            initial_ms=2.0, mf_ms=1.5, mb_ms=1.0, seeds=[0, 1], mf_range=[1.4, 1.6],
            mb_range=[1.0, 1.0], mf_seed_ms={"0": 1.4, "1": 1.6}, mb_seed_ms={"0": 1.0})})
        self.assertIn("| -25.00% [-30.00%, -20.00%] | -50.00% |", text)

    def test_measured_table_names_variants_of_one_graph(self):
        row = fixtures.graph_row(
            measured={"original": {"ort/cpu": 10.0}, "greedy": {"ort/cpu": 9.0},
                      "taso": {"ort/cpu": 9.0}},
            measured_iqr={"original": {"ort/cpu": [9.5, 10.5]},
                          "greedy": {"ort/cpu": [8.5, 9.5]}, "taso": {"ort/cpu": [8.5, 9.5]}},
            same_graph={"original": "original", "greedy": "greedy", "taso": "greedy"})
        text = tables.table_measured({"bert": row})
        self.assertIn("| bert | original | +0.00% | 10.00 (9.50-10.50) | +0.00% | 4.41 |", text)
        self.assertIn("| bert | taso (= greedy) | -55.00% | 9.00 (8.50-9.50) | -10.00% | "
                      "3.06 |", text)
        self.assertEqual(tables.table_measured({"bert": fixtures.graph_row()}).count("| bert"),
                         0)

    def test_measured_table_says_when_nothing_was_measured(self):
        text = tables.table_measured({"bert": fixtures.graph_row()})  # no timings
        self.assertTrue(text.startswith("Not measured"), text)
        self.assertNotIn("|", text)

    def test_tables_4_1_and_4_3_say_when_not_run(self):
        self.assertEqual(tables.table_4_1(None, {}), "Table 4.1: not run.\n")
        self.assertEqual(tables.table_4_3(None, "gpu", {}), "Table 4.3: not run.\n")

    def test_table_4_3_beside_the_thesis(self):
        sweep = SweepResult(graph="bert", cost_model="analytic/v100", seeds=2,
                            dream_episodes=64, rules="default", max_locations=50,
                            initial_cost_ms=10.0, seconds=1.0, world_model={},
                            rows=[SweepRow(temperature=0.5, world_model_mean=-1.0,
                                           world_model_std=0.1, real_mean=-2.0, real_std=0.2,
                                           world_model=[-1.1, -0.9], real=[-2.2, -1.8],
                                           applied=[[], []])])
        text = tables.table_4_3(sweep, "gpu", {0.5: [-3.0, -1.0]})
        self.assertIn("| 0.5 | -1.000% ± 0.100 | -2.000% ± 0.200 | -2.00% ± 1.00 | "
                      "-7.75% ± 0.3 | -55.33% ± 6.7 |", text)
        self.assertIn("bert, 2 seed(s) (thesis: BERT, 5)", text)

    def test_summary_lines(self):
        rows = {"gpu": {"bert": fixtures.graph_row(
            mf_vs_greedy="better than greedy", mb_vs_greedy="worse than greedy",
            taso_ms=1.0, greedy_ms=1.0,
            measured={"original": {"ort/cpu": 10.0}, "greedy": {"ort/cpu": 9.0},
                      "model-based": {"ort/cpu": 10.5}})}}
        lines = tables.summary_lines(rows)
        self.assertIn("- GPU-like (analytic/v100), model-free: better than greedy on 1 (bert); "
                      "only matches greedy on 0 (-); worse than greedy on 0 (-).", lines)
        self.assertIn("- GPU-like (analytic/v100): TASO's search equals one-step greedy's cost "
                      "on 1 of 1 graphs (bert).", lines)
        self.assertIn("- GPU-like (analytic/v100): measured ort/cpu change of the optimised "
                      "graphs from -10.0% to +5.0% (negative: faster).", lines)


def _timing(median, q1, q3):
    return ClockTiming(median, q1, q3, q1, q3, [median])


def _baseline(taso_ms=None, **kw):
    fields = dict(cost_model="analytic/cpu", ops=40, initial_ms=10.0, greedy_ms=9.0,
                  greedy_steps=3, greedy_seconds=0.25, taso_ms=taso_ms,
                  taso_budget=100 if taso_ms else None, taso_expansions=57 if taso_ms else None,
                  taso_seconds=1.5 if taso_ms else None, greedy_applied=[], taso_applied=[],
                  taso_initial_ms=None, taso_trace=[])
    fields.update(kw)
    return BaselineCosts(**fields)


class BaselinesTableTest(absltest.TestCase):
    """baselines.py's summary: the searches, then each variant's timings."""

    def test_searches_and_runtimes(self):
        costs = {"bert": _baseline(taso_ms=8.1), "mine": _baseline()}
        timed = {"tf/wall": _timing(20.0, 19.0, 21.0), "ort/cpu": _timing(10.0, 9.5, 10.5)}
        faster = {"tf/wall": _timing(15.0, 14.0, 16.0), "ort/cpu": _timing(12.5, 12.0, 13.0)}
        runtimes = {
            "bert": BaselineRuntimes(
                variants={"original": TimedGraph("a", 40, 10.0, timed),
                          "greedy": TimedGraph("b", 38, 9.0, faster),
                          "taso": TimedGraph("b", 38, 8.1, faster)},
                thesis_gpu_ms={"tf": 3.0, "taso": 2.0, "trt": 1.0}),
            "mine": BaselineRuntimes(
                variants={"original": TimedGraph("c", 40, 10.0, {}),
                          "greedy": TimedGraph("d", 39, 9.0, {})},
                thesis_gpu_ms=None)}
        text = tables.baselines_markdown(costs, runtimes, "not here")
        lines = text.splitlines()
        self.assertIn("TensorRT: not here.", lines[2])
        self.assertIn("| bert | 40 | analytic/cpu | 10.0000 | 9.0000 (3, 0.2) | "
                      "8.1000 (100, 57, 1.5) | -10.00% |", lines)
        self.assertIn("| mine | 40 | analytic/cpu | 10.0000 | 9.0000 (3, 0.2) | skipped | - |",
                      lines)
        self.assertIn("| bert | original | 20.00 (19.00-21.00) | - | - | 10.00 (9.50-10.50) | "
                      "+0.0% | +0.0% | TF 3.0 | not run (thesis: 1.0) |", lines)
        # TASO found greedy's graph: said so, with the same timings.
        self.assertIn("| bert | taso (= greedy) | 15.00 (14.00-16.00) | - | - | "
                      "12.50 (12.00-13.00) | -25.0% | +25.0% | TASO 2.0 |  |", lines)
        # Nothing timed, no thesis figures: dashes, and no TASO row.
        self.assertIn("| mine | greedy | - | - | - | - | - | - | - (not reported) |  |", lines)
        self.assertFalse(any(line.startswith("| mine | taso") for line in lines))
        self.assertIn("Thesis speed-up of TASO's graph over TensorFlow (GPU): bert 1.50x.", lines)
        # Neither graph ran equality saturation: no columns or rows of it.
        self.assertIn("# Baselines: original, one-step greedy and TASO's search "
                      "(Figures 4.1, 4.2)", lines)
        self.assertNotIn("eqsat", text)
        self.assertIn("|---|---|---|---|---|---|---|", lines)

    def test_equality_saturation_where_it_ran(self):
        eqsat = dict(eqsat_ms=8.55, eqsat_seconds=16.94, eqsat_time_limit_s=1.0,
                     eqsat_stop_reason="time_limit", eqsat_e_nodes=7288,
                     eqsat_handed_over="ilp")
        costs = {"bert": _baseline(taso_ms=8.1, **eqsat), "old": _baseline()}
        timed = {"ort/cpu": _timing(10.0, 9.5, 10.5)}
        runtimes = {
            "bert": BaselineRuntimes(
                variants={"original": TimedGraph("a", 40, 10.0, timed),
                          "greedy": TimedGraph("b", 38, 9.0, timed),
                          "taso": TimedGraph("c", 38, 8.1, timed),
                          "eqsat": TimedGraph("b", 38, 8.55, timed)},
                thesis_gpu_ms={"tf": 3.0, "taso": 2.0, "trt": 1.0}),
            "old": BaselineRuntimes(
                variants={"original": TimedGraph("d", 40, 10.0, timed),
                          "greedy": TimedGraph("e", 39, 9.0, timed)},
                thesis_gpu_ms=None)}
        lines = tables.baselines_markdown(costs, runtimes, "not here").splitlines()
        self.assertIn("# Baselines: original, one-step greedy, TASO's search and equality "
                      "saturation (Figures 4.1, 4.2)", lines)
        self.assertIn("| graph | ops | cost model | initial est. ms | greedy est. ms (steps, s) "
                      "| TASO est. ms (budget, expansions, s) | TASO vs greedy | eqsat est. ms "
                      "(time limit, stop, e-nodes, extraction, s) | eqsat vs greedy |", lines)
        self.assertIn("|---|---|---|---|---|---|---|---|---|", lines)
        self.assertIn("| bert | 40 | analytic/cpu | 10.0000 | 9.0000 (3, 0.2) | "
                      "8.1000 (100, 57, 1.5) | -10.00% | "
                      "8.5500 (1 s, time_limit, 7288, ilp, 16.9) | -5.00% |", lines)
        # A graph where it was skipped: dashes.
        self.assertIn("| old | 40 | analytic/cpu | 10.0000 | 9.0000 (3, 0.2) | skipped | - "
                      "| - | - |", lines)
        # Its graph timed, named as greedy's where it is greedy's; the
        # thesis has no figure of it.
        self.assertIn("| bert | eqsat (= greedy) | - | - | - | 10.00 (9.50-10.50) | - | "
                      "+0.0% | - (not in the thesis) |  |", lines)
        self.assertFalse(any(line.startswith("| old | eqsat") for line in lines))


class ThesisTest(absltest.TestCase):

    def test_baseline_columns(self):
        self.assertEqual(thesis.thesis_baseline_ms("bert"),
                         {"tf": 4.41, "trt": 3.81, "taso": 3.06})
        self.assertIsNone(thesis.thesis_baseline_ms("small_cnn"))
        self.assertEqual(set(thesis.THESIS_MS), set(thesis.THESIS_GRAPHS))


if __name__ == "__main__":
    absltest.main()
