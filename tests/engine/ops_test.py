"""The Python view of the engine's op table agrees with what the engine does."""

import math
import os

from absl.testing import absltest, parameterized
import numpy as np

from xflowrl import _engine, ops
from xflowrl.engine import CostModel, GraphBuilder
from xflowrl.engine.cost import FITTED_CLASSES, cudnn_plan, fitted_features
from xflowrl.executor import reference as executor
from xflowrl.rules import rules_io
from xflowrl.rules.rules_io import PatternOp, PatternTensor, Rule

_DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "docs", "engine.md")


def every_op_graph():
    """A graph holding every operator type at least once, built with the
    builder's typed methods (which name each input: their own arities)."""
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, 4, 10, 10))
    w = b.weight(name="w", shape=(4, 4, 3, 3))
    w1 = b.weight(name="w1", shape=(4, 4, 1, 1))
    c = b.weight(name="c", shape=(4,))
    s = b.weight(name="s", shape=(1,))
    wg = b.weight(name="wg", shape=(4, 1, 3, 3))
    y = b.conv2d(input=x, weight=w, activation="RELU")
    y = b.maxpool2d(input=y, kernel=3, strides=1)
    y = b.avgpool2d(input=y, kernel=2, strides=2, padding="VALID", activation="TANH")
    y = b.sigmoid(input=b.relu(input=b.tanh(input=y)))
    y = b.batchnorm(input=y, scale=c, bias=c, mean=c, var=c)
    y = b.concat(inputs=[y, y], axis=1)
    a, z = b.split(input=y, axis=1, sizes=[4, 4])
    y = b.div(x=b.sub(x=b.mul(x=b.add(x=a, y=z), y=a), y=z), y=a)
    y = b.scalar_mul(x=y, scale=s)
    m = b.reshape(input=y, shape=(1, 4, 25))
    m = b.transpose(input=m, perm=(0, 2, 1))
    m = b.matmul(a=m, b=b.reshape(input=w1, shape=(1, 4, 4)), activation="SIGMOID")
    big = b.enlarge(weight=w1, like=w)
    folded = b.fuse_conv_bn_alpha_var(weight=big, scale=c, var=c)
    bias = b.fuse_conv_bn_bias(scale=c, bias=c, mean=c, var=c)
    merged = b.merge_gconv(weight=wg, count=2, groups=4)
    v = b.conv2d(input=b.reshape(input=m, shape=(1, 4, 5, 5)), weight=folded)
    v = b.broadcast_add(input=v, bias=bias, activation="RELU")
    v = b.conv2d(input=v, weight=merged)
    [o] = b.opaque(op_type="Identity", inputs=[v], output_shapes=[(1, 4, 5, 5)], flops=100)
    return b.build([o, a])


class TableTest(parameterized.TestCase):

    def test_names_and_numbers_round_trip_through_the_engine(self):
        self.assertLen(set(ops.OP_TYPES), len(ops.SPECS))
        self.assertLen({s.type_id for s in ops.SPECS}, len(ops.SPECS))
        for s in ops.SPECS:
            self.assertEqual(_engine.op_type_id(s.name), s.type_id)
            self.assertEqual(_engine.op_type_str(s.type_id), s.name)
        self.assertEqual(_engine.op_type_id("no_such_op"), -1)
        with self.assertRaisesRegex(ValueError, "unknown op type 'no_such_op'"):
            ops.spec("no_such_op")

    def test_enums_keep_tasos_numbers(self):
        # Rule files and TASO's graph_subst.pb store these numbers.
        self.assertEqual(ops.PADDINGS, ("SAME", "VALID"))
        self.assertEqual(ops.ACTIVATIONS, ("NONE", "SIGMOID", "RELU", "TANH"))
        self.assertEqual(ops.PARAM_KEYS["stride_h"], 6)
        self.assertEqual(ops.PARAM_KEYS["epsilon"], 17)
        self.assertEqual(ops.FLOAT_PARAMS, ("epsilon",))
        self.assertEqual(ops.spec("conv2d").type_id, 3)
        self.assertEqual(ops.spec("broadcast_add").type_id, 61)

    def test_every_type_is_in_the_test_graph(self):
        graph = every_op_graph()
        self.assertEqual({op.type for op in graph.ops()}, set(ops.OP_TYPES))

    def test_arity_outputs_and_params_agree_with_built_ops(self):
        for op in every_op_graph().ops():
            s = ops.spec(op.type)
            if s.arity is not None:
                self.assertLen(op.inputs, s.arity, op.type)
            if s.num_outputs is not None:
                self.assertLen(op.output_shapes, s.num_outputs, op.type)
            self.assertEqual(tuple(op.params), s.params, op.type)

    def test_the_engine_refuses_any_other_arity(self):
        for s in ops.SPECS:
            if not s.arity:  # leaves (made by input/weight) and variadic types
                continue
            builder = _engine.BuilderHandle()
            x = builder.input("x", (1, 4, 4, 4))
            with self.assertRaisesRegex(ValueError, f"expects {s.arity} inputs"):
                builder.add(s.type_id, {}, [x] * (s.arity + 1))

    def test_the_executor_takes_the_arity_of_the_table(self):
        graph = every_op_graph()
        without_opaque = [op for op in graph.ops() if op.type != "opaque"]
        feeds = executor.random_feeds(graph, seed=0)
        values = {}
        for op in without_opaque:
            if op.type in ops.LEAF_TYPES:
                values[(op.guid, 0)] = feeds[op.name]
                continue
            args = [values[tuple(t)] for t in op.inputs]
            outs = executor.run_op(op.type, op.params, args)
            for k, out in enumerate(outs):
                self.assertEqual(out.shape, tuple(op.output_shapes[k]), op.type)
                values[(op.guid, k)] = out
            arity = ops.spec(op.type).arity
            if arity is not None:
                with self.assertRaisesRegex(ValueError, f"takes {arity} inputs"):
                    executor.run_op(op.type, op.params, args + args[:1])

    def test_free_types_cost_nothing_and_others_do(self):
        graph = every_op_graph()
        costs = graph.op_costs(CostModel("analytic"))
        for op, cost, weight_side in zip(graph.ops(), costs, graph.weight_side()):
            s = ops.spec(op.type)
            if s.free or weight_side:
                self.assertEqual(cost, 0.0, op.type)
            else:
                self.assertGreater(cost, 0.0, op.type)
            if s.weight_only:
                self.assertTrue(weight_side, op.type)

    def test_kinds_agree_with_the_other_columns(self):
        # ops_table.cc checks the same at compile time; this checks what Python reads.
        free_kinds = ("leaf", "copy", "view", "weight_transform")
        for s in ops.SPECS:
            self.assertIn(s.kind, ops.KINDS, s.name)
            self.assertEqual(s.free, s.kind in free_kinds, s.name)
            self.assertEqual(s.weight_only, s.kind == "weight_transform", s.name)
            self.assertEqual(s.arity == 0, s.kind == "leaf", s.name)
            self.assertEqual(s.flops_per_element > 0,
                             s.kind in ("eltwise", "batchnorm", "concat"), s.name)
        self.assertEqual({s.name: s.activation for s in ops.SPECS if s.activation != "NONE"},
                         {"relu": "RELU", "sigmoid": "SIGMOID", "tanh": "TANH"})

    def test_the_cost_backends_read_kind_flops_and_activation(self):
        graph = every_op_graph()
        shapes = {(op.guid, k): tuple(shape) for op in graph.ops()
                  for k, shape in enumerate(op.output_shapes)}
        for op, weight_side in zip(graph.ops(), graph.weight_side()):
            s = ops.spec(op.type)
            if s.kind == "leaf" or weight_side:
                continue
            inputs = [shapes[tuple(t)] for t in op.inputs]
            # The fitted backend prices an op by its kind's class, over
            # op_work's FLOPs (per output element for the element kinds).
            op_class, flops, _ = fitted_features(op.type, inputs, **op.params)
            self.assertEqual(op_class, s.kind if s.kind in FITTED_CLASSES else "", op.type)
            if s.flops_per_element:
                elements = sum(int(np.prod(shape)) for shape in op.output_shapes)
                self.assertEqual(flops, s.flops_per_element * elements, op.type)
            # The measured backends run an activation op's own function.
            if s.activation != "NONE":
                self.assertIn(f"activation {s.activation.lower()} ",
                              cudnn_plan(op.type, inputs, **op.params))

    def test_pattern_types_are_what_rule_validation_accepts(self):
        for s in ops.SPECS:
            arity = s.arity or 2
            op = PatternOp(s.name, tuple(PatternTensor(-1 - k) for k in range(arity)))
            rule = Rule(f"uses_{s.name}", src=(op,), dst=(op,),
                        mapped_outputs=((PatternTensor(0), PatternTensor(0)),))
            native = (rule.name, [(s.type_id, [(-1 - k, 0) for k in range(arity)], [], [])],
                      [(s.type_id, [(-1 - k, 0) for k in range(arity)], [], [])],
                      [((0, 0), (0, 0))])
            if s.pattern:
                rules_io.validate_rule(rule)
                _engine.RuleSetHandle([native])
            else:
                with self.assertRaisesRegex(ValueError, "unknown op type"):
                    rules_io.validate_rule(rule)
                with self.assertRaisesRegex(ValueError, "unusable type"):
                    _engine.RuleSetHandle([native])

    def test_docs_show_the_table(self):
        with open(_DOCS) as f:
            shown = ops.markdown_table() in f.read()
        self.assertTrue(shown, "docs/engine.md's operator table differs from the engine's: "
                               "paste the output of `python -m xflowrl.ops`")


def _reference_window(size, kernel, stride, padding):
    """TensorFlow's documented rule, written independently of the engine."""
    if padding == "VALID":
        return (size - kernel) // stride + 1, 0, 0
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return out, total // 2, total - total // 2


class WindowTest(parameterized.TestCase):

    def test_matches_the_reference_rule(self):
        for size, kernel, stride, padding in np.ndindex(12, 6, 4, 2):
            size, kernel, stride = size + 1, kernel + 1, stride + 1
            padding = ops.PADDINGS[padding]
            if padding == "VALID" and kernel > size:
                continue
            self.assertEqual(tuple(ops.window(size, kernel, stride, padding)),
                             _reference_window(size, kernel, stride, padding),
                             (size, kernel, stride, padding))

    @parameterized.parameters(
        ((5, 3, 0, "SAME"), "stride must be >= 1, got 0"),
        ((2, 3, 1, "VALID"), "VALID kernel of size 3 exceeds input size 2"),
        ((5, 3, 1, "FULL"), "unknown padding 'FULL'"),
    )
    def test_bad_arguments(self, args, message):
        with self.assertRaisesRegex(ValueError, message):
            ops.window(*args)

    def test_the_executor_and_onnx_use_it(self):
        from xflowrl.onnx_io import ops as onnx_ops  # pylint: disable=import-outside-toplevel
        self.assertIs(executor.window, ops.window)
        self.assertIs(onnx_ops.window, ops.window)
        # SAME_LOWER is SAME with the larger half first.
        pads, outs = onnx_ops._pads_2d({"auto_pad": b"SAME_LOWER"}, (6, 7), (4, 2), (2, 1))
        rows, cols = ops.window(6, 4, 2, "SAME"), ops.window(7, 2, 1, "SAME")
        self.assertEqual(pads, [(rows.pad_after, rows.pad_before),
                                (cols.pad_after, cols.pad_before)])
        self.assertEqual(outs, [rows.out, cols.out])


if __name__ == "__main__":
    absltest.main()
