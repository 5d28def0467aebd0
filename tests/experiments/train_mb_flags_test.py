"""experiments/train_mb.py's flags become the run's `ModelBasedSettings`.

The end-to-end run (tests/world_model/quick_run_test.py) takes the
defaults; here every flag that says how a run evaluates and hands over is
given a value other than its default, and the settings must carry it. The
script is imported in a child process: its flags are absl's global ones,
which another entry point imported into the test's process would clash
with.
"""

import json
import os
import subprocess
import sys

from absl.testing import absltest

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_PROBE = """
import json, sys
sys.path.insert(0, "experiments")
from absl import flags
import train_mb
for argv in json.loads(sys.argv[1]):
    flags.FLAGS.unparse_flags()  # every flag back to its default
    flags.FLAGS(["train_mb.py"] + argv)
    s = train_mb.settings_from_flags()
    print(json.dumps({"graph": s.run.graph, "seed": s.seed,
                      "plan_with_model": s.plan_with_model,
                      "model_train_steps": s.model_train_steps, "eval_masks": s.eval_masks,
                      "eval_episodes": s.eval_episodes, "select_round": s.select_round,
                      "equal_budget": s.equal_budget, "measure_rounds": s.measure_rounds,
                      "dream_episodes": s.dream.episodes, "rounds": s.world_model.rounds,
                      "held_out_episodes": s.world_model.held_out_episodes}))
"""


def _settings(*argvs):
    """The settings of each command line in `argvs`, parsed in turn in one
    child process."""
    run = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(argvs)], cwd=_REPO,
                         capture_output=True, text=True, timeout=300, check=False)
    if run.returncode != 0:
        raise AssertionError(run.stderr[-3000:])
    return [json.loads(line) for line in run.stdout.strip().splitlines()[-len(argvs):]]


class SettingsFromFlagsTest(absltest.TestCase):

    def test_flags_reach_the_settings(self):
        given, main_job = _settings(
            ["--quick", "--rounds=3", "--seed=7", "--noplan_with_model",
             "--model_train_steps=11", "--eval_masks=model", "--eval_episodes=2",
             "--noselect_round", "--noequal_budget", "--measure_rounds=0"],
            [])
        self.assertEqual(given, {
            "graph": "small_cnn", "seed": 7, "plan_with_model": False,
            "model_train_steps": 11, "eval_masks": "model", "eval_episodes": 2,
            "select_round": False, "equal_budget": False, "measure_rounds": 0,
            # --quick's values where no flag was given; --rounds given.
            "dream_episodes": 512, "rounds": 3, "held_out_episodes": 10})
        # The main job's defaults (parsed after the flags above: none of
        # theirs is left over).
        self.assertEqual(main_job["graph"], "bert")
        self.assertTrue(main_job["plan_with_model"])
        self.assertEqual(main_job["model_train_steps"], 500)
        self.assertEqual(main_job["eval_masks"], "real")
        self.assertTrue(main_job["select_round"])
        self.assertTrue(main_job["equal_budget"])
        self.assertEqual(main_job["measure_rounds"], 2)


if __name__ == "__main__":
    absltest.main()
