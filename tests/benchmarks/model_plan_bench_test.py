"""benchmarks/model_plan_bench.py as a user runs it (a subprocess, one
setting, one seed, a small corpus, a few training steps): the row and the
summary, a finished row counted as done only under the same configuration
and action space, and the engine planner's figures reused only from a row of
the same prior."""

import json
import os
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point
from xflowrl.planning.model_search import ModelPlanConfig

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SETTING = "squeezenet1_1/generated/analytic-v100"
# Markers no bisection of a 20-step budget can give.
_SAME_PRIOR, _OTHER_PRIOR = 12345, 54321
# Most of a run is TensorFlow tracing the model's training step, which grows
# with the unroll: one model step (`--unroll=1`) still runs every part of
# the loss, and nothing checked here depends on what the model learns.
_UNROLL = 1


def _run(rows, *extra):
    return entry_point.run(
        [sys.executable, os.path.join(_ROOT, "benchmarks", "model_plan_bench.py"),
         f"--settings={_SETTING}", "--seeds=0", "--corpus_families=squeezenet",
         "--corpus_real_steps=10", "--train_steps=2", f"--unroll={_UNROLL}", "--simulations=4",
         "--root_actions=4", "--check_simulations=2", "--engine_real_steps=20",
         f"--rows={rows}", *extra],
        capture_output=True, text=True, cwd=_ROOT, timeout=900)


def _rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _engine_row(marker, **config):
    """A row of another model configuration whose engine figures are `marker`."""
    return {"setting": _SETTING, "seed": 0,
            "config": {"engine_real_steps": 20, "train_steps": -1, **config},
            "engine_change_pct": -1.0, "engine_real_steps": marker,
            "engine_real_steps_to_best": marker, "engine_seconds": 0.0,
            "engine_route_length": 0}


class ModelPlanBenchTest(absltest.TestCase):

    def test_rows_reused_only_under_the_same_prior_and_action_space(self):
        with tempfile.TemporaryDirectory() as folder:
            rows = os.path.join(folder, "rows.jsonl")
            # A finished row of whole-xfer actions alone under the `xfer`
            # prior, written before the action space was a field, of
            # `_run`'s configuration otherwise.
            config = {"corpus_families": "squeezenet", "corpus_real_steps": 10,
                      "train_steps": 2, "unroll": _UNROLL, "simulations": 4,
                      "root_actions": 4, "max_depth": ModelPlanConfig.max_depth,
                      "stop_below": ModelPlanConfig.stop_below,
                      "max_decisions": ModelPlanConfig.max_decisions,
                      "real_root_rewards": True, "check_simulations": 2,
                      "engine_real_steps": 20, "engine_prior": "xfer"}
            finished = {**_engine_row(_SAME_PRIOR), "config": config, "from_greedy": False,
                        "replayed": True,
                        **{key: 1 for key in (
                            "change_pct", "planner_change_pct", "real_steps",
                            "real_steps_to_best", "planner_real_steps", "model_steps",
                            "decisions", "seconds", "corpus_real_steps_total",
                            "train_seconds")}}
            with open(rows, "w") as f:
                f.write(json.dumps(finished) + "\n")
                # A row written before the prior was a field (read as
                # "cost"): were the prior not compared, its figures, the
                # later ones, would be taken.
                f.write(json.dumps(_engine_row(_OTHER_PRIOR)) + "\n")
            # Without the option the finished row counts as done: nothing runs.
            done = _run(rows, "--engine_prior=xfer")
            self.assertEqual(done.returncode, 0, done.stderr[-2000:])
            self.assertLen(_rows(rows), 2)
            # With it, it does not: a row of its own, the engine figures
            # reused from the row of the same prior.
            done = _run(rows, "--engine_prior=xfer", "--single_actions")
            self.assertEqual(done.returncode, 0, done.stderr[-2000:])
            written = _rows(rows)
            self.assertLen(written, 3)
            row = written[-1]
            self.assertTrue(row["config"]["single_actions"])
            self.assertEqual(row["config"]["engine_prior"], "xfer")
            self.assertEqual(row["config"]["check_simulations"], 2)
            self.assertEqual(row["engine_real_steps_to_best"], _SAME_PRIOR)
            (summary,) = json.loads(done.stdout)
            self.assertEqual(summary["setting"], _SETTING)
            self.assertEqual(summary["seeds"], [0])   # the option's row alone
            self.assertTrue(summary["replayed"])
            self.assertTrue(summary["not_worse_than_greedy"])


if __name__ == "__main__":
    absltest.main()
