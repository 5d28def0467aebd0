"""Tests of the onnxruntime end-to-end timer."""

from absl.testing import absltest
import numpy as np

from xflowrl.engine import GraphBuilder
from xflowrl.executor import reference as executor
from xflowrl.executor.weights import random_inputs, random_weights
from xflowrl.measure import ort_runtime
from xflowrl.onnx_io import to_onnx


def _tiny_cnn(shortcut_from_pool=True):
    """pool, then conv + batch-norm + residual add + relu: a chain onnxruntime
    runs as one Conv kernel when the shortcut comes from an NCHWc op (the
    pool), not when it is the graph input."""
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, 16, 12, 12))
    p = b.maxpool2d(input=x, kernel=(3, 3), strides=(1, 1))
    y = b.conv2d(input=p, weight=b.weight(name="w", shape=(16, 16, 3, 3)))
    y = b.batchnorm(input=y, scale=b.weight(name="s", shape=(16,)),
                    bias=b.weight(name="b", shape=(16,)), mean=b.weight(name="m", shape=(16,)),
                    var=b.weight(name="v", shape=(16,)))
    return b.build([b.relu(input=b.add(x=y, y=p if shortcut_from_pool else x))])


def _optimized_kernels(model):
    """The op types of the model onnxruntime runs after its optimizations."""
    import os  # pylint: disable=import-outside-toplevel
    import tempfile  # pylint: disable=import-outside-toplevel

    import onnx  # pylint: disable=import-outside-toplevel
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "opt.onnx")
        ort_runtime.make_session(model, optimized_model_path=path)
        return [n.op_type for n in onnx.load(path).graph.node]


class OrtRuntimeTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.graph = _tiny_cnn()
        self.weights = random_weights(self.graph, seed=1)
        self.feeds = random_inputs(self.graph, seed=1)
        self.model = to_onnx(self.graph, self.weights, check=False)

    def test_times_a_tiny_model(self):
        m = ort_runtime.measure_onnx(self.model, self.feeds, warmup=1, repeats=5)
        self.assertLen(m.times_ms, 5)
        self.assertTrue(all(t > 0 for t in m.times_ms))
        self.assertEqual(m.median_ms, float(np.median(m.times_ms)))
        self.assertLen(m.cpu_times_ms, 5)
        self.assertEqual(m.cpu_median_ms, float(np.median(m.cpu_times_ms)))
        # CPU time of the calling thread: positive, at most the wall time
        # (plus the clocks' granularity).
        for wall, cpu in zip(m.times_ms, m.cpu_times_ms):
            self.assertGreater(cpu, 0)
            self.assertLessEqual(cpu, wall + 0.05)
        g = ort_runtime.measure_graph(self.graph, self.weights, self.feeds, warmup=1, repeats=3)
        self.assertLen(g.times_ms, 3)

    def test_outputs_match_tensorflow_and_the_reference(self):
        from xflowrl.measure import tf_runtime  # pylint: disable=import-outside-toplevel
        ort_out = list(ort_runtime.run_onnx(self.model, self.feeds).values())
        tf_out = list(tf_runtime.make_runner(self.model, self.feeds)().values())
        ref = executor.execute(self.graph, {**self.weights, **self.feeds})
        self.assertLen(ort_out, 1)
        np.testing.assert_allclose(ort_out[0], tf_out[0], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(ort_out[0], ref[0], rtol=1e-4, atol=1e-4)
        # Graph optimizations off: same numbers.
        plain = list(ort_runtime.run_onnx(self.model, self.feeds, optimize=False).values())
        np.testing.assert_allclose(ort_out[0], plain[0], rtol=1e-4, atol=1e-4)

    def test_fusions_the_fitted_cost_model_assumes(self):
        # One Conv kernel runs conv + batch-norm + add + relu when the
        # shortcut is an NCHWc op's output; with the graph input as shortcut
        # only the batch-norm folds. The fitted backend prices both so.
        from xflowrl.engine import CostModel  # pylint: disable=import-outside-toplevel
        model = CostModel("fitted")
        for from_pool, left in ((True, []), (False, ["Add", "Relu"])):
            graph = _tiny_cnn(from_pool)
            kernels = _optimized_kernels(to_onnx(graph, self.weights, check=False))
            self.assertEqual(kernels.count("Conv"), 1)
            self.assertNotIn("BatchNormalization", kernels)
            self.assertEqual([k for k in kernels if k in ("Add", "Relu")], left)
            costs = dict(zip([op.type for op in graph.ops()], graph.op_costs(model)))
            self.assertEqual(costs["batchnorm"], 0.0)
            self.assertEqual(costs["add"] > 0, not from_pool)
            self.assertEqual(costs["relu"] > 0, not from_pool)

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "repeats >= 1"):
            ort_runtime.measure_onnx(self.model, self.feeds, repeats=0)


if __name__ == "__main__":
    absltest.main()
