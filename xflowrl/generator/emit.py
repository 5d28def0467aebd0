"""Expression pairs -> rules of the project's format; rule comparison up to
renaming (how many of TASO's rules the generated set contains)."""

from __future__ import annotations

from typing import Dict, Iterable, List, Tuple

from xflowrl.generator import enumeration
from xflowrl.graphs.rules_io import PatternOp, PatternTensor, Rule, validate_rule


def _pattern(expr, var_ids: Dict[str, int]) -> Tuple[List[PatternOp], Dict]:
    ops, index = [], {}
    for node in enumeration.op_nodes(expr):
        inputs = tuple(PatternTensor(var_ids[c[1]], 0) if c[0] == "input"
                       else PatternTensor(index[c], 0) for c in node[2:])
        params = dict(node[1])
        if node[0] == "concat":
            params.update(num_inputs=len(inputs))
        index[node] = len(ops)
        ops.append(PatternOp(node[0], inputs, tuple(sorted(params.items()))))
    return ops, index


def to_rule(src, dst, name: str) -> Rule:
    """The rule rewriting expression `src` into `dst` (one mapped output)."""
    var_ids = {v: -(k + 1) for k, v in enumerate(enumeration.variables(src))}
    src_ops, src_index = _pattern(src, var_ids)
    dst_ops, dst_index = _pattern(dst, var_ids)
    if dst[0] == "input":
        raise ValueError(f"{name}: the target is a bare input, which the format cannot map")
    rule = Rule(name, tuple(src_ops), tuple(dst_ops),
                ((PatternTensor(src_index[src], 0), PatternTensor(dst_index[dst], 0)),))
    validate_rule(rule)
    return rule


def _canonical_side(ops, names: Dict[int, str]) -> Tuple:
    def tensor(t):
        return ("v", names.setdefault(t.op, f"v{len(names)}")) if t.op < 0 else ("op", t.op, t.index)
    return tuple((op.type, tuple(tensor(t) for t in op.inputs),
                  tuple((k, v) for k, v in op.params if k not in ("numdim",)))
                 for op in ops)


def canonical(rule: Rule) -> Tuple:
    """A key equal for rules equal up to renaming variables (op order kept)."""
    names: Dict[int, str] = {}
    return (_canonical_side(rule.src, names), _canonical_side(rule.dst, names),
            tuple(((s.op, s.index), (d.op, d.index)) for s, d in rule.mapped_outputs))


def count_contained(generated: Iterable[Rule], reference: Iterable[Rule]) -> int:
    """How many reference rules appear in `generated` up to variable renaming."""
    keys = {canonical(r) for r in generated}
    return sum(canonical(r) in keys for r in reference)
