"""The operator axioms of the proof tier: a table of universally quantified
equations, each with its statement and the reason it holds in the model M.

`AXIOMS` is data: each entry's `build(S, *tensors, *ints)` returns the two
sides (and an optional shape condition) as terms of the z3 signature `S`
(z3_encoding.py), which turns them into quantified formulas. Each axiom was
checked by hand to hold in M (model.py) for all inputs, its guard included;
symbolic.py says what a proof from them means. Kept apart from the encoding
so the list can be read, counted and cited without z3.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Tuple


@dataclasses.dataclass(frozen=True)
class Axiom:
    """One equation `lhs = rhs`, universally quantified.

    guard: "" (asserted for all arguments: both sides are defined under the
    same conditions), "L" / "R" (asserted where that side is defined: it
    implies the other side is), "LR" (where both are). `condition`: a further
    side condition on shapes; `shape_only`: the axiom is omitted without
    shapes (it is false for some shapes). `one_way`: only the left side
    triggers instantiation (the right side is smaller; the other direction
    would loop).
    """
    name: str
    statement: str
    why: str
    guard: str = ""
    condition: str = ""
    shape_only: bool = False
    one_way: bool = False
    # (S, named variables) -> (lhs, rhs, extra shape condition or None)
    build: Optional[Callable] = dataclasses.field(default=None, repr=False, compare=False)
    tvars: str = ""
    ivars: str = ""


def _ax(name, statement, why, tvars, ivars="", guard="", condition="", shape_only=False,
        one_way=False, build=None):
    return Axiom(name, statement, why, guard, condition, shape_only, one_way, build, tvars, ivars)


def _through_concat(fname: str, axis: int, out_axis: int, why: str) -> Axiom:
    """`fname(concat(axis, a, b)) = concat(out_axis, fname a, fname b)`: a
    unary op that works slice by slice along `axis`."""
    def build(S, a, b):
        f = getattr(S, fname)
        return f(S.concat(axis, a, b)), S.concat(out_axis, f(a), f(b))
    return _ax(f"{fname}_concat{axis}",
               f"{fname}(concat({axis}, a, b)) = concat({out_axis}, {fname} a, {fname} b)",
               why, "a b", build=build)


AXIOMS: Tuple[Axiom, ...] = (
    # --- element-wise (equal shapes; exact in real arithmetic)
    _ax("add_comm", "a + b = b + a", "real addition", "a b",
        build=lambda S, a, b: (S.add(a, b), S.add(b, a))),
    _ax("add_assoc", "(a + b) + c = a + (b + c)", "real addition", "a b c",
        build=lambda S, a, b, c: (S.add(S.add(a, b), c), S.add(a, S.add(b, c)))),
    _ax("mul_comm", "a * b = b * a", "real multiplication", "a b",
        build=lambda S, a, b: (S.mul(a, b), S.mul(b, a))),
    _ax("mul_assoc", "(a * b) * c = a * (b * c)", "real multiplication", "a b c",
        build=lambda S, a, b, c: (S.mul(S.mul(a, b), c), S.mul(a, S.mul(b, c)))),
    _ax("mul_add_distrib", "a * (b + c) = a * b + a * c", "element-wise distributivity", "a b c",
        build=lambda S, a, b, c: (S.mul(a, S.add(b, c)), S.add(S.mul(a, b), S.mul(a, c)))),
    _ax("relu_idem", "relu(relu(a)) = relu(a)", "max(max(x, 0), 0) = max(x, 0)", "a",
        one_way=True, build=lambda S, a: (S.relu(S.relu(a)), S.relu(a))),
    # --- matmul ([M, K] x [K, N])
    _ax("matmul_assoc", "(a b) c = a (b c)", "matrix product", "a b c",
        build=lambda S, a, b, c: (S.matmul(0, S.matmul(0, a, b), c),
                                  S.matmul(0, a, S.matmul(0, b, c)))),
    _ax("matmul_add_left", "a (b + c) = a b + a c",
        "bilinear; both sides need b, c of one shape", "a b c",
        build=lambda S, a, b, c: (S.matmul(0, a, S.add(b, c)),
                                  S.add(S.matmul(0, a, b), S.matmul(0, a, c)))),
    _ax("matmul_add_right", "(a + b) c = a c + b c",
        "bilinear; both sides need a, b of one shape", "a b c",
        build=lambda S, a, b, c: (S.matmul(0, S.add(a, b), c),
                                  S.add(S.matmul(0, a, c), S.matmul(0, b, c)))),
    _ax("matmul_relu_fuse", "relu(matmul(a, b)) = matmul_relu(a, b)",
        "the fused activation is applied after the product", "a b",
        build=lambda S, a, b: (S.relu(S.matmul(0, a, b)), S.matmul(2, a, b))),
    # --- transpose (2-D, perm [1, 0])
    _ax("transpose_invol", "transpose(transpose(a)) = a",
        "left side needs a matrix, the right side does not", "a", guard="L", one_way=True,
        build=lambda S, a: (S.transpose(S.transpose(a)), a)),
    _ax("transpose_matmul", "transpose(matmul(act, a, b)) = matmul(act, transpose b, transpose a)",
        "(AB)^T = B^T A^T; relu commutes with transposition", "a b", "act",
        build=lambda S, a, b, act: (S.transpose(S.matmul(act, a, b)),
                                    S.matmul(act, S.transpose(b), S.transpose(a)))),
    _ax("transpose_add", "transpose(a + b) = transpose a + transpose b",
        "element-wise; both need equal matrix shapes", "a b",
        build=lambda S, a, b: (S.transpose(S.add(a, b)), S.add(S.transpose(a), S.transpose(b)))),
    _ax("transpose_mul", "transpose(a * b) = transpose a * transpose b", "element-wise", "a b",
        build=lambda S, a, b: (S.transpose(S.mul(a, b)), S.mul(S.transpose(a), S.transpose(b)))),
    _ax("transpose_relu", "transpose(relu a) = relu(transpose a)", "element-wise", "a",
        build=lambda S, a: (S.transpose(S.relu(a)), S.relu(S.transpose(a)))),
    _through_concat("transpose", 0, 1, "stacked rows become stacked columns"),
    _through_concat("transpose", 1, 0, "stacked columns become stacked rows"),
    # --- concat
    _ax("concat_add", "concat(ax, a, b) + concat(ax, c, d) = concat(ax, a + c, b + d)",
        "the left side is also defined for different split points, where it differs",
        "a b c d", "ax", guard="R",
        build=lambda S, a, b, c, d, ax: (S.add(S.concat(ax, a, b), S.concat(ax, c, d)),
                                         S.concat(ax, S.add(a, c), S.add(b, d)))),
    _ax("concat_mul", "concat(ax, a, b) * concat(ax, c, d) = concat(ax, a * c, b * d)",
        "as concat_add", "a b c d", "ax", guard="R",
        build=lambda S, a, b, c, d, ax: (S.mul(S.concat(ax, a, b), S.concat(ax, c, d)),
                                         S.concat(ax, S.mul(a, c), S.mul(b, d)))),
    _ax("concat_relu", "relu(concat(ax, a, b)) = concat(ax, relu a, relu b)", "element-wise",
        "a b", "ax",
        build=lambda S, a, b, ax: (S.relu(S.concat(ax, a, b)),
                                   S.concat(ax, S.relu(a), S.relu(b)))),
    _ax("concat_assoc", "concat(ax, concat(ax, a, b), c) = concat(ax, a, concat(ax, b, c))",
        "both need a, b, c equal off ax", "a b c", "ax",
        build=lambda S, a, b, c, ax: (S.concat(ax, S.concat(ax, a, b), c),
                                      S.concat(ax, a, S.concat(ax, b, c)))),
    _ax("concat_interchange",
        "concat(0, concat(1, a, b), concat(1, c, d)) = concat(1, concat(0, a, c), concat(0, b, d))",
        "a 2x2 block layout; each side is also defined for misaligned blocks", "a b c d",
        guard="LR",
        build=lambda S, a, b, c, d: (S.concat(0, S.concat(1, a, b), S.concat(1, c, d)),
                                     S.concat(1, S.concat(0, a, c), S.concat(0, b, d)))),
    _ax("matmul_concat_rows",
        "matmul(act, concat(0, a, b), c) = concat(0, matmul(act, a, c), matmul(act, b, c))",
        "rows of a product", "a b c", "act",
        build=lambda S, a, b, c, act: (S.matmul(act, S.concat(0, a, b), c),
                                       S.concat(0, S.matmul(act, a, c), S.matmul(act, b, c)))),
    _ax("matmul_concat_cols",
        "matmul(act, a, concat(1, b, c)) = concat(1, matmul(act, a, b), matmul(act, a, c))",
        "columns of a product", "a b c", "act",
        build=lambda S, a, b, c, act: (S.matmul(act, a, S.concat(1, b, c)),
                                       S.concat(1, S.matmul(act, a, b), S.matmul(act, a, c)))),
    _ax("matmul_concat_inner",
        "matmul(concat(1, a, b), concat(0, c, d)) = matmul(a, c) + matmul(b, d)",
        "block product; the left side is also defined for misaligned inner splits",
        "a b c d", guard="R",
        build=lambda S, a, b, c, d: (S.matmul(0, S.concat(1, a, b), S.concat(0, c, d)),
                                     S.add(S.matmul(0, a, c), S.matmul(0, b, d)))),
    # --- split (sizes from the source: n = size of part 0 along the axis)
    _ax("split0_concat", "split0(ax, concat(ax, a, b), n) = a", "taking the first n back",
        "a b", "ax n", guard="L", condition="n = dim(ax, a)", one_way=True,
        build=lambda S, a, b, ax, n: (S.split0(ax, S.concat(ax, a, b), n), a,
                                      n == S.dim(ax, a))),
    _ax("split1_concat", "split1(ax, concat(ax, a, b), n) = b", "taking the rest back",
        "a b", "ax n", guard="L", condition="n = dim(ax, a)", one_way=True,
        build=lambda S, a, b, ax, n: (S.split1(ax, S.concat(ax, a, b), n), b,
                                      n == S.dim(ax, a))),
    _ax("concat_split", "concat(ax, split0(ax, t, n), split1(ax, t, n)) = t",
        "the two parts make the whole", "t", "ax n", guard="L", one_way=True,
        build=lambda S, t, ax, n: (S.concat(ax, S.split0(ax, t, n), S.split1(ax, t, n)), t)),
    # --- conv2d (stride 1, SAME, one group)
    _ax("conv_relu_fuse", "relu(conv(x, w)) = conv_relu(x, w)",
        "the fused activation is applied after the conv", "x w",
        build=lambda S, x, w: (S.relu(S.conv(0, x, w)), S.conv(2, x, w))),
    _ax("conv_add_data", "conv(x1 + x2, w) = conv(x1, w) + conv(x2, w)",
        "linear in the data (zero padding); both sides need x1, x2 of one shape",
        "x1 x2 w",
        build=lambda S, x1, x2, w: (S.conv(0, S.add(x1, x2), w),
                                    S.add(S.conv(0, x1, w), S.conv(0, x2, w)))),
    _ax("conv_add_weight", "conv(x, w1 + w2) = conv(x, w1) + conv(x, w2)",
        "linear in the weights; the right side is also defined for different kernel sizes",
        "x w1 w2", guard="L",
        build=lambda S, x, w1, w2: (S.conv(0, x, S.add(w1, w2)),
                                    S.add(S.conv(0, x, w1), S.conv(0, x, w2)))),
    _ax("conv_concat_weight_out",
        "conv(act, x, concat(0, w1, w2)) = concat(1, conv(act, x, w1), conv(act, x, w2))",
        "output channels are independent; the right side also allows different kernels",
        "x w1 w2", "act", guard="L",
        build=lambda S, x, w1, w2, act: (S.conv(act, x, S.concat(0, w1, w2)),
                                         S.concat(1, S.conv(act, x, w1), S.conv(act, x, w2)))),
    _ax("conv_concat_batch",
        "conv(act, concat(0, x1, x2), w) = concat(0, conv(act, x1, w), conv(act, x2, w))",
        "batch items are independent", "x1 x2 w", "act",
        build=lambda S, x1, x2, w, act: (S.conv(act, S.concat(0, x1, x2), w),
                                         S.concat(0, S.conv(act, x1, w), S.conv(act, x2, w)))),
    _ax("conv_concat_in",
        "conv(concat(1, x1, x2), concat(1, w1, w2)) = conv(x1, w1) + conv(x2, w2)",
        "sum over input channels; each side is also defined where the other is not",
        "x1 x2 w1 w2", guard="LR",
        build=lambda S, x1, x2, w1, w2: (S.conv(0, S.concat(1, x1, x2), S.concat(1, w1, w2)),
                                         S.add(S.conv(0, x1, w1), S.conv(0, x2, w2)))),
    # --- pools (3x3, stride 1, SAME; per (batch, channel) plane)
    _through_concat("avgpool", 0, 0, "pooling is per batch item"),
    _through_concat("avgpool", 1, 1, "pooling is per channel"),
    _through_concat("maxpool", 0, 0, "pooling is per batch item"),
    _through_concat("maxpool", 1, 1, "pooling is per channel"),
    _ax("avgpool_add", "avgpool(a + b) = avgpool a + avgpool b",
        "linear: each window's divisor depends on its position only", "a b",
        build=lambda S, a, b: (S.avgpool(S.add(a, b)), S.add(S.avgpool(a), S.avgpool(b)))),
    _ax("maxpool_relu", "maxpool(relu a) = relu(maxpool a)",
        "relu is monotone; every window holds at least one element", "a",
        build=lambda S, a: (S.maxpool(S.relu(a)), S.relu(S.maxpool(a)))),
    _ax("avgpool_conv1x1", "avgpool(conv(x, w)) = conv(avgpool x, w)",
        "a 1x1 conv mixes channels per pixel, which commutes with spatial averaging "
        "(false for larger kernels at the borders)", "x w", condition="w is 1x1",
        shape_only=True,
        build=lambda S, x, w: (S.avgpool(S.conv(0, x, w)), S.conv(0, S.avgpool(x), w),
                               S.all([S.dim(2, w) == 1, S.dim(3, w) == 1]))),
    # --- enlarge (zero-pad a kernel, centred, to another's size)
    _ax("conv_enlarge", "conv(act, x, enlarge(w, v)) = conv(act, x, w)",
        "stride 1 SAME pads (k-1)//2 before, which grows by exactly the added rows "
        "for an even difference", "x w v", "act", guard="L", one_way=True,
        build=lambda S, x, w, v, act: (S.conv(act, x, S.enlarge(w, v)), S.conv(act, x, w))),
    _ax("enlarge_add", "enlarge(a + b, v) = enlarge(a, v) + enlarge(b, v)",
        "padding is linear; the right side also allows different kernels", "a b v", guard="L",
        build=lambda S, a, b, v: (S.enlarge(S.add(a, b), v),
                                  S.add(S.enlarge(a, v), S.enlarge(b, v)))),
    _ax("enlarge_mul", "enlarge(a * b, v) = enlarge(a, v) * enlarge(b, v)",
        "0 * 0 = 0; the right side also allows different kernels", "a b v", guard="L",
        build=lambda S, a, b, v: (S.enlarge(S.mul(a, b), v),
                                  S.mul(S.enlarge(a, v), S.enlarge(b, v)))),
    _ax("enlarge_relu", "enlarge(relu a, v) = relu(enlarge(a, v))", "relu(0) = 0", "a v",
        build=lambda S, a, v: (S.enlarge(S.relu(a), v), S.relu(S.enlarge(a, v)))),
    _ax("enlarge_concat0", "enlarge(concat(0, a, b), v) = concat(0, enlarge(a, v), enlarge(b, v))",
        "padding is per kernel", "a b v", guard="L",
        build=lambda S, a, b, v: (S.enlarge(S.concat(0, a, b), v),
                                  S.concat(0, S.enlarge(a, v), S.enlarge(b, v)))),
    _ax("enlarge_concat1", "enlarge(concat(1, a, b), v) = concat(1, enlarge(a, v), enlarge(b, v))",
        "padding is per kernel", "a b v", guard="L",
        build=lambda S, a, b, v: (S.enlarge(S.concat(1, a, b), v),
                                  S.concat(1, S.enlarge(a, v), S.enlarge(b, v)))),
    _ax("enlarge_enlarge", "enlarge(enlarge(w, v), u) = enlarge(w, u)",
        "centred paddings compose", "w v u", guard="L", one_way=True,
        build=lambda S, w, v, u: (S.enlarge(S.enlarge(w, v), u), S.enlarge(w, u))),
    _ax("enlarge_same", "enlarge(w, v) = w", "nothing to pad", "w v", guard="L",
        condition="w and v have the same kernel size", shape_only=True, one_way=True,
        build=lambda S, w, v: (S.enlarge(w, v), w,
                               S.all([S.dim(2, w) == S.dim(2, v), S.dim(3, w) == S.dim(3, v)]))),
    # --- scalar multiply (s: one element; every side below needs s scalar and
    # the same shapes of the other operands, so no guards)
    _ax("smul_comm", "scalar_mul(scalar_mul(a, s), t) = scalar_mul(scalar_mul(a, t), s)",
        "real multiplication commutes", "a s t",
        build=lambda S, a, s, t: (S.scalar_mul(S.scalar_mul(a, s), t),
                                  S.scalar_mul(S.scalar_mul(a, t), s))),
    _ax("smul_add", "scalar_mul(a + b, s) = scalar_mul(a, s) + scalar_mul(b, s)",
        "distributivity", "a b s",
        build=lambda S, a, b, s: (S.scalar_mul(S.add(a, b), s),
                                  S.add(S.scalar_mul(a, s), S.scalar_mul(b, s)))),
    _ax("smul_mul", "scalar_mul(a * b, s) = scalar_mul(a, s) * b",
        "associativity and commutativity of real multiplication", "a b s",
        build=lambda S, a, b, s: (S.scalar_mul(S.mul(a, b), s), S.mul(S.scalar_mul(a, s), b))),
    _ax("smul_matmul_left", "matmul(scalar_mul(a, s), b) = scalar_mul(matmul(a, b), s)",
        "bilinear (not with a fused ReLU: s may be negative)", "a b s",
        build=lambda S, a, b, s: (S.matmul(0, S.scalar_mul(a, s), b),
                                  S.scalar_mul(S.matmul(0, a, b), s))),
    _ax("smul_matmul_right", "matmul(a, scalar_mul(b, s)) = scalar_mul(matmul(a, b), s)",
        "bilinear", "a b s",
        build=lambda S, a, b, s: (S.matmul(0, a, S.scalar_mul(b, s)),
                                  S.scalar_mul(S.matmul(0, a, b), s))),
    _ax("smul_transpose", "transpose(scalar_mul(a, s)) = scalar_mul(transpose a, s)",
        "element-wise", "a s",
        build=lambda S, a, s: (S.transpose(S.scalar_mul(a, s)),
                               S.scalar_mul(S.transpose(a), s))),
    _ax("smul_concat", "scalar_mul(concat(ax, a, b), s) = concat(ax, scalar_mul(a, s), "
        "scalar_mul(b, s))", "element-wise", "a b s", "ax",
        build=lambda S, a, b, s, ax: (S.scalar_mul(S.concat(ax, a, b), s),
                                      S.concat(ax, S.scalar_mul(a, s), S.scalar_mul(b, s)))),
    _ax("smul_split0", "split0(ax, scalar_mul(t, s), n) = scalar_mul(split0(ax, t, n), s)",
        "element-wise", "t s", "ax n",
        build=lambda S, t, s, ax, n: (S.split0(ax, S.scalar_mul(t, s), n),
                                      S.scalar_mul(S.split0(ax, t, n), s))),
    _ax("smul_split1", "split1(ax, scalar_mul(t, s), n) = scalar_mul(split1(ax, t, n), s)",
        "element-wise", "t s", "ax n",
        build=lambda S, t, s, ax, n: (S.split1(ax, S.scalar_mul(t, s), n),
                                      S.scalar_mul(S.split1(ax, t, n), s))),
    _ax("smul_conv_data", "conv(scalar_mul(x, s), w) = scalar_mul(conv(x, w), s)",
        "linear in the data (zero padding scales too); not with a fused ReLU", "x w s",
        build=lambda S, x, w, s: (S.conv(0, S.scalar_mul(x, s), w),
                                  S.scalar_mul(S.conv(0, x, w), s))),
    _ax("smul_conv_weight", "conv(x, scalar_mul(w, s)) = scalar_mul(conv(x, w), s)",
        "linear in the weights", "x w s",
        build=lambda S, x, w, s: (S.conv(0, x, S.scalar_mul(w, s)),
                                  S.scalar_mul(S.conv(0, x, w), s))),
    _ax("smul_avgpool", "avgpool(scalar_mul(a, s)) = scalar_mul(avgpool a, s)",
        "linear (not max pooling: s may be negative)", "a s",
        build=lambda S, a, s: (S.avgpool(S.scalar_mul(a, s)), S.scalar_mul(S.avgpool(a), s))),
    _ax("smul_enlarge", "enlarge(scalar_mul(w, s), v) = scalar_mul(enlarge(w, v), s)",
        "s * 0 = 0", "w v s",
        build=lambda S, w, v, s: (S.enlarge(S.scalar_mul(w, s), v),
                                  S.scalar_mul(S.enlarge(w, v), s))),
)
