"""experiments/compare_agents.py: the table from finished agent runs.

The agents' runs are written here as train_mf.py's and train_mb.py's
records (`ModelFreeRun`, `ModelBasedRun`) with the step limit the script
gives the agents, so with --reuse it only reads them back and runs the
baselines itself (SmallCNN: seconds); no training. A run the strict reader
refuses, or one of another step limit, ends the script with the error that
says which folder to remove.
"""

import dataclasses
import json
import os
import shutil
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point
from tests.results import fixtures
from xflowrl.entry_points import RunSettings
from xflowrl.search import with_equal_step_limit

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCRIPT = os.path.join(_ROOT, "experiments", "compare_agents.py")
GRAPH = "small_cnn"
COST = ("--cost_model=analytic", "--profile=v100")
MAX_STEPS = 3   # below 1.5 x greedy's steps on SmallCNN: the agents get more (20)


def _agents_step_limit() -> int:
    """The step limit compare_agents.py gives the agents on GRAPH (as it computes it)."""
    env = with_equal_step_limit(RunSettings(graph=GRAPH, cost_model="analytic", profile="v100",
                                            max_steps=MAX_STEPS).make_env())
    return env.config.max_steps


class CompareAgentsTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.max_steps = _agents_step_limit()

    def setUp(self):
        super().setUp()
        self.results = tempfile.mkdtemp(prefix="compare_agents_test_")
        self.addCleanup(shutil.rmtree, self.results, ignore_errors=True)
        self.mf = dataclasses.replace(fixtures.mf_run(0, 3.0, GRAPH), initial_cost_ms=4.0,
                                      max_steps=self.max_steps, steps_to_final_cost=30,
                                      interactions=120, train_seconds=7.0)
        self.mb = dataclasses.replace(fixtures.mb_run(0, 2.5, GRAPH), initial_cost_ms=4.0,
                                      max_steps=self.max_steps)
        self.mf_path = os.path.join(self.results, GRAPH, "train_mf", "result.json")
        self.mb_path = os.path.join(self.results, GRAPH, "train_mb", "result.json")
        self.mf.save(self.mf_path)
        self.mb.save(self.mb_path)

    def _run(self):
        return entry_point.run(
            [sys.executable, _SCRIPT, f"--graphs={GRAPH}", f"--max_steps={MAX_STEPS}", *COST,
             "--reuse", f"--results_dir={self.results}"],
            cwd=_ROOT, capture_output=True, text=True, timeout=600,
            env=dict(os.environ, PYTHONPATH=_ROOT))

    def test_reads_the_runs_and_writes_the_table(self):
        proc = self._run()
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        out = os.path.join(self.results, "compare_agents")
        with open(os.path.join(out, "result.json")) as f:
            result = json.load(f)
        # An AgentComparison record: the rows under "rows", with their keys.
        self.assertEqual((result["schema"], result["cost_model"]), ("compare_agents",
                                                                   "analytic/v100"))
        rows = result["rows"]
        self.assertLen(rows, 1)
        row = rows[0]
        # The agents' numbers are the records'.
        self.assertEqual(row["graph"], GRAPH)
        self.assertEqual(row["max_steps"], self.max_steps)
        self.assertEqual(row["initial_ms"], 4.0)
        self.assertEqual(row["mb_ms"], self.mb.controller_cost_ms)
        self.assertEqual(row["mb_cheapest_ms"], self.mb.controller_cheapest_cost_ms)
        self.assertEqual(row["mf_ms"], self.mf.agent_cost_ms)
        self.assertEqual(row["mb_real_steps"], self.mb.real_steps.world_model_rollouts
                         + self.mb.real_steps.held_out_rollouts)
        self.assertEqual(row["mf_steps_to_final"], 30)
        self.assertEqual(row["mf_real_steps"], 120)
        self.assertAlmostEqual(row["steps_ratio_mf_over_mb"], 30 / row["mb_real_steps"])
        self.assertFalse(row["equal_final_cost"])
        self.assertEqual((row["mb_seconds"], row["mf_seconds"]), (self.mb.seconds.total, 7.0))
        self.assertAlmostEqual(row["mf_change"], -25.0)
        # The baselines ran here, on the graph.
        self.assertGreater(row["greedy_ms"], 0.0)
        self.assertLessEqual(row["taso_ms"], row["greedy_ms"] + 1e-9)
        self.assertGreaterEqual(row["greedy_steps"], 1)
        with open(os.path.join(out, "result.md")) as f:
            text = f.read()
        self.assertIn(f"| {GRAPH} | 4.000 | {self.max_steps} | 3.500 (-12.50%) | 2.500 | "
                      "3.000 (-25.00%) |", text)
        self.assertIn(f"| {GRAPH} | {row['mb_real_steps']} | 30 (120 in all) |", text)
        with open(os.path.join(out, "compare_agents.png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_a_run_the_reader_refuses_names_the_folder_to_remove(self):
        with open(self.mf_path) as f:
            value = json.load(f)
        with open(self.mf_path, "w") as f:
            json.dump(dict(value, extra=1), f)
        proc = self._run()
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn(f"ValueError: {self.mf_path}: ModelFreeRun has no fields ['extra']; "
                      f"remove {os.path.dirname(self.mf_path)} to rerun it", proc.stderr)

    def test_a_run_of_another_step_limit_is_refused(self):
        dataclasses.replace(self.mb, max_steps=self.max_steps + 1).save(self.mb_path)
        proc = self._run()
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn(f"ValueError: {self.mb_path}: its agent had step limit "
                      f"{self.max_steps + 1}, not {self.max_steps}", proc.stderr)


if __name__ == "__main__":
    absltest.main()
