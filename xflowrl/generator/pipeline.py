"""The generator pipeline: enumerate -> fingerprint -> pair -> verify -> prune
-> emit, with a report.

Pairing. Expressions with equal fingerprints form a class. As in TASO's
generator, which pairs each new graph with the first one seen with its
fingerprint, each member is paired with its class' representative (fewest
ops, then a fixed order), in both directions (`pairing="representative"`);
`pairing="all"` pairs every ordered pair of members. Two-output candidates
pair two expressions (the source) with the two halves of a split expression
of equal fingerprints (the target), e.g. `conv(x, w1), conv(x, w2)` with
`split(conv(x, concat(w1, w2)))`.

Verification re-evaluates both sides of a candidate with the float reference
executor (real ReLU, real pools) on fresh random inputs: three float draws
(normal) and two integer draws (small integers, exact in float64), all
outputs equal at rtol 1e-6; `workers` processes share the work. This is
testing, not proof: a pair that agrees on these draws but differs elsewhere
would pass.

Other sizes. The enumeration fixes the sizes (4x4 matrices, 3x3 and 1x1
kernels), but the engine applies a rule to any tensors its source matches.
A candidate that survives pruning is therefore evaluated again at up to six
other size bindings (each axis 1..5) under which both sides are defined
(`other_sizes.counterexample`, sizes from sizes.py, no z3); one that
differs there is dropped ("rejected at other sizes"), e.g. `concat1(x0, x1)
@ concat0(x0, x2) -> concat1(x1, x0) @ concat0(x2, x0)`, true only for a
square x0, or `conv(avgpool(x), enlarge(w, v)) -> avgpool(conv(x, w))`,
true only for a 1x1 w. A dropped rule prunes nothing. The check costs more
per rule than pruning, so it runs first in the `workers` processes on every
rule pruning would reach were nothing dropped; pruning then runs for real
and checks in process the few rules a drop exposes. Every shipped rule is also checked by
the engine's semantics test (tests/rules/semantics_test.py) on graphs of
other shapes.

Pruning, in this order, smaller candidates first:
(1) a side with a proper sub-expression that is not its class'
representative ("not normal"), such as `matmul(a, transpose(transpose(b)))`:
rules are kept between graphs built of normal forms only, as in a reduced
rewrite system (a reducible source is covered by the smaller rewrite; a
target that builds a reducible term is junk). Membership is decided by
fingerprints, so an error here can only drop a rule, never admit one. This
also covers TASO's "shared tail" (same root op, one operand in common, the
others equivalent: one of those is not normal);
(2) the target reads an input the source does not ("unbound target": not
expressible as a rule);
(3) a joint renaming of the inputs of a kept pair ("renaming");
(4) both sides contain one and the same op on the same inputs (TASO's
"common subgraph": the rule holds with that op's output as a fresh input;
this covers splitting a concat into its own operands);
(5) an instance of a kept rule, its inputs substituted by inputs or
sub-expressions ("instance");
(6) a rule equal to a kept one up to `emit.canonical` (the same pattern from
another family or renaming class: "duplicate").
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

import numpy as np

from xflowrl.generator import emit, enumeration, fingerprint, other_sizes, parallel
from xflowrl.rules.rules_io import Rule

Expr = enumeration.Expr


class SplitOf(NamedTuple):
    """The two halves of `expr` along `axis` (a two-output target)."""
    expr: Expr
    axis: int


# A side of a candidate: one expression, two expressions, or a split.
Side = Union[Expr, Tuple[Expr, Expr], SplitOf]


@dataclasses.dataclass
class Report:
    max_ops: int
    families: List[str]
    pairing: str = "representative"
    workers: int = 1
    graphs_enumerated: int = 0
    fingerprint_classes: int = 0
    candidate_pairs: int = 0
    two_output_candidates: int = 0
    verified: int = 0
    rejected: int = 0
    rejected_other_sizes: int = 0
    rejected_other_sizes_rules: List[str] = dataclasses.field(default_factory=list)
    pruned_unbound_target: int = 0
    pruned_renaming: int = 0
    pruned_common_subgraph: int = 0
    pruned_instance: int = 0
    pruned_not_normal: int = 0
    pruned_duplicate: int = 0
    kept: int = 0
    kept_two_output: int = 0
    taso_rules: int = 0
    taso_rules_rediscovered: Optional[int] = None
    seconds_enumerate: float = 0.0
    seconds_verify: float = 0.0
    seconds_prune: float = 0.0
    seconds_other_sizes: float = 0.0
    seconds: float = 0.0


def _outputs(side: Side, values) -> List[np.ndarray]:
    if isinstance(side, SplitOf):
        return np.split(enumeration.evaluate(side.expr, values), 2, axis=side.axis)
    if isinstance(side[0], tuple):
        return [enumeration.evaluate(e, values) for e in side]
    return [enumeration.evaluate(side, values)]


def _verify(src: Side, dst: Side, family: enumeration.Family, seed: int) -> bool:
    """True if both sides agree on 5 fresh random draws (float executor)."""
    rng = np.random.default_rng(seed)
    for trial in range(5):
        if trial < 3:
            values = {n: rng.normal(size=s) for n, s in family.inputs.items()}
        else:
            values = {n: rng.integers(-3, 4, size=s).astype(np.float64)
                      for n, s in family.inputs.items()}
        xs, ys = _outputs(src, values), _outputs(dst, values)
        if len(xs) != len(ys):
            return False
        for x, y in zip(xs, ys):
            if x.shape != y.shape or not np.allclose(x, y, rtol=1e-6, atol=1e-9):
                return False
    return True


def _verify_range(shared: Tuple, bounds: Tuple[int, int]) -> List[bool]:
    """`verify` on candidates[bounds[0]:bounds[1]], each with its own seed."""
    verify, family, candidates, seed = shared
    return [verify(src, dst, family, seed + 1 + i)
            for i, (src, dst, _) in enumerate(candidates[bounds[0]:bounds[1]], bounds[0])]


def _witness_range(rules: Sequence, bounds: Tuple[int, int]) -> List[Optional[str]]:
    return [other_sizes.counterexample(rule) for rule in rules[bounds[0]:bounds[1]]]


def _map_shared(task: Callable, shared, n: int, chunk: int, workers: int,
                say: Callable[[str], None], what: str) -> list:
    """`task(shared, bounds)` over index ranges of n items, in `workers`
    forked processes (parallel.py), with progress lines `what`; the results
    in order."""
    bounds = parallel.ranges(n, chunk)
    start = time.time()
    parts: Dict[int, list] = {}
    done_items = 0
    for index, part in parallel.map_ranges(task, shared, bounds, workers):
        parts[index] = part
        done_items += len(part)
        if len(parts) % 20 == 0 or len(parts) == len(bounds):
            elapsed = time.time() - start
            say(f"{what} {done_items}/{n}, {elapsed:.1f} s, ETA "
                f"{elapsed / done_items * (n - done_items):.0f} s")
    return [x for index in range(len(bounds)) for x in parts[index]]


def _verify_all(verify, family, candidates, seed: int, workers: int, say) -> List[bool]:
    return _map_shared(_verify_range, (verify, family, candidates, seed), len(candidates),
                       500, workers, say, f"[{family.name}] verified candidates")


def _side_exprs(side: Side) -> List[Expr]:
    if isinstance(side, SplitOf):
        return [side.expr]
    return list(side) if isinstance(side[0], tuple) else [side]


def _variables(side: Side) -> List[str]:
    out: List[str] = []
    for e in _side_exprs(side):
        out += [v for v in enumeration.variables(e) if v not in out]
    return out


def _renaming_key(src: Side, dst: Side, family: enumeration.Family) -> Tuple:
    """The pair with inputs renamed by first use, per shape class."""
    order = _variables(src) + [v for v in _variables(dst) if v not in _variables(src)]
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
    side_key = lambda s: ((tuple(rename(e) for e in _side_exprs(s)),)
                          + ((s.axis,) if isinstance(s, SplitOf) else ()))
    return side_key(src), side_key(dst)


def _match(pattern: Expr, expr: Expr, sub: Dict[str, Expr]) -> bool:
    if pattern[0] == "input":  # binds to any sub-expression, consistently
        return sub.setdefault(pattern[1], expr) == expr
    return (pattern[:2] == expr[:2] and len(pattern) == len(expr)
            and all(_match(p, e, sub) for p, e in zip(pattern[2:], expr[2:])))


def _instance_of(src: Side, dst: Side, kept: List[Tuple[Side, Side]]) -> bool:
    """True if the pair is a kept pair with its inputs substituted by inputs or
    sub-expressions (the same input in two places, or a common subgraph fed
    to both sides): the kept, more general rule covers it."""
    ours = _side_exprs(src) + _side_exprs(dst)
    for ksrc, kdst in kept:
        theirs = _side_exprs(ksrc) + _side_exprs(kdst)
        if len(theirs) != len(ours) or getattr(ksrc, "axis", None) != getattr(src, "axis", None):
            continue
        if getattr(kdst, "axis", None) != getattr(dst, "axis", None):
            continue
        sub: Dict[str, Expr] = {}
        if all(_match(p, e, sub) for p, e in zip(theirs, ours)):
            return True
    return False


def _leaf_ops(side: Side) -> Set[Expr]:
    """Ops of a side whose operands are all inputs."""
    return {op for e in _side_exprs(side) for op in enumeration.op_nodes(e)
            if all(c[0] == "input" for c in op[2:])}


def _root_key(side: Side) -> Tuple:
    return tuple(e[:2] for e in _side_exprs(side)) + (getattr(side, "axis", None),)


class _Family:
    """One family's universe, fingerprint classes and candidates."""

    def __init__(self, family: enumeration.Family, max_ops: int, seed: int, pairing: str,
                 say: Callable[[str], None]):
        self.family = family
        self.fp = fingerprint.Fingerprinter(family, seed)
        self.u = enumeration.Universe(family, self.fp)
        self.u.grow(max_ops, say)
        n_inputs = len(family.inputs)
        self.classes: Dict[bytes, List[int]] = collections.defaultdict(list)
        for i in range(len(self.u)):
            self.classes[self.fp.keys[i]].append(i)
        order = lambda i: (len(self.u.ops[i]), repr(self.u.exprs[i]))
        self.class_of: Dict[int, int] = {}  # id -> representative id
        for members in self.classes.values():
            members.sort(key=order)
            for m in members:
                self.class_of[m] = members[0]
        # Inputs are representatives but never candidates.
        for key in {self.fp.keys[i] for i in range(n_inputs)}:
            self.classes[key] = [m for m in self.classes[key] if m >= n_inputs]
            if not self.classes[key]:
                del self.classes[key]
        self.single: List[Tuple[int, int]] = []
        for members in self.classes.values():
            if len(members) < 2:
                continue
            if pairing == "all":
                self.single += [(a, b) for a in members for b in members if a != b]
            else:
                r = members[0]
                self.single += [p for m in members[1:] for p in ((m, r), (r, m))]
        self.split: List[Tuple[int, int, int, int]] = []  # (r1, r2, e, axis)
        for e in range(n_inputs, len(self.u)):
            if len(self.u.ops[e]) >= max_ops:
                continue
            for axis in enumeration.SPLIT_AXES:
                if self.u.shapes[e][axis] % 2:
                    continue
                halves = np.split(self.fp.values[e], 2, axis=axis)
                k0, k1 = (fingerprint.digest(h) for h in halves)
                for r1 in self.classes.get(k0, ()):
                    for r2 in self.classes.get(k1, ()):
                        ops1, ops2 = self.u.ops[r1], self.u.ops[r2]
                        if (r1 != r2 and r1 not in ops2 and r2 not in ops1
                                and len(ops1 | ops2) <= max_ops):
                            self.split.append((r1, r2, e, axis))

    def normal(self, i: int) -> bool:
        """Every proper op sub-expression of i is its class' representative."""
        return all(self.class_of[o] == o for o in self.u.ops[i] if o != i)


def generate(max_ops: int = 2, family_names: Sequence[str] = ("matrix", "conv"),
             seed: int = 0, verify: Callable = _verify, workers: int = 1,
             pairing: str = "representative",
             progress: Optional[Callable[[str], None]] = None,
             check_other_sizes: bool = True):
    """Runs the pipeline; returns `(rules, report)`.

    Args:
      max_ops: K, the largest graphs enumerated (ops per side).
      family_names: keys of `enumeration.FAMILIES`.
      seed: seeds the fingerprint and verification inputs.
      verify: `(src, dst, family, seed) -> bool`; replaceable in tests.
      workers: processes that verify candidates (0: one per CPU).
      pairing: "representative" (TASO's) or "all".
      progress: called with progress lines.
      check_other_sizes: evaluate the kept rules at other sizes (above).
    """
    if pairing not in ("representative", "all"):
        raise ValueError(f"pairing must be 'representative' or 'all', got {pairing!r}")
    unknown = [f for f in family_names if f not in enumeration.FAMILIES]
    if unknown:
        raise ValueError(f"unknown families {unknown}; known: {sorted(enumeration.FAMILIES)}")
    workers = workers or os.cpu_count() or 1
    start = time.time()
    report = Report(max_ops, list(family_names), pairing, workers)
    rules: List[Rule] = []
    canonical_keys: Set[str] = set()
    say = progress or (lambda line: None)
    for fname in family_names:
        t0 = time.time()
        fam = _Family(enumeration.FAMILIES[fname], max_ops, seed, pairing, say)
        u = fam.u
        report.graphs_enumerated += len(u) - len(fam.family.inputs)
        report.fingerprint_classes += len(fam.classes)
        size = lambda i: len(u.ops[i])
        candidates: List[Tuple[Side, Side, Tuple]] = []
        for a, b in sorted(fam.single, key=lambda p: (size(p[0]) + size(p[1]),
                                                       repr(u.exprs[p[0]]), repr(u.exprs[p[1]]))):
            candidates.append((u.exprs[a], u.exprs[b], ("single", a, b)))
        for r1, r2, e, axis in sorted(fam.split, key=lambda c: (
                len(u.ops[c[0]] | u.ops[c[1]]) + size(c[2]), c[3],
                repr(u.exprs[c[0]]), repr(u.exprs[c[1]]), repr(u.exprs[c[2]]))):
            candidates.append(((u.exprs[r1], u.exprs[r2]), SplitOf(u.exprs[e], axis),
                               ("split", r1, r2, e)))
        report.candidate_pairs += len(candidates)
        report.two_output_candidates += len(fam.split)
        report.seconds_enumerate += time.time() - t0
        say(f"[{fname}] {len(u) - len(fam.family.inputs)} graphs, {len(fam.classes)} "
            f"classes, {len(fam.single)} candidate pairs, {len(fam.split)} two-output "
            f"candidates; verifying with {workers} worker(s)")

        t0 = time.time()
        results = _verify_all(verify, fam.family, candidates, seed, workers, say)
        report.seconds_verify += time.time() - t0

        t0 = time.time()
        witnesses: Dict[int, Optional[str]] = {}
        if check_other_sizes:
            witnesses = _other_sizes(fam, candidates, results, fname, len(rules),
                                     canonical_keys, workers, say)
        t1 = time.time()

        def check(index: int, rule) -> Optional[str]:
            if index not in witnesses:  # exposed by a rejection: the speculative pass missed it
                witnesses[index] = other_sizes.counterexample(rule)
            return witnesses[index]

        rules += _prune(fam, candidates, results, report, fname, len(rules), canonical_keys,
                        check if check_other_sizes else None, say)
        report.seconds_prune += time.time() - t1
        report.seconds_other_sizes += t1 - t0
        say(f"[{fname}] kept {len(rules)} rules so far, {time.time() - start:.1f} s")
    report.kept = len(rules)
    report.seconds = time.time() - start
    return rules, report


def _render(side: Side) -> str:
    if isinstance(side, SplitOf):
        return f"split{side.axis}({enumeration.render(side.expr)})"
    if isinstance(side[0], tuple):
        return ", ".join(enumeration.render(e) for e in side)
    return enumeration.render(side)


def _name_vars(text: str, src: Side) -> str:
    """Writes the rule's variables (v1, v2, ...: inputs in order of first use
    in the source, as `emit` numbers them) by their input names."""
    names: List[str] = []
    for e in (src if isinstance(src[0], tuple) else [src]):
        names += [v for v in enumeration.variables(e) if v not in names]
    return re.sub(r"\bv(\d+)\[", lambda m: names[int(m.group(1)) - 1] + "[", text)


def _other_sizes(fam: _Family, candidates, results, fname: str, first: int,
                 canonical_keys: Set[str], workers: int, say) -> Dict[int, Optional[str]]:
    """`other_sizes.counterexample` of every rule that pruning would reach if no
    rule were rejected at other sizes, by candidate index, in `workers`
    processes. Pruning depends on what was kept before, so a rejection can
    expose a rule this pass did not reach; `_prune` checks those itself."""
    reached: List[Tuple[int, object]] = []
    _prune(fam, candidates, results, Report(0, []), fname, first, set(canonical_keys),
           lambda index, rule: reached.append((index, rule)), lambda line: None)
    found = _map_shared(_witness_range, [rule for _, rule in reached], len(reached),
                        50, workers, say, f"[{fname}] checked at other sizes")
    return {index: witness for (index, _), witness in zip(reached, found)}


def _prune(fam: _Family, candidates, results, report: Report, fname: str, first: int,
           canonical_keys: Set[str], check: Optional[Callable[[int, object], Optional[str]]],
           say):
    """The kept rules; `check(candidate index, rule)` returns a witness that
    the rule fails at other sizes, or None (no check if None)."""
    rules: List[Rule] = []
    seen_keys: Set[Tuple] = set()
    kept: Dict[Tuple, List[Tuple[Side, Side]]] = collections.defaultdict(list)
    for index, ((src, dst, (kind, *ids)), ok) in enumerate(zip(candidates, results)):
        if not ok:
            report.rejected += 1
            continue
        report.verified += 1
        if kind == "single":
            sub_normal = all(fam.normal(i) for i in ids)
        else:
            r1, r2, e = ids
            sub_normal = (fam.normal(r1) and fam.normal(r2) and fam.normal(e)
                          and fam.class_of[e] == e)
        if not sub_normal:
            report.pruned_not_normal += 1
            continue
        if not set(_variables(dst)) <= set(_variables(src)):
            report.pruned_unbound_target += 1
            continue
        key = _renaming_key(src, dst, fam.family)
        if key in seen_keys:
            report.pruned_renaming += 1
            continue
        seen_keys.add(key)
        if _leaf_ops(src) & _leaf_ops(dst):
            report.pruned_common_subgraph += 1
            continue
        root = (_root_key(src), _root_key(dst))
        if _instance_of(src, dst, kept[root]):
            report.pruned_instance += 1
            continue
        name = f"gen_{fname}_{first + len(rules)}"
        if kind == "split":
            rule = emit.to_split_rule(src, dst.expr, dst.axis, name)
        else:
            rule = emit.to_rule(src, dst, name)
        canonical_key = emit.canonical(rule)
        if canonical_key in canonical_keys:  # equivalent to a kept rule: prunes like it
            kept[root].append((src, dst))
            report.pruned_duplicate += 1
            continue
        if check:
            witness = check(index, rule)
            if witness is not None:
                report.rejected_other_sizes += 1
                report.rejected_other_sizes_rules.append(
                    f"{_render(src)} -> {_render(dst)}; {_name_vars(witness, src)}")
                continue
        kept[root].append((src, dst))
        canonical_keys.add(canonical_key)
        report.kept_two_output += kind == "split"
        rules.append(rule)
    return rules
