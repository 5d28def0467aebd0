"""`experiments/train_from_search.py --quick`: two iterations of learning from
search on one small graph, its record and a policy folder (resuming is
tested in process: tests/planning/learning_from_search_test.py)."""

import json
import os
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point
from xflowrl.policy.folder import read_info

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCRIPT = os.path.join(_REPO, "experiments", "train_from_search.py")


class TrainFromSearchScriptTest(absltest.TestCase):

    def test_quick_run_writes_its_record_and_a_policy(self):
        out = tempfile.mkdtemp()
        command = [sys.executable, _SCRIPT, "--quick", f"--out_dir={out}"]
        proc = entry_point.run(command, capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("iteration 2/2: real steps", proc.stderr)
        with open(os.path.join(out, "run.json")) as f:
            run = json.load(f)
        self.assertLen(run["iterations"], 2)
        self.assertEqual(run["real_steps"],
                         sum(r["self_play_real_steps"] + r["reanalyse_real_steps"]
                             for r in run["iterations"]))
        self.assertEqual(run["iterations"][1]["states_reanalysed"], 2)
        self.assertIn("squeezenet/f2w8", read_info(os.path.join(out, "policy")).graphs)


if __name__ == "__main__":
    absltest.main()
