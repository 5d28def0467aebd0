"""Tests of tracing profiled onnxruntime kernels to engine ops (synthetic
profiles: no onnxruntime session, no timing)."""

from absl.testing import absltest

from xflowrl.engine import GraphBuilder
from xflowrl.measure import ort_profile


def _graph():
    b = GraphBuilder()
    x = b.input(shape=(1, 16, 8, 8), name="x")
    conv = b.conv2d(input=x, weight=b.weight(shape=(16, 16, 3, 3), name="w"))
    y = b.relu(input=conv)
    a = b.input(shape=(4, 32), name="a")
    mm = b.matmul(a=a, b=b.weight(shape=(32, 64), name="m"), activation="RELU")
    return b.build(outputs=[y, mm])


class AttributeTest(absltest.TestCase):

    def test_kernels_are_traced_to_ops(self):
        graph = _graph()
        ops = graph.ops()
        conv = next(i for i, op in enumerate(ops) if op.type == "conv2d")
        matmul = next(i for i, op in enumerate(ops) if op.type == "matmul")
        shape = lambda *s: {"float": list(s)}  # pylint: disable=unnecessary-lambda-assignment
        kernels = {
            # A conv writing a graph output carries the output's name.
            ("output_0_nchwc", "Conv"): [0.3, 0.1, 0.2],
            ("ReorderOutput_token_3", "ReorderOutput"): [0.05] * 3,
            (f"fused matmul_{ops[matmul].guid}__1/MatMulAddFusion/", "FusedGemm"): [0.4] * 3,
            (f"matmul_{ops[matmul].guid}_relu", "Relu"): [0.01] * 3,
            ("Something_else", "Cast"): [1.0] * 3,
        }
        args = {key: {} for key in kernels}
        args[("output_0_nchwc", "Conv")] = {
            "input_type_shape": [shape(1, 16, 8, 8), shape(16, 16, 3, 3)]}
        args[("ReorderOutput_token_3", "ReorderOutput")] = {
            "input_type_shape": [shape(1, 16, 8, 8)], "output_type_shape": [shape(1, 16, 8, 8)]}
        profile = ort_profile.KernelProfile(kernels, [1.0], args)
        rows, unattributed = ort_profile.attribute(graph, profile)
        got = {(r.op_index, r.kind): r for r in rows}
        self.assertAlmostEqual(got[(conv, "op")].ms, 0.12)  # 10th percentile
        self.assertEqual(got[(-1, "reorder")].elements, 16 * 8 * 8)
        self.assertAlmostEqual(got[(matmul, "op")].ms, 0.4)
        self.assertIn((matmul, "activation"), got)
        self.assertAlmostEqual(unattributed, 1.0)
        self.assertEqual(ort_profile.features(graph, got[(-1, "reorder")]),
                         ("copy", 0.0, 8.0 * 16 * 8 * 8))
        self.assertEqual(ort_profile.features(graph, got[(matmul, "activation")]),
                         ("eltwise", 256.0, 8.0 * 256))
        self.assertEqual(ort_profile.features(graph, got[(conv, "op")])[0], "conv")

    def test_graph_times(self):
        profile = ort_profile.KernelProfile({("a", "Conv"): [1.0] * 10, ("b", "Relu"): [0.5]},
                                            [3.0, 2.0, 4.0], {})
        self.assertEqual(ort_profile.graph_times(profile),
                         {"kernels": 2, "kernel_ms": 1.5, "e2e_ms": 3.0})


if __name__ == "__main__":
    absltest.main()
