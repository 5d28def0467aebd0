"""experiments/reproduce_budgets.py: the thesis' budgets, and reproduce.py's
refusal of --quick with another budget. (The report's tests are
tests/results/.)"""

import os
import shutil
import subprocess
import sys
import tempfile

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "experiments"))

import reproduce_budgets  # pylint: disable=wrong-import-position


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
