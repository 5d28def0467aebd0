"""A symbolic second verification tier for rules: TASO-style axiomatic proofs
with z3.

The generator verifies rules numerically (docs/generator.md, stage 4): both
sides agree on five random draws. This module adds an independent check in the
manner of TASO's verifier: tensors are an uninterpreted sort `T`, every
operator an uninterpreted function (parameters such as the concat axis or the
fused activation are `Int` arguments), the operator properties are a list of
universally quantified equations (`AXIOMS`), and a rule is *proved* when z3
finds the axioms plus "some mapped output pair differs" unsatisfiable.

Unlike TASO's verifier, tensors also carry shapes (the default,
`shapes=True`): a function `dim(i, t)` gives the size of axis i (0..3; a
matrix [M, N] is the tensor [M, N, 1, 1]) and a predicate `ok(t)` says that
`t` is defined. Every modelled operator has a definedness-and-shape axiom
(`SHAPE_RULES`): e.g. `ok(add(a, b)) <-> ok(a) & ok(b) & shape(a) = shape(b)`
and, when defined, `shape(add(a, b)) = shape(a)`. An equation whose two sides
are not defined under the same conditions is guarded: `conv(x, w1 + w2) =
conv(x, w1) + conv(x, w2)` is asserted only where its left side is defined
(the right side is also defined for a 1x1 `w1` and 3x3 `w2`, where they
differ); `concat(ax, a, b) + concat(ax, c, d) = concat(ax, a + c, b + d)` only
where its right side is defined (which forces matching split points). A split
output is `split0(axis, t, n)` / `split1(axis, t, n)` with `n` the size of the
first part (the engine takes it from the source tensor that output 0
replaces), and `split0(ax, concat(ax, a, b), n) = a` needs `n = dim(ax, a)`.
`shapes=False` drops shapes, definedness and guards (TASO's verifier; the split
axioms then make concat injective, which is false for tensors) and omits the
axioms that only hold for particular shapes.

What a rule is checked against. Hypotheses: every variable and every source op
is defined (the source matched real tensors), the source's shape constraints
hold (`kernel_h`/`kernel_w` on a conv, `numdim` 2: the tensor is [M, N, 1,
1]), every target op is defined and each mapped target tensor has the shape
of its source tensor (the engine rejects a match otherwise, docs/rules.md).
Goal: each mapped pair is equal.

What "proved" means. Consider the model M: T is the set of real-valued
(not float) tensors of rank 4 (with zero-size axes allowed) plus one
"undefined" element; every modelled operator computes its real definition
when its inputs are defined and have the shapes it requires (add and mul:
equal shapes, no broadcasting; matmul and transpose: [M, N, 1, 1] operands;
conv2d: stride 1, SAME, one group, any kernel size; pools: 3x3 stride 1 SAME;
scalar_mul: a scale [1, 1, 1, 1], the engine's [1])
and is undefined otherwise. Each axiom below was checked by hand to hold in M
for *all* inputs (its guard included); they are listed with the reason.
Every real instance of a rule over tensors of rank <= 4 (matrices as [M, N,
1, 1]) that the engine would apply is an instance in M, so "proved" means: if
the axioms are true of M (the hand check) and z3 is right, the rule's
mapped outputs are equal, in exact real arithmetic, for every binding of its
variables of every shape for which the engine would apply it. It does NOT
mean:
- float equality: reassociating adds or matmuls changes rounding;
- anything about ops outside the model: batched (rank > 2) matmul, grouped or
  strided or VALID convs, other pool sizes, broadcasting element-wise ops in a
  target and all other op types are opaque functions without axioms (a rule
  using them is proved only if it holds for every function);
- that the target is defined whenever the source is: a target may be defined
  for fewer shapes (the engine then rejects those matches). `ProofResult.total`
  reports whether it is (a quantifier-free check of the shape facts alone),
  and `ProofResult.applicable` whether any binding (sizes >= 1) makes both
  sides defined at all; a proved rule that is not applicable is vacuous;
- that the axioms are right: they are hand-written (TASO's list had unsound
  entries too). The numerical tier and tests/graphs/semantics_test.py remain
  the check of the axioms' consequences.
The converse also fails: "not proved" and "unknown" are no evidence that a
rule is wrong; many true rules are outside what the axioms reach (e.g. rules
that need a fact about max pooling other than those listed).

Outcomes: `prove` runs z3 with E-matching only (model-based quantifier
instantiation off, so a saturated search stops at once); UNSAT is "proved".
Otherwise both sides are evaluated numerically in M at up to six size
bindings that z3 solves for (`counterexample`): a difference is "not proved"
with the witness, a real counterexample to the rule. Anything else (timeout,
or E-matching saturated, and no difference found) is "unknown";
`prove_detail` says which. The same size search is the generator's check of
every rule at sizes other than those it was found on (pipeline.py).

Parameters the model ignores: `num_inputs num_outputs numdim group` are
shape-derived checks (numdim 2 is used as a hypothesis, a conv `group` other
than 1 makes the conv opaque).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import z3

from xflowrl.graphs.rules_io import PatternOp, PatternTensor, Rule

PROVED = "proved"
UNKNOWN = "unknown"
NOT_PROVED = "not proved"
STATUSES = (PROVED, UNKNOWN, NOT_PROVED)

NDIM = 4  # every tensor has four dims; a matrix [M, N] is [M, N, 1, 1]


# ------------------------------------------------------------- signature


class _Sig:
    """The sort, the operator functions and the shape functions."""

    def __init__(self):
        I = z3.IntSort()
        self.T = T = z3.DeclareSort("T")
        F = z3.Function
        self.add = F("add", T, T, T)
        self.mul = F("mul", T, T, T)
        self.relu = F("relu", T, T)
        self.matmul = F("matmul", I, T, T, T)  # (activation, a, b)
        self.transpose = F("transpose", T, T)  # perm [1, 0]
        self.concat = F("concat", I, T, T, T)  # (axis, a, b)
        self.split0 = F("split0", I, T, I, T)  # (axis, t, size of part 0)
        self.split1 = F("split1", I, T, I, T)
        self.conv = F("conv2d", I, T, T, T)  # (activation, x, w); stride 1, SAME
        self.avgpool = F("avgpool", T, T)  # 3x3, stride 1, SAME
        self.maxpool = F("maxpool", T, T)
        self.enlarge = F("enlarge", T, T, T)
        self.scalar_mul = F("scalar_mul", T, T, T)  # (x, s), s [1, 1, 1, 1]
        self.ok = F("ok", T, z3.BoolSort())
        self.dim = F("dim", I, T, I)

    def dims(self, t) -> List[z3.ArithRef]:
        return [self.dim(i, t) for i in range(NDIM)]

    def sheq(self, a, b) -> z3.BoolRef:
        return z3.And([self.dim(i, a) == self.dim(i, b) for i in range(NDIM)])

    def mat(self, a) -> z3.BoolRef:
        """`a` is a matrix: [M, N, 1, 1]."""
        return z3.And(self.dim(2, a) == 1, self.dim(3, a) == 1)


# The shape facts of each modelled function: (definedness condition beyond
# the operands being defined, output dims), as functions of the signature and
# the arguments. One source for the quantified axioms and the ground checks.
def _sel(S: _Sig, ax, t):
    """dim(ax, t) for an axis given as an Int term."""
    return S.dim(ax, t)


def _shape_add(S, a, b):
    return S.sheq(a, b), S.dims(a)


def _shape_unary(S, a):
    return z3.BoolVal(True), S.dims(a)


def _shape_matmul(S, act, a, b):
    cond = z3.And(z3.Or(act == 0, act == 2), S.mat(a), S.mat(b), S.dim(1, a) == S.dim(0, b))
    return cond, [S.dim(0, a), S.dim(1, b), z3.IntVal(1), z3.IntVal(1)]


def _shape_transpose(S, a):
    return S.mat(a), [S.dim(1, a), S.dim(0, a), z3.IntVal(1), z3.IntVal(1)]


def _shape_concat(S, ax, a, b):
    cond = z3.And([z3.And(0 <= ax, ax < NDIM)] +
                  [z3.Or(ax == i, S.dim(i, a) == S.dim(i, b)) for i in range(NDIM)])
    return cond, [z3.If(ax == i, S.dim(i, a) + S.dim(i, b), S.dim(i, a)) for i in range(NDIM)]


def _shape_split(part):
    def shape(S, ax, t, n):
        cond = z3.And(0 <= ax, ax < NDIM, 0 <= n, n <= _sel(S, ax, t))
        size = n if part == 0 else _sel(S, ax, t) - n
        return cond, [z3.If(ax == i, size, S.dim(i, t)) for i in range(NDIM)]
    return shape


def _shape_conv(S, act, x, w):
    cond = z3.And(z3.Or(act == 0, act == 2), S.dim(1, x) == S.dim(1, w))
    return cond, [S.dim(0, x), S.dim(0, w), S.dim(2, x), S.dim(3, x)]


def _shape_scalar_mul(S, x, s):
    return z3.And([S.dim(i, s) == 1 for i in range(NDIM)]), S.dims(x)


def _shape_enlarge(S, w, v):
    cond = z3.And(S.dim(2, w) <= S.dim(2, v), S.dim(3, w) <= S.dim(3, v),
                  (S.dim(2, v) - S.dim(2, w)) % 2 == 0, (S.dim(3, v) - S.dim(3, w)) % 2 == 0)
    return cond, [S.dim(0, w), S.dim(1, w), S.dim(2, v), S.dim(3, v)]


# function attribute name -> (argument kinds: "I" Int, "T" tensor; shape rule)
_SHAPES = {
    "add": ("TT", _shape_add),
    "mul": ("TT", _shape_add),
    "relu": ("T", _shape_unary),
    "matmul": ("ITT", _shape_matmul),
    "transpose": ("T", _shape_transpose),
    "concat": ("ITT", _shape_concat),
    "split0": ("ITI", _shape_split(0)),
    "split1": ("ITI", _shape_split(1)),
    "conv": ("ITT", _shape_conv),
    "avgpool": ("T", _shape_unary),
    "maxpool": ("T", _shape_unary),
    "enlarge": ("TT", _shape_enlarge),
    "scalar_mul": ("TT", _shape_scalar_mul),
}

SHAPE_RULES: Tuple[Tuple[str, str], ...] = (
    ("add, mul", "defined iff both operands are and have equal shapes (no broadcasting); "
                 "shape of the operands"),
    ("relu", "defined iff its operand is; same shape"),
    ("matmul(act, a, b)", "act in {0 none, 2 relu}, a [M,K,1,1], b [K,N,1,1]; [M,N,1,1]"),
    ("transpose (perm [1,0])", "a [M,N,1,1]; [N,M,1,1]"),
    ("concat(ax, a, b)", "0 <= ax < 4, equal sizes off ax; sizes add along ax"),
    ("split0/split1(ax, t, n)", "0 <= n <= dim(ax, t); part 0 has n along ax, part 1 the rest"),
    ("conv2d(act, x, w)", "stride 1, SAME, one group: act in {0, 2}, x [N,C,H,W], "
                          "w [O,C,kh,kw] (any kernel); [N,O,H,W]"),
    ("avgpool, maxpool", "3x3, stride 1, SAME; same shape"),
    ("enlarge(w, v)", "kernel of w <= kernel of v, even differences; [O,I] of w, kernel of v"),
    ("scalar_mul(x, s)", "s has one element (the engine's [1] is [1,1,1,1]); shape of x"),
    ("variables", "defined, sizes >= 0 (>= 1 in the applicability and totality checks)"),
)


def _shape_facts(S: _Sig, fname: str, args) -> List[z3.BoolRef]:
    """ok/dim facts of the term `fname(*args)`."""
    kinds, shape = _SHAPES[fname]
    term = getattr(S, fname)(*args)
    cond, out = shape(S, *args)
    oks = [S.ok(a) for a, k in zip(args, kinds) if k == "T"]
    return [S.ok(term) == z3.And(oks + [cond]),
            z3.Implies(S.ok(term), z3.And([S.dim(i, term) == out[i] for i in range(NDIM)]))]


def _shape_axioms(S: _Sig) -> List[z3.BoolRef]:
    out = []
    for fname, (kinds, _) in _SHAPES.items():
        args = [z3.Int(f"i{j}") if k == "I" else z3.Const(f"t{j}", S.T)
                for j, k in enumerate(kinds)]
        term = getattr(S, fname)(*args)
        out.append(z3.ForAll(args, z3.And(_shape_facts(S, fname, args)), patterns=[term]))
    return out


# ---------------------------------------------------------------- axioms


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
    _ax("transpose_concat0", "transpose(concat(0, a, b)) = concat(1, transpose a, transpose b)",
        "stacked rows become stacked columns", "a b",
        build=lambda S, a, b: (S.transpose(S.concat(0, a, b)),
                               S.concat(1, S.transpose(a), S.transpose(b)))),
    _ax("transpose_concat1", "transpose(concat(1, a, b)) = concat(0, transpose a, transpose b)",
        "stacked columns become stacked rows", "a b",
        build=lambda S, a, b: (S.transpose(S.concat(1, a, b)),
                               S.concat(0, S.transpose(a), S.transpose(b)))),
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
    _ax("avgpool_concat0", "avgpool(concat(0, a, b)) = concat(0, avgpool a, avgpool b)",
        "pooling is per batch item", "a b",
        build=lambda S, a, b: (S.avgpool(S.concat(0, a, b)),
                               S.concat(0, S.avgpool(a), S.avgpool(b)))),
    _ax("avgpool_concat1", "avgpool(concat(1, a, b)) = concat(1, avgpool a, avgpool b)",
        "pooling is per channel", "a b",
        build=lambda S, a, b: (S.avgpool(S.concat(1, a, b)),
                               S.concat(1, S.avgpool(a), S.avgpool(b)))),
    _ax("maxpool_concat0", "maxpool(concat(0, a, b)) = concat(0, maxpool a, maxpool b)",
        "pooling is per batch item", "a b",
        build=lambda S, a, b: (S.maxpool(S.concat(0, a, b)),
                               S.concat(0, S.maxpool(a), S.maxpool(b)))),
    _ax("maxpool_concat1", "maxpool(concat(1, a, b)) = concat(1, maxpool a, maxpool b)",
        "pooling is per channel", "a b",
        build=lambda S, a, b: (S.maxpool(S.concat(1, a, b)),
                               S.concat(1, S.maxpool(a), S.maxpool(b)))),
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
                               z3.And(S.dim(2, w) == 1, S.dim(3, w) == 1))),
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
                               z3.And(S.dim(2, w) == S.dim(2, v), S.dim(3, w) == S.dim(3, v)))),
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


def _axiom_formula(S: _Sig, ax: Axiom, shapes: bool) -> z3.BoolRef:
    tv = [z3.Const(n, S.T) for n in ax.tvars.split()]
    iv = [z3.Int(n) for n in ax.ivars.split()]
    built = ax.build(S, *tv, *iv)
    lhs, rhs = built[0], built[1]
    cond = built[2] if len(built) > 2 else None
    body = lhs == rhs
    if shapes:
        hyps = []
        if "L" in ax.guard:
            hyps.append(S.ok(lhs))
        if "R" in ax.guard:
            hyps.append(S.ok(rhs))
        if cond is not None:
            hyps.append(cond)
        if hyps:
            body = z3.Implies(z3.And(hyps), body)
    patterns = [lhs] if ax.one_way or not z3.is_app(rhs) or rhs.num_args() == 0 else [lhs, rhs]
    return z3.ForAll(tv + iv, body, patterns=patterns)


# --------------------------------------------------------------- encoding


def _int_param(op: PatternOp, key: str) -> Optional[int]:
    v = op.param(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _model_op(op: PatternOp, in_target: bool) -> str:
    """The modelled function of `op` ("add", "conv", ...); raises ValueError for
    an op the axioms do not cover."""
    typ, n_in = op.type, len(op.inputs)
    p = lambda key: _int_param(op, key)
    bad = None
    if typ in ("add", "mul", "enlarge", "scalar_mul"):
        bad = None if n_in == 2 else "two inputs"
        name = typ
    elif typ == "relu":
        name = "relu"
    elif typ == "matmul":
        bad = None if p("activation") in (0, 2) else "activation NONE or RELU"
        name = "matmul"
    elif typ == "transpose":
        bad = None if p("perm") == 21 else "perm [1, 0]"
        name = "transpose"
    elif typ == "concat":
        bad = None if n_in >= 2 and p("axis") in range(NDIM) else "axis 0..3, >= 2 inputs"
        name = "concat"
    elif typ == "split":
        bad = (None if in_target and p("axis") in range(NDIM) and p("num_outputs") in (None, 2)
               else "two outputs, in a target")
        name = "split"
    elif typ == "conv2d":
        ok = (p("activation") in (0, 2) and p("stride_h") == 1 and p("stride_w") == 1
              and p("padding") == 0 and p("group") in (None, 1))
        bad = None if ok else "stride 1, SAME, one group, activation NONE or RELU"
        name = "conv"
    elif typ in ("avgpool", "maxpool"):
        ok = (p("kernel_h") == 3 and p("kernel_w") == 3 and p("stride_h") == 1
              and p("stride_w") == 1 and p("padding") == 0 and p("activation") in (None, 0))
        bad = None if ok else "3x3, stride 1, SAME, no activation"
        name = typ
    else:
        raise ValueError(f"no axioms for op type {typ}")
    if bad is not None:
        raise ValueError(f"no axioms for {typ} with params {dict(op.params)} (needs {bad})")
    return name


class _Encoder:
    """Builds the z3 terms of one rule and the hypotheses about them."""

    def __init__(self, S: _Sig, rule: Rule, shapes: bool):
        self.S, self.rule, self.shapes = S, rule, shapes
        self.variables: Dict[int, z3.ExprRef] = {}
        self.terms: List[Tuple[str, tuple]] = []  # (function name, args) of the rule's terms
        self.constraints: List[z3.BoolRef] = []  # shape constraints from params (checks)
        self.src = self._side(rule.src, None)
        self.dst = self._side(rule.dst, self.src)

    def var(self, k: int):
        if k not in self.variables:
            self.variables[k] = z3.Const(f"v{k}", self.S.T)
        return self.variables[k]

    def _app(self, fname: str, *args):
        self.terms.append((fname, args))
        return getattr(self.S, fname)(*args)

    def _side(self, ops: Sequence[PatternOp], src_terms) -> Dict[Tuple[int, int], z3.ExprRef]:
        S = self.S
        out: Dict[Tuple[int, int], z3.ExprRef] = {}
        for j, op in enumerate(ops):
            ins = [self.var(-t.op) if t.op < 0 else out[(t.op, t.index)] for t in op.inputs]
            p = lambda key: _int_param(op, key)
            name = _model_op(op, src_terms is not None)
            if name in ("add", "mul", "enlarge", "scalar_mul", "relu", "transpose", "avgpool",
                        "maxpool"):
                outputs = {0: self._app(name, *ins)}
            elif name in ("matmul", "conv"):
                outputs = {0: self._app(name, z3.IntVal(p("activation")), *ins)}
                if name == "conv":
                    for key, axis in (("kernel_h", 2), ("kernel_w", 3)):
                        if p(key) is not None:
                            self.constraints.append(S.dim(axis, ins[1]) == p(key))
            elif name == "concat":
                t = ins[0]
                for x in ins[1:]:  # concat(a, b, c) = concat(concat(a, b), c)
                    t = self._app("concat", z3.IntVal(p("axis")), t, x)
                outputs = {0: t}
            else:
                outputs = self._split(j, op, ins[0], src_terms)
            if p("numdim") == 2:
                self.constraints += [S.mat(t) for t in outputs.values()]
            for i, t in outputs.items():
                out[(j, i)] = t
        return out

    def _split(self, j, op, t, src_terms):
        S, axv = self.S, z3.IntVal(op.param("axis"))
        mapped = {d.index: src_terms[(s.op, s.index)]
                  for s, d in self.rule.mapped_outputs if d.op == j}
        if 0 in mapped:
            n = S.dim(axv, mapped[0])
        elif 1 in mapped:
            n = S.dim(axv, t) - S.dim(axv, mapped[1])
        else:
            n = z3.Int(f"n{j}")
        # Without shapes nothing constrains n, and the split axioms hold for
        # every n: TASO's split, a function of the axis and the tensor only.
        return {0: self._app("split0", axv, t, n), 1: self._app("split1", axv, t, n)}

    # hypotheses and goal ------------------------------------------------

    def src_defined(self, min_size: int, max_size: Optional[int] = None) -> List[z3.BoolRef]:
        S = self.S
        hyps = []
        for v in self.variables.values():
            hyps.append(S.ok(v))
            hyps += [S.dim(i, v) >= min_size for i in range(NDIM)]
            if max_size is not None:
                hyps += [S.dim(i, v) <= max_size for i in range(NDIM)]
        hyps += [S.ok(t) for t in self.src.values()]
        return hyps + self.constraints

    def dst_defined(self) -> List[z3.BoolRef]:
        S = self.S
        hyps = [S.ok(t) for t in self.dst.values()]
        for s, d in self.rule.mapped_outputs:
            hyps.append(S.sheq(self.src[(s.op, s.index)], self.dst[(d.op, d.index)]))
        return hyps

    def ground_shape_facts(self) -> List[z3.BoolRef]:
        facts = []
        for fname, args in self.terms:
            facts += _shape_facts(self.S, fname, args)
        return facts

    def differ(self) -> z3.BoolRef:
        return z3.Or([self.src[(s.op, s.index)] != self.dst[(d.op, d.index)]
                      for s, d in self.rule.mapped_outputs])


# ------------------------------------------------------- counterexamples


_CONV_PARAMS = {"stride_h": 1, "stride_w": 1, "padding": "SAME"}
_POOL_PARAMS = dict(_CONV_PARAMS, kernel_h=3, kernel_w=3, activation="NONE")


def _eval_side(ops: Sequence[PatternOp], values: Dict[int, np.ndarray], rule: Rule,
               src_out: Optional[dict]) -> Dict[Tuple[int, int], np.ndarray]:
    """Evaluates a side in the model M (rank-4 tensors, matrices [M, N, 1, 1]);
    ValueError where an op is undefined there."""
    from xflowrl.graphs import executor  # numpy only; no engine needed

    def need(c, what):
        if not c:
            raise ValueError(what)

    out: Dict[Tuple[int, int], np.ndarray] = {}
    for j, op in enumerate(ops):
        xs = [values[-t.op] if t.op < 0 else out[(t.op, t.index)] for t in op.inputs]
        name = _model_op(op, src_out is not None)
        act = _int_param(op, "activation")
        if name in ("add", "mul"):
            need(xs[0].shape == xs[1].shape, "element-wise shapes")
            y = xs[0] + xs[1] if name == "add" else xs[0] * xs[1]
        elif name == "relu":
            y = np.maximum(xs[0], 0)
        elif name == "matmul":
            a, b = xs
            need(a.shape[2:] == b.shape[2:] == (1, 1) and a.shape[1] == b.shape[0], "matmul")
            y = (a[:, :, 0, 0] @ b[:, :, 0, 0])[:, :, None, None]
            y = np.maximum(y, 0) if act == 2 else y
        elif name == "transpose":
            need(xs[0].shape[2:] == (1, 1), "transpose")
            y = np.transpose(xs[0], (1, 0, 2, 3))
        elif name == "concat":
            y = np.concatenate(xs, axis=op.param("axis"))
        elif name == "split":
            ax = op.param("axis")
            sizes = {d.index: src_out[(s.op, s.index)].shape[ax]
                     for s, d in rule.mapped_outputs if d.op == j}
            need(sizes.get(0, 0) + sizes.get(1, 0) == xs[0].shape[ax], "split sizes")
            n = sizes.get(0, 0)
            out[(j, 1)] = np.take(xs[0], range(n, xs[0].shape[ax]), axis=ax)
            y = np.take(xs[0], range(n), axis=ax)
        elif name == "conv":
            need(xs[0].shape[1] == xs[1].shape[1], "conv channels")
            y = executor.conv2d(xs[0], xs[1], dict(_CONV_PARAMS,
                                                   activation="RELU" if act == 2 else "NONE"))
        elif name in ("avgpool", "maxpool"):
            y = getattr(executor, name)(xs[0], _POOL_PARAMS)
        elif name == "scalar_mul":
            need(xs[1].size == 1, "scalar_mul scale")
            y = xs[0] * xs[1].reshape(())
        else:
            y = executor.enlarge(*xs)
        out[(j, 0)] = y
    return out


def _bindings(enc: _Encoder, count: int, max_size: int, seed: int
              ) -> List[Dict[int, Tuple[int, ...]]]:
    """Up to `count` distinct size assignments (1..max_size) of the rule's
    variables under which the source and the target are defined and the
    mapped pairs have equal shapes.

    Deterministic: each draw fixes the variables' sizes one at a time, to a
    random target where that stays satisfiable and else to the smallest
    size that does, so the outcome depends only on satisfiability answers
    (exact for these quantifier-free problems), not on the solver's models.
    """
    S = enc.S
    solver = z3.SimpleSolver()
    solver.add(enc.ground_shape_facts() + enc.src_defined(1, max_size) + enc.dst_defined())
    if solver.check() != z3.sat:
        return []
    rng = np.random.default_rng(seed)
    dims = [(k, i) for k in sorted(enc.variables) for i in range(NDIM)]
    # is_size[j][n - 1]: "dims[j] has size n" (built once: z3 terms are slow to make)
    is_size = [[S.dim(i, enc.variables[k]) == n for n in range(1, max_size + 1)]
               for k, i in dims]
    found: List[Dict[int, Tuple[int, ...]]] = []
    for _ in range(4 * count):
        fixed: List[z3.BoolRef] = []
        sizes: Dict[Tuple[int, int], int] = {}
        for j in rng.permutation(len(dims)):
            target = int(rng.integers(1, max_size + 1))
            for size in [target] + [n for n in range(1, max_size + 1) if n != target]:
                if solver.check(*fixed, is_size[j][size - 1]) == z3.sat:
                    fixed.append(is_size[j][size - 1])
                    sizes[dims[j]] = size
                    break
        binding = {k: tuple(sizes[(k, i)] for i in range(NDIM)) for k in sorted(enc.variables)}
        if binding not in found:
            found.append(binding)
            if len(found) == count:
                break
    return found


def _find_difference(enc: _Encoder, bindings, seed: int) -> Optional[str]:
    rule = enc.rule
    rng = np.random.default_rng(seed)
    for shapes in bindings:
        values = {k: rng.normal(size=shape) for k, shape in shapes.items()}
        try:
            src = _eval_side(rule.src, values, rule, None)
            dst = _eval_side(rule.dst, values, rule, src)
        except (ValueError, IndexError):
            continue
        for s, d in rule.mapped_outputs:
            a, b = src[(s.op, s.index)], dst[(d.op, d.index)]
            if a.shape != b.shape:  # the engine rejects such a match
                break
            err = float(np.max(np.abs(a - b))) if a.size else 0.0
            if err > 1e-6 * (1 + float(np.max(np.abs(a), initial=0)) +
                             float(np.max(np.abs(b), initial=0))):
                return (f"{_describe(shapes)}: source {s} and target {d} differ by "
                        f"{err:.3g}")
    return None


def _describe(shapes) -> str:
    return " ".join(f"v{k}{list(sh)}" for k, sh in sorted(shapes.items()))


def shape_bindings(rule: Rule, count: int = 6, max_size: int = 5, seed: int = 0
                   ) -> List[Dict[int, Tuple[int, ...]]]:
    """Distinct variable sizes (rank 4, each axis 1..max_size, a matrix as
    [M, N, 1, 1]; keys are the variables, -1, -2, ...)
    under which the rule applies in the model of the module docstring.

    Raises:
      ValueError: an op the model does not cover.
    """
    enc = _Encoder(_signature(), rule, True)
    return [{-k: v for k, v in b.items()} for b in _bindings(enc, count, max_size, seed)]


def counterexample(rule: Rule, draws: int = 6, max_size: int = 5, seed: int = 0
                   ) -> Optional[str]:
    """Evaluates both sides numerically (float64, normal random values) at
    up to `draws` sizes from `shape_bindings`; returns a description of the
    first mapped pair that differs, or None.

    A rule the generator found on fixed sizes (4x4 matrices, 3x3 and 1x1
    kernels) can hold there and fail on others: `concat(x1, x2) @
    concat(x1, x3)` equals `concat(x2, x1) @ concat(x3, x1)` only when x1 is
    square. Deterministic for a given rule and seed.

    Raises:
      ValueError: an op the model does not cover.
    """
    enc = _Encoder(_signature(), rule, True)
    return _find_difference(enc, _bindings(enc, draws, max_size, seed), seed)


# ------------------------------------------------------------------ prove


@dataclasses.dataclass
class ProofResult:
    """The outcome for one rule.

    status: "proved", "unknown" or "not proved". reason: "unsat" (proved);
    "counterexample" (not proved: `witness` gives sizes and the differing
    pair); "saturated" (E-matching ran out of instances without a proof) or
    "timeout" (unknown). applicable: some sizes >= 1 make the source and the
    target defined with equal mapped shapes (False: the rule never fires).
    total: every binding that defines the source also defines the target
    (False: the engine rejects some matches). Both are quantifier-free checks
    of the shape facts alone.
    """
    name: str
    status: str
    reason: str
    seconds: float
    applicable: Optional[bool] = None
    total: Optional[bool] = None
    witness: str = ""


_SIG: Optional[_Sig] = None
_AXIOM_CACHE: Dict[bool, List[z3.BoolRef]] = {}


def _signature() -> _Sig:
    global _SIG
    if _SIG is None:
        _SIG = _Sig()
    return _SIG


def _axioms(shapes: bool) -> List[z3.BoolRef]:
    if shapes not in _AXIOM_CACHE:
        S = _signature()
        fs = [_axiom_formula(S, ax, shapes) for ax in AXIOMS if shapes or not ax.shape_only]
        if shapes:
            fs += _shape_axioms(S)
        _AXIOM_CACHE[shapes] = fs
    return _AXIOM_CACHE[shapes]


def _check(formulas, timeout_ms: int, mbqi: bool = False) -> Tuple[z3.CheckSatResult, str]:
    s = z3.SimpleSolver()
    s.set("timeout", max(1, timeout_ms))
    s.set("smt.mbqi", mbqi)
    s.add(formulas)
    r = s.check()
    return r, (s.reason_unknown() if r == z3.unknown else "")


def prove_detail(rule: Rule, timeout_ms: int = 2000, shapes: bool = True,
                 search_counterexample: bool = True) -> ProofResult:
    """Tries to prove `rule` from `AXIOMS` (see the module docstring).

    Raises:
      ValueError: the rule uses an op (or op parameters) the axioms do not
        cover, e.g. "no axioms for op type batchnorm".
    """
    start = time.perf_counter()
    S = _signature()
    enc = _Encoder(S, rule, shapes)
    if not rule.mapped_outputs:
        raise ValueError(f"rule {rule.name!r} has no mapped outputs")
    facts = enc.ground_shape_facts()
    src1 = enc.src_defined(1)
    applicable = _check(facts + src1 + enc.dst_defined(), 1000)[0] == z3.sat
    total = _check(facts + src1 + [z3.Not(z3.And(enc.dst_defined()))], 1000)[0] == z3.unsat

    def result(status, reason, witness=""):
        return ProofResult(rule.name, status, reason, time.perf_counter() - start,
                           applicable, total, witness)

    formulas = list(_axioms(shapes))
    if shapes:
        formulas += facts + enc.src_defined(0) + enc.dst_defined()
    formulas.append(enc.differ())
    left = int(timeout_ms - 1000 * (time.perf_counter() - start))
    r, why = _check(formulas, left) if left > 0 else (z3.unknown, "timeout")
    if r == z3.unsat:
        return result(PROVED, "unsat")
    if search_counterexample and applicable:
        witness = _find_difference(enc, _bindings(enc, 6, 5, 0), 0)
        if witness is not None:
            return result(NOT_PROVED, "counterexample", witness)
    if r == z3.sat:  # not expected with E-matching alone, but a model all the same
        return result(NOT_PROVED, "sat")
    return result(UNKNOWN, "saturated" if why == "(incomplete quantifiers)" else "timeout")


def prove(rule: Rule, timeout_ms: int = 2000, shapes: bool = True) -> str:
    """"proved", "unknown" or "not proved" (see the module docstring).

    Raises:
      ValueError: an op the axioms do not cover (see `prove_detail`).
    """
    return prove_detail(rule, timeout_ms, shapes).status


NOT_COVERED = "not covered"


def prove_all(rules: Sequence[Rule], timeout_ms: int = 2000,
              progress: Optional[Callable[[str], None]] = None,
              shapes: bool = True) -> dict:
    """Runs `prove_detail` on every rule.

    Returns a dict: "proved", "unknown", "not proved", "not covered" (rules
    with an op the axioms do not cover): counts, also under "counts";
    "rules": how many; "wall_s" (= "seconds"): wall time; "results" (=
    "answers"): {rule name: status}; "reasons": {reason: count};
    "proved_vacuous": proved rules no sizes can apply; "proved_partial":
    proved rules whose target is undefined for some sources the engine then
    rejects; "not_proved": {name: witness}; "axioms": len(AXIOMS);
    "details": {name: ProofResult}. `progress(line)` gets a status line every
    100 rules and at the end.
    """
    start = time.perf_counter()
    counts = {s: 0 for s in STATUSES + (NOT_COVERED,)}
    results, details, reasons = {}, {}, {}
    for i, rule in enumerate(rules):
        try:
            res = prove_detail(rule, timeout_ms, shapes)
        except ValueError as e:
            res = ProofResult(rule.name, NOT_COVERED, str(e), 0.0)
        counts[res.status] += 1
        results[rule.name] = res.status
        details[rule.name] = res
        key = res.reason if res.status != NOT_COVERED else NOT_COVERED
        reasons[key] = reasons.get(key, 0) + 1
        if progress is not None and ((i + 1) % 100 == 0 or i + 1 == len(rules)):
            elapsed = time.perf_counter() - start
            eta = elapsed / (i + 1) * (len(rules) - i - 1)
            progress(f"z3: {i + 1}/{len(rules)} rules, " +
                     ", ".join(f"{v} {k}" for k, v in counts.items()) +
                     f"; {elapsed:.0f} s, ETA {eta:.0f} s")
    wall = time.perf_counter() - start
    return {
        **counts,
        "counts": dict(counts),
        "rules": len(rules),
        "wall_s": wall,
        "seconds": wall,
        "results": results,
        "answers": results,
        "reasons": reasons,
        "proved_vacuous": [n for n, d in details.items()
                           if d.status == PROVED and d.applicable is False],
        "proved_partial": [n for n, d in details.items()
                           if d.status == PROVED and d.total is False],
        "not_proved": {n: d.witness for n, d in details.items() if d.status == NOT_PROVED},
        "axioms": len(AXIOMS),
        "details": details,
    }
