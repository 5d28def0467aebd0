"""benchmarks/gpu_cost_data.py, the learned GPU cost model's data run, as a
user types it with --dry_run (no GPU: small graphs on the CPU), and its
table."""

import json
import os
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point
from xflowrl.measure import gpu_data

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class DryRunTest(absltest.TestCase):

    def test_dry_run_writes_the_data_and_the_summary(self):
        out = tempfile.mkdtemp()
        env = dict(os.environ, PYTHONPATH=_ROOT)
        result = entry_point.run(
            [sys.executable, os.path.join(_ROOT, "benchmarks", "gpu_cost_data.py"),
             "--dry_run", f"--out_dir={out}", "--zoo=bert", "--batches=1,2",
             "--dtypes=float32"], capture_output=True, text=True, env=env, timeout=600,
            check=False)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        with open(os.path.join(out, "cost_data.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["card"], "cpu")
        self.assertTrue(summary["dry_run"])
        self.assertEqual(summary["failed"], [])
        self.assertIsNone(summary["stopped_at"])
        records = gpu_data.read_records(os.path.join(out, "gpu_times"), "cpu")
        self.assertLen(records, summary["records"])
        sources = {r["source"] for r in records}
        self.assertTrue({"zoo", "greedy", "random", "micro"} <= sources, sources)
        self.assertEqual({r["batch"] for r in records if r["source"] == "zoo"}, {1, 2})
        self.assertTrue(all(r["command"].startswith("benchmarks/gpu_cost_data.py")
                            for r in records))
        for r in records:  # every record's graph is stored and loads
            gpu_data.load_graph(os.path.join(out, "gpu_times"), r["graph"])
        self.assertIn("| source | dtype | batch | graphs | median ms |", result.stdout)


class TableTest(absltest.TestCase):

    def test_greedy_change_uses_the_longest_walk_against_the_original(self):
        recs = [
            {"source": "zoo", "name": "g", "variant": "original", "batch": 1,
             "dtype": "float32", "mode": "graph", "median_ms": 2.0},
            {"source": "greedy", "name": "g", "variant": "greedy@3", "batch": 1,
             "dtype": "float32", "mode": "graph", "median_ms": 1.0},
            {"source": "greedy", "name": "g", "variant": "greedy@12", "batch": 1,
             "dtype": "float32", "mode": "graph", "median_ms": 1.5},
            {"source": "zoo", "name": "g", "variant": "original", "batch": 1,
             "dtype": "float32", "mode": "compile", "median_ms": 0.1}]
        text, rows, changes = gpu_data.summary_table(recs, [])
        self.assertEqual(changes, [{"graph": "g", "dtype": "float32", "batch": 1, "steps": 12,
                                    "measured_change_pct": -25.0}])
        self.assertEqual([(r["source"], r["graphs"]) for r in rows], [("greedy", 2), ("zoo", 1)])
        self.assertIn("-25.0% (12 steps)", text)


if __name__ == "__main__":
    absltest.main()
