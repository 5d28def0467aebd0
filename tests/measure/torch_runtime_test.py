"""Tests of the PyTorch GPU runner.

`weight_side`, `unsupported_ops` and the refusal without PyTorch/CUDA run
everywhere; the CPU device (the GPU path's stand-in) runs wherever PyTorch
is installed; running graphs on the GPU needs PyTorch with a CUDA device
(the device machine of docs/engine.md, "Measured on a GPU"), and is skipped
elsewhere.
"""

import importlib.util
import unittest
from unittest import mock

from absl.testing import absltest, parameterized
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, GraphBuilder, XferSet
from xflowrl.executor.reference import execute, random_feeds
from xflowrl.executor.weights import random_inputs, random_weights
from xflowrl.measure import torch_runtime


def cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch  # pylint: disable=import-outside-toplevel
    return torch.cuda.is_available()


class _Cuda:
    """Skips the class unless a CUDA device is (`WANTED` True) or is not
    (False) here; asked when the class runs, not when the file is collected,
    so that collecting the suite does not import PyTorch (4 s)."""

    WANTED = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()  # type: ignore[misc]
        if cuda_available() != cls.WANTED:
            raise unittest.SkipTest("needs PyTorch with a CUDA device" if cls.WANTED
                                    else "PyTorch with CUDA is here")


def _fused_weights_graph():
    """A conv whose weight is a concat of two weights (weight side), then a
    transpose of the input-side result (not weight side)."""
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, 4, 8, 8))
    w = b.concat(axis=0, inputs=[b.weight(name="w1", shape=(2, 4, 3, 3)),
                                 b.weight(name="w2", shape=(2, 4, 3, 3))])
    y = b.conv2d(input=x, weight=w, activation="RELU")
    return b.build([b.transpose(input=y, perm=(0, 2, 3, 1))])


class WeightSideTest(absltest.TestCase):

    def test_weights_and_what_only_they_feed(self):
        graph = _fused_weights_graph()
        side = torch_runtime.weight_side(graph)
        kinds = {op.type: op.guid in side for op in graph.ops()}
        self.assertEqual(kinds, {"input": False, "weight": True, "concat": True,
                                 "conv2d": False, "transpose": False})


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


class UnsupportedOpsTest(absltest.TestCase):

    def test_every_op_of_a_zoo_graph_runs(self):
        self.assertEqual(torch_runtime.unsupported_ops(zoo.get_graph("squeezenet1_1")), [])

    def test_an_opaque_op_is_named(self):
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 4))
        y = b.opaque(inputs=[x], output_shapes=[(1, 4)], op_type="Softmax")
        lacking = torch_runtime.unsupported_ops(b.build(y))
        self.assertLen(lacking, 1)
        self.assertIn("Softmax", lacking[0])


@absltest.skipUnless(torch_available(), "needs PyTorch")
class OnCpuTest(parameterized.TestCase):
    """The CPU stand-in runs the same programs as the GPU."""

    def _graph_and_feeds(self, name):
        graph = zoo.get_graph(name, **zoo.REDUCED.get(name, {}))
        feeds = {**random_weights(graph, seed=1, dtype=np.float64,
                                  gain=zoo.weight_gain(name)),
                 **random_inputs(graph, seed=1, dtype=np.float64)}
        return graph, feeds

    @parameterized.parameters(("small_cnn", "float32", 1e-5), ("bert", "float32", 1e-5),
                              ("small_cnn", "bfloat16", 5e-2), ("bert", "float16", 1e-2))
    def test_outputs_match_the_reference(self, name, dtype, tolerance):
        graph, feeds = self._graph_and_feeds(name)
        program = torch_runtime.TorchProgram(graph, feeds, dtype=dtype, device="cpu")
        error = program.check(execute(graph, feeds))
        self.assertLess(error, tolerance)
        if dtype != "float32":  # the precision is really lower
            self.assertGreater(error, 1e-6)

    def test_eager_timing_and_interleaved_rounds(self):
        graph, feeds = self._graph_and_feeds("small_cnn")
        a = torch_runtime.TorchProgram(graph, feeds, device="cpu")
        b = torch_runtime.TorchProgram(graph, feeds, device="cpu")
        with self.assertRaisesRegex(ValueError, "mode must be one of"):
            a.time("graph")
        times = torch_runtime.interleaved_times({"a": a, "b": b}, "eager", rounds=3,
                                                warmup=1, repeats=2)
        self.assertEqual(sorted(times), ["a", "b"])
        for values in times.values():
            self.assertLen(values, 3)
            self.assertTrue(all(v > 0 for v in values))
        self.assertEqual(torch_runtime.environment("cpu")["device"], "cpu")

    def test_a_refused_fused_conv_relu_runs_as_two_kernels(self):
        import torch  # pylint: disable=import-outside-toplevel
        graph = _fused_weights_graph()
        feeds = random_feeds(graph)
        program = torch_runtime.TorchProgram(graph, feeds, device="cpu")
        program.fuse_conv_relu = True  # as on a GPU; the fused call then refuses
        conv = next(op for op in graph.ops() if op.type == "conv2d")
        refuse = mock.Mock(side_effect=RuntimeError("no fused kernel"))
        with mock.patch.object(torch, "cudnn_convolution_relu", refuse, create=True):
            run = program._op(conv)  # pylint: disable=protected-access
            x = torch.tensor(feeds["x"], dtype=torch.float32)
            w = torch.ones((4, 4, 3, 3))
            first, second = run(x, w), run(x, w)
        self.assertEqual(refuse.call_count, 1)  # refused once, then not asked again
        self.assertEqual(program.unfused_conv_relu, 1)
        want = torch.relu(torch.nn.functional.conv2d(x, w, padding=1))
        np.testing.assert_allclose(first.numpy(), want.numpy(), rtol=1e-6)
        np.testing.assert_allclose(second.numpy(), want.numpy(), rtol=1e-6)

    def test_bad_dtype_and_device(self):
        graph, feeds = self._graph_and_feeds("small_cnn")
        with self.assertRaisesRegex(ValueError, "dtype must be one of"):
            torch_runtime.TorchProgram(graph, feeds, dtype="int8", device="cpu")
        with self.assertRaisesRegex(ValueError, "device must be one of"):
            torch_runtime.TorchProgram(graph, feeds, device="tpu")


class RelativeErrorTest(absltest.TestCase):

    def test_relative_to_the_largest_magnitude(self):
        self.assertAlmostEqual(torch_runtime.relative_error([np.array([1.0, 4.0])],
                                                            [np.array([1.0, 2.0])]), 1.0)
        with self.assertRaisesRegex(ValueError, "shape"):
            torch_runtime.relative_error([np.zeros(2)], [np.zeros(3)])
        with self.assertRaisesRegex(ValueError, "not finite"):
            torch_runtime.relative_error([np.array([np.nan])], [np.array([1.0])])


class NoCudaTest(_Cuda, absltest.TestCase):

    WANTED = False

    def test_clear_error(self):
        graph = _fused_weights_graph()
        with self.assertRaisesRegex(RuntimeError, "PyTorch|CUDA"):
            torch_runtime.TorchProgram(graph, random_feeds(graph))


class CheckTest(_Cuda, absltest.TestCase):

    def test_non_finite_outputs_are_refused(self):
        graph = _fused_weights_graph()
        feeds = random_feeds(graph)
        program = torch_runtime.TorchProgram(graph, feeds)
        expected = [np.full_like(out, np.nan) for out in execute(graph, feeds)]
        with self.assertRaisesRegex(ValueError, "not finite"):
            program.check(expected)


class OnGpuTest(_Cuda, parameterized.TestCase):

    def _check(self, graph, tolerance=1e-4):
        feeds = random_feeds(graph, seed=1)
        program = torch_runtime.TorchProgram(graph, feeds)
        self.assertLess(program.check(execute(graph, feeds)), tolerance)
        return program

    def test_small_graph_and_both_timings(self):
        program = self._check(_fused_weights_graph())
        for mode in ("eager", "graph"):
            timing = program.time(mode, warmup=2, repeats=5)
            self.assertLessEqual(timing["min_ms"], timing["median_ms"])
            self.assertGreater(timing["min_ms"], 0.0)

    @parameterized.parameters("small_cnn", "squeezenet1_1", "inception_v3", "resnext50",
                              "bert", "nasrnn")
    def test_zoo_graph_and_its_greedy_rewrite(self, name):
        """The graph, and the graph after every improving step one-step greedy
        takes under the GPU-like profile, compute what the reference computes."""
        graph = zoo.get_graph(name)
        feeds = {**random_weights(graph, seed=1, dtype=np.float64, gain=zoo.weight_gain(name)),
                 **random_inputs(graph, seed=1, dtype=np.float64)}
        expected = execute(graph, feeds)
        xfers, model = XferSet.default(), CostModel("analytic", profile="v100")
        for _ in range(30):
            locations = xfers.locations(graph)
            costs = locations.costs(model)
            if not np.isfinite(costs).any() or np.nanmin(costs) >= graph.cost(model):
                break
            xfer, location = np.unravel_index(int(np.nanargmin(costs)), costs.shape)
            graph = locations.apply(int(xfer), int(location))
        program = torch_runtime.TorchProgram(graph, feeds)
        self.assertLess(program.check(expected), 1e-3)


if __name__ == "__main__":
    absltest.main()
