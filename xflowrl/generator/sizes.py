"""The size search: variable sizes under which a rule applies in the model M
(model.py), found without z3.

The generator finds rules on fixed sizes (4x4 matrices, 3x3 and 1x1 kernels)
but the engine applies them at any sizes its source matches, so every rule
is evaluated again at other sizes (other_sizes.py). Those sizes must make
both sides defined with equal mapped shapes. With every size of every
variable bounded (1..max_size), the shape rules of model.py turn into
integer constraints that are linear in the sizes (equalities, inequalities,
parities: concat adds sizes, split subtracts them), so an exact
satisfiability check is a small backtracking search; no solver is needed,
and the numeric generator runs without z3 installed.

The search is the one z3 used to answer: each draw fixes the variables'
sizes one at a time, to a random target where that stays satisfiable and
else to the smallest size that does, so the outcome depends only on exact
satisfiability answers. tests/generator/sizes_test.py checks the answers
against z3 on the shipped rules where z3 is installed.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, Hashable, List, Optional, Sequence, Tuple, Union

import numpy as np

from xflowrl.generator.model import NDIM, RuleTerms, SHAPES
from xflowrl.rules.rules_io import Rule

Binding = Dict[int, Tuple[int, ...]]  # variable k (1, 2, ...) -> its four sizes


# ------------------------------------------------------- linear algebra


class Lin:
    """An integer linear expression `const + sum(coef * unknown)`; comparing
    it builds a condition (`Cond`) instead of a bool."""

    __slots__ = ("const", "coef")
    # `==` builds a condition. The data model's way to say unhashable, which
    # typeshed's object.__hash__ (a method) does not allow for.
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, const: int = 0, coef: Optional[Dict[Hashable, int]] = None):
        self.const = const
        self.coef = {k: c for k, c in (coef or {}).items() if c}

    @staticmethod
    def unknown(key: Hashable) -> "Lin":
        return Lin(0, {key: 1})

    def _combine(self, other, sign: int) -> "Lin":
        other = other if isinstance(other, Lin) else Lin(other)
        coef = dict(self.coef)
        for k, c in other.coef.items():
            coef[k] = coef.get(k, 0) + sign * c
        return Lin(self.const + sign * other.const, coef)

    def __add__(self, other):
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, -1)

    def __rsub__(self, other):
        return Lin(other)._combine(self, -1)

    def __eq__(self, other):
        return _atom("eq", self - other)

    def __ge__(self, other):
        return _atom("ge", self - other)

    def __le__(self, other):
        return _atom("ge", Lin(0) + other - self)

    def __gt__(self, other):
        return _atom("ge", self - other - 1)

    def __lt__(self, other):
        return _atom("ge", Lin(0) + other - self - 1)

    def __mod__(self, modulus):
        return _Residue(self, modulus)

    def value(self, assignment: Dict[Hashable, int]) -> int:
        return self.const + sum(c * assignment[k] for k, c in self.coef.items())


class _Residue:
    """`lin % modulus`, comparable with a constant."""

    def __init__(self, lin: Lin, modulus: int):
        self.lin, self.modulus = lin, modulus

    def __eq__(self, residue):
        if self.modulus != 2 or residue != 0:
            raise NotImplementedError("only `x % 2 == 0` is modelled")
        return _atom("even", self.lin)


# An atom: (kind, lin) with kind "eq" (lin = 0), "ge" (lin >= 0) or "even".
Atom = Tuple[str, Lin]
# A condition: a constant, or the conjunction of its atoms.
Cond = Union[bool, Tuple[Atom, ...]]


def _holds(kind: str, v: int) -> bool:
    return v == 0 if kind == "eq" else (v >= 0 if kind == "ge" else v % 2 == 0)


def _atom(kind: str, lin: Lin) -> Cond:
    return _holds(kind, lin.const) if not lin.coef else ((kind, lin),)


class _LinearShapes:
    """The backend of `model.RuleTerms` for the size search: a tensor is its
    four sizes as `Lin`s over the variables' sizes ("v", k, axis) and the
    free split points ("n", name); `conditions` collects every
    application's definedness condition."""

    def __init__(self):
        self.conditions: List[Cond] = []

    def var(self, k: int) -> Tuple[Lin, ...]:
        return tuple(Lin.unknown(("v", k, i)) for i in range(NDIM))

    def int_val(self, v: int) -> int:
        return v

    def fresh_int(self, name: str) -> Lin:
        return Lin.unknown(("n", name))

    def app(self, fname: str, *args) -> Tuple[Lin, ...]:
        cond, out = SHAPES[fname][1](self, *args)
        self.conditions.append(cond)
        return tuple(Lin(0) + d for d in out)

    def dim(self, i: int, t) -> Lin:
        return t[i]

    def dims(self, t) -> List[Lin]:
        return list(t)

    def sheq(self, a, b) -> Cond:
        return self.all([a[i] == b[i] for i in range(NDIM)])

    def mat(self, a) -> Cond:
        return self.all([a[2] == 1, a[3] == 1])

    def const(self, v: int) -> Lin:
        return Lin(v)

    def true(self) -> Cond:
        return True

    def all(self, conds: Sequence[Cond]) -> Cond:
        atoms: List[Atom] = []
        for c in conds:
            if c is False:
                return False
            if c is not True:
                atoms += c
        return tuple(atoms) if atoms else True

    def any(self, conds: Sequence[Cond]) -> Cond:
        if any(c is True for c in conds):
            return True
        left = [c for c in conds if c is not False]
        if len(left) > 1:  # every disjunction of the shape rules is over constants here
            raise NotImplementedError("a disjunction of size conditions")
        return left[0] if left else False

    def ite(self, cond, then, other):
        if not isinstance(cond, bool):
            raise NotImplementedError("a size that depends on a condition")
        return then if cond else other


# ------------------------------------------------------------- the solver


class SizeProblem:
    """The integer constraints under which `rule` applies in M with every
    variable size in 1..max_size: the source and the target are defined,
    the parameters' shape constraints hold and mapped pairs have equal
    shapes.

    `satisfiable(fixed)` is exact: the unknowns split into independent
    groups (unknowns that share no constraint), and each group is searched
    by backtracking, an unknown that an equality determines taking that
    value. Answers are cached.

    Raises:
      ValueError: an op the model does not cover.
    """

    def __init__(self, rule: Rule, max_size: int):
        shapes = _LinearShapes()
        terms = RuleTerms(shapes, rule)
        conds = shapes.conditions + terms.constraints
        conds += [shapes.sheq(terms.src[(s.op, s.index)], terms.dst[(d.op, d.index)])
                  for s, d in rule.mapped_outputs]
        self.variables = sorted(terms.variables)
        self.max_size = max_size
        combined = shapes.all(conds)
        self.feasible = combined is not False
        self.atoms: List[Atom] = list(combined) if isinstance(combined, tuple) else []
        # A split point is at most a size, and sizes at most double per op.
        self._n_max = max_size * 2 ** len(terms.terms)
        self._groups = self._group_atoms()
        self._cache: Dict[Tuple[int, FrozenSet], bool] = {}

    def _domain(self, key) -> range:
        return range(1, self.max_size + 1) if key[0] == "v" else range(0, self._n_max + 1)

    def _group_atoms(self) -> List[Tuple[FrozenSet, List[Atom]]]:
        groups: List[Tuple[set, List[Atom]]] = []
        for atom in self.atoms:
            keys = set(atom[1].coef)
            joined = [g for g in groups if g[0] & keys]
            for g in joined:
                groups.remove(g)
                keys |= g[0]
            groups.append((keys, [a for g in joined for a in g[1]] + [atom]))
        return [(frozenset(keys), atoms) for keys, atoms in groups]

    def satisfiable(self, fixed: Dict[Hashable, int]) -> bool:
        """Whether some sizes agreeing with `fixed` ({("v", k, axis): size})
        satisfy every constraint."""
        if not self.feasible:
            return False
        if any(v not in self._domain(k) for k, v in fixed.items()):
            return False
        for g, (keys, atoms) in enumerate(self._groups):
            mine = frozenset((k, v) for k, v in fixed.items() if k in keys)
            if (g, mine) not in self._cache:
                self._cache[(g, mine)] = self._search(keys, atoms, dict(mine))
            if not self._cache[(g, mine)]:
                return False
        return True

    def _search(self, keys: FrozenSet, atoms: List[Atom], assigned: Dict) -> bool:
        pending = []  # atoms with an unknown left
        for kind, lin in atoms:
            if all(k in assigned for k in lin.coef):
                if not _holds(kind, lin.value(assigned)):
                    return False
            else:
                pending.append((kind, lin))
        if not pending:
            return True
        key, values = self._next(keys, pending, assigned)
        for v in values:
            assigned[key] = v
            if self._search(keys, pending, assigned):
                del assigned[key]
                return True
            del assigned[key]
        return False

    def _next(self, keys, pending: List[Atom], assigned: Dict):
        """The unknown to branch on and its candidate values: one an equality
        determines, else the one in the most pending atoms."""
        for kind, lin in pending:
            left = [k for k in lin.coef if k not in assigned]
            if kind == "eq" and len(left) == 1:
                key = left[0]
                rest = lin.const + sum(c * assigned[k] for k, c in lin.coef.items() if k != key)
                value, remainder = divmod(-rest, lin.coef[key])
                ok = remainder == 0 and value in self._domain(key)
                return key, ([value] if ok else [])
        counts: Dict[Hashable, int] = {}
        for _, lin in pending:
            for k in lin.coef:
                if k not in assigned:
                    counts[k] = counts.get(k, 0) + 1
        # The unknowns are all of one orderable type: sorted for a deterministic tie-break.
        key = max(sorted(counts), key=lambda k: counts[k])  # type: ignore[type-var]
        return key, self._domain(key)


# ------------------------------------------------------------- the search


def bindings(rule: Rule, count: int = 6, max_size: int = 5, seed: int = 0) -> List[Binding]:
    """Up to `count` distinct size assignments (each axis 1..max_size) of the
    rule's variables under which it applies in M; keys are the variables
    k = 1, 2, ... (pattern tensor -k). Deterministic for a rule and seed.

    Raises:
      ValueError: an op the model does not cover.
    """
    problem = SizeProblem(rule, max_size)
    if not problem.satisfiable({}):
        return []
    rng = np.random.default_rng(seed)
    dims = [("v", k, i) for k in problem.variables for i in range(NDIM)]
    found: List[Binding] = []
    for _ in range(4 * count):
        sizes: Dict[Hashable, int] = {}
        for j in rng.permutation(len(dims)):
            target = int(rng.integers(1, max_size + 1))
            for size in [target] + [n for n in range(1, max_size + 1) if n != target]:
                if problem.satisfiable({**sizes, dims[j]: size}):
                    sizes[dims[j]] = size
                    break
        binding = {k: tuple(sizes[("v", k, i)] for i in range(NDIM)) for k in problem.variables}
        if binding not in found:
            found.append(binding)
            if len(found) == count:
                break
    return found


def shape_bindings(rule: Rule, count: int = 6, max_size: int = 5, seed: int = 0
                   ) -> List[Dict[int, Tuple[int, ...]]]:
    """Distinct variable sizes (rank 4, each axis 1..max_size, a matrix as
    [M, N, 1, 1]) under which the rule applies in M, keyed by the pattern
    tensors -1, -2, ...

    Raises:
      ValueError: an op the model does not cover.
    """
    return [{-k: v for k, v in b.items()} for b in bindings(rule, count, max_size, seed)]
