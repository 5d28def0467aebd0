"""The z3 encoding of the model M for the proof tier (symbolic.py).

Tensors are an uninterpreted sort `T`, every modelled operator an
uninterpreted function (parameters such as the concat axis or the fused
activation are `Int` arguments), `dim(i, t)` gives the size of axis i and
`ok(t)` says that `t` is defined. The shape rules of model.py, applied to
z3 terms, become one quantified definedness-and-shape axiom per function;
the equations of axioms.py become quantified formulas with their guards;
`Encoder` builds a rule's terms and the hypotheses about them. This is the
only generator module besides symbolic.py that imports z3.
"""

from __future__ import annotations

from typing import List

import z3

from xflowrl.generator.axioms import AXIOMS, Axiom
from xflowrl.generator.model import NDIM, RuleTerms, SHAPES
from xflowrl.rules.rules_io import Rule


class Signature:
    """The sort, the operator functions and the shape functions; also the
    z3 backend of `model.SHAPES` and `model.RuleTerms`."""

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

    # shape-rule backend ------------------------------------------------

    def dims(self, t) -> List[z3.ArithRef]:
        return [self.dim(i, t) for i in range(NDIM)]

    def sheq(self, a, b) -> z3.BoolRef:
        return z3.And([self.dim(i, a) == self.dim(i, b) for i in range(NDIM)])

    def mat(self, a) -> z3.BoolRef:
        """`a` is a matrix: [M, N, 1, 1]."""
        return z3.And(self.dim(2, a) == 1, self.dim(3, a) == 1)

    all = staticmethod(lambda conds: z3.And(conds))
    any = staticmethod(lambda conds: z3.Or(conds))
    ite = staticmethod(z3.If)
    const = staticmethod(z3.IntVal)
    true = staticmethod(lambda: z3.BoolVal(True))

    # rule-terms backend ------------------------------------------------

    def var(self, k: int):
        return z3.Const(f"v{k}", self.T)

    int_val = staticmethod(z3.IntVal)
    fresh_int = staticmethod(z3.Int)

    def app(self, fname: str, *args):
        return getattr(self, fname)(*args)


def shape_facts(S: Signature, fname: str, args) -> List[z3.BoolRef]:
    """ok/dim facts of the term `fname(*args)`."""
    kinds, shape = SHAPES[fname]
    term = getattr(S, fname)(*args)
    cond, out = shape(S, *args)
    oks = [S.ok(a) for a, k in zip(args, kinds) if k == "T"]
    return [S.ok(term) == z3.And(oks + [cond]),
            z3.Implies(S.ok(term), z3.And([S.dim(i, term) == out[i] for i in range(NDIM)]))]


def shape_axioms(S: Signature) -> List[z3.BoolRef]:
    """`shape_facts` of every modelled function, quantified."""
    out = []
    for fname, (kinds, _) in SHAPES.items():
        args = [z3.Int(f"i{j}") if k == "I" else z3.Const(f"t{j}", S.T)
                for j, k in enumerate(kinds)]
        term = getattr(S, fname)(*args)
        out.append(z3.ForAll(args, z3.And(shape_facts(S, fname, args)), patterns=[term]))
    return out


def axiom_formula(S: Signature, ax: Axiom, shapes: bool) -> z3.BoolRef:
    """`ax` as a quantified formula, guarded as its `guard` says when
    `shapes`; E-matching patterns from its sides."""
    tv = [z3.Const(n, S.T) for n in ax.tvars.split()]
    iv = [z3.Int(n) for n in ax.ivars.split()]
    if ax.build is None:
        raise ValueError(f"axiom {ax.name} has no build function")
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


def axiom_formulas(S: Signature, shapes: bool) -> List[z3.BoolRef]:
    """Every axiom that holds with (or without) shapes, plus the shape
    axioms when `shapes`."""
    fs = [axiom_formula(S, ax, shapes) for ax in AXIOMS if shapes or not ax.shape_only]
    return fs + shape_axioms(S) if shapes else fs


class Encoder(RuleTerms):
    """The z3 terms of one rule (`model.RuleTerms`) and the hypotheses
    about them."""

    def __init__(self, S: Signature, rule: Rule):
        self.S = S
        super().__init__(S, rule)

    def src_defined(self, min_size: int) -> List[z3.BoolRef]:
        """Every variable and source op is defined, the variables' sizes are
        at least `min_size`, and the parameters' shape constraints hold."""
        S = self.S
        hyps = []
        for v in self.variables.values():
            hyps.append(S.ok(v))
            hyps += [S.dim(i, v) >= min_size for i in range(NDIM)]
        hyps += [S.ok(t) for t in self.src.values()]
        return hyps + self.constraints

    def dst_defined(self) -> List[z3.BoolRef]:
        """Every target op is defined and each mapped pair has one shape."""
        S = self.S
        hyps = [S.ok(t) for t in self.dst.values()]
        for s, d in self.rule.mapped_outputs:
            hyps.append(S.sheq(self.src[(s.op, s.index)], self.dst[(d.op, d.index)]))
        return hyps

    def ground_shape_facts(self) -> List[z3.BoolRef]:
        facts = []
        for fname, args in self.terms:
            facts += shape_facts(self.S, fname, args)
        return facts

    def differ(self) -> z3.BoolRef:
        """Some mapped pair differs (the negated goal)."""
        return z3.Or([self.src[(s.op, s.index)] != self.dst[(d.op, d.index)]
                      for s, d in self.rule.mapped_outputs])

    def size_problem(self, max_size: int) -> List[z3.BoolRef]:
        """The quantifier-free constraints `sizes.SizeProblem` solves: the
        rule applies with every variable size in 1..max_size (a cross-check
        of the size search in tests)."""
        S = self.S
        bounds = [S.dim(i, v) <= max_size for v in self.variables.values() for i in range(NDIM)]
        return self.ground_shape_facts() + self.src_defined(1) + bounds + self.dst_defined()

