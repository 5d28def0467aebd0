"""Calibrates the fitted cost backend on this machine: `calibrate()`.

The library side of `xflowrl calibrate` (docs/runtime.md, "A cost model
fitted from micro-benchmarks"). It times, in onnxruntime with the settings
of `xflowrl.measure.ort_runtime` (one thread, all graph optimizations):

- **micro-models** (`xflowrl.measure.micro_models`): tiny engine graphs,
  each a chain or a fan-out of copies of one op configuration with
  distinct weights, over generic grids of shapes of every op class the
  backend fits (matmul and conv models stream twice the last-level cache
  in weights, as a real graph does); the convs and pools also carry
  onnxruntime's NCHWc layout reorders;
- **training graphs** (`BUDGETS[...].zoo_graphs`): the thesis' zoo graphs
  and their one-step greedy variants under `analytic/cpu`, which carry the
  executor's behaviour in real graph context. Never the held-out graphs of
  docs/runtime.md.

Every model is timed end to end (median CPU time of the calling thread per
inference, as `runtime_bench.py` measures), not per kernel: onnxruntime's
profiler costs ~20 us per kernel and inflates small kernels, so a fit to
profiled kernels mispriced graphs of many small ops (NasRNN).

The fit (`xflowrl.measure.cost_fit.fit_joint`) is joint over all classes:
for fixed thresholds a graph's fitted cost is linear in the coefficients,
and `design` reads each graph's per-class sums of kernels, GFLOP, MB and MB
above the threshold off the backend itself (its cost under unit
coefficient profiles), with onnxruntime's fusions and reorders exactly as
the backend prices them. Thresholds of the matmul and conv hinges come
from a small grid (`fit_profile`). The per-inference constant (session.run)
is fitted and reported but not part of the profile (the backend sums ops).
"""

from __future__ import annotations

import os
import platform
import time
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from xflowrl.engine import Graph
from xflowrl.measure import cost_fit
from xflowrl.measure.micro_models import Budget, Model, micro_models

Progress = Optional[Callable[[str], None]]


TRAINING_GRAPHS = ("squeezenet1_1", "resnet18", "resnet50", "inception_v3", "bert",
                   "resnet50_taso")
BUDGETS = {
    "quick": Budget(copies=4, configs=50, min_ms=20.0, passes=2,
                    zoo_graphs=("squeezenet1_1", "resnet18", "bert", "resnet50")),
    "full": Budget(copies=6, configs=100, min_ms=50.0, passes=2, zoo_graphs=TRAINING_GRAPHS),
}
HINGE_GRID_MB = (0.0, 2.0, 8.0, 32.0)   # 0: no hinge
HINGED_CLASSES = ("matmul", "conv")
ZOO_WEIGHT = 3.0   # a training graph's row counts as this many micro-models


# -- Training graphs --------------------------------------------------------------------


def zoo_models(names: Sequence[str], seed: int = 0, progress: Progress = None) -> List[Model]:
    """Training graphs: each zoo graph and its one-step greedy variant under
    analytic/cpu (the merged convs and matmuls an optimizer creates)."""
    from xflowrl import zoo  # pylint: disable=import-outside-toplevel
    from xflowrl.engine import CostModel, XferSet  # pylint: disable=import-outside-toplevel
    from xflowrl.env import (  # pylint: disable=import-outside-toplevel
        EnvConfig,
        GraphEnv,
        NO_STEP_LIMIT,
    )
    from xflowrl.executor.weights import (  # pylint: disable=import-outside-toplevel
        random_inputs,
        random_weights,
    )
    from xflowrl.search.greedy import greedy_search  # pylint: disable=import-outside-toplevel
    xfers = XferSet.default()
    out = []
    for name in names:
        original = zoo.get_graph(name)
        weights = random_weights(original, seed, gain=zoo.weight_gain(name))
        feeds = random_inputs(original, seed)
        env = GraphEnv(original, xfers, CostModel("analytic", profile="cpu"),
                       EnvConfig(max_steps=NO_STEP_LIMIT))
        greedy_search(env)
        out.append(Model(f"{name}/original", original, weights, feeds))
        if env.graph.hash() != original.hash():
            out.append(Model(f"{name}/greedy[analytic/cpu]", env.graph, weights, feeds))
        _say(progress, f"training graph {name}: original and greedy variant built")
    return out


# -- Timing ---------------------------------------------------------------------------


def time_model(model: Model, budget: Budget) -> float:
    """Median CPU time (ms) of the calling thread per inference."""
    from xflowrl.measure import ort_runtime  # pylint: disable=import-outside-toplevel
    from xflowrl.onnx_io import to_onnx  # pylint: disable=import-outside-toplevel
    run = ort_runtime.make_runner(to_onnx(model.graph, model.weights, check=False), model.feeds)
    for _ in range(budget.warmup):
        run()
    times: List[float] = []
    while len(times) < budget.min_calls or sum(times) < budget.min_ms:
        start = time.thread_time()
        run()
        times.append(1e3 * (time.thread_time() - start))
    return float(np.median(times))


def time_models(models: Sequence[Model], budget: Budget, progress: Progress = None) -> np.ndarray:
    """Per model, the median over `budget.passes` passes (alternating
    order) of `time_model`."""
    per_pass = np.zeros((budget.passes, len(models)))
    for p in range(budget.passes):
        order = range(len(models)) if p % 2 == 0 else reversed(range(len(models)))
        for n, i in enumerate(order):
            per_pass[p, i] = time_model(models[i], budget)
            if progress and (n + 1) % 25 == 0:
                _say(progress, f"pass {p + 1}/{budget.passes}: {n + 1}/{len(models)} timed")
    return np.median(per_pass, axis=0)


# -- Design and fit --------------------------------------------------------------------


class _Handle(NamedTuple):
    handle: object


def _backend(coefficients: Mapping[str, Sequence[float]]) -> _Handle:
    from xflowrl import _engine  # pylint: disable=import-outside-toplevel
    return _Handle(_engine.fitted_backend("basis", {k: list(v) for k, v in coefficients.items()}))


def design(graphs: Sequence[Graph], thresholds_mb: Mapping[str, float]
           ) -> Tuple[np.ndarray, np.ndarray]:
    """Per graph and class the backend's summed kernels, GFLOP, MB and MB
    above the class's threshold (`cost_fit.BASIS`), and the cost the
    coefficients do not touch (ops priced by the analytic fallback).

    Read off the backend: a graph's cost under a profile whose only
    non-zero coefficient is one basis term of one class, minus its cost
    under the all-zero profile.

    Returns:
      ([graphs, classes, 4], [graphs]).
    """
    classes = cost_fit.CLASSES
    zero = {cls: [0.0, 0.0, 0.0, 0.0, thresholds_mb.get(cls, 0.0)] for cls in classes}
    fixed = np.array([g.cost(_backend(zero)) for g in graphs])
    features = np.zeros((len(graphs), len(classes), len(cost_fit.BASIS)))
    for c, cls in enumerate(classes):
        for k in range(len(cost_fit.BASIS)):
            if k == 3 and not thresholds_mb.get(cls, 0.0):
                continue
            unit = {key: list(v) for key, v in zero.items()}
            unit[cls][k] = 1.0
            backend = _backend(unit)
            # The basis profile prices 1 ms per kernel, per GFLOP, per MB.
            features[:, c, k] = [g.cost(backend) for g in graphs]
            features[:, c, k] -= fixed
    return features, fixed


class ProfileFit(NamedTuple):
    coefficients: Dict[str, List[float]]   # the profile's table
    intercept_ms: float
    predicted_ms: np.ndarray
    rel_error: np.ndarray                  # |predicted - measured| / measured per model


def hinge_column(graphs: Sequence[Graph], cls: str, threshold_mb: float) -> np.ndarray:
    """Per graph, the backend's summed MB above `threshold_mb` of class `cls`."""
    zero = {c: [0.0, 0.0, 0.0, 0.0, 0.0] for c in cost_fit.CLASSES}
    fixed = np.array([g.cost(_backend(zero)) for g in graphs])
    unit = dict(zero, **{cls: [0.0, 0.0, 0.0, 1.0, threshold_mb]})
    backend = _backend(unit)
    return np.array([g.cost(backend) for g in graphs]) - fixed


def fit_profile(graphs: Sequence[Graph], measured_ms: np.ndarray,
                weights: Optional[np.ndarray] = None) -> Tuple[ProfileFit, np.ndarray]:
    """The joint fit with the best thresholds of the hinged classes
    (`HINGE_GRID_MB`, one class at a time, by weighted relative error).
    Only the hinge column depends on a threshold: the rest of the design
    is read once.

    Returns:
      The fit, and the design without hinge columns ([graphs, classes, 4]).
    """
    base, fixed = design(graphs, {})
    thresholds = {cls: 0.0 for cls in cost_fit.CLASSES}
    w = 1.0 if weights is None else weights

    def run(features):
        result = cost_fit.fit_joint(features, fixed, measured_ms, weights)
        err = float(np.sum((w * (result.predicted_ms - measured_ms) / measured_ms) ** 2))
        return result, err

    features = base.copy()
    best, best_err = run(features)
    for cls in HINGED_CLASSES:
        c = cost_fit.CLASSES.index(cls)
        for t in HINGE_GRID_MB[1:]:
            trial = features.copy()
            trial[:, c, 3] = hinge_column(graphs, cls, t)
            result, err = run(trial)
            if result.coefficients[c, 3] > 0 and err < cost_fit.HINGE_GAIN * best_err:
                best, best_err, features = result, err, trial
                thresholds[cls] = t
    table = {cls: [float(v) for v in best.coefficients[c, :3]]
             + ([float(best.coefficients[c, 3]), float(thresholds[cls])]
                if thresholds[cls] and best.coefficients[c, 3] > 0 else [0.0, 0.0])
             for c, cls in enumerate(cost_fit.CLASSES)}
    rel = np.abs(best.predicted_ms - measured_ms) / measured_ms
    return ProfileFit(table, best.intercept_ms, best.predicted_ms, rel), base


# -- Entry point ------------------------------------------------------------------------


def calibrate(output_path: str, *, budget: str = "quick", progress: Progress = None,
              seed: int = 0) -> dict:
    """Micro-benchmarks this machine in onnxruntime and writes a fitted profile.

    The file loads with `CostModel("fitted", profile=output_path)` (or,
    written as `xflowrl/engine/data/fitted_<name>.json`, `profile=<name>`).
    It is written atomically (a temporary file renamed over the path):
    nothing is left behind on failure or interruption.

    Args:
      output_path: where the profile goes (a .json path).
      budget: "quick" (about 1.5 minutes on the project's 2-core machine,
        under 3 when it is loaded) or "full" (larger grids, longer timing,
        all six training graphs; about 4-5 minutes). See `BUDGETS`.
      progress: called with one line of text at each stage.
      seed: the sampled grid configurations, weights and inputs.

    Returns:
      {"path": output_path, "rows": models timed, "seconds": wall time,
       "budget": budget, "intercept_ms": the per-inference constant,
       "classes": per class {"coefficients", "models" (timed models whose
       cost the class enters), "median_rel_error", "p90_rel_error" (over
       those models)}}.

    Raises:
      ValueError: an unknown budget or an output path not ending in .json.
    """
    if budget not in BUDGETS:
        raise ValueError(f"unknown budget {budget!r}; choose from {sorted(BUDGETS)}")
    if not output_path.endswith(".json"):
        raise ValueError(f"a fitted profile is a .json file, got {output_path!r}")
    settings = BUDGETS[budget]
    start = time.time()
    models = micro_models(settings, seed)
    _say(progress, f"{len(models)} micro-models built")
    models += zoo_models(settings.zoo_graphs, seed, progress)
    _say(progress, f"timing {len(models)} models in onnxruntime (1 thread)")
    measured = time_models(models, settings, progress)
    weights = np.array([1.0 if m.name.startswith("micro/") else ZOO_WEIGHT for m in models])
    _say(progress, "fitting")
    result, features = fit_profile([m.graph for m in models], measured, weights)
    classes = {}
    for c, cls in enumerate(cost_fit.CLASSES):
        enters = features[:, c, 0] > 0
        rel = result.rel_error[enters]
        classes[cls] = {"coefficients": result.coefficients[cls], "models": int(enters.sum()),
                        "median_rel_error": float(np.median(rel)) if rel.size else None,
                        "p90_rel_error": float(np.percentile(rel, 90)) if rel.size else None}
    seconds = time.time() - start
    profile = {
        "description": "fitted cost backend: per op class ms = c0 + c1*GFLOP + c2*MB + "
                       "c3*max(0, MB - c4), fitted jointly to end-to-end onnxruntime times "
                       "(1 thread, all graph optimizations) of micro-models and training "
                       "graphs (xflowrl/measure/calibration.py)",
        "command": f"xflowrl.measure.calibration.calibrate(budget={budget!r}, seed={seed})",
        "machine": machine(),
        "method": "joint",
        "coefficients": result.coefficients,
        "overhead_scale": 1.0,
        "per_kernel_overhead_ms": 0.0,
        "intercept_ms": result.intercept_ms,
        "fit": classes,
        "seconds": seconds,
        "models": [{"name": m.name, "measured_ms": float(t), "predicted_ms": float(p)}
                   for m, t, p in zip(models, measured, result.predicted_ms)],
    }
    cost_fit.write_profile(output_path, profile)
    _say(progress, f"wrote {output_path} ({len(models)} models, {seconds:.0f} s)")
    return {"path": output_path, "rows": len(models), "seconds": seconds, "budget": budget,
            "intercept_ms": result.intercept_ms, "classes": classes}


def machine() -> str:
    """CPU model, core count, OS and onnxruntime version."""
    import onnxruntime  # pylint: disable=import-outside-toplevel
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")),
                         "")
    except OSError:
        pass
    return (f"{model} ({os.cpu_count()} cpus), {platform.system()}, onnxruntime "
            f"{onnxruntime.__version__}")


def _say(progress: Progress, line: str) -> None:
    if progress is not None:
        progress(line)
