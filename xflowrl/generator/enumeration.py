"""Enumeration of small graphs as expressions (TASO's generator, thesis §3.1).

A graph here is a single-output expression tree over named input tensors;
equal sub-expressions are one op, so a tree is a DAG. `Expr` is a hashable
tuple: `("input", name)` or `(op_type, params, operand, ...)` with `params` a
sorted tuple of `(key, value)` in the rule format's keys. Operands of
commutative ops are sorted, so `add(a, b)` and `add(b, a)` are one graph.

`enumerate_graphs(k, family)` yields every expression of at most `k` distinct
ops over a family's inputs and operator templates whose shapes check out.

Operator templates (a subset of TASO's; what is left out is listed in the
report and docs): element-wise add and mul, matmul (with and without fused
ReLU), ReLU, concat on axes 0 and 1 (2-D), and for 4-D: conv 1x1 and 3x3
(stride 1, SAME, with and without fused ReLU), add, ReLU and concat on axes 0
and 1. Transpose, split, pools, enlarge and scalar multiply are not
enumerated yet.
"""

from __future__ import annotations

import itertools
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from xflowrl.graphs import executor

Expr = tuple


class Template(NamedTuple):
    op_type: str
    params: Tuple[Tuple[str, int], ...]
    arity: int
    commutative: bool


class Family(NamedTuple):
    """Inputs (name -> shape) and the op templates enumerated over them."""
    name: str
    inputs: Dict[str, Tuple[int, ...]]
    templates: Tuple[Template, ...]


_CONV = (("activation", 0), ("padding", 0), ("stride_h", 1), ("stride_w", 1))
_CONV_RELU = (("activation", 2), ("padding", 0), ("stride_h", 1), ("stride_w", 1))

FAMILIES: Dict[str, Family] = {
    "matrix": Family("matrix", {"x0": (4, 4), "x1": (4, 4), "x2": (4, 4)}, (
        Template("add", (), 2, True),
        Template("mul", (), 2, True),
        Template("matmul", (("activation", 0),), 2, False),
        Template("matmul", (("activation", 2),), 2, False),
        Template("relu", (), 1, False),
        Template("concat", (("axis", 0),), 2, False),
        Template("concat", (("axis", 1),), 2, False),
    )),
    "conv": Family("conv", {"i0": (1, 4, 4, 4), "w0": (4, 4, 3, 3), "w1": (4, 4, 3, 3),
                            "w2": (4, 4, 1, 1)}, (
        Template("conv2d", _CONV, 2, False),
        Template("conv2d", _CONV_RELU, 2, False),
        Template("add", (), 2, True),
        Template("relu", (), 1, False),
        Template("concat", (("axis", 0),), 2, False),
        Template("concat", (("axis", 1),), 2, False),
    )),
}


def num_ops(expr: Expr) -> int:
    """Distinct non-input sub-expressions."""
    return len(op_nodes(expr))


def op_nodes(expr: Expr) -> List[Expr]:
    """Distinct op sub-expressions in post order (operands first)."""
    seen, order = set(), []

    def visit(e):
        if e[0] == "input" or e in seen:
            return
        for child in e[2:]:
            visit(child)
        seen.add(e)
        order.append(e)
    visit(expr)
    return order


def variables(expr: Expr) -> List[str]:
    """Input names in order of first use (depth first, left to right)."""
    out: List[str] = []

    def visit(e):
        if e[0] == "input":
            if e[1] not in out:
                out.append(e[1])
            return
        for child in e[2:]:
            visit(child)
    visit(expr)
    return out


def public_params(op_type: str, params) -> dict:
    """Rule-format params -> the executor's parameter dict."""
    p = dict(params)
    out = {}
    if "activation" in p:
        out["activation"] = ("NONE", "SIGMOID", "RELU", "TANH")[p["activation"]]
    if op_type == "conv2d":
        out.update(stride_h=p["stride_h"], stride_w=p["stride_w"],
                   padding=("SAME", "VALID")[p["padding"]])
    if "axis" in p:
        out["axis"] = p["axis"]
    return out


def evaluate(expr: Expr, values: Dict[str, np.ndarray], cache: Optional[dict] = None,
             relu=None) -> np.ndarray:
    """Evaluates `expr` with the reference executor (or `relu` as ReLU)."""
    cache = {} if cache is None else cache
    if expr in cache:
        return cache[expr]
    if expr[0] == "input":
        out = values[expr[1]]
    else:
        op_type, params = expr[0], expr[1]
        args = [evaluate(c, values, cache, relu) for c in expr[2:]]
        p = public_params(op_type, params)
        if relu is not None and (op_type == "relu" or p.get("activation") == "RELU"):
            if op_type == "relu":
                out = relu(args[0])
            else:
                out = relu(executor.run_op(op_type, dict(p, activation="NONE"), args)[0])
        else:
            out = executor.run_op(op_type, p, args)[0]
    cache[expr] = out
    return out


def _shape_ok(template: Template, operands: Sequence[Expr],
              shapes: Dict[Expr, Tuple[int, ...]]) -> Optional[Tuple[int, ...]]:
    s = [shapes[o] for o in operands]
    t = template.op_type
    if t in ("add", "mul"):
        return s[0] if s[0] == s[1] else None
    if t == "relu":
        return s[0]
    if t == "matmul":
        return (s[0][0], s[1][1]) if len(s[0]) == len(s[1]) == 2 and s[0][1] == s[1][0] else None
    if t == "concat":
        axis = dict(template.params)["axis"]
        if len(s[0]) != len(s[1]) or any(a != b for d, (a, b) in enumerate(zip(*s)) if d != axis):
            return None
        if max(s[0][axis], s[1][axis]) > 8:
            return None  # keep tensors small (TASO: at most 4x4x4x4 inputs)
        return tuple(a + b if d == axis else a for d, (a, b) in enumerate(zip(*s)))
    if t == "conv2d":
        x, w = s
        if len(x) != 4 or len(w) != 4 or x[1] != w[1] or w[2] != w[3]:
            return None
        return (x[0], w[0], x[2], x[3])
    raise ValueError(f"no shape rule for {t}")


def enumerate_graphs(k: int, family: Family) -> Iterator[Tuple[Expr, Tuple[int, ...]]]:
    """Yields `(expr, output shape)` for every graph of 1..k ops."""
    shapes: Dict[Expr, Tuple[int, ...]] = {("input", n): s for n, s in family.inputs.items()}
    by_size: Dict[int, List[Expr]] = {0: list(shapes)}
    for size in range(1, k + 1):
        by_size[size] = []
        pool = [e for n in range(size) for e in by_size[n]]
        for template in family.templates:
            for operands in itertools.product(pool, repeat=template.arity):
                if template.commutative and list(operands) != sorted(operands):
                    continue
                expr = (template.op_type, template.params) + tuple(operands)
                if num_ops(expr) != size:
                    continue
                shape = _shape_ok(template, operands, shapes)
                if shape is None:
                    continue
                shapes[expr] = shape
                by_size[size].append(expr)
                yield expr, shape
