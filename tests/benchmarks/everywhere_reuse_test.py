"""benchmarks/everywhere_calls.py (the recorder and the two ceilings) and
benchmarks/everywhere_reuse.py as a user runs it (a subprocess, a small
budget)."""

import json
import os
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point
from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import everywhere_calls  # noqa: E402  pylint: disable=wrong-import-position

Call = everywhere_calls.Call


class CeilingsTest(absltest.TestCase):

    def test_starts_and_convergence_counted_per_rule_in_call_order(self):
        calls = [
            # Three applications from graph 0: enumerations on 0, 1, 2.
            Call(0, 1, (1, 2, 3), 3, 0.3),
            # Starts at graph 1, which the first call passed through: all of it.
            Call(1, 1, (2, 3), 2, 0.2),
            # Reaches graph 2 after one application, then stops for want of a
            # location (4 enumerations: on 9, 10, 2, 11): the last two.
            Call(9, 1, (10, 2, 11), 4, 0.4),
            # Graph 1 under another rule: nothing seen.
            Call(1, 2, (5,), 1, 0.1),
            # Starts at graph 3, where the first call ended: seen.
            Call(3, 1, (12,), 1, 0.05),
        ]
        counts = everywhere_calls.ceilings(calls)
        self.assertEqual(counts["start_seen"]["calls"], 2)
        self.assertEqual(counts["start_seen"]["enumerations"], 3)
        self.assertAlmostEqual(counts["start_seen"]["cpu_seconds"], 0.25)
        self.assertEqual(counts["converging"]["calls"], 3)
        self.assertEqual(counts["converging"]["enumerations"], 2 + 2 + 1)
        self.assertAlmostEqual(counts["converging"]["cpu_seconds"], 0.2 + 0.2 + 0.05)

    def test_nothing_seen_twice_counts_nothing(self):
        counts = everywhere_calls.ceilings([Call(0, 1, (1,), 1, 0.1), Call(2, 1, (3,), 1, 0.1)])
        self.assertEqual(counts["converging"]["calls"], 0)
        self.assertEqual(counts["start_seen"]["cpu_seconds"], 0.0)


class RecordedTest(absltest.TestCase):

    def test_records_what_the_call_returned_and_restores_the_method(self):
        graph = zoo.get_graph("small_cnn")
        xfers = XferSet.default()
        cost_model = CostModel("analytic")
        counts = xfers.locations(graph).counts
        xfer = max(range(len(counts)), key=lambda x: counts[x])
        self.assertGreaterEqual(counts[xfer], 2)
        want_graph, want_hashes, want_enumerations = xfers.apply_everywhere(
            graph, xfer, int(counts[xfer]), cost_model)
        with everywhere_calls.recorded(xfers) as calls:
            got_graph, got_hashes, got_enumerations = xfers.apply_everywhere(
                graph, xfer, int(counts[xfer]), cost_model)
        self.assertEqual((got_graph.hash(), got_hashes, got_enumerations),
                         (want_graph.hash(), want_hashes, want_enumerations))
        [call] = calls
        self.assertEqual((call.start, call.xfer, call.after, call.enumerations),
                         (graph.hash(), xfer, tuple(want_hashes), want_enumerations))
        self.assertGreater(call.cpu_seconds, 0.0)
        self.assertNotIn("apply_everywhere", vars(xfers))  # the class's method again


class ScriptTest(absltest.TestCase):

    def test_a_small_run_prints_consistent_figures(self):
        proc = entry_point.run(
            [sys.executable, os.path.join(_ROOT, "benchmarks", "everywhere_reuse.py"),
             "--settings=nasnet_a/tensat/analytic-v100", "--max_real_steps=80"],
            capture_output=True, text=True, cwd=_ROOT, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        out = json.loads(proc.stdout)
        [row] = out["rows"]
        self.assertEqual(out["summary"]["rows"], 1)
        self.assertEqual((row["setting"], row["seed"]), ("nasnet_a/tensat/analytic-v100", 0))
        self.assertGreater(row["everywhere_calls"], 0)
        self.assertGreater(row["taso_cpu"], 0.0)
        self.assertLessEqual(row["everywhere_cpu"], row["plan_cpu"])
        converging, start = row["converging"], row["start_seen"]
        self.assertLessEqual(start["calls"], converging["calls"])
        self.assertLessEqual(converging["enumerations"], row["everywhere_enumerations"])
        self.assertLessEqual(converging["cpu_seconds"], row["everywhere_cpu"] + 1e-3)
        self.assertAlmostEqual(row["plan_cpu_minus_converging"],
                               row["plan_cpu"] - converging["cpu_seconds"], delta=2e-3)
        # The speed-up that brings the planner to TASO's CPU time does so.
        speedup = row["everywhere_speedup_to_taso_cpu"]
        rest = row["plan_cpu"] - row["everywhere_cpu"]
        if speedup is None:
            self.assertGreaterEqual(rest, row["taso_cpu"] - 2e-3)
        elif speedup > 1.0:
            self.assertAlmostEqual(rest + row["everywhere_cpu"] / speedup, row["taso_cpu"],
                                   delta=0.01 * row["taso_cpu"] + 2e-3)
        else:
            self.assertLessEqual(row["plan_cpu"], row["taso_cpu"] + 2e-3)
        # A saved report's summary is printed again from its rows.
        saved = os.path.join(tempfile.mkdtemp(), "report.json")
        with open(saved, "w") as f:
            f.write(proc.stdout)
        again = entry_point.run(
            [sys.executable, os.path.join(_ROOT, "benchmarks", "everywhere_reuse.py"),
             f"--from_json={saved}"], capture_output=True, text=True, cwd=_ROOT, check=True)
        self.assertEqual(json.loads(again.stdout), out)
        refused = entry_point.run(
            [sys.executable, os.path.join(_ROOT, "benchmarks", "everywhere_reuse.py"),
             "--settings=nope"], capture_output=True, text=True, cwd=_ROOT)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("unknown settings ['nope']", refused.stderr)


if __name__ == "__main__":
    absltest.main()
