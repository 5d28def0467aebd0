"""`experiments/select_generalist.py` scores candidate policy folders on
validation graphs, writes the decision, and refuses any other graph."""

import json
import os
import shutil
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point
from tests.generalist.fixtures import untrained_policy_folders
from xflowrl.engine import CostModel, XferSet

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCRIPT = os.path.join(_REPO, "experiments", "select_generalist.py")
XFERS = XferSet.default()
COST = CostModel("analytic", profile="v100")


class SelectGeneralistScriptTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = tempfile.mkdtemp()
        cls.folders = untrained_policy_folders(cls.root, "mlp/s100", (0, 1), XFERS, COST,
                                               subfolder="policy")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, True)
        super().tearDownClass()

    def _run(self, *args):
        return entry_point.run([sys.executable, _SCRIPT, *args], capture_output=True, text=True,
                               timeout=300)

    def test_the_decision_names_every_candidate_and_the_winner(self):
        out = os.path.join(self.root, "selection.json")
        proc = self._run(f"--policy={','.join(self.folders)}",
                         "--graphs=mlp/s100,transformer/s100", f"--out={out}")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        with open(out) as f:
            decision = json.load(f)
        self.assertEqual(decision["split"], "validation")
        self.assertEqual(decision["graphs"], ["mlp/s100", "transformer/s100"])
        self.assertEqual([c["folder"] for c in decision["candidates"]], self.folders)
        self.assertEqual([c["seed"] for c in decision["candidates"]], [0, 1])
        self.assertEqual(sorted(c["rank"] for c in decision["candidates"]), [1, 2])
        winner = [c for c in decision["candidates"] if c["rank"] == 1][0]
        self.assertEqual(decision["winner"], winner["folder"])
        for cand in decision["candidates"]:
            self.assertEqual([g["graph"] for g in cand["graphs"]], decision["graphs"])
        with open(os.path.splitext(out)[0] + ".md") as f:
            self.assertIn(f"Ships: {decision['winner']}", f.read())

    def test_a_held_out_graph_is_refused(self):
        proc = self._run(f"--policy={self.folders[0]}", "--graphs=vit/l1h64p16",
                         f"--out={os.path.join(self.root, 'refused.json')}")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("not in the validation split", proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.root, "refused.json")))


if __name__ == "__main__":
    absltest.main()
