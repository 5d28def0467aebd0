"""scripts/gpu/optimize_check.py's dry run: the GPU figure's loop on the CPU
stand-in, on one small graph (the script itself is imported from
scripts/gpu/, as the tests of the entry points import experiments/)."""

import importlib.util
import json
import os
import sys

from absl.testing import absltest

from tests.optimize.cli_test import make_tempdir

SCRIPTS = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "gpu")


@absltest.skipUnless(importlib.util.find_spec("torch"), "needs PyTorch (the CPU stand-in)")
class DryRunTest(absltest.TestCase):

    def test_one_graph_at_both_batches(self):
        sys.path.insert(0, os.path.abspath(SCRIPTS))
        self.addCleanup(sys.path.remove, os.path.abspath(SCRIPTS))
        import optimize_check  # pylint: disable=import-outside-toplevel,import-error
        folder = make_tempdir(self)
        out = os.path.join(folder, "check.json")
        code = optimize_check.main(["--out", out, "--dry_run", "--graphs=small_cnn",
                                    "--dtypes=float32", "--batches=1,16",
                                    "--models_dir", folder])
        self.assertEqual(code, 0)
        with open(out) as f:
            result = json.load(f)
        self.assertEqual(result["environment"]["target"], "torch-cpu")
        rows = result["rows"]
        self.assertEqual([(r["graph"], r["batch"]) for r in rows],
                         [("small_cnn", 1), ("small_cnn", 2)])
        for row in rows:
            self.assertEqual(row["exit_code"], 0, row.get("error"))
            self.assertIn(row["written"], ("optimized", "original"))
            self.assertTrue(row["decided_by"].startswith("torch-cpu: PyTorch"))
            self.assertLess(row["estimated_change"], 0.0)  # greedy rewrote it
            self.assertTrue(row["device_outputs"]["same"])
            if row["written"] == "optimized":  # never written slower than the spread allows
                self.assertLess(row["measured_change"], 0.0)
        self.assertIn("| small_cnn | 2 | float32 |", optimize_check.table(rows))


if __name__ == "__main__":
    absltest.main()
