"""Round-trip equivalence: import -> optimise -> export computes what the
original ONNX model computes, in an executor independent of the project.

For every zoo graph (random weights) and for models from real exporters
(tf2onnx over small Keras models; torch.onnx-style models written node by
node in `onnx_models`): import -> optimise with TASO's search
(`XferSet.default().search`, analytic cost, small budget) -> export, then run
the original and the optimised ONNX model on the same random input: the
outputs agree within rtol 1e-4 (atol 1e-5 of the output's largest
magnitude: float32 sums in a different order). The exporters' models run
through TensorFlow (onnx-tf); the zoo graphs run in onnxruntime, since
onnx-tf's preparation of the large zoo graphs took minutes of the suite
(tests/zoo/zoo_test.py checks onnxruntime against the reference executor
on them, tests/onnx_io/exporters_test.py runs both executors on the real
exports).
"""

from absl.testing import absltest, parameterized
import numpy as np
import onnx_tf.backend
import onnxruntime

from tests.onnx_io import models as onnx_models
from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.executor.weights import random_inputs, random_weights
from xflowrl.onnx_io import load_onnx, to_onnx

BUDGET = 20
RTOL = 1e-4


def _run_tf(model, feeds):
    return [np.asarray(v) for v in onnx_tf.backend.prepare(model).run(feeds)]


def _run_ort(model, feeds):
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


class RoundTripTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.xfers = XferSet.default()
        cls.cost = CostModel("analytic")

    def _optimise_and_compare(self, original, feeds, run=_run_tf):
        graph, weights = load_onnx(original)
        result = self.xfers.search(graph, self.cost, budget=BUDGET)
        optimised = to_onnx(result.graph, weights)
        want, got = run(original, feeds), run(optimised, feeds)
        self.assertEqual(len(want), len(got))
        for w, g in zip(want, got):
            self.assertTrue(np.all(np.isfinite(w)))
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=1e-5 * np.abs(w).max())
        return graph, result

    @parameterized.parameters("resnet18", "resnet50", "inception_v3", "squeezenet1_1", "bert")
    def test_zoo_graph(self, name):
        graph = zoo.get_graph(name)
        weights = random_weights(graph, gain=zoo.weight_gain(name))
        original = to_onnx(graph, weights)
        imported, result = self._optimise_and_compare(original, random_inputs(graph),
                                                      run=_run_ort)
        if name != "bert":
            # Nothing is lost or added on the way (BERT's fused ReLUs come
            # back as ops of their own).
            self.assertEqual(imported.hash(), graph.hash())
        self.assertLess(result.best_cost, result.initial_cost)

    def test_torch_style_cnn(self):
        model = onnx_models.torch_style_cnn()
        feeds = {"input": np.random.default_rng(0).standard_normal((1, 3, 32, 32),
                                                                     np.float32)}
        graph, result = self._optimise_and_compare(model, feeds)
        self.assertEqual(graph.op_counts()["batchnorm"], 7)
        self.assertIn("conv_bn_s1_same", result.applied_names)

    def test_torch_style_bert(self):
        model = onnx_models.torch_style_bert()
        graph, _ = self._optimise_and_compare(model, onnx_models.bert_feeds())
        # The shape arithmetic folded away: only the attention's own reshapes
        # and the [1, S, K] x [K, N] matmuls' row flattening remain.
        self.assertEqual(graph.op_counts()["matmul"], 17)

    def test_tf2onnx_keras_cnn(self):
        model = onnx_models.keras_cnn()
        feeds = {"image": np.random.default_rng(0).standard_normal((1, 32, 32, 3), np.float32)}
        graph, result = self._optimise_and_compare(model, feeds)
        self.assertNotIn("opaque", graph.op_counts())
        self.assertTrue(any(n.startswith("enlarge_merge") for n in result.applied_names))

    def test_tf2onnx_keras_attention(self):
        model = onnx_models.keras_attention()
        feeds = {"tokens": np.random.default_rng(0).standard_normal((1, 16, 32), np.float32)}
        graph, _ = self._optimise_and_compare(model, feeds)
        self.assertEqual(graph.op_counts()["matmul"], 9)


if __name__ == "__main__":
    absltest.main()
