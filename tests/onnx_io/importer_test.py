"""Tests of ONNX import: every operator, folding, the opaque path, errors.

Each model is imported, exported again and both run through ONNX's
reference evaluator (`onnx.reference`) on the same inputs; the engine op
counts show which path a node took. onnx 1.15's reference Conv misplaces
`auto_pad` padding when strided (its outputs disagree with onnx-tf and the
specification), so those cases run through onnx-tf instead.
"""

import os
import tempfile

from absl.testing import absltest, parameterized
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.onnx_io.models import OnnxWriter
from xflowrl.engine import CostModel, XferSet
from xflowrl.onnx_io import load_onnx, to_onnx
from xflowrl.onnx_io.common import decode_opaque, opaque_op_type

X = (1, 4, 8, 8)


def _model(build, inputs=(("x", X),), opset=13, in_type=TensorProto.FLOAT,
           out_type=None):
    """A model of whatever `build(w, *input_names)` adds; its return value
    (a name or a list of names) is the graph output, typed by evaluating the
    model unless `out_type` is given."""
    w = OnnxWriter(seed=5)
    outs = build(w, *[name for name, _ in inputs])
    outs = [outs] if isinstance(outs, str) else list(outs)
    graph = helper.make_graph(
        w.nodes, "t", [helper.make_tensor_value_info(n, in_type, s) for n, s in inputs],
        [helper.make_empty_tensor_value_info(o) for o in outs], initializer=w.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if out_type is not None:
        del model.graph.output[:]
        model.graph.output.extend([helper.make_tensor_value_info(o, out_type, ["d0", "d1"])
                                   for o in outs])
    else:
        values = ReferenceEvaluator(model).run(None, _feeds(model))
        del model.graph.output[:]
        model.graph.output.extend([helper.make_tensor_value_info(
            o, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for o, v in zip(outs, values)])
    onnx.checker.check_model(model)
    return model


def _conv(w, x, c_out=4, k=3, **attrs):
    return w.op("Conv", [x, w.weight("w", (c_out, X[1] // attrs.get("group", 1), k, k))],
                kernel_shape=[k, k], **attrs)


def _feeds(model, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in model.graph.input:
        shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
        feeds[info.name] = (rng.standard_normal(shape) if dtype.kind == "f" else
                            rng.integers(0, 2, shape)).astype(dtype)
    return feeds


def _run(model, feeds, oracle):
    if callable(oracle):
        model = _model(oracle, opset=model.opset_import[0].version)
    if oracle == "tf":
        import onnx_tf.backend  # pylint: disable=g-import-not-at-top
        return [np.asarray(v) for v in onnx_tf.backend.prepare(model).run(feeds)]
    return ReferenceEvaluator(model).run(None, feeds)


# name: (build, expected engine op counts (others may appear), opset, oracle)
CASES = {
    "conv_same_pads": (lambda w, x: _conv(w, x, pads=[1, 1, 1, 1]), {"conv2d": 1, "opaque": 0}),
    "conv_torch_stride2_pads": (lambda w, x: _conv(w, x, pads=[1, 1, 1, 1], strides=[2, 2]),
                                {"conv2d": 1, "opaque": 1}),
    "conv_auto_pad_same_upper": (lambda w, x: _conv(w, x, auto_pad="SAME_UPPER", strides=[2, 2]),
                                 {"conv2d": 1, "opaque": 0}, 13, "tf"),
    # onnx-tf has no SAME_LOWER: the oracle is the same conv with the
    # padding SAME_LOWER specifies written out (the extra row/column first).
    "conv_auto_pad_same_lower": (lambda w, x: _conv(w, x, auto_pad="SAME_LOWER", strides=[2, 2]),
                                 {"conv2d": 1, "opaque": 1}, 13,
                                 lambda w, x: _conv(w, x, pads=[1, 1, 0, 0], strides=[2, 2])),
    "conv_valid_bias": (lambda w, x: w.op("Conv", [x, w.weight("w", (6, 4, 3, 3)),
                                                   w.weight("b", (6,), 1.0)]),
                        {"conv2d": 1, "broadcast_add": 1}),
    "conv_depthwise": (lambda w, x: _conv(w, x, k=3, group=4, pads=[1, 1, 1, 1]),
                       {"conv2d": 1}),
    "conv_dilated_is_opaque": (lambda w, x: _conv(w, x, dilations=[2, 2]),
                               {"conv2d": 0, "opaque": 1}),
    "maxpool_torch_pads": (lambda w, x: w.op("MaxPool", [x], kernel_shape=[3, 3],
                                             strides=[2, 2], pads=[1, 1, 1, 1]),
                           {"maxpool": 1, "opaque": 1}),
    "maxpool_ceil_mode": (lambda w, x: w.op("MaxPool", [x], kernel_shape=[3, 3],
                                            strides=[2, 2], ceil_mode=1),
                          {"maxpool": 1}),
    "avgpool_count_include_pad": (lambda w, x: w.op("AveragePool", [x], kernel_shape=[3, 3],
                                                    pads=[1, 1, 1, 1], count_include_pad=1),
                                  {"avgpool": 1, "opaque": 1}),
    "avgpool_exclude_pad_same": (lambda w, x: w.op("AveragePool", [x], kernel_shape=[3, 3],
                                                   pads=[1, 1, 1, 1]),
                                 {"avgpool": 1, "opaque": 0}),
    "avgpool_exclude_pad_other_is_opaque": (
        lambda w, x: w.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2],
                          pads=[1, 1, 1, 1]), {"avgpool": 0, "opaque": 1}),
    "global_pools": (lambda w, x: w.op("Add", [w.op("GlobalAveragePool", [x]),
                                               w.op("GlobalMaxPool", [x])]),
                     {"avgpool": 1, "maxpool": 1, "add": 1}),
    "batchnorm": (lambda w, x: w.op("BatchNormalization", [
        x, w.weight("s", (4,), 1.0), w.weight("b", (4,), 1.0), w.weight("m", (4,), 1.0),
        w.init("v", np.array([0.5, 1.0, 1.5, 2.0], np.float32))], epsilon=1e-3),
                  {"batchnorm": 1}, 15),  # 15: see onnx_export_test's docstring
    "activations": (lambda w, x: w.op("Tanh", [w.op("Sigmoid", [w.op("Relu", [x])])]),
                    {"relu": 1, "sigmoid": 1, "tanh": 1}),
    "binary_broadcasting": (lambda w, x: w.op("Div", [w.op("Sub", [w.op("Mul", [
        w.op("Add", [x, w.weight("bias", (4, 1, 1), 1.0)]), w.const(np.float32(2.0))]),
        w.weight("row", (8,), 1.0)]), w.init("den", np.full((1, 4, 1, 1), 3, np.float32))]),
                            {"add": 1, "scalar_mul": 1, "mul": 0, "sub": 1, "div": 1,
                             "opaque": 0}),
    "mul_by_scalar_first": (lambda w, x: w.op("Mul", [w.const(np.float32(0.5)), x]),
                            {"scalar_mul": 1, "mul": 0}),
    # A one-element constant that broadcasts x up a rank is not a scaling of x.
    "mul_by_one_element_of_higher_rank": (
        lambda w, x: w.op("Mul", [x, w.init("one", np.full((1, 1, 1, 1, 1), 2, np.float32))]),
        {"scalar_mul": 0, "mul": 1}),
    "matmul_3d_by_2d": (lambda w, x: w.op("MatMul", [x, w.weight("w", (8, 5), 1.0)]),
                        {"matmul": 1, "reshape": 2}),
    "matmul_batched": (lambda w, x: w.op("MatMul", [x, w.op("Transpose", [x],
                                                             perm=[0, 1, 3, 2])]),
                       {"matmul": 1, "transpose": 1}),
    "gemm": (lambda w, x: w.op("Gemm", [w.op("Flatten", [x]), w.weight("w", (5, 256), 0.1),
                                        w.weight("c", (5,), 1.0)],
                               transB=1, alpha=0.5, beta=2.0),
             {"matmul": 1, "scalar_mul": 1, "mul": 0, "add": 1, "reshape": 1}),
    "gemm_trans_a": (lambda w, x: w.op("Gemm", [w.op("Reshape", [x, w.const(np.array(
        [32, 8], np.int64))]), w.weight("w", (32, 3), 0.1)], transA=1),
                     {"matmul": 1, "transpose": 1}),
    "concat_split_opset13": (lambda w, x: w.op("Concat", w.op(
        "Split", [x, w.init("sizes", np.array([1, 3], np.int64))], n_out=2, axis=1)[::-1],
        axis=-3), {"split": 1, "concat": 1}),
    "split_equal_opset11": (lambda w, x: w.op("Split", [x], n_out=2, axis=2),
                            {"split": 1}, 11),
    "reshape_zero_and_minus_one": (lambda w, x: w.op("Reshape", [x, w.const(np.array(
        [0, -1, 8], np.int64))]), {"reshape": 1}),
    "transpose_flatten": (lambda w, x: w.op("Flatten", [w.op("Transpose", [x])], axis=2),
                          {"transpose": 1, "reshape": 1}),
    "squeeze_unsqueeze_opset13": (lambda w, x: w.op("Squeeze", [w.op(
        "Unsqueeze", [x, w.init("a", np.array([0, 5], np.int64))]),
        w.init("b", np.array([0], np.int64))]), {"reshape": 2}),
    "squeeze_unsqueeze_opset11": (lambda w, x: w.op("Squeeze", [w.op(
        "Unsqueeze", [x], axes=[-1])]), {"reshape": 2}, 11),
    "identity_dropout_cast": (lambda w, x: w.op("Cast", [w.op("Dropout", [
        w.op("Identity", [x])])], to=TensorProto.FLOAT), {"input": 1}),
    "cast_to_other_type_is_opaque": (lambda w, x: w.op("Cast", [x], to=TensorProto.DOUBLE),
                                     {"opaque": 1}),
    # Equal views of one tensor are one engine op (shared views): three
    # MatMuls of a 4-D x by [8, K] share one flattening, two equal Reshape
    # nodes and two equal Transposes are one each; other targets and perms
    # stay apart.
    "matmuls_share_their_flattening": (lambda w, x: w.op("Concat", [
        w.op("MatMul", [x, w.weight("w", (8, 5), 1.0)]),
        w.op("MatMul", [x, w.weight("w", (8, 3), 1.0)]),
        w.op("MatMul", [x, w.weight("w", (8, 5), 1.0)])], axis=-1),
        {"matmul": 3, "reshape": 4, "concat": 1}),
    "equal_views_are_shared": (lambda w, x: [w.op("Concat", [
        w.op("Reshape", [x, w.const(np.array([1, 4, 64], np.int64))]),
        w.op("Reshape", [x, w.const(np.array([1, 4, -1], np.int64))]),
        w.op("Reshape", [w.op("Transpose", [x], perm=[0, 1, 3, 2]),
                         w.const(np.array([1, 4, 64], np.int64))]),
        w.op("Reshape", [w.op("Transpose", [x], perm=[0, 1, 3, 2]),
                         w.const(np.array([1, 4, 64], np.int64))]),
        w.op("Reshape", [w.op("Transpose", [x], perm=[0, 2, 1, 3]),
                         w.const(np.array([1, 4, 64], np.int64))])], axis=1),
        w.op("Reshape", [x, w.const(np.array([4, 1, 64], np.int64))])],
        {"reshape": 4, "transpose": 2, "concat": 1}),
    # x.view(x.size(0), -1) as torch.onnx writes it: folded to one reshape.
    "shape_arithmetic_folds": (lambda w, x: w.op("Reshape", [x, w.op("Concat", [
        w.op("Unsqueeze", [w.op("Gather", [w.op("Shape", [x]), w.const(np.array(0, np.int64))],
                                axis=0), w.const(np.array([0], np.int64))]),
        w.const(np.array([-1], np.int64))], axis=0)]), {"reshape": 1, "opaque": 0}),
}


class ImportOperatorTest(parameterized.TestCase):

    @parameterized.named_parameters(*[(name,) + case for name, case in CASES.items()])
    def test_operator(self, build, counts, opset=13, oracle="reference"):
        model = _model(build, opset=opset)
        graph, weights = load_onnx(model)
        all_counts = graph.op_counts()
        all_counts["input"] = len(graph.inputs())
        for op_type, n in counts.items():
            self.assertEqual(all_counts.get(op_type, 0), n, f"{op_type} in {all_counts}")
        exported = to_onnx(graph, weights)
        feeds = _feeds(model)
        want = _run(model, feeds, oracle)
        got = _run(exported, feeds, "tf" if oracle == "tf" else "reference")
        self.assertEqual([o.name for o in exported.graph.output],
                         [o.name for o in model.graph.output])
        for w_, g_ in zip(want, got):
            np.testing.assert_allclose(g_, w_, rtol=1e-5, atol=1e-5)

    def test_imported_weights_and_names(self):
        model = _model(CASES["conv_valid_bias"][0])
        graph, weights = load_onnx(model)
        self.assertEqual(sorted(weights), sorted(i.name for i in model.graph.initializer))
        for init in model.graph.initializer:
            np.testing.assert_array_equal(weights[init.name], numpy_helper.to_array(init))
        self.assertEqual(graph.inputs(), {"x": X})
        self.assertEqual(weights.interface.output_names, [model.graph.output[0].name])

    def test_unsorted_nodes_are_sorted(self):
        model = _model(CASES["activations"][0])
        nodes = list(model.graph.node)
        del model.graph.node[:]
        model.graph.node.extend(nodes[::-1])
        graph, _ = load_onnx(model)
        self.assertEqual(graph.num_ops(), 3)


class OpaqueTest(absltest.TestCase):

    def test_opaque_nodes_are_exported_verbatim(self):
        def build(w, x):
            y = w.op("Softmax", [x], axis=2)
            y = w.op("Pow", [y, w.const(np.float32(3.0))])
            values, indices = w.op("TopK", [y, w.init("k", np.array([2], np.int64))], n_out=2,
                                   axis=-1, largest=1)
            return [w.op("Relu", [values]), indices]
        model = _model(build)
        graph, weights = load_onnx(model)
        opaque = [op for op in graph.ops() if op.type == "opaque"]
        self.assertEqual([opaque_op_type(op.params["opaque_type"]) for op in opaque],
                         ["Softmax", "Pow", "TopK"])
        # Small constants ride inside the record, not in the weights.
        self.assertEqual(weights, {})
        topk = decode_opaque(opaque[2].params["opaque_type"])
        self.assertEqual(topk.output_types, [TensorProto.FLOAT, TensorProto.INT64])
        self.assertEqual(list(topk.constants.values()), [np.array([2])])
        self.assertEqual(opaque[2].output_shapes, [(1, 4, 8, 2)] * 2)
        exported = to_onnx(graph, weights)
        originals = {n.op_type: n for n in model.graph.node}
        for node in exported.graph.node:
            if node.op_type in ("Softmax", "Pow", "TopK"):
                self.assertEqual(list(node.attribute), list(originals[node.op_type].attribute))
        self.assertEqual(exported.graph.output[1].type.tensor_type.elem_type, TensorProto.INT64)
        feeds = _feeds(model)
        for w_, g_ in zip(ReferenceEvaluator(model).run(None, feeds),
                          ReferenceEvaluator(exported).run(None, feeds)):
            np.testing.assert_allclose(g_, w_, rtol=1e-6)

    def test_large_constant_of_opaque_op_is_a_weight(self):
        def build(w, ids):
            return w.op("Relu", [w.op("Gather", [w.weight("table", (100, 16), 1.0), ids])])
        model = _model(build, inputs=(("ids", (2, 3)),), in_type=TensorProto.INT64)
        graph, weights = load_onnx(model)
        self.assertEqual(list(weights), ["table_1"])
        self.assertEqual(weights.interface.input_types, {"ids": TensorProto.INT64})
        exported = to_onnx(graph, weights)
        self.assertEqual(exported.graph.input[0].type.tensor_type.elem_type, TensorProto.INT64)
        ids = {"ids": np.array([[1, 5, 99], [0, 0, 7]], np.int64)}
        np.testing.assert_array_equal(ReferenceEvaluator(exported).run(None, ids)[0],
                                      ReferenceEvaluator(model).run(None, ids)[0])

    def test_attributes_distinguish_opaque_ops_and_rules_skip_them(self):
        hashes = []
        for axis in (1, 2):
            graph, _ = load_onnx(_model(lambda w, x: w.op("Softmax", [x], axis=axis)))
            hashes.append(graph.hash())
        self.assertNotEqual(hashes[0], hashes[1])
        # conv -> softmax -> relu: conv_relu cannot fuse across the opaque op.
        graph, weights = load_onnx(_model(lambda w, x: w.op("Relu", [w.op(
            "Softmax", [_conv(w, x, pads=[1, 1, 1, 1])])])))
        result = XferSet.default().search(graph, CostModel("analytic"), budget=10)
        self.assertEqual(result.graph.op_counts()["opaque"], 1)
        self.assertEqual(result.graph.op_counts()["relu"], 1)
        self.assertGreater(result.graph.cost(CostModel("analytic")), 0)


class ImportErrorTest(absltest.TestCase):

    def _relu_model(self, shape=X):
        return _model(lambda w, x: w.op("Relu", [x]), inputs=(("x", shape),))

    def test_dynamic_input_needs_a_shape(self):
        model = self._relu_model()
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
        with self.assertRaisesRegex(ValueError, r"graph input 'x' has a dynamic dimension "
                                                r"\('batch'\) at axis 0.*input_shapes"):
            load_onnx(model)
        graph, _ = load_onnx(model, input_shapes={"x": (3, 4, 8, 8)})
        self.assertEqual(graph.output_shapes(), [(3, 4, 8, 8)])

    def test_data_dependent_shape_names_the_node(self):
        def build(w, x):
            nz = w.op("NonZero", [w.op("Greater", [x, w.const(np.float32(0))])])
            return w.op("Relu", [w.op("Cast", [nz], to=TensorProto.FLOAT)])
        model = _model(build, inputs=(("x", (2, 3)),))
        with self.assertRaisesRegex(ValueError, r"node 'NonZero_\d+' \(NonZero\).*dynamic"):
            load_onnx(model)

    def test_runtime_reshape_target_names_the_node(self):
        model = _model(lambda w, x, s: w.op("Reshape", [x, s]),
                       inputs=(("x", (2, 3)), ("s", (2,))), out_type=TensorProto.FLOAT)
        model.graph.input[1].type.tensor_type.elem_type = TensorProto.INT64
        with self.assertRaisesRegex(ValueError, r"node 'Reshape_\d+' \(Reshape\): the target "
                                                r"shape .* computed at run time"):
            load_onnx(model)

    def test_truncated_file(self):
        data = _model(CASES["conv_valid_bias"][0]).SerializeToString()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "cut.onnx")
            for cut in (len(data) // 3, len(data) // 2, len(data) - 5):
                with open(path, "wb") as f:
                    f.write(data[:cut])
                with self.assertRaisesRegex(ValueError, "malformed or truncated"):
                    load_onnx(path)

    def test_garbage_and_missing_files(self):
        with self.assertRaisesRegex(ValueError, "malformed or truncated"):
            load_onnx(b"\x08\x07garbage\xff\xff")
        with self.assertRaisesRegex(ValueError, "cannot read ONNX model"):
            load_onnx("/nonexistent/model.onnx")

    def test_control_flow_names_the_node(self):
        branch = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "b", [],
                                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, X)])
        model = _model(lambda w, x: w.op("Relu", [x]))
        cond = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
            np.array(True)))
        node = helper.make_node("If", ["c"], ["z"], name="branchy", then_branch=branch,
                                else_branch=branch)
        model.graph.node.extend([cond, node])
        model.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, X))
        with self.assertRaisesRegex(ValueError, r"node 'branchy' \(If\): control flow"):
            load_onnx(model)

    def test_unknown_domain_names_the_node(self):
        model = _model(lambda w, x: w.op("Relu", [x]))
        model.graph.node[0].op_type = "FancyOp"
        model.graph.node[0].domain = "com.example"
        model.opset_import.append(helper.make_opsetid("com.example", 1))
        with self.assertRaisesRegex(ValueError, r"\(FancyOp\): .*cannot be inferred"):
            load_onnx(model)

    def test_zero_stride_or_kernel_names_the_node(self):
        # Once a ZeroDivisionError.
        for attrs in ({"strides": [0, 1]}, {"strides": [1, -2]}, {"pads": [1, 1, 1]}):
            model = _model(lambda w, x: _conv(w, x, pads=[1, 1, 1, 1]))
            conv = model.graph.node[0]
            for key, value in attrs.items():
                for a in conv.attribute:
                    if a.name == key:
                        conv.attribute.remove(a)
                conv.attribute.append(helper.make_attribute(key, value))
            with self.assertRaisesRegex(ValueError, r"node 'Conv_\d+' \(Conv\): (strides|pads)"):
                load_onnx(model)
        model = _model(lambda w, x: w.op("MaxPool", [x], kernel_shape=[2, 2]))
        model.graph.node[0].attribute[0].ints[1] = 0
        with self.assertRaisesRegex(ValueError, r"\(MaxPool\): kernel_shape"):
            load_onnx(model)

    def test_empty_required_input_names_the_node(self):
        # Once an AttributeError ('NoneType' object has no attribute
        # 'is_const'): an empty name among Concat's variadic inputs, which
        # the checker lets through.
        model = _model(lambda w, x: w.op("Concat", [x, w.op("Relu", [x])], axis=1))
        model.graph.node[-1].input[0] = ""
        with self.assertRaisesRegex(ValueError, r"\(Concat\): an input of the variadic"):
            load_onnx(model)
        model = _model(lambda w, x: w.op("Add", [x, w.weight("b", X)]))
        model.graph.node[0].input[1] = ""
        with self.assertRaisesRegex(ValueError, r"Node \(Add_\d+\)'s input 1 is marked single"):
            load_onnx(model)  # the checker's message names the node
        model = _model(lambda w, x: w.op("Add", [x, w.weight("b", X)]))
        model.graph.node[0].input[1] = "nothing_makes_this"
        with self.assertRaisesRegex(ValueError, r"nothing_makes_this.*\n.*Add_\d+ OpType: Add"):
            load_onnx(model)

    def test_other_exceptions_become_value_errors_naming_the_node(self):
        # A Reshape target rewired to a 2-D float weight; an element type
        # onnx 1.15 does not know; a huge constant fold.
        model = _model(lambda w, x: w.op("Reshape", [x, w.weight("t", (2, 2))]),
                       out_type=TensorProto.FLOAT)
        with self.assertRaisesRegex(ValueError, r"\(Reshape\): the target shape must be"):
            load_onnx(model)
        model = _model(lambda w, x: w.op("Add", [x, w.op("ConstantOfShape", [
            w.const(np.array([2 ** 20, 2 ** 20], np.int64))])]), out_type=TensorProto.FLOAT)
        with self.assertRaisesRegex(ValueError, r"\(ConstantOfShape\): folding it would"):
            load_onnx(model)

    def test_opset_out_of_range(self):
        model = self._relu_model()
        model.opset_import[0].version = 9
        with self.assertRaisesRegex(ValueError, "opset 9"):
            load_onnx(model)


if __name__ == "__main__":
    absltest.main()
