"""Tests of the PyTorch GPU runner.

`weight_side` and the refusal without PyTorch/CUDA run everywhere; running
graphs needs PyTorch with a CUDA device (the device machine of
docs/engine.md, "Measured on a GPU"), and is skipped elsewhere.
"""

import importlib.util

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


@absltest.skipIf(cuda_available(), "PyTorch with CUDA is here")
class NoCudaTest(absltest.TestCase):

    def test_clear_error(self):
        graph = _fused_weights_graph()
        with self.assertRaisesRegex(RuntimeError, "PyTorch|CUDA"):
            torch_runtime.TorchProgram(graph, random_feeds(graph))


@absltest.skipUnless(cuda_available(), "needs PyTorch with a CUDA device")
class CheckTest(absltest.TestCase):

    def test_non_finite_outputs_are_refused(self):
        graph = _fused_weights_graph()
        feeds = random_feeds(graph)
        program = torch_runtime.TorchProgram(graph, feeds)
        expected = [np.full_like(out, np.nan) for out in execute(graph, feeds)]
        with self.assertRaisesRegex(ValueError, "not finite"):
            program.check(expected)


@absltest.skipUnless(cuda_available(), "needs PyTorch with a CUDA device")
class OnGpuTest(parameterized.TestCase):

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
