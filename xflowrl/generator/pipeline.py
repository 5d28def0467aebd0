"""The generator pipeline: enumerate -> fingerprint -> pair -> verify -> prune
-> emit, with a report.

Verification re-evaluates both graphs of a candidate with the float reference
executor (real ReLU) on fresh random inputs: three float draws (normal) and
two integer draws (small integers, exact in float64), all outputs equal at
rtol 1e-6. This is testing, not proof: a pair that agrees on these draws but
differs elsewhere would pass. Rules that survive are also checked by the
engine's semantics test (tests/graphs/semantics_test.py style) before use.

Pruning: (1) a pair equal to a kept one under a joint renaming of inputs,
or an instance of a kept one (its inputs substituted, e.g. one input used
twice, or a common subgraph in place of an input);
(2) a pair whose two roots are the same op with one identical operand in the
same slot and the other operands a smaller verified pair ("shared tail":
implied by the smaller rule); (3) a target that reads an input its source
does not (not expressible as a rule).
"""

from __future__ import annotations

import collections
import dataclasses
import time
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from xflowrl.generator import emit, enumeration, fingerprint

Expr = enumeration.Expr


@dataclasses.dataclass
class Report:
    max_ops: int
    families: List[str]
    graphs_enumerated: int = 0
    fingerprint_classes: int = 0
    candidate_pairs: int = 0
    verified: int = 0
    rejected: int = 0
    pruned_renaming: int = 0
    pruned_shared_tail: int = 0
    pruned_instance: int = 0
    pruned_unbound_target: int = 0
    kept: int = 0
    taso_rules_rediscovered: Optional[int] = None
    seconds: float = 0.0


def _verify(a: Expr, b: Expr, family: enumeration.Family, seed: int) -> bool:
    rng = np.random.default_rng(seed)
    for trial in range(5):
        if trial < 3:
            values = {n: rng.normal(size=s) for n, s in family.inputs.items()}
        else:
            values = {n: rng.integers(-3, 4, size=s).astype(np.float64)
                      for n, s in family.inputs.items()}
        x, y = enumeration.evaluate(a, values), enumeration.evaluate(b, values)
        if x.shape != y.shape or not np.allclose(x, y, rtol=1e-6, atol=1e-9):
            return False
    return True


def _renaming_key(a: Expr, b: Expr, family: enumeration.Family) -> Tuple[Expr, Expr]:
    """The pair with inputs renamed by first use, per shape class."""
    order = enumeration.variables(a) + [v for v in enumeration.variables(b)
                                        if v not in enumeration.variables(a)]
    counters: Dict[Tuple[int, ...], int] = collections.Counter()
    names = {}
    for v in order:
        shape = family.inputs[v]
        names[v] = f"{shape}#{counters[shape]}"
        counters[shape] += 1

    def rename(e):
        if e[0] == "input":
            return ("input", names[e[1]])
        return (e[0], e[1]) + tuple(rename(c) for c in e[2:])
    return rename(a), rename(b)


def _shared_tail(a: Expr, b: Expr, verified: Set[Tuple[Expr, Expr]]) -> bool:
    if a[0] == "input" or b[0] == "input" or a[:2] != b[:2] or len(a) != len(b):
        return False
    differing = [(x, y) for x, y in zip(a[2:], b[2:]) if x != y]
    return len(differing) == 1 and (differing[0] in verified or differing[0][::-1] in verified)


def _match(pattern: Expr, expr: Expr, sub: Dict[str, Expr]) -> bool:
    if pattern[0] == "input":  # binds to any sub-expression, consistently
        return sub.setdefault(pattern[1], expr) == expr
    return (pattern[:2] == expr[:2] and len(pattern) == len(expr)
            and all(_match(p, e, sub) for p, e in zip(pattern[2:], expr[2:])))


def _instance_of(a: Expr, b: Expr, kept: List[Tuple[Expr, Expr]]) -> bool:
    """True if (a, b) is a kept pair with its inputs substituted by inputs or
    sub-expressions (the same input in two places, or a common subgraph fed
    to both sides): the kept, more general rule covers it."""
    for ka, kb in kept:
        sub: Dict[str, Expr] = {}
        if _match(ka, a, sub) and _match(kb, b, sub):
            return True
    return False


def generate(max_ops: int = 2, family_names: Sequence[str] = ("matrix", "conv"),
             seed: int = 0, verify: Callable = _verify,
             progress: Optional[Callable[[str], None]] = None):
    """Runs the pipeline; returns `(rules, report)`.

    Args:
      max_ops: K, the largest graphs enumerated (ops per side).
      family_names: keys of `enumeration.FAMILIES`.
      seed: seeds the fingerprint and verification inputs.
      verify: `(a, b, family, seed) -> bool`; replaceable in tests.
      progress: called with a progress line per family and stage.
    """
    start = time.time()
    report = Report(max_ops, list(family_names))
    rules = []
    say = progress or (lambda line: None)
    for fname in family_names:
        family = enumeration.FAMILIES[fname]
        values = fingerprint.random_inputs(family, seed)
        cache: dict = {}
        classes: Dict[bytes, List[Expr]] = collections.defaultdict(list)
        for n, (expr, _) in enumerate(enumeration.enumerate_graphs(max_ops, family), 1):
            classes[fingerprint.fingerprint(expr, values, cache)].append(expr)
            report.graphs_enumerated += 1
            if n % 2000 == 0:
                say(f"[{fname}] enumerated {n} graphs, {len(classes)} fingerprint classes, "
                    f"{time.time() - start:.1f} s")
        report.fingerprint_classes += len(classes)
        # Candidate pairs, smallest first so that shared-tail pruning sees
        # the smaller rules it relies on.
        pairs = [(a, b) for group in classes.values() if len(group) > 1
                 for a in group for b in group if a != b]
        pairs.sort(key=lambda p: (enumeration.num_ops(p[0]) + enumeration.num_ops(p[1]),
                                  repr(p)))
        report.candidate_pairs += len(pairs)
        say(f"[{fname}] {len(pairs)} candidate pairs; verifying")
        verified: Set[Tuple[Expr, Expr]] = set()
        seen_keys = set()
        kept: Dict[Tuple, List[Tuple[Expr, Expr]]] = collections.defaultdict(list)
        for i, (a, b) in enumerate(pairs):
            if not verify(a, b, family, seed + 1 + i):
                report.rejected += 1
                continue
            report.verified += 1
            verified.add((a, b))
            if not set(enumeration.variables(b)) <= set(enumeration.variables(a)):
                report.pruned_unbound_target += 1
                continue
            key = _renaming_key(a, b, family)
            if key in seen_keys:
                report.pruned_renaming += 1
                continue
            seen_keys.add(key)
            if _shared_tail(a, b, verified):
                report.pruned_shared_tail += 1
                continue
            root = (a[:2], b[:2])
            if _instance_of(a, b, kept[root]):
                report.pruned_instance += 1
                continue
            kept[root].append((a, b))
            rules.append(emit.to_rule(a, b, f"gen_{fname}_{len(rules)}"))
    report.kept = len(rules)
    report.seconds = time.time() - start
    return rules, report
