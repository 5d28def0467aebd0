"""Tests of the cost backends."""

import os
import tempfile

from absl.testing import absltest

from xflowrl.engine import CostModel, GraphBuilder, available_backends


def conv_graph(channels=16, size=16, relu=True):
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, channels, size, size))
    y = b.conv2d(input=x, weight=b.weight(name="w", shape=(channels, channels, 3, 3)))
    # Weight-side ops and views are free.
    w2 = b.concat(inputs=[b.weight(name="a", shape=(4, 4)), b.weight(name="c", shape=(4, 4))],
                  axis=0)
    y = b.reshape(input=y, shape=(1, -1))
    outs = [y, w2] + ([b.relu(input=y)] if relu else [])
    return b.build(outs)


class AnalyticTest(absltest.TestCase):

    def test_deterministic_positive_and_monotone(self):
        a, b = CostModel("analytic"), CostModel("analytic")
        small, large = conv_graph(16), conv_graph(32)
        self.assertGreater(small.cost(a), 0)
        self.assertEqual(small.cost(a), small.cost(b))
        self.assertGreater(large.cost(a), small.cost(a))

    def test_free_ops_cost_nothing(self):
        g = conv_graph()
        costs = dict(zip([op.type for op in g.ops()], g.op_costs(CostModel("analytic"))))
        self.assertEqual(costs["concat"], 0.0)   # weights only: folded offline
        self.assertEqual(costs["reshape"], 0.0)
        self.assertGreater(costs["conv2d"], 0.0)
        self.assertAlmostEqual(g.cost(CostModel("analytic")), sum(costs.values()))

    def test_profiles(self):
        g = conv_graph()
        self.assertGreater(g.cost(CostModel("analytic", profile="cpu")),
                           g.cost(CostModel("analytic", profile="h100")))
        with self.assertRaisesRegex(ValueError, "unknown device profile 'tpu'"):
            CostModel("analytic", profile="tpu")
        with self.assertRaisesRegex(ValueError, "unknown cost backend"):
            CostModel("magic")


class OneDnnTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        if "onednn" not in available_backends():
            self.skipTest("built without oneDNN")

    def test_measures_and_caches_on_disk(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cache.tsv")
            g = conv_graph()
            first = g.cost(CostModel("onednn", cache_path=path, repeats=5))
            self.assertGreater(first, 0)
            with open(path) as f:
                self.assertLen(f.readlines(), 2)  # conv and relu
            # A new backend reads the cache: identical costs, no new lines.
            self.assertEqual(g.cost(CostModel("onednn", cache_path=path)), first)
            with open(path) as f:
                self.assertLen(f.readlines(), 2)

    def test_every_measured_op_runs(self):
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 8, 10, 10))
        w = b.weight(name="w", shape=(8, 4, 3, 3))
        y = b.conv2d(input=x, weight=w, strides=2, activation="RELU")     # grouped
        y = b.maxpool2d(input=y, kernel=3, strides=1, padding="SAME")
        y = b.avgpool2d(input=y, kernel=2, strides=2, padding="VALID")
        v = {k: b.weight(name=k, shape=(8,)) for k in ("s", "b", "m", "v")}
        y = b.batchnorm(input=y, scale=v["s"], bias=v["b"], mean=v["m"], var=v["v"])
        y = b.broadcast_add(input=b.sigmoid(input=y), bias=v["b"])
        y = b.div(x=b.sub(x=b.tanh(input=y), y=y), y=b.mul(x=y, y=y))
        y = b.scalar_mul(x=y, scale=b.weight(name="k", shape=(1,)))
        y = b.concat(inputs=[y, y], axis=1)
        m = b.matmul(a=b.reshape(input=y, shape=(4, 1, 16)),
                     b=b.input(name="z", shape=(4, 16, 3)), activation="RELU")
        g = b.build([m])
        costs = g.op_costs(CostModel("onednn", repeats=3))
        for op, c in zip(g.ops(), costs):
            if op.type not in ("input", "weight", "reshape"):
                self.assertGreater(c, 0, op.type)

    def test_corrupt_cache_is_reported(self):
        with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
            f.write("key-without-time\n")
        self.addCleanup(os.remove, f.name)
        with self.assertRaisesRegex(ValueError, "corrupt cost cache .* line 1"):
            CostModel("onednn", cache_path=f.name)


if __name__ == "__main__":
    absltest.main()
