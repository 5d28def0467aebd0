"""The fitting maths of the fitted cost backend, and its profile file.

Pure numpy: no timing, no engine. Timed rows come from
`xflowrl.measure.ort_profile` (kernels of whole graphs, or of the
micro-benchmarks of `xflowrl.measure.calibration`); this module turns them
into the coefficients `CostModel("fitted", profile=...)` loads.

Per op class (`xflowrl.engine.cost.FITTED_CLASSES`) the model is

    ms = c0 + c1 * GFLOP + c2 * MB + c3 * max(0, MB - T)

over the FLOPs and bytes the backend itself prices (`fitted_features`),
fitted by non-negative least squares with rows weighted by 1/sqrt(ms)
(relative errors of large ops matter most for a graph's total, small ones
should not be ignored); the threshold T comes from a grid
(`THRESHOLDS_MB`), and the hinge is kept only where it lowers the error by
2% (it models working sets beyond the cache). What the profiler does not see
(the executor between kernels) is fitted over whole graphs as
`(scale - 1) * kernel time + per-kernel * kernels` (`overhead_scale`) and
folded into every class's coefficients (`fold_overhead`).

The profile file (`write_profile`) is JSON: "coefficients" (per class
[c0, c1, c2, c3, T]), "overhead_scale", "per_kernel_overhead_ms", "fit"
(per-class statistics), "graphs" (per-graph times behind the overhead
fit), "rows" (every timed row, so that a fit can be audited and redone),
and free-form provenance ("description", "command", "machine", ...).
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

# Kept in step with xflowrl.engine.cost.FITTED_CLASSES (tests/measure/cost_fit_test.py
# checks it); repeated here so that the maths imports no engine.
CLASSES = ("conv", "matmul", "pool", "eltwise", "batchnorm", "concat", "copy")
THRESHOLDS_MB = (1, 2, 3, 4, 6, 8, 10, 12, 16, 24, 32)
# A hinge must cut the weighted squared error by this factor to be kept.
HINGE_GAIN = 0.98


class Row(NamedTuple):
    """One timed kernel: where it came from, its class and features, its time."""
    graph: str      # "<graph>/<variant>" or "micro/<case>"
    guid: int       # the engine op it executes (-1: none, e.g. a layout reorder)
    op_class: str
    flops: float
    bytes: float
    ms: float


class ClassFit(NamedTuple):
    coefficients: List[float]   # [c0, c1, c2, c3, T]
    stats: dict


def nnls(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Non-negative weighted least squares, min |w * (x @ c - y)|^2 with
    c >= 0, by enumerating active sets (exact; meant for up to ~5 features).

    Args:
      x: [rows, features] design matrix.
      y: [rows] targets.
      w: [rows] row weights.

    Returns:
      [features] coefficients (zeros if no subset gives a non-negative fit).
    """
    best, best_err = np.zeros(x.shape[1]), np.inf
    for k in range(1, x.shape[1] + 1):
        for cols in itertools.combinations(range(x.shape[1]), k):
            xs = x[:, cols] * w[:, None]
            coef, *_ = np.linalg.lstsq(xs, y * w, rcond=None)
            if (coef < 0).any():
                continue
            full = np.zeros(x.shape[1])
            full[list(cols)] = coef
            err = float(np.sum((w * (x @ full - y)) ** 2))
            if err < best_err:
                best, best_err = full, err
    return best


def row_weights(ms: np.ndarray) -> np.ndarray:
    """1/sqrt(ms): between absolute (1) and relative (1/ms) errors."""
    return 1.0 / np.sqrt(np.maximum(ms, 1e-4))


def predict(coef: Sequence[float], flops: np.ndarray, mbytes: np.ndarray) -> np.ndarray:
    """The backend's formula: ms for FLOPs and megabytes (arrays)."""
    return (coef[0] + coef[1] * flops * 1e-9 + coef[2] * mbytes
            + coef[3] * np.maximum(0.0, mbytes - coef[4]))


def fit_class(flops: np.ndarray, mbytes: np.ndarray, ms: np.ndarray,
              weights: Optional[np.ndarray] = None) -> List[float]:
    """[c0, c1, c2, c3, T] of one class: the best non-negative fit over the
    threshold grid (c3 = T = 0 when no hinge earns its keep).

    Args:
      flops: [rows] FLOPs per op.
      mbytes: [rows] megabytes per op.
      ms: [rows] measured times.
      weights: [rows] extra row weights (multiplied with `row_weights`).
    """
    w = row_weights(ms) * (1.0 if weights is None else weights)
    base = np.stack([np.ones_like(ms), flops * 1e-9, mbytes], axis=1)
    coef = nnls(base, ms, w)
    best = [*coef, 0.0, 0.0]
    best_err = float(np.sum((w * (base @ coef - ms)) ** 2))
    # An improvement below this is rounding (exact data), not a hinge.
    floor = 1e-12 * float(np.sum((w * ms) ** 2))
    for t in THRESHOLDS_MB:
        hinge = np.maximum(0.0, mbytes - t)
        if not hinge.any():
            continue
        x = np.concatenate([base, hinge[:, None]], axis=1)
        coef = nnls(x, ms, w)
        err = float(np.sum((w * (x @ coef - ms)) ** 2))
        if coef[3] > 0 and err < HINGE_GAIN * best_err and best_err - err > floor:
            best, best_err = [*coef, float(t)], err
    return [float(c) for c in best]


def class_stats(coef: Sequence[float], flops: np.ndarray, mbytes: np.ndarray,
                ms: np.ndarray) -> dict:
    """Rows, measured and predicted totals, median and 90th percentile of
    the relative error."""
    pred = predict(coef, flops, mbytes)
    rel = np.abs(pred - ms) / ms
    return {"rows": int(len(ms)), "total_ms": float(ms.sum()),
            "predicted_total_ms": float(pred.sum()),
            "median_rel_error": float(np.median(rel)),
            "p90_rel_error": float(np.percentile(rel, 90))}


def fit(rows: Iterable[Row], source_weights: Optional[Mapping[str, float]] = None
        ) -> Tuple[Dict[str, List[float]], Dict[str, dict]]:
    """Per class, coefficients and statistics (`fit_class`, `class_stats`).

    Args:
      rows: timed rows of any classes.
      source_weights: extra weight of rows by source, the part of
        `Row.graph` before the first "/" ("micro", a zoo graph's name);
        default 1.

    Returns:
      (coefficients, stats) by class name; a class without rows gets zeros
      and {"rows": 0}.
    """
    rows = list(rows)
    source_weights = source_weights or {}
    coefficients, stats = {}, {}
    for cls in CLASSES:
        sel = [r for r in rows if r.op_class == cls]
        if not sel:
            coefficients[cls] = [0.0] * 5
            stats[cls] = {"rows": 0}
            continue
        flops = np.array([r.flops for r in sel], dtype=np.float64)
        mbytes = np.array([r.bytes * 1e-6 for r in sel], dtype=np.float64)
        ms = np.array([r.ms for r in sel], dtype=np.float64)
        extra = np.array([source_weights.get(r.graph.split("/")[0], 1.0) for r in sel])
        coef = fit_class(flops, mbytes, ms, extra)
        coefficients[cls] = coef
        stats[cls] = class_stats(coef, flops, mbytes, ms)
    return coefficients, stats


def overhead_scale(graphs: Sequence[Mapping[str, float]]) -> Tuple[float, float]:
    """(scale, per-kernel ms) with e2e - kernels ~ (scale - 1) * kernels +
    per-kernel * count over whole graphs (non-negative least squares).

    Args:
      graphs: per graph, "e2e_ms" (end-to-end CPU time of an inference),
        "kernel_ms" (the sum of its profiled kernel times) and "kernels"
        (how many kernels ran).
    """
    if not graphs:
        return 1.0, 0.0
    y = np.array([g["e2e_ms"] - g["kernel_ms"] for g in graphs], dtype=np.float64)
    x = np.array([[g["kernel_ms"], g["kernels"]] for g in graphs], dtype=np.float64)
    coef = nnls(x, y, np.ones_like(y))
    return 1.0 + float(coef[0]), float(coef[1])


def fold_overhead(coefficients: Mapping[str, Sequence[float]], scale: float,
                  per_kernel_ms: float) -> Dict[str, List[float]]:
    """Every class's kernel model times `scale`, plus the per-kernel
    overhead in c0 (the threshold T is unchanged)."""
    return {cls: [scale * c[0] + per_kernel_ms, scale * c[1], scale * c[2], scale * c[3],
                  c[4]] for cls, c in coefficients.items()}


def write_profile(path: str, profile: Mapping[str, object]) -> None:
    """Writes a profile (a JSON object with "coefficients") atomically: a
    temporary file in the same folder, renamed over `path`; nothing is left
    behind on failure.

    Raises:
      ValueError: no "coefficients", or a class missing, negative or not
        finite (what the backend would refuse).
    """
    coefficients = profile.get("coefficients")
    if not isinstance(coefficients, Mapping):
        raise ValueError("a fitted profile needs a 'coefficients' table")
    for cls in CLASSES:
        values = coefficients.get(cls)
        if values is None or len(values) != 5:
            raise ValueError(f"class {cls!r} needs 5 coefficients, got {values!r}")
        if not all(np.isfinite(v) and v >= 0 for v in values):
            raise ValueError(f"class {cls!r} has a negative or non-finite coefficient")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".fitted-", suffix=".json.tmp", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(profile, f, indent=1)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would follow the rename
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_rows(profile: Mapping[str, Any], where: str = "profile") -> List[Row]:
    """The rows stored in a profile, each with every field of `Row`.

    Raises:
      ValueError: a row of another layout (an older profile's lack
        "guid"), named by `where` and its index.
    """
    rows = profile.get("rows", [])
    for i, r in enumerate(rows):
        if set(r) != set(Row._fields):
            raise ValueError(f"{where}: row {i} has the fields {sorted(r)}, not "
                             f"{sorted(Row._fields)} (an older profile); fit it again")
    return [Row(**r) for r in rows]


# -- Joint fit over whole graphs ------------------------------------------------
#
# A graph's fitted cost is linear in the coefficients once the thresholds T
# are fixed: sum over its priced kernels (in context: fused ops cost 0,
# reorders and separate activations add kernels) of c0 + c1*GFLOP + c2*MB +
# c3*max(0, MB - T) of their class. `xflowrl.measure.calibration` reads
# those sums off the backend itself ([classes, 4] per graph), so a model
# fitted to whole-graph times prices exactly what it was fitted on.

BASIS = ("kernels", "gflop", "mb", "mb_above")


def nnls_active_set(a: np.ndarray, b: np.ndarray, max_iter: int = 0) -> np.ndarray:
    """min |a @ x - b|^2 subject to x >= 0 (Lawson and Hanson, 1974, ch. 23).

    Args:
      a: [rows, unknowns].
      b: [rows].
      max_iter: outer iterations (0: 3 * unknowns).

    Returns:
      [unknowns] non-negative solution.
    """
    rows, n = a.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 10 * np.finfo(np.float64).eps * np.linalg.norm(a, 1) * max(rows, n)
    for _ in range(max_iter or 3 * n):
        grad = a.T @ (b - a @ x)
        if passive.all() or (grad[~passive] <= tol).all():
            break
        j = int(np.argmax(np.where(passive, -np.inf, grad)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            bad = passive & (z <= 0)
            alpha = np.min(x[bad] / (x[bad] - z[bad]))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
    return x


class JointFit(NamedTuple):
    coefficients: np.ndarray   # [classes, 4]: c0, c1 (per GFLOP), c2 (per MB), c3 (per MB above T)
    intercept_ms: float        # per inference, outside any kernel (session.run); not in the profile
    predicted_ms: np.ndarray   # [graphs]


def fit_joint(features: np.ndarray, fixed_ms: np.ndarray, measured_ms: np.ndarray,
              weights: Optional[np.ndarray] = None, intercept: bool = True) -> JointFit:
    """Non-negative coefficients of every class at once from whole graphs.

    measured ~ intercept + fixed + sum_{class, basis} features * coefficients,
    least squares relative to the measured time (rows weighted by
    1/measured, times `weights`): every graph's total counts alike,
    whatever its size.

    Args:
      features: [graphs, classes, 4] per graph and class the summed kernel
        count, GFLOP, MB and MB above the class's threshold (`BASIS`).
      fixed_ms: [graphs] the part of the cost the coefficients do not
        touch (ops the backend prices by its analytic fallback).
      measured_ms: [graphs] measured time of one inference.
      weights: [graphs] extra row weights (default 1).
      intercept: fit a non-negative per-inference constant.

    Returns:
      The coefficients, the intercept and the predictions (with intercept).
    """
    g, c, k = features.shape
    x = features.reshape(g, c * k)
    if intercept:
        x = np.concatenate([np.ones((g, 1)), x], axis=1)
    w = 1.0 / measured_ms * (1.0 if weights is None else weights)
    # Columns are scaled to unit norm so that the active-set tolerance
    # treats ms-per-GFLOP and ms-per-kernel alike.
    xs = x * w[:, None]
    norms = np.linalg.norm(xs, axis=0)
    norms[norms == 0] = 1.0
    sol = nnls_active_set(xs / norms, (measured_ms - fixed_ms) * w) / norms
    icpt = float(sol[0]) if intercept else 0.0
    coef = sol[1:] if intercept else sol
    return JointFit(coef.reshape(c, k), icpt, x @ sol + fixed_ms)
