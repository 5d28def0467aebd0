"""experiments/publish_results.py: the README's results block from a report."""

import os
import shutil
import sys
import tempfile

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "experiments"))

import publish_results  # pylint: disable=wrong-import-position

REPORT = """# Reproduction of the thesis' Chapter 4 (full mode)

Settings: ...

Measured on Some CPU, 2 CPU(s), 2026-11-23 22:09 UTC; project commit abc.

## Summary

- a line

## Table 4.1: graph properties

| a | b |
|---|---|
| 1 | 2 |

## Figures

![fig4_1](fig4_1_baseline_runtimes.png)
"""


class PublishResultsTest(absltest.TestCase):

    def test_block_takes_the_tables_and_demotes_headings(self):
        block = publish_results.report_block(REPORT)
        self.assertTrue(block.startswith("Measured on Some CPU"))
        self.assertIn("#### Summary", block)
        self.assertIn("#### Table 4.1: graph properties\n\n| a | b |", block)
        self.assertNotIn("Figures", block)
        self.assertNotIn("\n## ", block)

    def test_splice_replaces_only_the_marked_block(self):
        readme = (f"intro\n{publish_results.BEGIN}\nold tables\n{publish_results.END}\n"
                  "discussion\n")
        out = publish_results.splice(readme, "new tables")
        self.assertEqual(out, f"intro\n{publish_results.BEGIN}\n\nnew tables\n\n"
                              f"{publish_results.END}\ndiscussion\n")
        # Idempotent: publishing the same report twice changes nothing more.
        self.assertEqual(publish_results.splice(out, "new tables"), out)

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "no <!-- reproduce-report:begin"):
            publish_results.splice("no markers", "x")
        with self.assertRaisesRegex(ValueError, "not a reproduce.py report"):
            publish_results.report_block("# something else\n")

    def test_publish_writes_readme_and_figures(self):
        tmp = tempfile.mkdtemp(prefix="publish_results_test_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        report_dir = os.path.join(tmp, "report")
        os.makedirs(report_dir)
        with open(os.path.join(report_dir, "report.md"), "w") as f:
            f.write(REPORT)
        for name in publish_results.README_FIGURES:
            with open(os.path.join(report_dir, name), "wb") as f:
                f.write(name.encode())
        readme = os.path.join(tmp, "README.md")
        with open(readme, "w") as f:
            f.write(f"x\n{publish_results.BEGIN}\n{publish_results.END}\ny\n")
        publish_results.publish(report_dir, readme, os.path.join(tmp, "figures"))
        with open(readme) as f:
            self.assertIn("#### Table 4.1", f.read())
        for name in publish_results.README_FIGURES:
            with open(os.path.join(tmp, "figures", name), "rb") as f:
                self.assertEqual(f.read(), name.encode())

    def test_scaled_block_puts_the_agents_side_by_side(self):
        def report(scale, mf_ms, mb_ms, episodes):
            row = {"initial_ms": 2.0, "greedy_ms": 1.0, "taso_ms": 1.0, "random_ms": 2.5,
                   "mf_ms": mf_ms, "mb_ms": mb_ms,
                   "mf_vs_greedy": "worse than greedy", "mb_vs_greedy": "only matches greedy",
                   "mb_real_steps": 10 * episodes,
                   "measured": {"original": {"ort/cpu": 10.0},
                                "model-free": {"ort/cpu": 11.0},
                                "model-based": {"ort/cpu": 9.0}}}
            return {"meta": {"budget_scale": scale, "commit": "abc", "date_utc": "d",
                             "wall_seconds": 600,
                             "budget": {"mf_episodes": episodes, "mb_episodes_per_round": 2,
                                        "mb_dream_episodes": 3}},
                    "rows": {"gpu": {"bert": row}}}
        block = publish_results.scaled_block(report(1.0, 1.5, 1.0, 50),
                                             report(4.0, 1.2, 1.0, 200))
        self.assertIn("x4", block)
        self.assertIn("model-free episodes 50 -> 200", block)
        self.assertIn("| gpu | bert | -50.00% | -50.00% | +25.00% | -25.00% (worse than "
                      "greedy) | -40.00% (worse than greedy; +10.00%) | -50.00% (only "
                      "matches greedy) | -50.00% (only matches greedy; -10.00%) | "
                      "500 (2000) |", block)
        readme = (f"a\n{publish_results.SCALED_BEGIN}\n{publish_results.SCALED_END}\nb\n")
        out = publish_results.splice(readme, block, publish_results.SCALED_BEGIN,
                                     publish_results.SCALED_END)
        self.assertIn("| gpu | bert |", out)
        self.assertTrue(out.endswith(f"{publish_results.SCALED_END}\nb\n"))

    def test_agents_block_against_the_baselines(self):
        row = {"initial_ms": 2.0, "greedy_ms": 1.0, "greedy_steps": 7, "taso_ms": 0.9,
               "random_ms": 2.5, "mf_ms": 1.5, "mb_ms": 1.02,
               "mf_vs_greedy": "worse than greedy", "mb_vs_greedy": "worse than greedy",
               "mf_interactions": 400, "mf_steps_to_final": 120, "mb_real_steps": 900,
               "measured": {"original": {"ort/cpu": 10.0}, "greedy": {"ort/cpu": 9.5},
                            "model-based": {"ort/cpu": 9.0}}}
        far = dict(row, mb_ms=1.05)
        block = publish_results.agents_block(
            {"meta": {"commit": "abc", "date_utc": "d", "wall_seconds": 600},
             "rows": {"gpu": {"bert": row, "vit": far}}})
        self.assertIn("commit abc", block)
        # 1.02 ms is 1 point of the initial 2 ms above greedy: within; 1.05 is not.
        self.assertIn("| gpu | bert | -50.00% (7) | -55.00% | +25.00% | -25.00% (worse than "
                      "greedy) | -49.00% (worse than greedy) | yes | 400 (120) / 900 | "
                      "-5.00% / -10.00% |", block)
        self.assertIn("| gpu | vit | -50.00% (7) | -55.00% | +25.00% | -25.00% (worse than "
                      "greedy) | -47.50% (worse than greedy) | no |", block)

    def test_measured_spread_between_two_runs(self):
        def run(mf_ms):
            return {"rows": {"gpu": {"bert": {"measured": {
                "original": {"ort/cpu": 10.0}, "model-free": {"ort/cpu": mf_ms},
                "greedy": {"ort/cpu": 10.0}}}}}}
        spread = publish_results.measured_spread(run(11.0), run(10.5))
        self.assertEqual(spread["largest_at"], "gpu/bert/model-free")
        self.assertAlmostEqual(spread["largest_difference_points"], 5.0)
        self.assertEqual(spread["changes_pct"]["gpu/bert/greedy"], [0.0, 0.0])

    def test_readme_has_the_markers(self):
        with open(os.path.join(_ROOT, "README.md")) as f:
            text = f.read()
        self.assertEqual(text.count(publish_results.BEGIN), 1)
        self.assertLess(text.index(publish_results.BEGIN), text.index(publish_results.END))


if __name__ == "__main__":
    absltest.main()
