"""Tests of the onednn backend's reproducibility: the shipped reference table
and the measurement's own settings (docs/engine.md, "The onednn backend")."""

import hashlib
import os
import tempfile

from absl.testing import absltest

from xflowrl import _engine, zoo
from xflowrl.engine import CostModel, GraphBuilder, available_backends, cost


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), os.stat(path).st_mtime_ns


def small_conv(channels=8, size=12):
    """A conv + relu graph whose configurations are in no zoo graph."""
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, channels, size, size))
    y = b.conv2d(input=x, weight=b.weight(name="w", shape=(channels, channels, 3, 3)))
    return b.build([b.relu(input=y)])


class ReferenceTableTest(absltest.TestCase):
    """The table itself: needs no oneDNN build."""

    def test_parses_and_times_are_positive(self):
        self.assertTrue(os.path.exists(cost.REFERENCE_PATH))
        with open(cost.REFERENCE_PATH) as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
        self.assertGreater(len(lines), 100)
        keys = set()
        for line in lines:
            key, ms = line.rsplit("\t", 1)
            self.assertGreater(float(ms), 0, key)
            keys.add(key)
        self.assertLen(keys, len(lines))  # one time per configuration
        self.assertEqual(cost.cache_keys(cost.REFERENCE_PATH), keys)
        self.assertTrue(os.path.exists(os.path.splitext(cost.REFERENCE_PATH)[0] + ".json"))

    def test_reference_is_onednn_only(self):
        with self.assertRaisesRegex(ValueError, "reference cost table is for onednn"):
            CostModel("analytic", reference=True)


class OneDnnReferenceTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        if "onednn" not in available_backends():
            self.skipTest("built without oneDNN")
        self.before = _digest(cost.REFERENCE_PATH)

    def tearDown(self):
        # Whatever a test did, the shipped table is never written.
        self.assertEqual(_digest(cost.REFERENCE_PATH), self.before)
        super().tearDown()

    def test_covers_every_zoo_graph(self):
        keys = cost.cache_keys(cost.REFERENCE_PATH)
        times = set()
        with open(cost.REFERENCE_PATH) as f:
            for line in f:
                times.add(float(line.rsplit("\t", 1)[1]))
        for name in zoo.GRAPHS:
            model = CostModel("onednn", reference=True)
            graph = zoo.get_graph(name)
            costs = graph.op_costs(model)
            self.assertEqual(model.num_new_measurements, 0, name)
            self.assertLessEqual(model.handle.num_measured, len(keys))
            for c in costs:
                if c:  # every paid op's time is a reference time
                    self.assertIn(c, times, name)

    def test_measures_only_missing_configs_into_the_cache(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cache.tsv")
            model = CostModel("onednn", reference=True, cache_path=path, repeats=3)
            zoo.get_graph("small_cnn").cost(model)
            self.assertEqual(model.num_new_measurements, 0)
            small_conv().cost(model)
            self.assertEqual(model.num_new_measurements, 2)  # conv, relu
            self.assertLen(cost.cache_keys(path), 2)  # misses go to the cache only

    def test_reference_wins_over_the_cache(self):
        graph = zoo.get_graph("small_cnn")
        expected = graph.cost(CostModel("onednn", cache_path=cost.REFERENCE))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cache.tsv")
            with open(path, "w") as f:
                for key in sorted(cost.cache_keys(cost.REFERENCE_PATH)):
                    f.write(f"{key}\t123.0\n")
            self.assertEqual(graph.cost(CostModel("onednn", cache_path=path,
                                                  reference=True)), expected)
            self.assertGreater(graph.cost(CostModel("onednn", cache_path=path)), expected)

    def test_missing_reference_file_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "cannot read the reference cost table"):
            _engine.onednn_backend("", 1, 1, "/nonexistent/reference.tsv")


class OneDnnMeasurementTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        if "onednn" not in available_backends():
            self.skipTest("built without oneDNN")

    def test_repeated_measurement_agrees_loosely(self):
        # Two fresh backends in one process time the same conv. The bound is
        # loose on purpose (the cross-process figure is the benchmark's job,
        # benchmarks/cost_repro_bench.py): only a broken timer, a thread-count
        # mix-up or a wall-clock time slice would miss it.
        graph = small_conv(16, 24)
        a = graph.cost(CostModel("onednn", repeats=11))
        b = graph.cost(CostModel("onednn", repeats=11))
        self.assertGreater(min(a, b), 0)
        self.assertLess(max(a, b) / min(a, b), 3.0)

    def test_no_openmp_worker_threads(self):
        # One OpenMP thread from primitive creation on: GOMP never starts a
        # worker (the old backend left one behind, spinning or sleeping).
        def threads():
            return len(os.listdir("/proc/self/task"))
        before = threads()
        small_conv(16, 24).cost(CostModel("onednn", repeats=2))
        self.assertEqual(threads(), before)

    def test_affinity_is_restored(self):
        before = os.sched_getaffinity(0)
        small_conv(4, 8).cost(CostModel("onednn", repeats=2))
        self.assertEqual(os.sched_getaffinity(0), before)


if __name__ == "__main__":
    absltest.main()
