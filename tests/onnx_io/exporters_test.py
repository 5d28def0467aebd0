"""Today's PyTorch and Hugging Face exports, and tf2onnx at opset 18, import
whole, optimise and export computing the same function.

Models: `onnx_exporter_models` (the TorchScript exporter's Hugging Face
BertModel with its attention-mask chain, the dynamo exporter's IR 10 /
opset 18 encoder layer, a Keras transformer block through tf2onnx at
opset 18). Each is imported, searched (analytic cost, small budget) and
exported; the original runs in onnxruntime (onnx-tf 1.10 cannot run opset 13
`Unsqueeze` nor anything of opset 18), the export in onnx-tf where it can (the
opset-13 BERT) and in onnxruntime: outputs agree within rtol 1e-4.
"""

import collections

from absl.testing import absltest
import numpy as np
import onnx
from onnx import TensorProto, helper
import onnxruntime

from tests.onnx_io import exporter_models as models
from xflowrl.engine import CostModel, XferSet
from xflowrl.onnx_io import load_onnx, to_onnx
from xflowrl.onnx_io.common import decode_opaque, opaque_op_type

BUDGET = 20
RTOL = 1e-4


def _ort(model, feeds):
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _onnx_tf(model, feeds):
    import onnx_tf.backend
    return [np.asarray(v) for v in onnx_tf.backend.prepare(model).run(feeds)]


def _opaque_types(graph):
    return collections.Counter(opaque_op_type(op.params["opaque_type"])
                               for op in graph.ops() if op.type == "opaque")


class ExporterModelsTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.xfers = XferSet.default()
        cls.cost = CostModel("analytic")

    def _round_trip(self, model, feeds, runners=(_ort,)):
        """Import, search, export; the export's outputs in every runner equal
        the original's in onnxruntime. Returns the imported graph."""
        graph, weights = load_onnx(model)
        result = self.xfers.search(graph, self.cost, budget=BUDGET)
        exported = to_onnx(result.graph, weights)
        want = _ort(model, feeds)
        for run in runners:
            got = run(exported, feeds)
            self.assertEqual(len(got), len(want))
            for w, g in zip(want, got):
                self.assertTrue(np.all(np.isfinite(w)))
                self.assertEqual(np.shape(g), w.shape)
                np.testing.assert_allclose(g, w, rtol=RTOL, atol=1e-5 * np.abs(w).max())
        return graph

    def test_hf_bert_torchscript_imports_whole_and_round_trips(self):
        model = models.hf_bert_torchscript()
        graph = self._round_trip(model, models.bert_feeds(), runners=(_ort, _onnx_tf))
        opaque = _opaque_types(graph)
        # The mask chain's run-time part stays (opaque); its shape arithmetic
        # (Shape, Concat, ConstantOfShape, Equal, Where on shapes) and the
        # position ids' GatherElements are folded away.
        for op_type in ("Cast", "And", "Expand", "Where"):
            self.assertEqual(opaque[op_type], 1, op_type)
        for op_type in ("Shape", "Concat", "ConstantOfShape", "Equal", "GatherElements",
                        "Reshape", "Range", "Slice"):
            self.assertNotIn(op_type, opaque)
        self.assertEqual(graph.op_counts()["matmul"], 17)  # 2 x 6 + 2 x 2 (scores, ctx) + 1

    def test_gather_elements_folds_past_32_indices(self):
        # onnx 1.15's reference GatherElements returns a wrong shape here
        # (np.choose takes at most 32 choices): the Hugging Face failure.
        rng = np.random.default_rng(0)
        data = rng.standard_normal((2, 64)).astype(np.float32)
        index = rng.integers(-64, 64, (2, 50)).astype(np.int64)
        node = helper.make_node("GatherElements", ["d", "i"], ["g"], axis=1)
        add = helper.make_node("Add", ["x", "g"], ["y"])
        graph = helper.make_graph(
            [node, add], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 50))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 50))],
            initializer=[onnx.numpy_helper.from_array(data, "d"),
                         onnx.numpy_helper.from_array(index, "i")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        _, weights = load_onnx(model)
        (folded,) = [v for k, v in weights.items() if v.shape == (2, 50)]
        np.testing.assert_array_equal(folded, np.take_along_axis(data, index % 64, axis=1))

    def test_dynamo_ir10_opset18_imports_whole_and_round_trips(self):
        model = models.torch_dynamo_transformer()
        self.assertEqual(model.ir_version, 10)
        with self.assertRaisesRegex(Exception, "ir_version 10 is higher"):
            onnx.checker.check_model(model)  # what refused these files before
        graph = self._round_trip(model, models.bert_feeds(16, 50))
        opaque = _opaque_types(graph)
        for op_type in ("LayerNormalization", "ReduceMean", "GatherND", "IsNaN", "And"):
            self.assertIn(op_type, opaque)
        self.assertEqual(graph.op_counts()["matmul"], 8)

    def test_model_local_functions_are_inlined(self):
        model = models.dynamo_with_functions()
        feeds = {"x": np.random.default_rng(0).standard_normal((1, 8, 16), np.float32)}
        graph = self._round_trip(model, feeds)
        # Gelu's body (and its nested Half) became engine arithmetic around
        # an opaque Erf; both Leaky calls are LeakyRelu with their alphas.
        opaque = _opaque_types(graph)
        self.assertEqual(opaque, collections.Counter({"Erf": 1, "LeakyRelu": 2}))
        alphas = sorted(helper.get_attribute_value(a)
                        for op in graph.ops() if op.type == "opaque"
                        for a in decode_opaque(op.params["opaque_type"]).node.attribute
                        if a.name == "alpha")
        np.testing.assert_allclose(alphas, [0.01, 0.2])

    def test_recursive_function_is_refused(self):
        model = models.dynamo_with_functions()
        half = next(f for f in model.functions if f.name == "Half")
        half.node[1].CopyFrom(helper.make_node("Half", ["x"], ["y"], domain=half.domain))
        with self.assertRaisesRegex(ValueError, "nest deeper than"):
            load_onnx(model)

    def test_newer_ir_still_checked(self):
        # Read past the IR version, but not past what the checker knows: an
        # invalid node in an IR 10 file is still refused, naming the problem.
        model = models.torch_dynamo_transformer()
        model.graph.node[3].input.append("no_such_tensor")
        with self.assertRaisesRegex(ValueError, "not a valid ONNX model"):
            load_onnx(model)
        # An element type the installed onnx does not know (IR 10's int4 is
        # 22) is refused too.
        model = models.torch_dynamo_transformer()
        model.graph.input[0].type.tensor_type.elem_type = 22
        with self.assertRaises(ValueError):
            load_onnx(model)

    def test_keras_transformer_block_tf2onnx_opset18(self):
        model = models.keras_transformer_block()
        self.assertEqual([o.version for o in model.opset_import if o.domain == ""], [18])
        feeds = {"tokens": np.random.default_rng(0).standard_normal((1, 16, 32), np.float32)}
        graph = self._round_trip(model, feeds)
        # LayerNormalization decomposed by tf2onnx: ReduceMean-18 (axes as
        # an input) stays opaque, the rest is engine arithmetic.
        self.assertEqual(_opaque_types(graph)["ReduceMean"], 4)
        self.assertGreaterEqual(graph.op_counts()["matmul"], 6)


if __name__ == "__main__":
    absltest.main()
