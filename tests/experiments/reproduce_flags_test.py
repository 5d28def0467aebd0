"""experiments/reproduce.py refuses --quick with another budget. (The
budgets' tests are tests/reproduction/budgets_test.py; the report's,
tests/results/.)"""

import os
import shutil
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class BudgetFlagTest(absltest.TestCase):

    def test_quick_with_another_budget_is_refused(self):
        tmp = tempfile.mkdtemp(prefix="reproduce_flags_test_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        proc = entry_point.run(
            [sys.executable, os.path.join(_ROOT, "experiments", "reproduce.py"), "--quick",
             "--budget=thesis", f"--results_dir={tmp}"], capture_output=True, text=True,
            timeout=120, check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--quick is --budget=quick, not --budget=thesis", proc.stderr)


if __name__ == "__main__":
    absltest.main()
