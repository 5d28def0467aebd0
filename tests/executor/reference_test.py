"""Tests of the reference executor against slow references and hand values.

The graphs here are a small fake of the graph view of docs/engine.md, so the
executor is tested without the native engine. Convolutions and pools are also
checked against TensorFlow (an independent implementation of the SAME rule)
when it is installed.
"""

import itertools
import math
import time
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

from absl.testing import absltest, parameterized
import numpy as np

from xflowrl.executor import reference as executor

try:
    import tensorflow as tf
except ImportError:  # pragma: no cover
    tf = None

TensorId = Tuple[int, int]


class FakeOp(NamedTuple):
    guid: int
    type: str
    params: Dict[str, Any]
    inputs: List[TensorId]
    output_shapes: List[Tuple[int, ...]]
    name: str


class FakeGraph:
    """The graph view of docs/engine.md, built by hand."""

    def __init__(self):
        self._ops: List[FakeOp] = []
        self._outputs: List[TensorId] = []

    def _guid(self) -> int:
        # Sparse, non-positional guids: the executor must key values by guid.
        return 100 + 7 * len(self._ops)

    def leaf(self, kind: str, name: str, shape: Sequence[int]) -> TensorId:
        guid = self._guid()
        self._ops.append(FakeOp(guid, kind, {}, [], [tuple(shape)], name))
        return (guid, 0)

    def op(self, type_name: str, inputs: Sequence[TensorId], shapes: Sequence[Sequence[int]],
           **params) -> List[TensorId]:
        guid = self._guid()
        self._ops.append(FakeOp(guid, type_name, params, list(inputs),
                                [tuple(s) for s in shapes], ""))
        return [(guid, k) for k in range(len(shapes))]

    def set_outputs(self, outputs: Sequence[TensorId]) -> "FakeGraph":
        self._outputs = list(outputs)
        return self

    def ops(self) -> List[FakeOp]:
        return list(self._ops)

    def outputs(self) -> List[TensorId]:
        return list(self._outputs)


def run_one(op_type: str, args: Sequence[np.ndarray], shapes: Sequence[Sequence[int]],
            **params) -> List[np.ndarray]:
    """Runs a single op through `execute` on a fake graph."""
    g = FakeGraph()
    leaves = [g.leaf("input", f"x{k}", a.shape) for k, a in enumerate(args)]
    outs = g.op(op_type, leaves, shapes, **params)
    g.set_outputs(outs)
    return executor.execute(g, {f"x{k}": a for k, a in enumerate(args)})


def conv_params(stride=(1, 1), padding="SAME", activation="NONE") -> Dict[str, Any]:
    return dict(stride_h=stride[0], stride_w=stride[1], padding=padding,
                activation=activation)


# ------------------------------------------------------- slow references


def _pad_before(size: int, kernel: int, stride: int, padding: str) -> Tuple[int, int]:
    """(out, padding before) by TensorFlow's documented SAME rule."""
    if padding == "VALID":
        return (size - kernel) // stride + 1, 0
    out = math.ceil(size / stride)
    return out, max((out - 1) * stride + kernel - size, 0) // 2


def naive_conv(x, w, stride, padding):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    per_group = o // (c // cg)
    oh, pt = _pad_before(h, kh, stride[0], padding)
    ow, pl = _pad_before(wd, kw, stride[1], padding)
    y = np.zeros((n, o, oh, ow))
    for b, oc, r, q in itertools.product(range(n), range(o), range(oh), range(ow)):
        first = (oc // per_group) * cg
        for i, j in itertools.product(range(kh), range(kw)):
            row, col = r * stride[0] + i - pt, q * stride[1] + j - pl
            if 0 <= row < h and 0 <= col < wd:
                y[b, oc, r, q] += np.dot(x[b, first:first + cg, row, col], w[oc, :, i, j])
    return y


def naive_pool(x, kernel, stride, padding, kind):
    n, c, h, wd = x.shape
    oh, pt = _pad_before(h, kernel[0], stride[0], padding)
    ow, pl = _pad_before(wd, kernel[1], stride[1], padding)
    y = np.zeros((n, c, oh, ow))
    for r, q in itertools.product(range(oh), range(ow)):
        rows = [r * stride[0] + i - pt for i in range(kernel[0])]
        cols = [q * stride[1] + j - pl for j in range(kernel[1])]
        rows = [i for i in rows if 0 <= i < h]
        cols = [j for j in cols if 0 <= j < wd]
        patch = x[:, :, rows][:, :, :, cols]
        y[:, :, r, q] = patch.max(axis=(2, 3)) if kind == "max" else patch.mean(axis=(2, 3))
    return y


# ------------------------------------------------------------------ tests


class ConvTest(parameterized.TestCase):

    @parameterized.parameters(
        # (x shape, w shape, stride, padding)
        ((2, 4, 7, 7), (6, 4, 3, 3), (1, 1), "SAME"),
        ((2, 4, 7, 7), (6, 4, 3, 3), (2, 2), "SAME"),
        ((1, 4, 8, 8), (6, 4, 3, 3), (2, 2), "SAME"),     # asymmetric: 0 before, 1 after
        ((1, 3, 8, 6), (5, 3, 2, 2), (1, 1), "SAME"),     # even kernel: 0 before, 1 after
        ((1, 3, 9, 10), (4, 3, 5, 3), (3, 2), "SAME"),    # non-square, strides differ
        ((2, 4, 7, 7), (6, 4, 3, 3), (2, 2), "VALID"),
        ((1, 3, 9, 8), (4, 3, 4, 1), (2, 3), "VALID"),
        ((2, 8, 6, 6), (8, 2, 3, 3), (1, 1), "SAME"),     # 4 groups
        ((2, 8, 7, 7), (4, 4, 3, 3), (2, 2), "SAME"),     # 2 groups, stride 2
        ((1, 6, 5, 5), (6, 1, 3, 3), (1, 1), "VALID"),    # depthwise
        ((1, 4, 5, 5), (8, 4, 1, 1), (2, 2), "SAME"),
    )
    def test_matches_naive_loop(self, x_shape, w_shape, stride, padding):
        rng = np.random.default_rng(0)
        x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
        want = naive_conv(x, w, stride, padding)
        (got,) = run_one("conv2d", [x, w], [want.shape], **conv_params(stride, padding))
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)

    def test_same_padding_is_asymmetric_by_hand(self):
        # H = W = 4, k = 3, s = 2: out 2, total padding 1, all of it after.
        x = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)
        w = np.ones((1, 1, 3, 3))
        (y,) = run_one("conv2d", [x, w], [(1, 1, 2, 2)], **conv_params((2, 2), "SAME"))
        want = [[x[0, 0, 0:3, 0:3].sum(), x[0, 0, 0:3, 2:4].sum()],
                [x[0, 0, 2:4, 0:3].sum(), x[0, 0, 2:4, 2:4].sum()]]
        np.testing.assert_array_equal(y[0, 0], want)
        self.assertEqual(want[0][0], 45.0)  # 0+1+2+4+5+6+8+9+10

    def test_fused_activations(self):
        rng = np.random.default_rng(1)
        x, w = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
        linear = naive_conv(x, w, (1, 1), "SAME")
        for activation, fn in [("RELU", lambda v: np.where(v > 0, v, 0.0)),
                               ("SIGMOID", lambda v: 1 / (1 + np.exp(-v))),
                               ("TANH", np.tanh)]:
            with self.subTest(activation=activation):
                (y,) = run_one("conv2d", [x, w], [linear.shape],
                               **conv_params(activation=activation))
                np.testing.assert_allclose(y, fn(linear), rtol=1e-10, atol=1e-12)

    @absltest.skipIf(tf is None, "TensorFlow is not installed")
    def test_matches_tensorflow(self):
        rng = np.random.default_rng(2)
        for h, k, s, padding in itertools.product((6, 7), (1, 2, 3), (1, 2, 3),
                                                  ("SAME", "VALID")):
            x, w = rng.standard_normal((2, 3, h, h)), rng.standard_normal((4, 3, k, k))
            want = tf.nn.conv2d(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0),
                                strides=s, padding=padding).numpy().transpose(0, 3, 1, 2)
            with self.subTest(h=h, k=k, s=s, padding=padding):
                (got,) = run_one("conv2d", [x, w], [want.shape],
                                 **conv_params((s, s), padding))
                np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)

    def test_is_fast(self):
        rng = np.random.default_rng(3)
        x, w = rng.standard_normal((1, 64, 56, 56)), rng.standard_normal((64, 64, 3, 3))
        start = time.perf_counter()
        y = executor.conv2d(x, w, conv_params())
        self.assertLess(time.perf_counter() - start, 1.0)
        self.assertEqual(y.shape, (1, 64, 56, 56))
        np.testing.assert_allclose(y[0, 5, 10, 20],
                                   np.sum(x[0, :, 9:12, 19:22] * w[5]), rtol=1e-10)

    def test_bad_shapes(self):
        with self.assertRaisesRegex(ValueError, "not a multiple"):
            executor.conv2d(np.zeros((1, 5, 4, 4)), np.zeros((4, 2, 3, 3)), conv_params())
        with self.assertRaisesRegex(ValueError, "not divisible by the group count 2"):
            executor.conv2d(np.zeros((1, 4, 4, 4)), np.zeros((3, 2, 3, 3)), conv_params())
        with self.assertRaisesRegex(ValueError, "unknown padding 'FULL'"):
            executor.conv2d(np.zeros((1, 4, 4, 4)), np.zeros((4, 4, 3, 3)),
                            conv_params(padding="FULL"))
        with self.assertRaisesRegex(ValueError, "empty kernel 0x3"):
            executor.conv2d(np.zeros((1, 4, 4, 4)), np.zeros((4, 4, 0, 3)), conv_params())


class PoolTest(parameterized.TestCase):

    @parameterized.product(kind=("max", "avg"),
                           case=[((6, 6), (3, 3), (2, 2), "SAME"),
                                 ((7, 5), (3, 2), (1, 2), "SAME"),
                                 ((8, 8), (2, 2), (2, 2), "VALID"),
                                 ((7, 7), (3, 3), (2, 2), "VALID"),
                                 ((5, 5), (5, 5), (1, 1), "SAME")])
    def test_matches_naive_loop(self, kind, case):
        size, kernel, stride, padding = case
        x = np.random.default_rng(4).standard_normal((2, 3) + size)
        want = naive_pool(x, kernel, stride, padding, kind)
        (got,) = run_one(f"{kind}pool", [x], [want.shape], kernel_h=kernel[0],
                         kernel_w=kernel[1], **conv_params(stride, padding))
        np.testing.assert_allclose(got, want, rtol=1e-12)

    def test_by_hand(self):
        x = -np.arange(1, 10, dtype=np.float64).reshape(1, 1, 3, 3)  # all negative
        params = dict(kernel_h=3, kernel_w=3, **conv_params())
        (mx,) = run_one("maxpool", [x], [(1, 1, 3, 3)], **params)
        (avg,) = run_one("avgpool", [x], [(1, 1, 3, 3)], **params)
        # Padding never wins the max (-inf, not 0) ...
        self.assertEqual(mx[0, 0, 0, 0], -1.0)
        self.assertEqual(mx[0, 0, 2, 2], -5.0)
        # ... and never counts in the mean: corner = mean(-1, -2, -4, -5).
        self.assertEqual(avg[0, 0, 0, 0], -3.0)
        self.assertEqual(avg[0, 0, 1, 1], -5.0)
        (relu_avg,) = run_one("avgpool", [x], [(1, 1, 3, 3)],
                              **dict(params, activation="RELU"))
        np.testing.assert_array_equal(relu_avg, np.zeros((1, 1, 3, 3)))

    def test_empty_kernel(self):
        with self.assertRaisesRegex(ValueError, "maxpool: empty kernel 3x0"):
            executor.maxpool(np.zeros((1, 1, 3, 3)), dict(kernel_h=3, kernel_w=0,
                                                          **conv_params()))

    @absltest.skipIf(tf is None, "TensorFlow is not installed")
    def test_matches_tensorflow(self):
        x = np.random.default_rng(5).standard_normal((2, 3, 7, 6))
        nhwc = x.transpose(0, 2, 3, 1)
        for (k, s, padding), kind in itertools.product(
                [(3, 2, "SAME"), (2, 2, "SAME"), (3, 1, "VALID"), (3, 3, "SAME")],
                ("max", "avg")):
            fn = tf.nn.max_pool2d if kind == "max" else tf.nn.avg_pool2d
            want = fn(nhwc, ksize=k, strides=s, padding=padding).numpy().transpose(0, 3, 1, 2)
            with self.subTest(k=k, s=s, padding=padding, kind=kind):
                (got,) = run_one(f"{kind}pool", [x], [want.shape], kernel_h=k, kernel_w=k,
                                 **conv_params((s, s), padding))
                # TF's CPU max pool computes in float32.
                np.testing.assert_allclose(got, want, rtol=1e-6)


class MatmulAndElementwiseTest(absltest.TestCase):

    def test_batched_matmul(self):
        rng = np.random.default_rng(6)
        a, b = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 5, 6))
        want = np.empty((2, 3, 4, 6))
        for i, j in itertools.product(range(2), range(3)):
            for m, n in itertools.product(range(4), range(6)):
                want[i, j, m, n] = sum(a[i, j, m, k] * b[i, j, k, n] for k in range(5))
        (got,) = run_one("matmul", [a, b], [want.shape], activation="NONE")
        np.testing.assert_allclose(got, want, rtol=1e-12)
        (got,) = run_one("matmul", [a, b], [want.shape], activation="TANH")
        np.testing.assert_allclose(got, np.tanh(want), rtol=1e-12)

    def test_matmul_by_hand(self):
        a = np.array([[1.0, 2.0], [3.0, 4.0]])
        b = np.array([[1.0, -1.0], [0.0, 1.0]])
        (got,) = run_one("matmul", [a, b], [(2, 2)], activation="RELU")
        np.testing.assert_array_equal(got, [[1.0, 1.0], [3.0, 1.0]])

    def test_matmul_rejects_mismatches(self):
        with self.assertRaisesRegex(ValueError, "equal rank"):
            executor.matmul(np.zeros((2, 3, 4)), np.zeros((4, 5)), "NONE")
        with self.assertRaisesRegex(ValueError, "do not match"):
            executor.matmul(np.zeros((2, 3, 4)), np.zeros((3, 4, 5)), "NONE")
        with self.assertRaisesRegex(ValueError, "do not match"):
            executor.matmul(np.zeros((3, 4)), np.zeros((5, 6)), "NONE")

    def test_elementwise_broadcasting(self):
        x = np.arange(6, dtype=np.float64).reshape(2, 3)
        y = np.array([1.0, 2.0, 4.0])
        expected = {"add": [[1, 3, 6], [4, 6, 9]], "sub": [[-1, -1, -2], [2, 2, 1]],
                    "mul": [[0, 2, 8], [3, 8, 20]], "div": [[0, 0.5, 0.5], [3, 2, 1.25]]}
        for op_type, want in expected.items():
            with self.subTest(op=op_type):
                (got,) = run_one(op_type, [x, y], [(2, 3)])
                np.testing.assert_array_equal(got, want)

    def test_activations(self):
        x = np.array([-2.0, 0.0, 3.0])
        (relu,) = run_one("relu", [x], [(3,)])
        (sigmoid,) = run_one("sigmoid", [x], [(3,)])
        (tanh,) = run_one("tanh", [x], [(3,)])
        np.testing.assert_array_equal(relu, [0.0, 0.0, 3.0])
        np.testing.assert_allclose(sigmoid, [0.11920292202, 0.5, 0.95257412682], rtol=1e-10)
        np.testing.assert_allclose(tanh, [-0.96402758008, 0.0, 0.99505475368], rtol=1e-10)


class TensorOpsTest(absltest.TestCase):

    def test_concat_and_split(self):
        a, b = np.zeros((2, 1, 3)), np.ones((2, 2, 3))
        (cat,) = run_one("concat", [a, b], [(2, 3, 3)], axis=1)
        np.testing.assert_array_equal(cat[:, 0], 0.0)
        np.testing.assert_array_equal(cat[:, 1:], 1.0)
        x = np.arange(12, dtype=np.float64).reshape(2, 6)
        parts = run_one("split", [x], [(2, 1), (2, 3), (2, 2)], axis=1, sizes=(1, 3, 2))
        np.testing.assert_array_equal(parts[0], [[0], [6]])
        np.testing.assert_array_equal(parts[1], [[1, 2, 3], [7, 8, 9]])
        np.testing.assert_array_equal(parts[2], [[4, 5], [10, 11]])
        with self.assertRaisesRegex(ValueError, r"split sizes \(2, 3\) do not partition"):
            run_one("split", [x], [(2, 2), (2, 3)], axis=1, sizes=(2, 3))

    def test_reshape_keeps_zeros_and_infers_minus_one(self):
        x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
        (y,) = run_one("reshape", [x], [(2, 12)], shape=(0, -1))
        np.testing.assert_array_equal(y, x.reshape(2, 12))
        (y,) = run_one("reshape", [x], [(4, 3, 2)], shape=(-1, 0, 2))
        np.testing.assert_array_equal(y, x.reshape(4, 3, 2))
        with self.assertRaisesRegex(ValueError, "at most one -1"):
            executor.reshape(x, (-1, -1))
        with self.assertRaisesRegex(ValueError, "cannot infer"):
            executor.reshape(x, (5, -1))

    def test_transpose(self):
        x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
        (y,) = run_one("transpose", [x], [(4, 2, 3)], perm=(2, 0, 1))
        self.assertEqual(y[3, 1, 2], x[1, 2, 3])

    def test_batchnorm_per_channel(self):
        rng = np.random.default_rng(7)
        x = rng.standard_normal((2, 3, 4, 4))
        scale, bias, mean = (rng.standard_normal(3) for _ in range(3))
        var = rng.uniform(0.5, 2.0, 3)
        (y,) = run_one("batchnorm", [x, scale, bias, mean, var], [x.shape], epsilon=1e-3)
        for c in range(3):
            np.testing.assert_allclose(
                y[:, c], (x[:, c] - mean[c]) / math.sqrt(var[c] + 1e-3) * scale[c] + bias[c],
                rtol=1e-12)

    def test_broadcast_add(self):
        x = np.zeros((2, 3, 2, 2))
        (y,) = run_one("broadcast_add", [x, np.array([1.0, 2.0, 3.0])], [x.shape])
        np.testing.assert_array_equal(y[1, :, 1, 0], [1.0, 2.0, 3.0])
        with self.assertRaisesRegex(ValueError, r"b must have shape \(3,\)"):
            executor.broadcast_add(x, np.zeros(2))


class WeightOpsTest(absltest.TestCase):

    def test_enlarge_centres_by_hand(self):
        w1 = np.arange(1, 5, dtype=np.float64).reshape(2, 2, 1, 1)
        (big,) = run_one("enlarge", [w1, np.zeros((3, 2, 3, 3))], [(2, 2, 3, 3)])
        want = np.zeros((2, 2, 3, 3))
        want[:, :, 1, 1] = w1[:, :, 0, 0]
        np.testing.assert_array_equal(big, want)
        w3 = np.ones((1, 1, 3, 1))
        (big,) = run_one("enlarge", [w3, np.zeros((1, 1, 5, 3))], [(1, 1, 5, 3)])
        np.testing.assert_array_equal(big[0, 0], [[0, 0, 0], [0, 1, 0], [0, 1, 0],
                                                  [0, 1, 0], [0, 0, 0]])
        with self.assertRaisesRegex(ValueError, "cannot be centred"):
            executor.enlarge(np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 3, 3)))
        with self.assertRaisesRegex(ValueError, "cannot be centred"):
            executor.enlarge(np.zeros((1, 1, 5, 5)), np.zeros((1, 1, 3, 3)))

    def test_merge_gconv_block_structure(self):
        # 4 groups, 2 output channels each, I = 1 input channel per group.
        w = np.arange(1, 9, dtype=np.float64).reshape(8, 1, 1, 1)
        (merged,) = run_one("merge_gconv", [w], [(8, 2, 1, 1)], count=2, groups=4)
        # Original group go = o // 2 keeps its weight at slot go % 2.
        want = np.array([[1, 0], [2, 0], [0, 3], [0, 4], [5, 0], [6, 0], [0, 7], [0, 8]])
        np.testing.assert_array_equal(merged[:, :, 0, 0], want)
        with self.assertRaisesRegex(ValueError, "cannot merge 3 groups"):
            executor.merge_gconv(w, count=2, groups=3)

    def test_merge_gconv_is_equivalent(self):
        rng = np.random.default_rng(8)
        for groups, count, stride in [(4, 2, (1, 1)), (4, 4, (2, 2)), (2, 2, (1, 1)),
                                      (6, 3, (2, 1))]:
            x = rng.standard_normal((2, 2 * groups, 7, 7))
            w = rng.standard_normal((3 * groups, 2, 3, 3))
            out = naive_conv(x, w, stride, "SAME").shape
            g = FakeGraph()
            xt, wt = g.leaf("input", "x", x.shape), g.leaf("weight", "w", w.shape)
            (direct,) = g.op("conv2d", [xt, wt], [out], **conv_params(stride))
            (mw,) = g.op("merge_gconv", [wt], [(3 * groups, 2 * count, 3, 3)],
                         count=count, groups=groups)
            (merged,) = g.op("conv2d", [xt, mw], [out], **conv_params(stride))
            want, got = executor.execute(g.set_outputs([direct, merged]), {"x": x, "w": w})
            with self.subTest(groups=groups, count=count):
                np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
                np.testing.assert_allclose(want, naive_conv(x, w, stride, "SAME"),
                                           rtol=1e-10, atol=1e-10)

    def test_enlarge_is_equivalent_at_stride_1_same(self):
        rng = np.random.default_rng(9)
        x = rng.standard_normal((2, 4, 6, 7))
        w1, w2 = rng.standard_normal((3, 4, 1, 1)), rng.standard_normal((5, 4, 3, 3))
        small = executor.conv2d(x, w1, conv_params())
        large = executor.conv2d(x, executor.enlarge(w1, w2), conv_params())
        np.testing.assert_allclose(large, small, rtol=1e-10, atol=1e-12)
        # Why the enlarge rules are stride 1 only: on even sizes, stride 2
        # SAME pads a 3x3 kernel 0 before / 1 after, so the enlarged kernel's
        # centre is off by one from the 1x1 kernel's position.
        s2 = conv_params((2, 2))
        self.assertGreater(np.abs(executor.conv2d(x, w1, s2) - executor.conv2d(
            x, executor.enlarge(w1, w2), s2)).max(), 1e-3)

    def test_enlarge_merge_of_sibling_convs(self):
        # The built-in rule: conv(x, w1), conv(x, w2) -> split(conv(x,
        # concat(enlarge(w1, w2), w2)), axis 1).
        rng = np.random.default_rng(10)
        feeds = {"x": rng.standard_normal((1, 4, 6, 6)),
                 "w1": rng.standard_normal((3, 4, 1, 1)),
                 "w2": rng.standard_normal((5, 4, 3, 3))}
        g = FakeGraph()
        x, w1, w2 = (g.leaf("input" if n == "x" else "weight", n, v.shape)
                     for n, v in feeds.items())
        (a,) = g.op("conv2d", [x, w1], [(1, 3, 6, 6)], **conv_params(activation="RELU"))
        (b,) = g.op("conv2d", [x, w2], [(1, 5, 6, 6)], **conv_params(activation="RELU"))
        (big,) = g.op("enlarge", [w1, w2], [(3, 4, 3, 3)])
        (cat,) = g.op("concat", [big, w2], [(8, 4, 3, 3)], axis=0)
        (y,) = g.op("conv2d", [x, cat], [(1, 8, 6, 6)], **conv_params(activation="RELU"))
        a2, b2 = g.op("split", [y], [(1, 3, 6, 6), (1, 5, 6, 6)], axis=1, sizes=(3, 5))
        got = executor.execute(g.set_outputs([a, b, a2, b2]), feeds)
        np.testing.assert_allclose(got[2], got[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got[3], got[1], rtol=1e-10, atol=1e-12)

    def test_batchnorm_folding_is_equivalent(self):
        g = FakeGraph()
        x = g.leaf("input", "x", (2, 3, 5, 5))
        w = g.leaf("weight", "w", (4, 3, 3, 3))
        scale, bias, mean, var = (g.leaf("weight", n, (4,))
                                  for n in ("scale", "bias", "mean", "var"))
        params = conv_params((2, 2), "VALID")
        (conv,) = g.op("conv2d", [x, w], [(2, 4, 2, 2)], **params)
        (bn,) = g.op("batchnorm", [conv, scale, bias, mean, var], [(2, 4, 2, 2)],
                     epsilon=1e-2)
        (alpha_w,) = g.op("fuse_conv_bn_alpha_var", [w, scale, var], [(4, 3, 3, 3)],
                          epsilon=1e-2)
        (folded_conv,) = g.op("conv2d", [x, alpha_w], [(2, 4, 2, 2)], **params)
        (b,) = g.op("fuse_conv_bn_bias", [scale, bias, mean, var], [(4,)], epsilon=1e-2)
        (folded,) = g.op("broadcast_add", [folded_conv, b], [(2, 4, 2, 2)])
        g.set_outputs([bn, folded])
        for seed in range(3):
            feeds = executor.random_feeds(g, seed=seed)
            want, got = executor.execute(g, feeds)
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
        # epsilon matters: a wrong epsilon in the folding ops would show.
        self.assertGreater(np.abs(executor.fuse_conv_bn_bias(
            *(feeds[n] for n in ("scale", "bias", "mean", "var")), epsilon=1.0)
            - executor.fuse_conv_bn_bias(
                *(feeds[n] for n in ("scale", "bias", "mean", "var")), epsilon=1e-2)).max(),
            1e-3)


class GraphTest(absltest.TestCase):

    def _graph(self) -> FakeGraph:
        g = FakeGraph()
        x = g.leaf("input", "x", (1, 2, 3, 3))
        w = g.leaf("weight", "w", (2, 2, 1, 1))
        (y,) = g.op("conv2d", [x, w], [(1, 2, 3, 3)], **conv_params())
        (r,) = g.op("relu", [y], [(1, 2, 3, 3)])
        return g.set_outputs([r, y])

    def test_outputs_in_order(self):
        x = np.random.default_rng(11).standard_normal((1, 2, 3, 3))
        w = np.eye(2).reshape(2, 2, 1, 1)
        r, y = executor.execute(self._graph(), {"x": x, "w": w, "unused": np.zeros(1)})
        np.testing.assert_array_equal(y, x)
        np.testing.assert_array_equal(r, np.maximum(x, 0))
        self.assertEqual(r.dtype, np.float64)
        (r32, _) = executor.execute(self._graph(), {"x": x, "w": w}, dtype=np.float32)
        self.assertEqual(r32.dtype, np.float32)

    def test_missing_feeds_are_named(self):
        with self.assertRaisesRegex(KeyError, r"\['w', 'x'\]"):
            executor.execute(self._graph(), {})

    def test_wrong_shape_is_named(self):
        with self.assertRaisesRegex(ValueError, r"weight op 107 \('w'\): fed shape "
                                    r"\(2, 2\), the graph needs \(2, 2, 1, 1\)"):
            executor.execute(self._graph(), {"x": np.zeros((1, 2, 3, 3)),
                                             "w": np.zeros((2, 2))})

    def test_shape_disagreement_with_the_engine(self):
        g = FakeGraph()
        x = g.leaf("input", "x", (2, 3))
        (y,) = g.op("transpose", [x], [(2, 3)], perm=(1, 0))
        with self.assertRaisesRegex(ValueError, r"transpose op 107: .* \(3, 2\), the "
                                    r"engine inferred \(2, 3\)"):
            executor.execute(g.set_outputs([y]), {"x": np.zeros((2, 3))})

    def test_op_errors_name_the_op(self):
        g = FakeGraph()
        a, b = g.leaf("input", "a", (2, 3)), g.leaf("input", "b", (4, 5))
        (y,) = g.op("matmul", [a, b], [(2, 5)], activation="NONE")
        with self.assertRaisesRegex(ValueError, "matmul op 114: matmul: shapes"):
            executor.execute(g.set_outputs([y]), {"a": np.zeros((2, 3)),
                                                  "b": np.zeros((4, 5))})

    def test_not_topological(self):
        g = FakeGraph()
        x = g.leaf("input", "x", (2,))
        g.op("relu", [(999, 0)], [(2,)])
        with self.assertRaisesRegex(ValueError, r"reads tensor \(999, 0\)"):
            executor.execute(g.set_outputs([x]), {"x": np.zeros(2)})

    def test_opaque_and_unknown_ops(self):
        g = FakeGraph()
        x = g.leaf("input", "x", (2,))
        (y,) = g.op("opaque", [x], [(2,)], opaque_type="Gelu")
        with self.assertRaisesRegex(NotImplementedError, "opaque op 107.*'Gelu'"):
            executor.execute(g.set_outputs([y]), {"x": np.zeros(2)})
        with self.assertRaisesRegex(ValueError, "unknown op type 'gelu'"):
            executor.run_op("gelu", {}, [np.zeros(2)])
        with self.assertRaisesRegex(ValueError, "conv2d takes 2 inputs, got 1"):
            executor.run_op("conv2d", conv_params(), [np.zeros((1, 1, 2, 2))])


class RandomFeedsTest(absltest.TestCase):

    def test_shapes_seeds_and_positive_variances(self):
        g = FakeGraph()
        x = g.leaf("input", "x", (2, 6, 4, 4))
        stats = {n: g.leaf("weight", n, (6,)) for n in ("scale", "bias", "mean")}
        va, vb = g.leaf("weight", "var_a", (2,)), g.leaf("weight", "var_b", (4,))
        (var,) = g.op("concat", [va, vb], [(6,)], axis=0)   # var made of two leaves
        (y,) = g.op("batchnorm", [x, stats["scale"], stats["bias"], stats["mean"], var],
                    [(2, 6, 4, 4)], epsilon=1e-5)
        g.set_outputs([y])
        feeds = executor.random_feeds(g, seed=3, scale=0.1)
        self.assertEqual(sorted(feeds), ["bias", "mean", "scale", "var_a", "var_b", "x"])
        self.assertEqual(feeds["x"].shape, (2, 6, 4, 4))
        self.assertTrue((feeds["var_a"] > 0).all() and (feeds["var_b"] > 0).all())
        self.assertLess(feeds["x"].std(), 0.2)   # scale 0.1
        self.assertTrue((feeds["mean"] < 0).any())  # ordinary weights are not positive
        again = executor.random_feeds(g, seed=3, scale=0.1)
        other = executor.random_feeds(g, seed=4, scale=0.1)
        np.testing.assert_array_equal(again["x"], feeds["x"])
        self.assertFalse(np.array_equal(other["x"], feeds["x"]))
        self.assertTrue(np.isfinite(executor.execute(g, feeds)[0]).all())


if __name__ == "__main__":
    absltest.main()
