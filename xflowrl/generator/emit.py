"""Expression pairs -> rules of the project's format; rule comparison up to
renaming (how many of TASO's rules the generated set contains)."""

from __future__ import annotations

import itertools
from typing import Dict, Iterable, List, Sequence, Tuple

from xflowrl.generator import enumeration
from xflowrl.rules.rules_io import PatternOp, PatternTensor, Rule, validate_rule

# Source ops whose meaning depends on the rank of their inputs are pinned to
# the rank they were generated at (TASO's NUMDIM constraint).
_RANKED = ("concat", "matmul", "transpose")
_COMMUTATIVE = ("add", "mul")
_DERIVED_KEYS = ("numdim", "num_inputs", "num_outputs")


def _pattern(roots: Sequence, var_ids: Dict[str, int], source: bool, info):
    ops: List[PatternOp] = []
    index: Dict[tuple, int] = {}  # op node -> its position in `ops`
    for root in roots:
        for node in enumeration.op_nodes(root):
            if node in index:
                continue
            inputs = tuple(PatternTensor(var_ids[c[1]], 0) if c[0] == "input"
                           else PatternTensor(index[c], 0) for c in node[2:])
            params = dict(node[1])
            if node[0] == "concat":
                params.update(num_inputs=len(inputs))
            if source and node[0] in _RANKED:
                params.update(numdim=info[node[2]][0])
            if source and node[0] == "conv2d":  # identities may hold for one kernel size only
                kernel = info[node[3]][1]
                params.update(kernel_h=kernel[0], kernel_w=kernel[1], group=1)
            index[node] = len(ops)
            ops.append(PatternOp(node[0], inputs, tuple(sorted(params.items()))))
    return ops, index


def _shape_info(exprs: Sequence, family_inputs: Dict[str, tuple]) -> Dict:
    """(rank, kernel size) of every sub-expression: ranks never change inside
    a family; a weight's kernel is its input's, or enlarge's second operand's."""
    info = {}

    def visit(e):
        if e not in info:
            if e[0] == "input":
                shape = family_inputs[e[1]]
                info[e] = (len(shape), tuple(shape[2:4]))
            else:
                for c in e[2:]:
                    visit(c)
                info[e] = info[e[3]] if e[0] == "enlarge" else info[e[2]]
    for e in exprs:
        visit(e)
    return info


def _family_inputs(exprs) -> Dict[str, tuple]:
    for family in enumeration.FAMILIES.values():
        names = {v for e in exprs for v in enumeration.variables(e)}
        if names <= set(family.inputs):
            return family.inputs
    raise ValueError(f"no family has the inputs of {exprs}")


def to_rule(src, dst, name: str) -> Rule:
    """The rule rewriting expression `src` into `dst` (one mapped output)."""
    if dst[0] == "input":
        raise ValueError(f"{name}: the target is a bare input, which the format cannot map")
    var_ids = {v: -(k + 1) for k, v in enumerate(enumeration.variables(src))}
    info = _shape_info([src, dst], _family_inputs([src, dst]))
    src_ops, src_index = _pattern([src], var_ids, True, info)
    dst_ops, dst_index = _pattern([dst], var_ids, False, info)
    rule = Rule(name, tuple(src_ops), tuple(dst_ops),
                ((PatternTensor(src_index[src], 0), PatternTensor(dst_index[dst], 0)),))
    validate_rule(rule)
    return rule


def to_split_rule(src: Tuple, dst, axis: int, name: str) -> Rule:
    """The rule rewriting two expressions `src` into the halves of `dst` split
    along `axis` (two mapped outputs)."""
    variables: List[str] = []
    for e in src:
        variables += [v for v in enumeration.variables(e) if v not in variables]
    var_ids = {v: -(k + 1) for k, v in enumerate(variables)}
    info = _shape_info(list(src) + [dst], _family_inputs(list(src) + [dst]))
    src_ops, src_index = _pattern(list(src), var_ids, True, info)
    dst_ops, dst_index = _pattern([dst], var_ids, False, info)
    split = len(dst_ops)
    dst_ops.append(PatternOp("split", (PatternTensor(dst_index[dst], 0),),
                             (("axis", axis), ("num_outputs", 2))))
    rule = Rule(name, tuple(src_ops), tuple(dst_ops),
                tuple((PatternTensor(src_index[e], 0), PatternTensor(split, k))
                      for k, e in enumerate(src)))
    validate_rule(rule)
    return rule


def _side_exprs(ops: Sequence[PatternOp], names: Dict[int, str]) -> Dict[Tuple[int, int], tuple]:
    """Expressions of every op output of a pattern, variables named by `names`."""
    tensors: Dict[Tuple[int, int], tuple] = {}
    for j, op in enumerate(ops):
        args = [("input", names[t.op]) if t.op < 0 else tensors[(t.op, t.index)]
                for t in op.inputs]
        if op.type in _COMMUTATIVE:
            args.sort(key=repr)
        params = tuple((k, v) for k, v in op.params if k not in _DERIVED_KEYS
                       and not (op.type == "conv2d" and k in ("kernel_h", "kernel_w", "group")))
        node = (op.type, params) + tuple(args)
        if op.type == "split":
            for k in range(int(dict(op.params).get("num_outputs", 2))):
                tensors[(j, k)] = ("out", k, node)
        else:
            tensors[(j, 0)] = node
    return tensors


def canonical(rule: Rule) -> str:
    """A key equal for rules equal up to renaming variables, the order of
    their ops, the order of commutative operands and of mapped outputs, and
    the shape-derived constraints (numdim, num_inputs, num_outputs, a conv's
    kernel size and group count, which TASO's rules leave out)."""
    variables = sorted({t.op for op in rule.src + rule.dst for t in op.inputs if t.op < 0})

    def key(perm: Tuple[int, ...]) -> str:
        names = {v: f"v{perm[k]}" for k, v in enumerate(variables)}
        src = _side_exprs(rule.src, names)
        dst = _side_exprs(rule.dst, names)
        return repr(sorted(repr((src[(s.op, s.index)], dst[(d.op, d.index)]))
                           for s, d in rule.mapped_outputs))

    return min(key(perm) for perm in itertools.permutations(range(len(variables))))


def count_contained(generated: Iterable[Rule], reference: Iterable[Rule]) -> int:
    """How many reference rules appear in `generated` up to `canonical`."""
    keys = {canonical(r) for r in generated}
    return sum(canonical(r) in keys for r in reference)
