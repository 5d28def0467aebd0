"""Rules evaluated at sizes other than those they were found on: numpy
semantics of the model M (model.py) and the counterexample search.

A rule the generator found on fixed sizes (4x4 matrices, 3x3 and 1x1
kernels) can hold there and fail on others: `concat(x1, x2) @ concat(x1,
x3)` equals `concat(x2, x1) @ concat(x3, x1)` only when x1 is square. The
pipeline therefore evaluates both sides of every kept rule at up to six size
bindings from the size search (sizes.py) and drops a rule whose sides differ
there; the z3 tier (symbolic.py) reports the same witness for a rule it
cannot prove. Needs numpy and the reference executor only (no z3, no engine).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from xflowrl.generator import sizes
from xflowrl.generator.model import int_param, model_op
from xflowrl.rules.rules_io import PatternOp, Rule

_CONV_PARAMS = {"stride_h": 1, "stride_w": 1, "padding": "SAME"}
_POOL_PARAMS = dict(_CONV_PARAMS, kernel_h=3, kernel_w=3, activation="NONE")


def _need(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(what)


def _axis(op: PatternOp) -> int:
    axis = int_param(op, "axis")
    if axis is None:  # model_op accepts integer axes only
        raise ValueError(f"{op.type} without an integer axis")
    return axis


def evaluate_side(ops: Sequence[PatternOp], values: Dict[int, np.ndarray], rule: Rule,
                  src_out: Optional[dict]) -> Dict[Tuple[int, int], np.ndarray]:
    """Evaluates a side in M (rank-4 tensors, matrices [M, N, 1, 1]).

    Args:
      ops: the side's ops.
      values: {variable k: array} (pattern tensor -k).
      rule: the rule (a split takes its sizes from the mapped source).
      src_out: the source's outputs when `ops` is the target, else None.

    Returns:
      {(op index, output index): array}.

    Raises:
      ValueError: an op is undefined at these shapes, or not in the model.
    """
    from xflowrl.executor import reference as executor  # numpy only; no engine needed

    out: Dict[Tuple[int, int], np.ndarray] = {}
    for j, op in enumerate(ops):
        xs = [values[-t.op] if t.op < 0 else out[(t.op, t.index)] for t in op.inputs]
        name = model_op(op, src_out is not None)
        act = int_param(op, "activation")
        if name in ("add", "mul"):
            _need(xs[0].shape == xs[1].shape, "element-wise shapes")
            y = xs[0] + xs[1] if name == "add" else xs[0] * xs[1]
        elif name == "relu":
            y = np.maximum(xs[0], 0)
        elif name == "matmul":
            a, b = xs
            _need(a.shape[2:] == b.shape[2:] == (1, 1) and a.shape[1] == b.shape[0], "matmul")
            y = (a[:, :, 0, 0] @ b[:, :, 0, 0])[:, :, None, None]
            y = np.maximum(y, 0) if act == 2 else y
        elif name == "transpose":
            _need(xs[0].shape[2:] == (1, 1), "transpose")
            y = np.transpose(xs[0], (1, 0, 2, 3))
        elif name == "concat":
            y = np.concatenate(xs, axis=_axis(op))
        elif name == "split":
            ax = _axis(op)
            if src_out is None:  # model_op accepts a split in a target only
                raise ValueError("split outside a target")
            split_sizes = {d.index: src_out[(s.op, s.index)].shape[ax]
                           for s, d in rule.mapped_outputs if d.op == j}
            _need(split_sizes.get(0, 0) + split_sizes.get(1, 0) == xs[0].shape[ax],
                  "split sizes")
            n = split_sizes.get(0, 0)
            out[(j, 1)] = np.take(xs[0], range(n, xs[0].shape[ax]), axis=ax)
            y = np.take(xs[0], range(n), axis=ax)
        elif name == "conv":
            _need(xs[0].shape[1] == xs[1].shape[1], "conv channels")
            y = executor.conv2d(xs[0], xs[1], dict(_CONV_PARAMS,
                                                   activation="RELU" if act == 2 else "NONE"))
        elif name in ("avgpool", "maxpool"):
            y = getattr(executor, name)(xs[0], _POOL_PARAMS)
        elif name == "scalar_mul":
            _need(xs[1].size == 1, "scalar_mul scale")
            y = xs[0] * xs[1].reshape(())
        else:
            y = executor.enlarge(*xs)
        out[(j, 0)] = y
    return out


def find_difference(rule: Rule, bindings: Sequence[sizes.Binding], seed: int) -> Optional[str]:
    """Evaluates both sides (float64, normal random values from `seed`) at
    each binding in turn; a description of the first mapped pair that
    differs, or None. A binding where a side is undefined is skipped."""
    rng = np.random.default_rng(seed)
    for shapes in bindings:
        values = {k: rng.normal(size=shape) for k, shape in shapes.items()}
        try:
            src = evaluate_side(rule.src, values, rule, None)
            dst = evaluate_side(rule.dst, values, rule, src)
        except (ValueError, IndexError):
            continue
        for s, d in rule.mapped_outputs:
            a, b = src[(s.op, s.index)], dst[(d.op, d.index)]
            if a.shape != b.shape:  # the engine rejects such a match
                break
            err = float(np.max(np.abs(a - b))) if a.size else 0.0
            if err > 1e-6 * (1 + float(np.max(np.abs(a), initial=0)) +
                             float(np.max(np.abs(b), initial=0))):
                return (f"{_describe(shapes)}: source {s} and target {d} differ by "
                        f"{err:.3g}")
    return None


def _describe(shapes: sizes.Binding) -> str:
    return " ".join(f"v{k}{list(sh)}" for k, sh in sorted(shapes.items()))


def counterexample(rule: Rule, draws: int = 6, max_size: int = 5, seed: int = 0
                   ) -> Optional[str]:
    """Evaluates both sides at up to `draws` sizes from the size search
    (`sizes.bindings`); returns a description of the first mapped pair that
    differs, or None. Deterministic for a given rule and seed.

    Raises:
      ValueError: an op the model does not cover.
    """
    return find_difference(rule, sizes.bindings(rule, draws, max_size, seed), seed)
