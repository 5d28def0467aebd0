"""Tests of the TensorFlow measurements (time and allocator memory)."""

import os
import subprocess
import sys

from absl.testing import absltest
import numpy as np

from xflowrl.engine import CostModel, GraphBuilder
import xflowrl.measure
from xflowrl.measure import tf_runtime


def _mlp(hidden=512):
    b = GraphBuilder()
    x = b.input(name="x", shape=(64, hidden))
    for i in range(3):
        x = b.matmul(a=x, b=b.weight(name=f"w{i}", shape=(hidden, hidden)), activation="RELU")
    return b.build([x])


class MeasureTest(absltest.TestCase):

    def test_time_and_memory(self):
        graph = _mlp()
        m = xflowrl.measure.measure_graph(graph, warmup=2, repeats=4)
        self.assertLen(m.times_ms, 4)
        self.assertEqual(m.median_ms, float(np.median(m.times_ms)))
        self.assertGreater(m.median_ms, 0)
        self.assertTrue(xflowrl.measure.memory_stats_available())
        weight_bytes = 3 * 512 * 512 * 4
        feed_bytes = 64 * 512 * 4
        # Resident: the weights and the feed, each in one allocator chunk.
        # TensorFlow's BFC allocator hands out a free chunk whole unless it
        # is at least twice the request (it splits only then), so a chunk
        # holds less than twice its tensor; how much more depends on what
        # earlier work in the process left free (the suite's order).
        self.assertBetween(m.resident_bytes, weight_bytes, 2 * (weight_bytes + feed_bytes))
        # At least the output and one intermediate [64, 512] float32 tensor.
        self.assertGreaterEqual(m.activation_peak_bytes, 2 * 64 * 512 * 4)
        self.assertLess(m.activation_peak_bytes, weight_bytes)

    def test_table_row(self):
        # The table's row for a zoo graph; SqueezeNet is the quickest.
        row = xflowrl.measure.graph_properties("squeezenet1_1", CostModel("analytic"),
                                               warmup=1, repeats=2)
        self.assertEqual((row["type"], row["ops"]), ("Convolutional", 65))
        self.assertAlmostEqual(row["estimated_cost_ms"], 15.08, places=2)
        self.assertGreater(row["memory_peak_gib"], row["weights_gib"])
        self.assertIn("| squeezenet1_1 | Convolutional | 65 | 15.08 |",
                      xflowrl.measure.markdown_table([row]))

    def test_import_changes_nothing(self):
        # Importing the package leaves the environment alone; the first
        # measurement asks for the BFC allocator only while TensorFlow is
        # not imported, and not after.
        script = ("import os, sys\n"
                  "import xflowrl.measure as m\n"
                  "assert m.BFC_ENV not in os.environ, 'set at import'\n"
                  "if sys.argv[1] == 'tf_first':\n"
                  "    import tensorflow\n"
                  "print(m.enable_memory_stats(), os.environ.get(m.BFC_ENV))\n")
        env = {k: v for k, v in os.environ.items() if k != xflowrl.measure.BFC_ENV}
        outputs = {}
        for order in ("measure_first", "tf_first"):
            proc = subprocess.run([sys.executable, "-c", script, order], env=env,
                                  capture_output=True, text=True, timeout=120, check=False)
            self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
            outputs[order] = proc.stdout.split()
        self.assertEqual(outputs, {"measure_first": ["True", "true"],
                                   "tf_first": ["False", "None"]})

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "repeats >= 1"):
            tf_runtime.measure_graph(_mlp(64), repeats=0)


if __name__ == "__main__":
    absltest.main()
