"""benchmarks/eqsat_start_bench.py as a user runs it (a subprocess): on
SqueezeNet under TASO's rules both starts end at TASO's search's cost, and
a malformed setting is a usage error."""

import os
import subprocess
import sys

from absl.testing import absltest

from tests import entry_point

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class EqsatStartBenchTest(absltest.TestCase):

    def test_both_starts_on_squeezenet(self):
        report = entry_point.run_report(
            "benchmarks/eqsat_start_bench.py", ["--settings=squeezenet1_1/taso/analytic/v100"])
        (row,) = report["rows"]
        self.assertLess(row["greedy_pct"], 0.0)
        for start in ("from_input", "from_greedy"):
            self.assertLessEqual(row[start]["pct"], row["greedy_pct"] + 1e-9)
            self.assertAlmostEqual(row[start]["pct"], row["taso_pct"], places=6)
            self.assertGreater(row[start]["e_nodes"], 0)
        # Greedy's graph leaves less to rewrite: a smaller e-graph.
        self.assertLess(row["from_greedy"]["e_nodes"], row["from_input"]["e_nodes"])
        summary = report["summary"]
        self.assertEqual((summary["settings"], summary["lower_from_greedy"],
                          summary["lower_from_input"]), (1, [], []))

    def test_a_setting_needs_four_parts(self):
        done = subprocess.run(
            [sys.executable, "benchmarks/eqsat_start_bench.py", "--settings=squeezenet1_1/taso"],
            capture_output=True, text=True, cwd=_ROOT, timeout=300)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("GRAPH/RULES/BACKEND/PROFILE", done.stderr)


if __name__ == "__main__":
    absltest.main()
