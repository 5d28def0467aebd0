"""benchmarks/plan_bench.py as a user runs it (a subprocess, one setting,
one seed, a small budget): the row appended, the JSON summary and the
Markdown table, and a second run resuming from the rows without planning
seed 0 again, adding seed 1 with a TASO run of its own."""

import json
import os
import shutil
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point
from xflowrl.engine import CostModel, graph_from_data

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SETTING = "squeezenet1_1/generated/analytic-v100"


def _run(folder, *extra):
    rows = os.path.join(folder, "rows.jsonl")
    done = entry_point.run(
        [sys.executable, os.path.join(_ROOT, "benchmarks", "plan_bench.py"),
         f"--settings={_SETTING}", "--seeds=0", "--simulations=4", "--root_actions=4",
         "--max_real_steps=300", f"--rows={rows}",
         f"--taso_rows={os.path.join(folder, 'taso_rows.jsonl')}",
         f"--markdown={os.path.join(folder, 'table.md')}", *extra],
        capture_output=True, text=True, cwd=_ROOT, timeout=600)
    return done, rows


class PlanBenchTest(absltest.TestCase):

    def test_plans_summarises_and_resumes(self):
        with tempfile.TemporaryDirectory() as folder:
            done, rows = _run(folder)
            self.assertEqual(done.returncode, 0, done.stderr[-2000:])
            summary = json.loads(done.stdout)
            line = summary["settings"][0]
            self.assertEqual(line["setting"], _SETTING)
            self.assertLessEqual(line["plan_median"], line["greedy"] + 1e-9)
            self.assertTrue(line["not_worse_than_greedy"])
            self.assertLessEqual(line["real_steps_median"], 300 + 1)
            self.assertFalse(line["gap_is_merging"])  # squeezenet repeats no op
            self.assertEqual(summary["counts"]["settings"], 1)
            # TASO's search timed here, its result the list's TASO at alpha
            # 1.05 (the list's TASO is the best of three alphas: no better).
            self.assertGreater(line["taso_here_cpu_seconds"], 0)
            self.assertGreater(line["cpu_seconds_median"], 0)
            self.assertGreaterEqual(line["taso_here_change_pct"], line["taso"] - 1e-6)
            # The flag compares the unrounded seconds; the summary shows them
            # to 0.01 s, so where the two round alike either answer is right.
            planner_s, taso_s = line["cpu_seconds_median"], line["taso_here_cpu_seconds"]
            self.assertIsInstance(line["within_taso_time"], bool)
            if planner_s != taso_s:
                self.assertEqual(line["within_taso_time"], planner_s < taso_s)
            taso_rows = os.path.join(folder, "taso_rows.jsonl")
            with open(taso_rows) as f:
                [taso_line] = f.readlines()
            self.assertEqual(json.loads(taso_line)["seed"], 0)
            self.assertEqual(line["taso_here_runs"], 1)
            with open(rows) as f:
                self.assertLen(f.readlines(), 1)
            with open(os.path.join(folder, "table.md")) as f:
                self.assertIn(f"| `{_SETTING}` |", f.read())
            # Resumed, and the planner's graph added to the GPU check's file.
            exported = os.path.join(folder, "graphs")
            os.makedirs(exported)
            name = _SETTING.replace("/", "__") + ".json"
            shutil.copy(os.path.join(_ROOT, "benchmarks", "data", "lookahead_graphs", name),
                        exported)
            # TASO's row as a file of the older layout holds it (one per
            # setting, no seed): seed 0's, so searched again for seed 1 only.
            old = json.loads(taso_line)
            del old["seed"]
            with open(taso_rows, "w") as f:
                f.write(json.dumps(old) + "\n")
            again, _ = _run(folder, f"--export_graphs={exported}", "--seeds=0,1")
            self.assertEqual(again.returncode, 0, again.stderr[-2000:])
            self.assertNotIn("seed 0:", again.stderr)   # seed 0 not planned again
            self.assertIn("seed 1:", again.stderr)
            with open(os.path.join(exported, name)) as f:
                graphs = json.load(f)["graphs"]
            self.assertEqual(set(graphs), {"original", "greedy", "taso", "eqsat", "plan"})
            rebuilt = graph_from_data(graphs["plan"]["graph"])
            self.assertAlmostEqual(rebuilt.cost(CostModel("analytic", profile="v100")),
                                   graphs["plan"]["estimated_ms"], places=9)
            self.assertAlmostEqual(100 * (graphs["plan"]["estimated_ms"]
                                          / graphs["original"]["estimated_ms"] - 1),
                                   line["plan_median"], places=2)
            with open(rows) as f:
                self.assertLen(f.readlines(), 2)
            with open(taso_rows) as f:
                taso_seeds = [json.loads(t).get("seed") for t in f.readlines()]
            self.assertEqual(taso_seeds, [None, 1])   # seed 0's not searched again
            resumed = json.loads(again.stdout)["settings"][0]
            self.assertEqual(resumed["taso_here_runs"], 2)
            low, high = resumed["plan_range"]
            self.assertBetween(line["plan_median"], low, high)

    def test_unknown_setting_is_refused(self):
        with tempfile.TemporaryDirectory() as folder:
            done = entry_point.run(
                [sys.executable, os.path.join(_ROOT, "benchmarks", "plan_bench.py"),
                 "--settings=nothing/here", f"--rows={os.path.join(folder, 'r.jsonl')}"],
                capture_output=True, text=True, cwd=_ROOT, timeout=300)
            self.assertNotEqual(done.returncode, 0)
            self.assertIn("unknown settings", done.stderr)


    def test_a_row_of_an_older_layout_is_refused(self):
        with tempfile.TemporaryDirectory() as folder:
            rows = os.path.join(folder, "r.jsonl")
            with open(rows, "w") as f:  # a row from before `patience` was a field
                f.write(json.dumps({"setting": _SETTING, "seed": 0,
                                    "config": {"prior": "cost", "simulations": 4}}) + "\n")
            done = entry_point.run(
                [sys.executable, os.path.join(_ROOT, "benchmarks", "plan_bench.py"),
                 f"--settings={_SETTING}", f"--rows={rows}"],
                capture_output=True, text=True, cwd=_ROOT, timeout=300)
            self.assertNotEqual(done.returncode, 0)
            self.assertIn(f"ValueError: {rows}: row 1's config lacks ['c_puct', ", done.stderr)
            self.assertIn("(a row of an older layout); this benchmark reads the current one "
                          "only: run it again with another --rows file", done.stderr)


if __name__ == "__main__":
    absltest.main()
