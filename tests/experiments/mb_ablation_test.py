"""experiments/mb_ablation.py: the table over seeds, from finished runs.

The runs are written here as train_mb.py's records (`ModelBasedRun`, with
the baselines as `Baselines.to_json`), so the script only reads them back:
no training in this test.
"""

import dataclasses
import json
import os
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point
from tests.results import fixtures
from xflowrl.results import ModelBasedRun, ModelBasedSeconds, RealSteps
from xflowrl.search.record import Baselines, GreedyResult, TasoResult

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCRIPT = os.path.join(_ROOT, "experiments", "mb_ablation.py")


def _result(seed, best_ms, greedy_ms=90.0, invalid=0) -> ModelBasedRun:
    baselines = Baselines(
        greedy=GreedyResult(cost_ms=greedy_ms, seconds=0.1, steps=4, applied=[("fuse", 1)]),
        taso=TasoResult(cost_ms=80.0, seconds=1.0, steps=0, applied=[], alpha=1.05, budget=20,
                        expansions=20, enqueued=30, initial_cost_ms=100.0, trace=[],
                        max_locations=50),
        max_locations=50)
    evaluation = dataclasses.replace(fixtures.episode(best_ms, [["mb", seed]]),
                                     invalid_actions=invalid, steps=5)
    return dataclasses.replace(
        fixtures.mb_run(seed, best_ms, graph="bert"), initial_cost_ms=100.0,
        controller_cost_ms=best_ms + 1.0, controller_cheapest_cost_ms=best_ms, max_steps=50,
        eval_masks="real", baselines=baselines.to_json(), controller={"greedy": evaluation},
        sampled=[evaluation, evaluation],
        real_steps=RealSteps(world_model_rollouts=100, held_out_rollouts=10,
                             round_evaluations=5, evaluation=15),
        seconds=ModelBasedSeconds(world_model=30.0, controller=30.0 + seed,
                                  total=60.0 + seed))


def _write(root, variant, seed, result: ModelBasedRun):
    result.save(os.path.join(root, "bert", "mb_ablation", variant, f"seed_{seed}", "bert",
                             "train_mb", "result.json"))


class MbAblationTest(absltest.TestCase):

    def test_median_and_range_over_every_finished_seed(self):
        root = tempfile.mkdtemp()
        for seed, best in enumerate([91.0, 89.5, 95.0]):
            _write(root, "full", seed, _result(seed, best))
        _write(root, "thesis", 0, _result(0, 99.0, invalid=3))
        # Asking for one seed still tables all three finished seeds of "full".
        proc = entry_point.run(
            [sys.executable, _SCRIPT, f"--results_dir={root}", "--variants=full,thesis",
             "--measure_rounds=0",
             "--seeds=1"], capture_output=True, text=True, timeout=300, check=False)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        out = json.loads(proc.stdout)
        full, thesis = out["variants"]["full"], out["variants"]["thesis"]
        self.assertEqual(full["seeds"], [0, 1, 2])
        for got, want in zip(full["best_change_pct"]["values"], [-9.0, -10.5, -5.0]):
            self.assertAlmostEqual(got, want)
        self.assertAlmostEqual(full["best_change_pct"]["median"], -9.0)
        self.assertAlmostEqual(full["best_change_pct"]["min"], -10.5)
        self.assertAlmostEqual(full["best_change_pct"]["max"], -5.0)
        self.assertAlmostEqual(full["greedy_change_pct"]["median"], -10.0)
        self.assertAlmostEqual(full["taso_change_pct"]["median"], -20.0)
        self.assertAlmostEqual(full["real_steps"]["median"], 130.0)
        # -9.0 is within 1 point of greedy's -10.0; the thesis row's -1.0 is not.
        self.assertTrue(full["within_1_point_of_greedy"])
        self.assertFalse(thesis["within_1_point_of_greedy"])
        # 3 in each of its 3 evaluation episodes (greedy and two sampled).
        self.assertEqual(thesis["invalid_actions"]["median"], 9.0)
        with open(os.path.join(root, "bert", "mb_ablation", "ablation.md")) as f:
            table = f.read()
        self.assertIn("| full |", table)
        self.assertIn("-9.00 [-10.50, -5.00]", table)

    def test_unknown_variant_is_refused(self):
        proc = entry_point.run([sys.executable, _SCRIPT, "--variants=nonsense",
                               f"--results_dir={tempfile.mkdtemp()}"],
                               capture_output=True, text=True, timeout=300, check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("unknown variants ['nonsense']", proc.stderr)


if __name__ == "__main__":
    absltest.main()
