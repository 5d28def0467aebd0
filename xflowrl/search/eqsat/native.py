"""Equality saturation's native matcher: the engine's e-matching
(third_party/taso/include/taso/ematch.h) driven from the Python e-graph.

`NativeMatcher` registers each rewrite's source pattern (its ops, the
planned steps of `Rewrite._plan`, its variables) with the engine once (a
list of rewrites registered before, as a rule set's cached rewrites are
in every run after the first, replays the engine calls worked out then),
and before each round of matching mirrors the e-graph there (`sync`: per e-node
its type, canonical class, usability, children and projected index; per
class its e-nodes in the e-graph's order). What a source op requires of one
e-node alone (type, arity, parameter constraints, equal element-wise
operand shapes: `rewrites.fits_alone`) is decided here in Python, once per
e-node and op signature, and handed over as bits, so that the parameter
semantics stay written once. `matches` returns what `Rewrite.matches`
returns, in the same order (tests/search/eqsat_native_test.py checks both
on real e-graphs for every rule of the shipped sets); the Python matcher
stays the reference (`EqsatConfig.matcher="python"`).
"""

from __future__ import annotations

import collections
import itertools
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from xflowrl import _engine
from xflowrl.search.eqsat.egraph import EGraph, OUT
from xflowrl.search.eqsat.rewrites import Match, Rewrite, fits_alone

_KINDS = {"scan": 0, "down": 1, "up": 2}
Signature = Tuple[str, int, tuple]   # (op type, arity, constraints)


class _Registered(NamedTuple):
    """What registering a list of rewrites worked out, for the next matcher of
    the same list (`rewrites` keeps them alive, so that their ids stay theirs)."""
    rewrites: List[Rewrite]
    added: List[tuple]
    type_code: Dict[str, int]
    signatures_of_type: Dict[str, List[Tuple[int, int, tuple]]]
    pattern: Dict[int, Tuple[int, List[int]]]


# The last few lists of rewrites registered (a run of equality saturation
# registers its rule set's rewrites, `saturation.compile_rules`' cached
# list, once; most of that is Python work that depends on the rewrites
# alone, docs/benchmark.md).
_REGISTERED: "collections.OrderedDict[tuple, _Registered]" = collections.OrderedDict()
_REMEMBERED = 4


def _remember(key: tuple, registered: "_Registered") -> None:
    _REGISTERED[key] = registered
    _REGISTERED.move_to_end(key)
    while len(_REGISTERED) > _REMEMBERED:
        _REGISTERED.popitem(last=False)


class NativeMatcher:
    """The rewrites' patterns held by one engine matcher, for one e-graph
    (see the module docstring). Not for two threads at once."""

    def __init__(self, rewrites: Sequence[Rewrite]):
        self._handle = _engine.EMatcherHandle()
        key = tuple(map(id, rewrites))
        known = _REGISTERED.get(key)
        if known is None:
            self._type_code: Dict[str, int] = {OUT: 0}
            self._signature: Dict[Signature, int] = {}
            self._signatures_of_type: Dict[str, List[Tuple[int, int, tuple]]] = {}
            # id(rewrite) -> (pattern id, the rewrite's variables in binding order)
            self._pattern: Dict[int, Tuple[int, List[int]]] = {}
            self._added: List[tuple] = []   # add_pattern's arguments, in order
            for rw in rewrites:
                self._register(rw)
            _remember(key, _Registered(list(rewrites), self._added, dict(self._type_code),
                                       self._signatures_of_type, self._pattern))
        else:
            # The same rewrites registered before: the same calls, in the same
            # order, give the same patterns (what `_register` works out of a
            # rewrite depends on the rewrites before it alone).
            for args in known.added:
                self._handle.add_pattern(*args)
            self._type_code = dict(known.type_code)
            self._signatures_of_type = known.signatures_of_type
            self._pattern = known.pattern
        self._fit_len = 0          # e-nodes whose signature bits are set
        self._by_type_seen: Dict[str, int] = {}
        self._fit_memo: Dict[tuple, bool] = {}
        self._within: Dict[Any, int] = {}

    def _code(self, op_type: str) -> int:
        code = self._type_code.get(op_type)
        if code is None:
            code = self._type_code[op_type] = len(self._type_code)
        return code

    def _register(self, rw: Rewrite) -> None:
        src = rw.rule.src
        var_dense: Dict[int, int] = {}
        for step in rw.steps:   # the order a match binds its variables
            for t in src[step.op].inputs:
                if t.op < 0 and t.op not in var_dense:
                    var_dense[t.op] = len(var_dense)
        ops = []
        for j, op in enumerate(src):
            sig_key: Signature = (op.type, len(op.inputs), rw.constraints[j])
            sig = self._signature.get(sig_key)
            if sig is None:
                sig = self._signature[sig_key] = len(self._signature)
                self._signatures_of_type.setdefault(op.type, []).append(
                    (sig, len(op.inputs), rw.constraints[j]))
            inputs = [(t.op, t.index) if t.op >= 0 else (-1 - var_dense[t.op], 0)
                      for t in op.inputs]
            ops.append((self._code(op.type), sig, op.type == "split", inputs))
        steps = [(_KINDS[s.kind], s.op, s.via_op, s.slot, s.index,
                  var_dense[s.var] if s.kind == "up" and s.via_op < 0 else 0)
                 for s in rw.steps]
        args = (ops, steps, len(var_dense), list(range(len(var_dense))))
        pattern = self._handle.add_pattern(*args)
        if pattern != len(self._added):
            raise RuntimeError(f"the engine numbered pattern {len(self._added)} {pattern}")
        self._added.append(args)
        self._pattern[id(rw)] = (pattern, list(var_dense))

    def sync(self, eg: EGraph) -> None:
        """Mirrors `eg` (after a rebuild, or before any union) in the engine;
        the within sets of the last e-graph are dropped."""
        nodes, alive, filtered = eg.nodes, eg.alive, eg.filtered
        find, node_class = eg.find, eg.node_class
        code = self._type_code
        for op_type in eg.by_type:
            self._code(op_type)
        types = [code[n[0]] for n in nodes]
        parent = eg._parent
        cls = [c if parent[c] == c else find(c) for c in node_class]
        usable = bytes([a and not f for a, f in zip(alive, filtered)])
        out_index = [-1] * len(nodes)
        for n in eg.by_type.get(OUT, ()):
            if alive[n]:
                out_index[n] = nodes[n][1][0][1]
        child_start = list(itertools.accumulate((len(node[2]) for node in nodes), initial=0))
        children = list(itertools.chain.from_iterable(node[2] for node in nodes))
        class_order = list(eg.class_nodes)
        members = list(eg.class_nodes.values())
        class_start = list(itertools.accumulate((len(m) for m in members), initial=0))
        class_nodes = list(itertools.chain.from_iterable(members))
        self._handle.set_graph(len(eg._parent), 0, types, cls, usable, out_index,
                               child_start, children, class_order, class_start,
                               class_nodes)
        self._update_fit(eg)
        self._within = {}

    def _update_fit(self, eg: EGraph) -> None:
        """Signature bits of the e-nodes added since the last sync."""
        first, total = self._fit_len, len(eg.nodes)
        if total == first:
            return
        for op_type, sigs in self._signatures_of_type.items():
            of_type = eg.by_type.get(op_type, [])
            seen = self._by_type_seen.get(op_type, 0)
            new = of_type[seen:]
            self._by_type_seen[op_type] = len(of_type)
            if not new:
                continue
            for sig, arity, constraints in sigs:
                bits = bytearray(total - first)
                for n in new:
                    if len(eg.nodes[n][2]) == arity and fits_alone(
                            eg, n, constraints, self._fit_memo):
                        bits[n - first] = 1
                self._handle.set_fit(sig, first, bits)
        self._fit_len = total

    def within_id(self, key: Any) -> Optional[int]:
        """The id `set_within` gave `key` for this e-graph, or None."""
        return self._within.get(key)

    def set_within(self, key: Any, classes: Iterable[int], height: int) -> int:
        """Names (`key`, for this e-graph) the classes `classes` and those up
        to `height` reader steps above them; returns the id `matches` takes."""
        got = self._within[key] = len(self._within)
        self._handle.set_within(got, list(classes), height)
        return got

    def matches(self, rw: Rewrite, limit: int, within: Optional[int] = None) -> List[Match]:
        """`rw.matches` on the synced e-graph, leaving out applied matches
        (`add_applied`); `within`: an id of `set_within` restricting a
        single-pattern rule's root."""
        pattern, var_ids = self._pattern[id(rw)]
        use = -1 if within is None or rw.multi_pattern else within
        count, nodes, vars_ = self._handle.match(pattern, limit, use)
        k, v = len(rw.rule.src), len(var_ids)
        return [Match(rw, tuple(nodes[m * k:(m + 1) * k]),
                      dict(zip(var_ids, vars_[m * v:(m + 1) * v])))
                for m in range(count)]

    def add_applied(self, rw: Rewrite, nodes: Sequence[int]) -> None:
        """Leaves the match of `rw` on `nodes` out of later `matches`."""
        self._handle.add_applied(self._pattern[id(rw)][0], list(nodes))
