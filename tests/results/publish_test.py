"""xflowrl.results.publish: dated report files under reports/ from a reproduction report."""

import os
import shutil
import tempfile

from absl.testing import absltest

from tests.results import fixtures
from xflowrl.results import publish

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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
        block = publish.report_block(REPORT)
        self.assertTrue(block.startswith("Measured on Some CPU"))
        self.assertIn("### Summary", block)
        self.assertIn("### Table 4.1: graph properties\n\n| a | b |", block)
        self.assertNotIn("Figures", block)
        self.assertNotIn("\n## ", block)

    def test_splice_replaces_only_the_marked_block(self):
        readme = f"intro\n{publish.BEGIN}\nold tables\n{publish.END}\ndiscussion\n"
        out = publish.splice(readme, "new tables")
        self.assertEqual(out, f"intro\n{publish.BEGIN}\n\nnew tables\n\n{publish.END}\n"
                              "discussion\n")
        # Idempotent: publishing the same report twice changes nothing more.
        self.assertEqual(publish.splice(out, "new tables"), out)

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "no <!-- reproduce-report:begin"):
            publish.splice("no markers", "x")
        with self.assertRaisesRegex(ValueError, "not a reproduce.py report"):
            publish.report_block("# something else\n")
        with self.assertRaisesRegex(ValueError, "records no date"):
            publish.report_path({}, "topic")

    def _report_dir(self, tmp, name="report", **meta):
        """A report folder: report.md, report.json with `meta`, the figures."""
        report_dir = os.path.join(tmp, name)
        os.makedirs(report_dir)
        with open(os.path.join(report_dir, "report.md"), "w") as f:
            f.write(REPORT)
        fixtures.report({"gpu": {"bert": fixtures.graph_row()}}, **meta).save(
            os.path.join(report_dir, "report.json"))
        for figure in publish.REPORT_FIGURES:
            with open(os.path.join(report_dir, figure), "wb") as f:
                f.write(figure.encode())
        return report_dir

    def test_report_path_is_dated(self):
        self.assertEqual(publish.report_path({"date_utc": "2026-11-23 23:11"}, "topic", "r"),
                         os.path.join("r", "2026-11-23_topic.md"))

    def test_publish_writes_a_dated_report_with_its_run_and_figures(self):
        tmp = tempfile.mkdtemp(prefix="publish_results_test_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        report_dir = self._report_dir(
            tmp, date_utc="2026-11-23 22:09", commit="abc", mode="full",
            machine="Some CPU, 2 CPU(s)", command="python experiments/reproduce.py --jobs=2",
            wall_seconds=1200)
        reports = os.path.join(tmp, "reports")
        path = publish.publish(report_dir, reports_dir=reports)
        self.assertEqual(path, os.path.join(reports, "2026-11-23_thesis_chapter4.md"))
        with open(path) as f:
            text = f.read()
        self.assertTrue(text.startswith("# The thesis' Chapter 4 reproduced (full mode)\n"))
        for line in ("- Date: 2026-11-23 22:09 UTC", "- Commit: abc",
                     "- Command: `python experiments/reproduce.py --jobs=2`",
                     "- Machine: Some CPU, 2 CPU(s)", "- Wall time: 20 min"):
            self.assertIn(line + "\n", text)
        self.assertIn("### Table 4.1: graph properties", text)
        figures = os.path.join(reports, "figures", "2026-11-23_thesis_chapter4")
        for name in publish.REPORT_FIGURES:
            with open(os.path.join(figures, name), "rb") as f:
                self.assertEqual(f.read(), name.encode())
            self.assertIn(f"(figures/2026-11-23_thesis_chapter4/{name})", text)

    def test_publishing_again_keeps_the_prose_around_the_block(self):
        tmp = tempfile.mkdtemp(prefix="publish_results_test_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        report_dir = self._report_dir(tmp, date_utc="2026-11-23 22:09")
        path = os.path.join(tmp, "run.md")
        with open(path, "w") as f:
            f.write(f"# A run\n\nWhat it says.\n\n{publish.BEGIN}\nold\n{publish.END}\n"
                    "More prose.\n")
        self.assertEqual(publish.publish(report_dir, path), path)
        with open(path) as f:
            text = f.read()
        self.assertTrue(text.startswith("# A run\n\nWhat it says.\n\n"))
        self.assertTrue(text.endswith(f"{publish.END}\nMore prose.\n"))
        self.assertNotIn("old", text)
        self.assertIn("### Summary", text)
        # Idempotent: the same report twice gives the same file.
        publish.publish(report_dir, path)
        with open(path) as f:
            self.assertEqual(f.read(), text)

    def test_publish_agents_and_scaled_write_reports_of_their_own(self):
        tmp = tempfile.mkdtemp(prefix="publish_results_test_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        budget = {"mf_episodes": 50, "mb_episodes_per_round": 2, "mb_dream_episodes": 3}
        for name, scale, date in (("base", 1.0, "2026-11-23 23:11"),
                                  ("x4", 4.0, "2026-11-24 00:05")):
            fixtures.report({"gpu": {"bert": fixtures.graph_row()}}, commit=name,
                            budget_scale=scale, budget=budget, date_utc=date).save(
                os.path.join(tmp, name, "report.json"))
        reports = os.path.join(tmp, "reports")
        agents = publish.publish_agents(os.path.join(tmp, "base"), reports_dir=reports)
        scaled = publish.publish_scaled(os.path.join(tmp, "base"), os.path.join(tmp, "x4"),
                                        reports_dir=reports)
        self.assertEqual(agents, os.path.join(reports, "2026-11-23_model_based_agents.md"))
        self.assertEqual(scaled, os.path.join(reports, "2026-11-24_agents_x4_budget.md"))
        with open(agents) as f:
            text = f.read()
        self.assertIn("- Commit: base", text)
        self.assertIn(f"{publish.AGENTS_BEGIN}\n\nRun at commit base", text)
        with open(scaled) as f:
            text = f.read()
        self.assertIn("- Commit: x4", text)
        self.assertIn("Agents' training budgets x4 (model-free episodes 50 -> 50", text)
        self.assertIn(publish.SCALED_END, text)

    def test_scaled_block_puts_the_agents_side_by_side(self):
        def report(scale, mf_ms, mb_ms, episodes):
            row = fixtures.graph_row(
                initial_ms=2.0, greedy_ms=1.0, taso_ms=1.0, random_ms=2.5, mf_ms=mf_ms,
                mb_ms=mb_ms, mf_vs_greedy="worse than greedy",
                mb_vs_greedy="only matches greedy", mb_real_steps=10 * episodes,
                measured={"original": {"ort/cpu": 10.0}, "model-free": {"ort/cpu": 11.0},
                          "model-based": {"ort/cpu": 9.0}})
            return fixtures.report(
                {"gpu": {"bert": row}}, budget_scale=scale, commit="abc", date_utc="d",
                wall_seconds=600, budget={"mf_episodes": episodes, "mb_episodes_per_round": 2,
                                          "mb_dream_episodes": 3})
        block = publish.scaled_block(report(1.0, 1.5, 1.0, 50), report(4.0, 1.2, 1.0, 200))
        self.assertIn("x4", block)
        self.assertIn("model-free episodes 50 -> 200", block)
        self.assertIn("| gpu | bert | -50.00% | -50.00% | +25.00% | -25.00% (worse than "
                      "greedy) | -40.00% (worse than greedy; +10.00%) | -50.00% (only "
                      "matches greedy) | -50.00% (only matches greedy; -10.00%) | "
                      "500 (2000) |", block)
        readme = f"a\n{publish.SCALED_BEGIN}\n{publish.SCALED_END}\nb\n"
        out = publish.splice(readme, block, publish.SCALED_BEGIN, publish.SCALED_END)
        self.assertIn("| gpu | bert |", out)
        self.assertTrue(out.endswith(f"{publish.SCALED_END}\nb\n"))

    def test_agents_block_against_the_baselines(self):
        row = fixtures.graph_row(
            initial_ms=2.0, greedy_ms=1.0, greedy_steps=7, taso_ms=0.9, random_ms=2.5,
            mf_ms=1.5, mb_ms=1.02, mf_vs_greedy="worse than greedy",
            mb_vs_greedy="worse than greedy", mf_interactions=400, mf_steps_to_final=120,
            mb_real_steps=900, measured={"original": {"ort/cpu": 10.0},
                                         "greedy": {"ort/cpu": 9.5},
                                         "model-based": {"ort/cpu": 9.0}})
        far = fixtures.graph_row(**dict(row.__dict__, mb_ms=1.05))
        block = publish.agents_block(fixtures.report(
            {"gpu": {"bert": row, "vit": far}}, commit="abc", date_utc="d", wall_seconds=600))
        self.assertIn("commit abc", block)
        # 1.02 ms is 1 point of the initial 2 ms above greedy: within; 1.05 is not.
        self.assertIn("| gpu | bert | -50.00% (7) | -55.00% | +25.00% | -25.00% (worse than "
                      "greedy) | -49.00% (worse than greedy) | yes | 400 (120) / 900 | "
                      "-5.00% / -10.00% |", block)
        self.assertIn("| gpu | vit | -50.00% (7) | -55.00% | +25.00% | -25.00% (worse than "
                      "greedy) | -47.50% (worse than greedy) | no |", block)

    def test_agents_block_over_seeds_shows_ranges(self):
        row = fixtures.graph_row(mf_ms=1.5, mf_range=[1.4, 1.6], seeds=[0, 1])
        block = publish.agents_block(fixtures.report({"gpu": {"bert": row}}, seeds=[0, 1]))
        self.assertIn("2 seeds (0, 1)", block)
        self.assertIn("-25.00% [-30.00%, -20.00%] (worse than greedy)", block)

    def test_measured_spread_between_two_runs(self):
        def run(mf_ms):
            return fixtures.report({"gpu": {"bert": fixtures.graph_row(measured={
                "original": {"ort/cpu": 10.0}, "model-free": {"ort/cpu": mf_ms},
                "greedy": {"ort/cpu": 10.0}})}})
        spread = publish.measured_spread(run(11.0), run(10.5))
        self.assertEqual(spread["largest_at"], "gpu/bert/model-free")
        self.assertAlmostEqual(spread["largest_difference_points"], 5.0)
        self.assertEqual(spread["changes_pct"]["gpu/bert/greedy"], [0.0, 0.0])

    def test_readme_test_command_is_the_one_ci_runs(self):
        # The README's test command is what .ci/run runs, verbatim.
        with open(os.path.join(_ROOT, ".ci", "run")) as f:
            ci = [line for line in f.read().splitlines() if "pytest" in line]
        with open(os.path.join(_ROOT, "README.md")) as f:
            readme = f.read().splitlines()
        self.assertLen(ci, 1)
        self.assertTrue(ci[0] in readme, f"README.md has no line {ci[0]!r}")

    def test_every_report_is_indexed(self):
        reports = os.path.join(_ROOT, publish.REPORTS_DIR)
        with open(os.path.join(reports, "README.md")) as f:
            index = f.read()
        for name in sorted(os.listdir(reports)):
            if name.endswith(".md") and name != "README.md":
                self.assertRegex(name, r"^\d{4}-\d\d-\d\d_[a-z0-9_]+\.md$")
                self.assertIn(f"({name})", index, name)


if __name__ == "__main__":
    absltest.main()
