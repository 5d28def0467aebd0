"""The model M in which rules are checked at other sizes and proved: which
pattern ops it covers and the shape rule of each modelled function, written
once for two interpretations.

M (see symbolic.py for what a proof in it means): rank-4 real tensors (a
matrix [M, N] is [M, N, 1, 1]) plus "undefined"; every modelled function
computes its real definition when its operands are defined and have the
shapes it requires, and is undefined otherwise.

A shape rule `SHAPES[name] = (kinds, rule)` maps a backend `B` and the
function's arguments to `(condition, output dims)`: the condition for the
application to be defined (beyond its operands being defined) and its four
sizes. The backend supplies `dim(i, t)`, `dims`, `sheq`, `mat`, `all`, `any`,
`ite`, `const` and `true`. The z3 encoding (z3_encoding.py) passes z3 terms, so
the rules become the quantified shape axioms of the proofs; the size search
(sizes.py) passes linear expressions over the variables' sizes, so the same
rules become the constraints it solves without z3. `RuleTerms` walks a
rule's ops once for either backend.

This module needs neither z3 nor the engine.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from xflowrl.rules.rules_io import PatternOp, Rule

NDIM = 4  # every tensor has four dims; a matrix [M, N] is [M, N, 1, 1]


# ------------------------------------------------------------ shape rules


def _shape_add(B, a, b):
    return B.sheq(a, b), B.dims(a)


def _shape_unary(B, a):
    return B.true(), B.dims(a)


def _shape_matmul(B, act, a, b):
    cond = B.all([B.any([act == 0, act == 2]), B.mat(a), B.mat(b), B.dim(1, a) == B.dim(0, b)])
    return cond, [B.dim(0, a), B.dim(1, b), B.const(1), B.const(1)]


def _shape_transpose(B, a):
    return B.mat(a), [B.dim(1, a), B.dim(0, a), B.const(1), B.const(1)]


def _shape_concat(B, ax, a, b):
    cond = B.all([B.all([0 <= ax, ax < NDIM])] +
                 [B.any([ax == i, B.dim(i, a) == B.dim(i, b)]) for i in range(NDIM)])
    return cond, [B.ite(ax == i, B.dim(i, a) + B.dim(i, b), B.dim(i, a)) for i in range(NDIM)]


def _shape_split(part):
    def shape(B, ax, t, n):
        cond = B.all([0 <= ax, ax < NDIM, 0 <= n, n <= B.dim(ax, t)])
        size = n if part == 0 else B.dim(ax, t) - n
        return cond, [B.ite(ax == i, size, B.dim(i, t)) for i in range(NDIM)]
    return shape


def _shape_conv(B, act, x, w):
    cond = B.all([B.any([act == 0, act == 2]), B.dim(1, x) == B.dim(1, w)])
    return cond, [B.dim(0, x), B.dim(0, w), B.dim(2, x), B.dim(3, x)]


def _shape_scalar_mul(B, x, s):
    return B.all([B.dim(i, s) == 1 for i in range(NDIM)]), B.dims(x)


def _shape_enlarge(B, w, v):
    cond = B.all([B.dim(2, w) <= B.dim(2, v), B.dim(3, w) <= B.dim(3, v),
                  (B.dim(2, v) - B.dim(2, w)) % 2 == 0, (B.dim(3, v) - B.dim(3, w)) % 2 == 0])
    return cond, [B.dim(0, w), B.dim(1, w), B.dim(2, v), B.dim(3, v)]


# modelled function -> (argument kinds: "I" integer, "T" tensor; shape rule)
SHAPES = {
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

# The same rules in words (docs and reports).
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


# ------------------------------------------------------------ covered ops


def int_param(op: PatternOp, key: str) -> Optional[int]:
    """The integer parameter `key` of `op`, or None (absent or not an int)."""
    v = op.param(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def model_op(op: PatternOp, in_target: bool) -> str:
    """The modelled function of `op` ("add", "conv", "split", ...).

    Raises:
      ValueError: an op (or op parameters) the model does not cover, e.g.
        "no axioms for op type batchnorm".
    """
    typ, n_in = op.type, len(op.inputs)
    p = lambda key: int_param(op, key)
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


# ------------------------------------------------------------ rule terms


class RuleTerms:
    """A rule's two sides as terms of a backend, with the shape constraints
    its parameters state.

    The backend `B` (see the module docstring) also supplies `var(k)` (the
    term of variable k), `int_val(v)`, `fresh_int(name)` and `app(name,
    *args)` (the term of a modelled function applied to `args`).

    Attributes:
      variables: {k: term of variable k} (k = 1, 2, ...: pattern tensor -k).
      terms: (function name, args) of every application, in order.
      constraints: shape constraints from params (conv kernel sizes,
        `numdim` 2: a matrix).
      src, dst: {(op index, output index): term}.

    Raises:
      ValueError: an op the model does not cover (`model_op`).
    """

    def __init__(self, backend, rule: Rule):
        self.B, self.rule = backend, rule
        self.variables: Dict[int, object] = {}
        self.terms: List[Tuple[str, tuple]] = []
        self.constraints: list = []
        self.src = self._side(rule.src, None)
        self.dst = self._side(rule.dst, self.src)

    def var(self, k: int):
        if k not in self.variables:
            self.variables[k] = self.B.var(k)
        return self.variables[k]

    def _app(self, fname: str, *args):
        self.terms.append((fname, args))
        return self.B.app(fname, *args)

    def _side(self, ops: Sequence[PatternOp], src_terms) -> Dict[Tuple[int, int], object]:
        B = self.B
        out: Dict[Tuple[int, int], object] = {}
        for j, op in enumerate(ops):
            ins = [self.var(-t.op) if t.op < 0 else out[(t.op, t.index)] for t in op.inputs]
            p = lambda key: int_param(op, key)
            name = model_op(op, src_terms is not None)
            if name in ("add", "mul", "enlarge", "scalar_mul", "relu", "transpose", "avgpool",
                        "maxpool"):
                outputs = {0: self._app(name, *ins)}
            elif name in ("matmul", "conv"):
                outputs = {0: self._app(name, B.int_val(p("activation")), *ins)}
                if name == "conv":
                    for key, axis in (("kernel_h", 2), ("kernel_w", 3)):
                        if p(key) is not None:
                            self.constraints.append(B.dim(axis, ins[1]) == p(key))
            elif name == "concat":
                t = ins[0]
                for x in ins[1:]:  # concat(a, b, c) = concat(concat(a, b), c)
                    t = self._app("concat", B.int_val(p("axis")), t, x)
                outputs = {0: t}
            else:
                outputs = self._split(j, op, ins[0], src_terms)
            if p("numdim") == 2:
                self.constraints += [B.mat(t) for t in outputs.values()]
            for i, t in outputs.items():
                out[(j, i)] = t
        return out

    def _split(self, j, op, t, src_terms):
        B, axv = self.B, self.B.int_val(op.param("axis"))
        mapped = {d.index: src_terms[(s.op, s.index)]
                  for s, d in self.rule.mapped_outputs if d.op == j}
        if 0 in mapped:
            n = B.dim(axv, mapped[0])
        elif 1 in mapped:
            n = B.dim(axv, t) - B.dim(axv, mapped[1])
        else:
            n = B.fresh_int(f"n{j}")
        # Without shapes nothing constrains n, and the split axioms hold for
        # every n: TASO's split, a function of the axis and the tensor only.
        return {0: self._app("split0", axv, t, n), 1: self._app("split1", axv, t, n)}
