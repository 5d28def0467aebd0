"""benchmarks/model_plan_bench.py as a user runs it (a subprocess, one
setting, one seed, a small corpus, a few training steps): the row and the
summary, and the engine planner's figures reused only from rows of the same
prior."""

import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SETTING = "squeezenet1_1/generated/analytic-v100"
# A marker no bisection of a 20-step budget can give.
_REUSED = 12345


def _run(rows, *extra):
    return subprocess.run(
        [sys.executable, os.path.join(_ROOT, "benchmarks", "model_plan_bench.py"),
         f"--settings={_SETTING}", "--seeds=0", "--corpus_families=squeezenet",
         "--corpus_real_steps=10", "--train_steps=2", "--simulations=4", "--root_actions=4",
         "--check_simulations=2", "--engine_real_steps=20", f"--rows={rows}", *extra],
        capture_output=True, text=True, cwd=_ROOT, timeout=900)


def _rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class ModelPlanBenchTest(absltest.TestCase):

    def test_engine_figures_reused_only_under_the_same_prior(self):
        with tempfile.TemporaryDirectory() as folder:
            rows = os.path.join(folder, "rows.jsonl")
            # A row of an older configuration, written before the prior was a
            # field (read as "cost"): its engine figures are a marker.
            old = {"setting": _SETTING, "seed": 0,
                   "config": {"engine_real_steps": 20, "train_steps": -1},
                   "engine_change_pct": -1.0, "engine_real_steps": _REUSED,
                   "engine_real_steps_to_best": _REUSED, "engine_seconds": 0.0,
                   "engine_route_length": 0}
            with open(rows, "w") as f:
                f.write(json.dumps(old) + "\n")

            done = _run(rows, "--engine_prior=cost")
            self.assertEqual(done.returncode, 0, done.stderr[-2000:])
            line = json.loads(done.stdout)[0]
            self.assertEqual(line["setting"], _SETTING)
            self.assertTrue(line["replayed"])
            self.assertTrue(line["not_worse_than_greedy"])
            row = _rows(rows)[-1]
            self.assertEqual(row["config"]["engine_prior"], "cost")
            self.assertEqual(row["config"]["check_simulations"], 2)
            self.assertEqual(row["engine_real_steps_to_best"], _REUSED)   # reused

            done = _run(rows, "--engine_prior=xfer")
            self.assertEqual(done.returncode, 0, done.stderr[-2000:])
            written = _rows(rows)
            self.assertLen(written, 3)
            row = written[-1]
            self.assertEqual(row["config"]["engine_prior"], "xfer")
            # Run, not reused: within its budget, at or below greedy's cost.
            self.assertLessEqual(row["engine_real_steps_to_best"], row["engine_real_steps"])
            self.assertLess(row["engine_real_steps"], _REUSED)
            self.assertLessEqual(row["engine_change_pct"], line["greedy"] + 1e-6)


if __name__ == "__main__":
    absltest.main()
