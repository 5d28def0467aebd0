"""Tests of the cudnn cost backend.

`cudnn_plan` (what the backend runs for an op) is host code and is tested in
every build. The backend itself is tested according to the build and the
machine: not built, built without a visible GPU, or built with one.
"""

import glob
import os
import tempfile

from absl.testing import absltest, parameterized

from xflowrl.engine import CostModel, GraphBuilder, available_backends, cudnn_check, cudnn_plan
from xflowrl.zoo import get_graph


def gpu_visible() -> bool:
    """Whether an NVIDIA device node exists and CUDA_VISIBLE_DEVICES allows it."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return bool(glob.glob("/dev/nvidia[0-9]*"))


class CudnnPlanTest(parameterized.TestCase):

    @parameterized.named_parameters(
        # TF's SAME splits an odd total padding with the extra row at the
        # bottom/right: cuDNN gets the smaller side over a larger input.
        ("same_odd_kernel_stride1", (1, 8, 16, 16), (8, 8, 3, 3), 1, "SAME",
         "x=[1,8,16,16] w=[8,8,3,3] y=[1,8,16,16] pad=[1,1] stride=[1,1] groups=1"),
        ("same_even_kernel", (1, 8, 16, 16), (8, 8, 4, 4), 1, "SAME",
         "x=[1,8,17,17] w=[8,8,4,4] y=[1,8,16,16] pad=[1,1]"),
        ("same_stride2_asymmetric", (1, 8, 16, 16), (8, 8, 3, 3), 2, "SAME",
         "x=[1,8,17,17] w=[8,8,3,3] y=[1,8,8,8] pad=[0,0] stride=[2,2]"),
        ("same_stride2_symmetric", (1, 8, 15, 15), (8, 8, 3, 3), 2, "SAME",
         "x=[1,8,15,15] w=[8,8,3,3] y=[1,8,8,8] pad=[1,1]"),
        ("valid", (1, 8, 10, 10), (8, 8, 3, 3), 1, "VALID",
         "x=[1,8,10,10] w=[8,8,3,3] y=[1,8,8,8] pad=[0,0]"),
        ("grouped", (1, 8, 10, 10), (16, 4, 3, 3), 1, "SAME", "y=[1,16,10,10] pad=[1,1] "
         "stride=[1,1] groups=2"),
        ("depthwise", (2, 8, 10, 10), (8, 1, 3, 3), 1, "SAME", "groups=8"),
    )
    def test_conv_geometry(self, x, w, stride, padding, expected):
        plan = cudnn_plan("conv2d", [x, w], stride_h=stride, stride_w=stride, padding=padding)
        self.assertStartsWith(plan, "conv ")
        self.assertIn(expected, plan)

    def test_asymmetric_padding_per_axis(self):
        # Height: odd total (asymmetric); width: even total (symmetric).
        plan = cudnn_plan("conv2d", [(1, 4, 16, 15), (4, 4, 3, 3)], stride_h=2, stride_w=2)
        self.assertIn("x=[1,4,17,15] w=[4,4,3,3] y=[1,4,8,8] pad=[0,1]", plan)

    def test_conv_activation(self):
        shapes = [(1, 8, 8, 8), (8, 8, 3, 3)]
        self.assertIn("act=none fused=0", cudnn_plan("conv2d", shapes))
        self.assertIn("act=relu fused=1", cudnn_plan("conv2d", shapes, activation="RELU"))
        self.assertIn("act=sigmoid fused=0", cudnn_plan("conv2d", shapes, activation="SIGMOID"))
        self.assertIn("act=tanh fused=0", cudnn_plan("conv2d", shapes, activation="TANH"))

    def test_pools(self):
        plan = cudnn_plan("maxpool", [(1, 8, 16, 16)], kernel_h=3, kernel_w=3, stride_h=2,
                          stride_w=2, padding="SAME", activation="RELU")
        self.assertEqual(plan, "maxpool x=[1,8,17,17] y=[1,8,8,8] window=[3,3] pad=[0,0] "
                               "stride=[2,2] act=relu")
        plan = cudnn_plan("avgpool", [(1, 8, 7, 7)], kernel_h=2, kernel_w=2, stride_h=2,
                          stride_w=2, padding="VALID")
        self.assertEqual(plan, "avgpool x=[1,8,7,7] y=[1,8,3,3] window=[2,2] pad=[0,0] "
                               "stride=[2,2] act=none")

    def test_matmul(self):
        self.assertEqual(cudnn_plan("matmul", [(4, 2, 3, 16), (4, 2, 16, 5)], activation="RELU"),
                         "gemm batch=8 m=3 n=5 k=16 act=relu")
        self.assertEqual(cudnn_plan("matmul", [(64, 768), (768, 3072)]),
                         "gemm batch=1 m=64 n=3072 k=768 act=none")

    def test_activations_view_any_rank_as_4d(self):
        self.assertEqual(cudnn_plan("relu", [(2, 3, 4, 5, 6)]), "activation relu x=[6,4,5,6]")
        self.assertEqual(cudnn_plan("tanh", [(7, 9)]), "activation tanh x=[1,1,7,9]")
        self.assertEqual(cudnn_plan("sigmoid", [(1, 8, 4, 4)]), "activation sigmoid x=[1,8,4,4]")

    @parameterized.named_parameters(
        ("same_shapes", "add", (2, 8, 4, 4), (2, 8, 4, 4),
         "optensor add a=[1,1,1,256] b=[1,1,1,256] c=[1,1,1,256] alpha=[1,1]"),
        ("channel_broadcast", "sub", (1, 8, 4, 4), (8, 1, 1),
         "optensor add a=[1,1,8,16] b=[1,1,8,1] c=[1,1,8,16] alpha=[1,-1]"),
        # Only B may broadcast: b - a becomes -a + b with the operands swapped.
        ("swapped", "sub", (8, 1, 1), (1, 8, 4, 4),
         "optensor add a=[1,1,8,16] b=[1,1,8,1] c=[1,1,8,16] alpha=[-1,1]"),
        ("mul_swapped", "mul", (4,), (3, 4),
         "optensor mul a=[1,1,3,4] b=[1,1,1,4] c=[1,1,3,4] alpha=[1,1]"),
        ("scalar_mul", "scalar_mul", (2, 3, 4), (1,),
         "optensor mul a=[1,1,1,24] b=[1,1,1,1] c=[1,1,1,24] alpha=[1,1]"),
        ("both_broadcast", "add", (4, 1), (1, 5),
         'optensor add a=[1,1,4,5] b=[1,1,1,5] c=[1,1,4,5] alpha=[1,1] '
         'approx="both operands broadcast: timed with a full-size first operand"'),
        ("div", "div", (2, 3), (2, 3),
         'optensor mul a=[1,1,1,6] b=[1,1,1,6] c=[1,1,1,6] alpha=[1,1] '
         'approx="division timed as cudnnOpTensor MUL (cuDNN has no divide)"'),
        ("five_dims", "add", (2, 3, 4, 5, 6), (3, 1, 5, 1),
         "optensor add a=[2,3,4,5,6] b=[1,3,1,5,1] c=[2,3,4,5,6]"),
        ("merged_runs", "add", (2, 3, 4, 5, 6, 7), (2, 3, 1, 1, 6, 7),
         "optensor add a=[1,6,20,42] b=[1,6,1,42] c=[1,6,20,42]"),
    )
    def test_element_wise(self, op, a, b, expected):
        self.assertIn(expected, cudnn_plan(op, [a, b]))

    def test_six_alternating_dims_are_rejected(self):
        with self.assertRaisesRegex(ValueError, "more than 5 dims in cudnnOpTensor"):
            cudnn_plan("add", [(2, 3, 4, 5, 6, 7), (1, 3, 1, 5, 1, 7)])

    def test_broadcast_add_batchnorm_concat_opaque(self):
        self.assertIn("optensor add a=[1,2,8,16] b=[1,1,8,1] c=[1,2,8,16] alpha=[1,1]",
                      cudnn_plan("broadcast_add", [(2, 8, 4, 4), (8,)]))
        self.assertEqual(cudnn_plan("batchnorm", [(1, 8, 4, 4)] + [(8,)] * 4, epsilon=1e-3),
                         "batchnorm x=[1,8,4,4] vec=[1,8,1,1] eps=0.001")
        # 2 rows; per row 3*4 and 5*4 floats side by side in 8*4.
        self.assertEqual(cudnn_plan("concat", [(2, 3, 4), (2, 5, 4)], axis=1),
                         "concat rows=2 widths=[48,80] out_width=128")
        self.assertEqual(cudnn_plan("concat", [(3, 4), (5, 4)], axis=0),
                         "concat rows=1 widths=[48,80] out_width=128")
        self.assertEqual(cudnn_plan("opaque", [(1, 8)], opaque_type="Softmax",
                                    opaque_shapes=[(1, 8)], opaque_flops=40), "analytic")

    def test_free_and_unknown_ops_are_rejected(self):
        with self.assertRaisesRegex(ValueError, "free ops are never measured"):
            cudnn_plan("reshape", [(2, 8)], shape=(16,))
        with self.assertRaisesRegex(ValueError, "unknown op type"):
            cudnn_plan("softmax", [(2, 8)])

    def test_every_paid_op_has_a_plan(self):
        """Every op the zoo graphs pay for can be planned, so measured."""
        kinds = {plan_of(op_type, inputs, params).split()[0]
                 for op_type, inputs, params in paid_ops()}
        self.assertEqual(kinds, {"conv", "maxpool", "avgpool", "gemm", "activation", "optensor",
                                 "batchnorm", "concat"})


def plan_of(op_type, inputs, params):
    return cudnn_plan(op_type, inputs, **params)


def paid_ops():
    """(type, input shapes, params) of every non-free op of a few zoo graphs
    and of `_all_kinds_graph`, deduplicated."""
    seen = {}
    graphs = [get_graph(n) for n in ("resnet50", "inception_v3", "squeezenet1_1", "bert")]
    for g in graphs + [_all_kinds_graph()]:
        shapes = {op.guid: op.output_shapes for op in g.ops()}
        for op, cost in zip(g.ops(), g.op_costs(CostModel("analytic"))):
            if cost == 0:
                continue  # free: never measured
            inputs = [shapes[guid][i] for guid, i in op.inputs]
            seen[repr((op.type, inputs, sorted(op.params.items())))] = (op.type, inputs,
                                                                        op.params)
    return list(seen.values())


class CudnnBackendTest(absltest.TestCase):

    def test_not_built_is_a_clear_error(self):
        if "cudnn" in available_backends():
            self.skipTest("built with cuDNN")
        with self.assertRaisesRegex(ValueError, "cudnn cost backend is not built"):
            CostModel("cudnn")

    def test_bad_arguments(self):
        if "cudnn" not in available_backends():
            self.skipTest("built without cuDNN")
        with self.assertRaisesRegex(ValueError, "warmup must be >= 0 and repeats >= 1"):
            CostModel("cudnn", repeats=0)

    def test_graph_timing_is_for_cudnn_only(self):
        with self.assertRaisesRegex(ValueError, "graph timing is for the cudnn backend"):
            CostModel("analytic", graph_timing=False)

    def test_descriptors_of_every_paid_op_are_accepted_by_cudnn(self):
        """cuDNN itself (no device needed) accepts every plan's descriptors and
        derives the engine's output shapes for convs and pools."""
        ops = paid_ops()
        if "cudnn" not in available_backends():
            with self.assertRaisesRegex(ValueError, "cudnn cost backend is not built"):
                cudnn_check(*ops[0][:2], **ops[0][2])
            return
        self.assertGreater(len(ops), 50)
        for op_type, inputs, params in ops:
            cudnn_check(op_type, inputs, **params)

    def test_no_device_is_a_clear_error(self):
        if "cudnn" not in available_backends():
            self.skipTest("built without cuDNN")
        if gpu_visible():
            self.skipTest("a GPU is visible")
        with self.assertRaisesRegex(ValueError, r"^cudnn backend: no CUDA device: "):
            CostModel("cudnn")


def _all_kinds_graph():
    b = GraphBuilder()
    x = b.input(name="x", shape=(2, 8, 10, 10))
    w = b.weight(name="w", shape=(8, 4, 3, 3))
    y = b.conv2d(input=x, weight=w, strides=2, activation="RELU")     # grouped
    y = b.conv2d(input=y, weight=b.weight(name="w2", shape=(8, 8, 2, 2)), activation="TANH")
    y = b.maxpool2d(input=y, kernel=3, strides=1, padding="SAME")
    y = b.avgpool2d(input=y, kernel=2, strides=2, padding="VALID", activation="SIGMOID")
    v = {k: b.weight(name=k, shape=(8,)) for k in ("s", "b", "m", "v")}
    y = b.batchnorm(input=y, scale=v["s"], bias=v["b"], mean=v["m"], var=v["v"])
    y = b.broadcast_add(input=b.sigmoid(input=y), bias=v["b"])
    y = b.div(x=b.sub(x=b.tanh(input=y), y=y), y=b.mul(x=y, y=y))
    y = b.concat(inputs=[y, y], axis=1)
    m = b.matmul(a=b.reshape(input=y, shape=(4, 1, 32)),     # y: [2, 16, 2, 2]
                 b=b.input(name="z", shape=(4, 32, 3)), activation="RELU")
    return b.build([m])


def _conv_relu_pair(size=32, channels=64):
    """A 3x3 conv and a relu with the same output shape."""
    b = GraphBuilder()
    x = b.input(name="x", shape=(8, channels, size, size))
    y = b.conv2d(input=x, weight=b.weight(name="w", shape=(channels, channels, 3, 3)))
    return b.build([b.relu(input=y)])


class CudnnDeviceTest(absltest.TestCase):
    """Runs only where the backend is built and a GPU is visible."""

    def setUp(self):
        super().setUp()
        if "cudnn" not in available_backends():
            self.skipTest("built without cuDNN")
        if not gpu_visible():
            self.skipTest("no GPU visible")

    def test_every_kind_runs_and_costs_are_memoized(self):
        g = _all_kinds_graph()
        model = CostModel("cudnn", warmup=2, repeats=5)
        costs = g.op_costs(model)
        free = ("input", "weight", "reshape")
        for op, c in zip(g.ops(), costs):
            if op.type in free:
                self.assertEqual(c, 0.0, op.type)
            else:
                self.assertGreater(c, 0, op.type)
        measured = model.handle.num_measured
        self.assertGreater(measured, 0)
        # A second pass, and an identical graph, hit the memo: same numbers.
        self.assertEqual(_all_kinds_graph().op_costs(model), costs)
        self.assertEqual(model.handle.num_measured, measured)

    def test_graph_timing_runs_every_kind(self):
        """Timed from CUDA-graph replays, every kind costs more than nothing
        and less than one op per pair of events, whose samples include the
        host's launch."""
        g = _all_kinds_graph()
        replayed = g.op_costs(CostModel("cudnn", warmup=2, repeats=5))  # the default
        launched = g.op_costs(CostModel("cudnn", warmup=2, repeats=5, graph_timing=False))
        for op, r in zip(g.ops(), replayed):
            if op.type in ("input", "weight", "reshape"):
                self.assertEqual(r, 0.0, op.type)
            else:
                self.assertGreater(r, 0.0, op.type)
        self.assertLess(sum(replayed), sum(launched))

    def test_cached_on_disk_and_reloaded(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cudnn.tsv")
            g = _conv_relu_pair()
            first = g.cost(CostModel("cudnn", cache_path=path, repeats=5))
            self.assertGreater(first, 0)
            with open(path) as f:
                lines = f.readlines()
            self.assertLen(lines, 2)  # conv and relu
            self.assertTrue(all(float(line.split("\t")[1]) > 0 for line in lines))
            self.assertEqual(g.cost(CostModel("cudnn", cache_path=path)), first)
            with open(path) as f:
                self.assertLen(f.readlines(), 2)

    def test_conv_costs_more_than_relu_of_its_output(self):
        g = _conv_relu_pair()
        by_type = dict(zip([op.type for op in g.ops()],
                           g.op_costs(CostModel("cudnn", warmup=3, repeats=11))))
        self.assertGreater(by_type["conv2d"], by_type["relu"])

    def test_corrupt_cache_is_reported(self):
        with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
            f.write("key-without-time\n")
        self.addCleanup(os.remove, f.name)
        with self.assertRaisesRegex(ValueError, "corrupt cost cache .* line 1"):
            CostModel("cudnn", cache_path=f.name)


if __name__ == "__main__":
    absltest.main()
