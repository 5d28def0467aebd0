"""A symbolic second verification tier for rules: TASO-style axiomatic proofs
with z3.

The generator verifies rules numerically (docs/generator.md, stage 4): both
sides agree on five random draws. This module adds an independent check in the
manner of TASO's verifier: tensors are an uninterpreted sort `T`, every
operator an uninterpreted function (parameters such as the concat axis or the
fused activation are `Int` arguments), the operator properties are a list of
universally quantified equations (`axioms.AXIOMS`), and a rule is *proved* when z3
finds the axioms plus "some mapped output pair differs" unsatisfiable.

Unlike TASO's verifier, tensors also carry shapes (the default,
`shapes=True`): a function `dim(i, t)` gives the size of axis i (0..3; a
matrix [M, N] is the tensor [M, N, 1, 1]) and a predicate `ok(t)` says that
`t` is defined. Every modelled operator has a definedness-and-shape axiom
(`model.SHAPES`, in words `model.SHAPE_RULES`): e.g. `ok(add(a, b)) <-> ok(a) & ok(b) & shape(a) = shape(b)`
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
  entries too). The numerical tier and tests/rules/semantics_test.py remain
  the check of the axioms' consequences.
The converse also fails: "not proved" and "unknown" are no evidence that a
rule is wrong; many true rules are outside what the axioms reach (e.g. rules
that need a fact about max pooling other than those listed).

Outcomes: `prove` runs z3 with E-matching only (model-based quantifier
instantiation off, so a saturated search stops at once); UNSAT is "proved".
Otherwise both sides are evaluated numerically in M at up to six size
bindings from the size search (`other_sizes.counterexample`, sizes.py): a
difference is "not proved" with the witness, a real counterexample to the
rule. Anything else (timeout,
or E-matching saturated, and no difference found) is "unknown";
`prove_detail` says which. The same size search is the generator's check of
every rule at sizes other than those it was found on (pipeline.py).

Where things live: the model's shape rules and covered ops in model.py, the
axiom table in axioms.py, their z3 encoding in z3_encoding.py, the numpy
semantics and the counterexample search in other_sizes.py and sizes.py
(neither needs z3). This module runs the proofs; it and z3_encoding.py are
the only ones that import z3.

Parameters the model ignores: `num_inputs num_outputs numdim group` are
shape-derived checks (numdim 2 is used as a hypothesis, a conv `group` other
than 1 makes the conv opaque).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import z3

from xflowrl.generator import other_sizes, z3_encoding
from xflowrl.generator.axioms import AXIOMS

# Re-exported: callers and docs name them here.
from xflowrl.generator.model import SHAPE_RULES  # noqa: F401
from xflowrl.generator.other_sizes import counterexample  # noqa: F401
from xflowrl.generator.sizes import shape_bindings  # noqa: F401
from xflowrl.rules.rules_io import Rule

PROVED = "proved"
UNKNOWN = "unknown"
NOT_PROVED = "not proved"
NOT_COVERED = "not covered"
STATUSES = (PROVED, UNKNOWN, NOT_PROVED)


@dataclasses.dataclass
class ProofResult:
    """The outcome for one rule.

    status: "proved", "unknown" or "not proved" ("not covered" in
    `prove_all` for a rule with an op the axioms do not cover). reason:
    "unsat" (proved); "counterexample" (not proved: `witness` gives sizes
    and the differing pair); "saturated" (E-matching ran out of instances
    without a proof) or "timeout" (unknown); the error for "not covered".
    applicable: some sizes >= 1 make the source and the target defined with
    equal mapped shapes (False: the rule never fires). total: every binding
    that defines the source also defines the target (False: the engine
    rejects some matches). Both are quantifier-free checks of the shape
    facts alone.
    """
    name: str
    status: str
    reason: str
    seconds: float
    applicable: Optional[bool] = None
    total: Optional[bool] = None
    witness: str = ""


@dataclasses.dataclass
class ProofSummary:
    """What `prove_all` found for a rule set.

    counts: {status: rules}, for "proved", "unknown", "not proved" and "not
    covered". rules: how many rules. seconds: wall time. statuses: {rule
    name: status}. reasons: {reason: rules} ("not covered" counted as one
    reason). proved_vacuous: proved rules no sizes can apply.
    proved_partial: proved rules whose target is undefined for some sources
    (the engine rejects those matches). not_proved: {rule name: witness}.
    axioms: len(AXIOMS). details: {rule name: ProofResult}.
    """
    counts: Dict[str, int]
    rules: int
    seconds: float
    statuses: Dict[str, str]
    reasons: Dict[str, int]
    proved_vacuous: List[str]
    proved_partial: List[str]
    not_proved: Dict[str, str]
    axioms: int
    details: Dict[str, ProofResult]


@functools.lru_cache(maxsize=None)
def _signature() -> z3_encoding.Signature:
    return z3_encoding.Signature()


@functools.lru_cache(maxsize=None)
def _axioms(shapes: bool) -> Tuple[z3.BoolRef, ...]:
    return tuple(z3_encoding.axiom_formulas(_signature(), shapes))


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
    enc = z3_encoding.Encoder(S, rule)
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
        witness = other_sizes.counterexample(rule)
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


def prove_all(rules: Sequence[Rule], timeout_ms: int = 2000,
              progress: Optional[Callable[[str], None]] = None,
              shapes: bool = True) -> ProofSummary:
    """Runs `prove_detail` on every rule; a rule with an op the axioms do not
    cover counts as "not covered". `progress(line)` gets a status line every
    100 rules and at the end."""
    start = time.perf_counter()
    counts = {s: 0 for s in STATUSES + (NOT_COVERED,)}
    details: Dict[str, ProofResult] = {}
    reasons: Dict[str, int] = {}
    for i, rule in enumerate(rules):
        try:
            res = prove_detail(rule, timeout_ms, shapes)
        except ValueError as e:
            res = ProofResult(rule.name, NOT_COVERED, str(e), 0.0)
        counts[res.status] += 1
        details[rule.name] = res
        key = res.reason if res.status != NOT_COVERED else NOT_COVERED
        reasons[key] = reasons.get(key, 0) + 1
        if progress is not None and ((i + 1) % 100 == 0 or i + 1 == len(rules)):
            elapsed = time.perf_counter() - start
            eta = elapsed / (i + 1) * (len(rules) - i - 1)
            progress(f"z3: {i + 1}/{len(rules)} rules, " +
                     ", ".join(f"{v} {k}" for k, v in counts.items()) +
                     f"; {elapsed:.0f} s, ETA {eta:.0f} s")
    return ProofSummary(
        counts=counts,
        rules=len(rules),
        seconds=time.perf_counter() - start,
        statuses={n: d.status for n, d in details.items()},
        reasons=reasons,
        proved_vacuous=[n for n, d in details.items()
                        if d.status == PROVED and d.applicable is False],
        proved_partial=[n for n, d in details.items() if d.status == PROVED and d.total is False],
        not_proved={n: d.witness for n, d in details.items() if d.status == NOT_PROVED},
        axioms=len(AXIOMS),
        details=details,
    )
