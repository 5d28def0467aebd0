"""Tests of ONNX export: every graph the engine produces exports valid and
computes what the engine graph computes.

For every xfer of the default set, its source pattern (as the semantics test
builds it) and every rewrite of it are exported, checked with
`onnx.checker.check_model(full_check=True)` (done by `to_onnx`) and run
through ONNX's reference evaluator; the numpy reference executor on the
engine graph is the oracle. Models are written at opset 15: onnx 1.15's
reference BatchNormalization-9 (opsets 9-13) fills in the default `momentum`
and then normalises with batch statistics, which is not inference.
"""

from absl.testing import absltest
import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from tests.rules import semantics_test
from xflowrl.engine import GraphBuilder, XferSet
from xflowrl.executor import reference as executor
from xflowrl.onnx_io import load_onnx, to_onnx
from xflowrl.onnx_io.common import ModelInterface


def _assert_exports_equivalent(test, graph, seed, what):
    feeds = {k: v.astype(np.float32) for k, v in executor.random_feeds(graph, seed).items()}
    want = executor.execute(graph, feeds)
    weights = {k: v for k, v in feeds.items() if k in graph.weights()}
    model = to_onnx(graph, weights, opset=15)
    got = ReferenceEvaluator(model).run(None, {k: feeds[k] for k in graph.inputs()})
    test.assertEqual(len(got), len(want), what)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(np.abs(w).max(), 1),
                                   err_msg=what)
    return model


class ExportEveryRewriteTest(absltest.TestCase):

    def test_every_rule_and_every_rewrite(self):
        xfers = XferSet.default()
        exported = 0
        for index, rule in enumerate(xfers.rules):
            graph = semantics_test.instantiate(rule)
            if graph is None:
                continue
            locs = XferSet([rule]).locations(graph)
            candidates = [graph] + [locs.apply(0, l) for l in range(locs.counts[0])]
            for k, candidate in enumerate(candidates):
                _assert_exports_equivalent(self, candidate, index, f"{rule.name} #{k}")
                exported += 1
        self.assertGreater(exported, 2 * len(xfers))

    def test_mini_networks_every_location(self):
        xfers = XferSet.default()
        seen = set()
        for name, graph in semantics_test.mini_networks().items():
            locs = xfers.locations(graph)
            for x, n in enumerate(locs.counts):
                for l in range(n):
                    rewritten = locs.apply(x, l)
                    seen.update(rewritten.op_counts())
                    _assert_exports_equivalent(self, rewritten, l, f"{name}: {xfers.names[x]}")
        # The folding ops and fused activations all went through the exporter.
        for op_type in ("fuse_conv_bn_alpha_var", "fuse_conv_bn_bias", "broadcast_add",
                        "enlarge", "merge_gconv", "split", "concat"):
            self.assertIn(op_type, seen)


class ExportDetailsTest(absltest.TestCase):

    @staticmethod
    def _weights(graph):
        return {k: v.astype(np.float32) for k, v in executor.random_feeds(graph).items()}

    def _conv_bn(self):
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 3, 6, 6))
        y = b.conv2d(input=x, weight=b.weight(name="w", shape=(4, 3, 3, 3)), strides=2,
                     activation="RELU")
        y = b.batchnorm(input=y, **{k: b.weight(name=f"bn.{k}", shape=(4,))
                                    for k in ("scale", "bias", "mean", "var")})
        return b.build([y])

    def test_fused_activation_and_tf_same_pads(self):
        model = to_onnx(self._conv_bn(), self._weights(self._conv_bn()))
        conv, relu = model.graph.node[0], model.graph.node[1]
        self.assertEqual((conv.op_type, relu.op_type), ("Conv", "Relu"))
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in conv.attribute}
        # SAME at stride 2 on 6: one padding row/column, after (TensorFlow's rule).
        self.assertEqual(attrs["pads"], [0, 0, 1, 1])
        self.assertEqual(model.graph.output[0].name, "output")

    def test_folded_batchnorm_is_precomputed(self):
        graph = self._conv_bn()
        feeds = self._weights(graph)
        bn_fold = XferSet.default().names.index("conv_bn_s2_same")
        # conv_bn needs an unfused conv: take the relu out first.
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 3, 6, 6))
        y = b.conv2d(input=x, weight=b.weight(name="w", shape=(4, 3, 3, 3)), strides=2)
        y = b.batchnorm(input=y, **{k: b.weight(name=f"bn.{k}", shape=(4,))
                                    for k in ("scale", "bias", "mean", "var")})
        folded = XferSet.default().apply(b.build([y]), bn_fold, 0)
        model = to_onnx(folded, feeds)
        self.assertEqual([n.op_type for n in model.graph.node], ["Conv", "Add"])
        self.assertEqual(len(model.graph.initializer), 2)   # folded weight, [C,1,1] bias
        self.assertEqual(sorted(tuple(i.dims) for i in model.graph.initializer),
                         [(4, 1, 1), (4, 3, 3, 3)])

    def test_folding_ops_on_run_time_values_become_nodes(self):
        # Weights fed as graph inputs: the folding ops cannot be precomputed.
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 3, 6, 6))
        w = b.input(name="w", shape=(4, 3, 3, 3))
        y = b.conv2d(input=x, weight=w)
        y = b.batchnorm(input=y, **{k: b.input(name=f"bn.{k}", shape=(4,))
                                    for k in ("scale", "bias", "mean", "var")})
        fold = XferSet.default().names.index("conv_bn_s1_same")
        folded = XferSet.default().apply(b.build([y]), fold, 0)
        feeds = {k: v.astype(np.float32) for k, v in executor.random_feeds(folded).items()}
        model = to_onnx(folded, {}, opset=15)
        got = ReferenceEvaluator(model).run(None, feeds)[0]
        np.testing.assert_allclose(got, executor.execute(folded, feeds)[0], rtol=1e-4,
                                   atol=1e-5)
        self.assertIn("Sqrt", [n.op_type for n in model.graph.node])

    def test_round_trip_keeps_the_graph(self):
        graph = self._conv_bn()
        weights = self._weights(graph)
        model = to_onnx(graph, weights, interface=ModelInterface(output_names=["y"]))
        again, again_weights = load_onnx(model)
        # The fused ReLU comes back as its own op; everything else is as built.
        self.assertEqual(again.op_counts(), {"conv2d": 1, "relu": 1, "batchnorm": 1})
        self.assertEqual(sorted(again_weights), sorted(weights.keys() - {"x"}))
        self.assertEqual(again_weights.interface.output_names, ["y"])

    def test_missing_and_misshaped_weights(self):
        graph = self._conv_bn()
        weights = self._weights(graph)
        del weights["bn.mean"]
        with self.assertRaisesRegex(ValueError, "no value for weight 'bn.mean'"):
            to_onnx(graph, weights)
        weights["bn.mean"] = np.zeros(5)
        with self.assertRaisesRegex(ValueError, r"weight 'bn.mean' has shape \(5,\)"):
            to_onnx(graph, weights)

    def test_hand_built_opaque_op_is_refused(self):
        b = GraphBuilder()
        x = b.input(name="x", shape=(2, 2))
        graph = b.build(b.opaque(op_type="Mystery", inputs=[x], output_shapes=[(2, 2)]))
        with self.assertRaisesRegex(ValueError, "'Mystery' carries no ONNX node"):
            to_onnx(graph, {})


if __name__ == "__main__":
    absltest.main()
