"""Tests of the evaluation-graph zoo."""

from absl.testing import absltest, parameterized
import numpy as np
import onnx
import onnxruntime

from xflowrl import zoo
from xflowrl.executor import reference as executor
from xflowrl.onnx_io import to_onnx

EXPECTED = {
    # name: (num_ops, selected op counts, output shape)
    "resnet18": (69, {"conv2d": 20, "batchnorm": 20, "add": 8}, (1, 1000)),
    "resnet50": (175, {"conv2d": 53, "batchnorm": 53, "add": 16}, (1, 1000)),
    "resnet50_taso": (84, {"conv2d": 52, "add": 16}, (1, 2048, 7, 7)),
    "inception_v3": (313, {"conv2d": 94, "batchnorm": 94, "concat": 15}, (1, 1000)),
    "squeezenet1_1": (65, {"conv2d": 26, "concat": 8}, (1, 1000)),
    "bert": (121, {"matmul": 48, "transpose": 32, "add": 8}, (64, 1024)),
    "vit": (115, {"matmul": 50, "transpose": 25, "reshape": 26, "add": 13}, (1, 1000)),
    "nasnet_a": (383, {"conv2d": 217, "avgpool": 51, "maxpool": 7, "add": 90, "concat": 18},
                 (1, 5120, 7, 7)),
    "resnext50": (86, {"conv2d": 53, "add": 16, "relu": 16, "maxpool": 1}, (1, 2048, 7, 7)),
    "nasrnn": (230, {"matmul": 80, "add": 55, "mul": 20, "relu": 10, "sigmoid": 25,
                     "tanh": 40}, (1, 512)),
    "vgg19": (43, {"conv2d": 16, "relu": 18, "maxpool": 5, "matmul": 3}, (1, 1000)),
    "small_cnn": (27, {"conv2d": 9, "batchnorm": 3, "concat": 2}, (1, 10)),
}


class ZooTest(parameterized.TestCase):

    @parameterized.parameters(*zoo.GRAPHS)
    def test_graph(self, name):
        num_ops, counts, output = EXPECTED[name]
        graph = zoo.get_graph(name)
        self.assertEqual(graph.num_ops(), num_ops)
        for op_type, n in counts.items():
            self.assertEqual(graph.op_counts()[op_type], n, op_type)
        self.assertEqual(graph.output_shapes(), [output])
        self.assertEqual(zoo.get_graph(name).hash(), graph.hash())

    @parameterized.parameters(*zoo.REDUCED)
    def test_reduced_variant_exports_and_runs(self, name):
        # The small variant (zoo.REDUCED) exports to a valid ONNX model that
        # onnxruntime runs to the reference executor's result. The full
        # graphs: `benchmarks/zoo_bench.py --onnx_check` (too slow here).
        graph = zoo.get_graph(name, **zoo.REDUCED[name])
        feeds = executor.random_feeds(graph, seed=1)
        want = executor.execute(graph, feeds)
        model = to_onnx(graph, {k: v.astype(np.float32) for k, v in feeds.items()})
        onnx.checker.check_model(model)
        session = onnxruntime.InferenceSession(model.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        got = session.run(None, {k: feeds[k].astype(np.float32) for k in graph.inputs()})
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertTrue(np.all(np.isfinite(w)))
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * np.abs(w).max())

    def test_reduced_variants_keep_the_op_kinds(self):
        # A small variant has every op kind of its full graph.
        for name, kwargs in zoo.REDUCED.items():
            full, small = zoo.get_graph(name), zoo.get_graph(name, **kwargs)
            self.assertEqual(set(small.op_counts()), set(full.op_counts()), name)
            self.assertLessEqual(small.num_ops(), full.num_ops(), name)

    def test_inception_spatial_sizes(self):
        concats = [op for op in zoo.get_graph("inception_v3").ops() if op.type == "concat"]
        self.assertEqual(concats[0].output_shapes[0], (1, 256, 35, 35))
        self.assertEqual(concats[-1].output_shapes[0], (1, 2048, 8, 8))

    def test_unknown_graph(self):
        for lookup in (zoo.get_graph, zoo.kind, zoo.weight_gain):
            with self.assertRaisesRegex(ValueError, "unknown graph 'vgg'"):
                lookup("vgg")

    def test_kinds_and_weight_gains(self):
        # One place says what each graph is and how to draw its weights.
        self.assertEqual(set(zoo.KINDS), set(zoo.GRAPHS))
        self.assertEqual(zoo.kind("vit"), "transformer")
        self.assertEqual(zoo.kind("nasrnn"), "recurrent")
        self.assertEqual(zoo.kind("resnext50"), "convolutional")
        self.assertEqual(zoo.weight_gain("bert"), 0.2)
        self.assertAlmostEqual(zoo.weight_gain("resnet18"), 2.0 ** 0.5)


if __name__ == "__main__":
    absltest.main()
