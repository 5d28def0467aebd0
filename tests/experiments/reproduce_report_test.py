"""experiments/reproduce_report.py over seeds: median and range per agent
cell, the median seed's run for everything else, and differences called
only where ranges over seeds do not overlap.

The runs are result files written here by hand (of the entry points'
shape, only the fields the report reads): no training in this test.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

from absl.testing import absltest, parameterized

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "experiments"))

import reproduce_budgets  # pylint: disable=wrong-import-position
import reproduce_report as report  # pylint: disable=wrong-import-position

GRAPH = "bert"


def _write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f)


def _baselines(greedy_ms=90.0):
    return {"cost_model": "analytic/v100", "ops": 10, "initial_cost_ms": 100.0,
            "greedy": {"cost_ms": greedy_ms, "steps": 4, "seconds": 0.1,
                       "applied": [["fuse", 1]]},
            "taso": {"cost_ms": greedy_ms, "budget": 20, "expansions": 20, "seconds": 1.0,
                     "applied": [], "trace": []}}


def _mf(seed, cost):
    return {"seed": seed, "agent_cost_ms": cost, "initial_cost_ms": 100.0,
            "baselines": {"random": {"cost_ms": 101.0}}, "interactions": 100 + seed,
            "steps_to_final_cost": 50, "episodes": 10, "train_seconds": 10.0 + seed,
            "optimize_seconds": 0.1, "agent_applied": [["mf", seed]],
            "history": [{"episode": 1, "mean_reward": 0.0}, {"episode": 2, "mean_reward": 1.0}]}


def _mb(seed, cost):
    greedy = {"predicted_return": 0.1, "real_return": 0.2, "invalid_actions": 0}
    return {"seed": seed, "controller_best_cost_ms": cost, "controller_cost_ms": cost + 1.0,
            "initial_cost_ms": 100.0, "baselines": {"greedy": {"cost_ms": 90.0}},
            "real_steps": {"world_model_rollouts": 100 * (seed + 1), "held_out_rollouts": 10,
                           "evaluation": 5, "lockstep_dream": 0},
            "seconds": {"total": 20.0 + seed, "optimize": 0.2},
            "controller_best_applied": [["mb", seed]], "controller": {"greedy": greedy},
            "world_model": {"rounds": [{"real_steps": 100, "held_out_latent_nll": 1.0,
                                        "held_out_reward_mse": 0.5}]}}


def _runs(root, seeds, mf_costs, mb_costs, separate_costs=()):
    """A setting's folder `root` with baselines and, per seed, the agents."""
    _write(os.path.join(root, GRAPH, "baselines", "result.json"), _baselines())
    for i, seed in enumerate(seeds):
        d = report.seed_root(root, seeds, seed)
        _write(os.path.join(d, GRAPH, "train_mf", "result.json"), _mf(seed, mf_costs[i]))
        _write(os.path.join(d, GRAPH, "train_mb", "result.json"), _mb(seed, mb_costs[i]))
        if separate_costs:
            _write(os.path.join(d, "separate_reward", GRAPH, "train_mb", "result.json"),
                   _mb(seed, separate_costs[i]))


class SpreadTest(parameterized.TestCase):

    def test_over_seeds(self):
        self.assertEqual(report.over_seeds([3.0, 1.0, 2.0]), report.Spread(2.0, 1.0, 3.0, 3))
        self.assertEqual(report.over_seeds([4.0, 1.0]).median, 2.5)

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
        self.assertEqual(report.compare(report.over_seeds(a), report.over_seeds(b), "greedy"),
                         want)

    def test_one_seed_keeps_the_old_wording(self):
        self.assertEqual(report.versus(89.0, 90.0), "better than greedy")
        self.assertEqual(report.versus(90.0, 90.0 * (1 + 1e-9)), "only matches greedy")
        self.assertEqual(report.versus(91.0, 90.0), "worse than greedy")

    def test_median_seed(self):
        by_seed = {0: {"c": 3.0}, 1: {"c": 1.0}, 2: {"c": 2.0}}
        self.assertEqual(report.median_seed(by_seed, "c"), 2)
        # An even count: the cheaper of the two middle runs; ties: the smaller seed.
        self.assertEqual(report.median_seed({0: {"c": 4.0}, 1: {"c": 1.0}, 2: {"c": 2.0},
                                             3: {"c": 3.0}}, "c"), 2)
        self.assertEqual(report.median_seed({5: {"c": 1.0}, 4: {"c": 1.0}}, "c"), 4)

    def test_seed_root(self):
        self.assertEqual(report.seed_root("r", [3, 4], 3), "r")
        self.assertEqual(report.seed_root("r", [3, 4], 4), os.path.join("r", "seed_4"))


class ReportOverSeedsTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.results = tempfile.mkdtemp(prefix="reproduce_report_test_")
        self.addCleanup(shutil.rmtree, self.results, ignore_errors=True)
        self.root = os.path.join(self.results, "gpu")

    def test_cells_are_median_and_range_and_runs_the_median_seeds(self):
        seeds = [0, 1, 2]
        _runs(self.root, seeds, mf_costs=[95.0, 92.0, 99.0], mb_costs=[85.0, 91.0, 88.0])
        runs = report.load_runs(self.root, GRAPH, seeds)
        self.assertEqual(sorted(runs.mf_seeds), seeds)
        # Median seeds: model-free 95.0 is seed 0; model-based 88.0 is seed 2.
        self.assertEqual(runs.mf["seed"], 0)
        self.assertEqual(runs.mb["seed"], 2)
        row = report.graph_row("gpu", GRAPH, runs)
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
        stamps = report.run_stamps(self.root, GRAPH, seeds)
        self.assertEqual(stamps["mf"], [["mf", 0]])
        self.assertEqual(stamps["mb"], [["mb", 2]])

    def test_tables_and_summary_show_ranges(self):
        seeds = [0, 1, 2]
        _runs(self.root, seeds, mf_costs=[95.0, 89.0, 99.0], mb_costs=[85.0, 91.0, 88.0],
              separate_costs=[80.0, 82.0, 81.0])
        out = os.path.join(self.results, "report")
        report.write_report(self.results, out, [GRAPH], ["gpu"], [GRAPH], "", [],
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
            rows = json.load(f)["rows"]["gpu"][GRAPH]
        self.assertEqual(rows["mf_range"], [89.0, 99.0])
        self.assertEqual(rows["mb_separate_range"], [80.0, 82.0])

    def test_one_seed_reads_and_writes_as_before(self):
        _runs(self.root, [0], mf_costs=[95.0], mb_costs=[85.0])
        out = os.path.join(self.results, "report")
        report.write_report(self.results, out, [GRAPH], ["gpu"], [], "", [],
                            meta={"mode": "quick"})
        with open(os.path.join(out, "report.md")) as f:
            text = f.read()
        self.assertIn("| -5.00% | -15.00% | worse than greedy | better than greedy |", text)
        self.assertNotIn("median [min, max]", text)
        self.assertNotIn("within the range", text)


class BudgetsTest(absltest.TestCase):

    def test_thesis_budget(self):
        thesis = reproduce_budgets.BUDGETS["thesis"]
        self.assertEqual(thesis.mf_episodes, 2000)
        self.assertEqual(thesis.mb_rounds * thesis.mb_episodes_per_round, 5000)
        self.assertEqual(thesis.mb_dream_episodes, 2200)
        self.assertEqual(thesis.max_steps, reproduce_budgets.FULL.max_steps)
        self.assertEqual(reproduce_budgets.BUDGETS["quick"], reproduce_budgets.QUICK)
        self.assertEqual(reproduce_budgets.BUDGETS["full"], reproduce_budgets.FULL)

    def test_quick_with_another_budget_is_refused(self):
        tmp = tempfile.mkdtemp(prefix="reproduce_flags_test_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        proc = subprocess.run(
            [sys.executable, os.path.join(_ROOT, "experiments", "reproduce.py"), "--quick",
             "--budget=thesis", f"--results_dir={tmp}"], capture_output=True, text=True,
            timeout=120, check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--quick is --budget=quick, not --budget=thesis", proc.stderr)


if __name__ == "__main__":
    absltest.main()
