"""Calibrates the fitted cost backend on this machine: `calibrate()`.

The library side of `xflowrl calibrate` (docs/runtime.md, "A cost model
fitted from micro-benchmarks"). It times, in onnxruntime with the settings
of `xflowrl.measure.ort_runtime` (one thread, all graph optimizations):

- **micro-models** (`micro_models`): tiny engine graphs, each a chain or a
  fan-out of copies of one op configuration with distinct weights (matmuls
  and convs: enough copies to stream twice the last-level cache in weights,
  as a real graph does, `cold_copies`),
  over generic grids of shapes: matmuls of many M/K/N (including the wide
  merged shapes rewrites create: N a multiple of K), batched matmuls,
  convs of many sizes, strides, groups and kernels (enlarged 3x3/5x5
  included), pools, element-wise chains, batch-norms, concats, splits and
  transposes; the convs and pools also carry onnxruntime's NCHWc layout
  reorders;
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

import dataclasses
import os
import platform
import time
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from xflowrl.measure import cost_fit

Progress = Optional[Callable[[str], None]]


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much `calibrate` measures.

    Attributes:
      copies: op copies per micro-model (chain length or fan-out).
      configs: micro-model configurations per op family (a seeded sample of
        its grid; 0: the whole grid).
      min_ms: each model runs until this much CPU time is spent (and at
        least `min_calls` calls), after `warmup` calls.
      passes: passes over all models (a model's time: the median over
        passes of its per-pass medians).
      zoo_graphs: training graphs timed whole with their greedy variants.
    """
    copies: int
    configs: int
    min_ms: float
    passes: int
    zoo_graphs: Tuple[str, ...]
    min_calls: int = 5
    warmup: int = 2


TRAINING_GRAPHS = ("squeezenet1_1", "resnet18", "resnet50", "inception_v3", "bert",
                   "resnet50_taso")
BUDGETS = {
    "quick": Budget(copies=4, configs=50, min_ms=20.0, passes=2,
                    zoo_graphs=("squeezenet1_1", "resnet18", "bert", "resnet50")),
    "full": Budget(copies=6, configs=100, min_ms=50.0, passes=2, zoo_graphs=TRAINING_GRAPHS),
}
HINGE_GRID_MB = (0.0, 2.0, 8.0, 32.0)   # 0: no hinge
# Matmul and conv micro-models stream this multiple of the last-level cache
# in distinct weights per inference (up to a cap of copies and
# MAX_MODEL_FLOPS): a real graph reads each weight once per inference and
# the graphs of the zoo hold far more weights than the cache (ResNet-50:
# ~100 MB, BERT: ~340 MB), so their weights come from memory. A chain of 4
# copies keeps 1-8 MB weights in the cache and prices them at about twice
# the bandwidth a graph gets; a cap of 64 copies does the same for weights
# under 1 MB, and the per-op hinge then reads "small weights are fast" into
# the data (docs/runtime.md). Matmul chains take up to 1024 copies (a chain
# has one output); conv fan-outs 64 (each copy is a graph output).
COLD_CACHE_MULTIPLE = 2.0
MAX_MATMUL_COPIES = 1024
MAX_CONV_COPIES = 64
MAX_MODEL_FLOPS = 2e9
HINGED_CLASSES = ("matmul", "conv")
ZOO_WEIGHT = 3.0   # a training graph's row counts as this many micro-models


class Model(NamedTuple):
    """One timed graph: a micro-model or a training graph."""
    name: str               # "micro/<family>/<config>" or "<zoo graph>/<variant>"
    graph: object           # engine Graph
    weights: Dict[str, np.ndarray]
    feeds: Dict[str, np.ndarray]


# -- Micro-models -----------------------------------------------------------------


class _Micro:
    """Builds one micro-model: a GraphBuilder plus the weights' values."""

    def __init__(self, rng: np.random.Generator):
        from xflowrl.engine import GraphBuilder  # pylint: disable=import-outside-toplevel
        self.b = GraphBuilder()
        self.rng = rng
        self.values: Dict[str, np.ndarray] = {}
        self.inputs: Dict[str, Tuple[int, ...]] = {}

    def input(self, shape):
        name = f"x{len(self.inputs)}"
        self.inputs[name] = tuple(shape)
        return self.b.input(shape=shape, name=name)

    def weight(self, shape, kind: str = "fan_in", fan_in: int = 1):
        """kind: "fan_in" (N(0, 1/fan_in): activations keep their scale
        through chains), "near_one" (U(0.5, 1.5): products and quotients
        stay finite), "small" (N(0, 0.1)), "var" (U(0.5, 1.5))."""
        name = f"w{len(self.values)}"
        if kind == "fan_in":
            value = self.rng.standard_normal(shape) / np.sqrt(max(fan_in, 1))
        elif kind in ("near_one", "var"):
            value = self.rng.uniform(0.5, 1.5, shape)
        else:
            value = 0.1 * self.rng.standard_normal(shape)
        self.values[name] = value.astype(np.float32)
        return self.b.weight(shape=shape, name=name)

    def model(self, name: str, outputs) -> Model:
        graph = self.b.build(outputs=list(outputs))
        feeds = {k: self.rng.standard_normal(s).astype(np.float32)
                 for k, s in self.inputs.items()}
        return Model(name, graph, self.values, feeds)


def last_level_cache_bytes() -> int:
    """The largest CPU cache (sysfs), 32 MiB where it cannot be read."""
    sizes = []
    folder = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(folder):
            with open(os.path.join(folder, entry, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
            sizes.append(int(text.rstrip("KM")) * scale)
    except (OSError, ValueError):
        pass
    return max(sizes) if sizes else 32 << 20


def cold_copies(budget: Budget, weight_bytes: float, flops: float, cap: int) -> int:
    """Copies of a weighted op that stream `COLD_CACHE_MULTIPLE` times the
    last-level cache in weights, within `cap` and MAX_MODEL_FLOPS (never
    fewer than `budget.copies`)."""
    want = int(np.ceil(COLD_CACHE_MULTIPLE * last_level_cache_bytes() / max(weight_bytes, 1.0)))
    want = min(want, cap, int(MAX_MODEL_FLOPS // max(flops, 1.0)))
    return max(budget.copies, want)


def _sample(configs: List[tuple], budget: Budget, rng: np.random.Generator) -> List[tuple]:
    if not budget.configs or len(configs) <= budget.configs:
        return configs
    idx = rng.choice(len(configs), size=budget.configs, replace=False)
    return [configs[i] for i in sorted(idx)]


def matmul_models(budget: Budget, rng: np.random.Generator) -> List[Model]:
    """[M,K]x[K,N] chains with distinct weights (K == N: one shape; else
    alternating [K,N] and [N,K]); N up to 8K covers the merged matmuls of
    the rewrites; some with a fused ReLU (a separate kernel in onnxruntime)."""
    dims = (64, 256, 512, 1024, 2048)
    configs = []
    for m in (1, 16, 64, 256):
        for k in dims:
            for mult in (1, 2, 3, 4, 8):
                n = k * mult
                if 4.0 * k * n > 40e6 or 2.0 * m * k * n > 2.5e9:
                    continue
                configs.append((m, k, n))
    out = []
    for i, (m, k, n) in enumerate(_sample(configs, budget, rng)):
        mb = _Micro(rng)
        h = mb.input((m, k))
        act = "RELU" if i % 3 == 2 else "NONE"
        width = k
        for c in range(cold_copies(budget, 4.0 * k * n, 2.0 * m * k * n, MAX_MATMUL_COPIES)):
            to = n if width == k else k
            h = mb.b.matmul(a=h, b=mb.weight((width, to), fan_in=width), activation=act)
            width = to
        out.append(mb.model(f"micro/matmul/{m}x{k}x{n}{'_relu' if act != 'NONE' else ''}", [h]))
    # Batched (attention-like): [B,S,d] x [B,d,S] -> [B,S,S] x [B,S,d].
    batched = [(b, s, d) for b in (4, 12) for s in (16, 64, 128, 256) for d in (16, 64)]
    for b, s, d in _sample(batched, budget, rng):
        mb = _Micro(rng)
        h = mb.input((b, s, d))
        for c in range(budget.copies):
            h = mb.b.matmul(a=h, b=mb.weight((b, d, s), fan_in=d))
            h = mb.b.matmul(a=h, b=mb.weight((b, s, d), fan_in=s))
        out.append(mb.model(f"micro/bmm/{b}x{s}x{d}", [h]))
    return out


def conv_models(budget: Budget, rng: np.random.Generator) -> List[Model]:
    """A 1x1 stem conv, then copies of one conv configuration fanning out
    from its output (distinct weights; each output a graph output, so
    onnxruntime reorders it out of NCHWc, as the backend prices)."""
    configs = []
    for c in (16, 32, 64, 128, 256, 512):
        for hw in (7, 14, 28, 56):
            if c * hw * hw > 800_000 or c * hw * hw < 3000:
                continue
            for kh, kw in ((1, 1), (3, 3), (5, 5), (1, 7), (7, 1)):
                for stride in (1, 2):
                    for out_mult, groups in ((1, 1), (2, 1), (0.5, 1), (1, 32), (1, c)):
                        o = int(c * out_mult)
                        if groups > 1 and (c % groups or o % groups):
                            continue
                        if (kh, kw) in ((1, 7), (7, 1)) and (stride > 1 or groups > 1):
                            continue
                        if stride == 2 and kh == 5:
                            continue
                        flops = 2.0 * o * (c // groups) * kh * kw * (hw // stride) ** 2
                        if flops > 4e8:
                            continue
                        configs.append((c, hw, o, kh, kw, stride, groups))
    out = []
    for i, (c, hw, o, kh, kw, stride, groups) in enumerate(_sample(configs, budget, rng)):
        mb = _Micro(rng)
        x = mb.input((1, c, hw, hw))
        stem = mb.b.conv2d(input=x, weight=mb.weight((c, c, 1, 1), fan_in=c),
                           activation="RELU")
        act = "RELU" if i % 2 else "NONE"
        copies = cold_copies(budget, 4.0 * o * (c // groups) * kh * kw,
                             2.0 * o * (c // groups) * kh * kw * (hw // stride) ** 2,
                             MAX_CONV_COPIES)
        outs = [mb.b.conv2d(input=stem, weight=mb.weight((o, c // groups, kh, kw),
                                                         fan_in=c // groups * kh * kw),
                            strides=(stride, stride), padding="SAME", activation=act)
                for _ in range(copies)]
        out.append(mb.model(f"micro/conv/c{c}_hw{hw}_o{o}_k{kh}x{kw}_s{stride}_g{groups}", outs))
    return out


def pool_models(budget: Budget, rng: np.random.Generator) -> List[Model]:
    """A 1x1 stem conv, then a chain of pools (stride 1: `copies` of them;
    stride 2: until the image is small)."""
    configs = [(kind, c, hw, k, s) for kind in ("maxpool", "avgpool")
               for c in (32, 64, 128, 256) for hw in (14, 28, 56, 112)
               for k, s in ((3, 1), (3, 2), (2, 2))
               if 3000 <= c * hw * hw <= 1_000_000]
    out = []
    for kind, c, hw, k, s in _sample(configs, budget, rng):
        mb = _Micro(rng)
        h = mb.b.conv2d(input=mb.input((1, c, hw, hw)), weight=mb.weight((c, c, 1, 1), fan_in=c),
                        activation="RELU")
        pool = mb.b.maxpool2d if kind == "maxpool" else mb.b.avgpool2d
        for _ in range(budget.copies):
            if h.shape[2] < 2 * k:
                break
            h = pool(input=h, kernel=(k, k), strides=(s, s), padding="SAME")
        out.append(mb.model(f"micro/{kind}/c{c}_hw{hw}_k{k}_s{s}", [h]))
    return out


ELEMENTWISE = ("relu", "sigmoid", "tanh", "add", "mul", "sub", "div", "scalar_mul",
               "broadcast_add")
SIZES = ((1, 64), (16, 256), (1, 64, 16, 16), (1, 128, 28, 28), (64, 1024), (1, 256, 56, 56),
         (1, 512, 56, 56))


def eltwise_models(budget: Budget, rng: np.random.Generator) -> List[Model]:
    """Chains of one element-wise op over a graph input (no conv before it:
    nothing fuses); binary ops read a distinct weight each."""
    configs = [(op, shape) for op in ELEMENTWISE for shape in SIZES]
    out = []
    for op, shape in _sample(configs, budget, rng):
        mb = _Micro(rng)
        h = mb.input(shape)
        for _ in range(budget.copies):
            if op in ("relu", "sigmoid", "tanh"):
                h = getattr(mb.b, op)(input=h)
            elif op == "scalar_mul":
                h = mb.b.scalar_mul(x=h, scale=mb.weight((1,), "near_one"))
            elif op == "broadcast_add":
                h = mb.b.broadcast_add(input=h, bias=mb.weight((shape[1],), "small"))
            else:
                w = mb.weight(shape, "near_one" if op in ("mul", "div") else "small")
                h = getattr(mb.b, op)(x=h, y=w)
        out.append(mb.model(f"micro/{op}/{'x'.join(map(str, shape))}", [h]))
    return out


def batchnorm_models(budget: Budget, rng: np.random.Generator) -> List[Model]:
    """Chains of unfused batch-norms over a graph input."""
    out = []
    for shape in _sample([s for s in SIZES if len(s) == 4], budget, rng):
        mb = _Micro(rng)
        h = mb.input(shape)
        c = shape[1]
        for _ in range(budget.copies):
            h = mb.b.batchnorm(input=h, scale=mb.weight((c,), "near_one"),
                               bias=mb.weight((c,), "small"), mean=mb.weight((c,), "small"),
                               var=mb.weight((c,), "var"))
        out.append(mb.model(f"micro/batchnorm/{'x'.join(map(str, shape))}", [h]))
    return out


def copy_models(budget: Budget, rng: np.random.Generator) -> List[Model]:
    """Concat chains that double a tensor; split + concat (swapped halves)
    chains; transposes fanning out from a graph input (distinct perms, so
    onnxruntime cannot merge them)."""
    out = []
    starts = [(1, 16, 8, 8), (1, 32, 28, 28), (1, 64, 56, 56), (4, 64), (64, 256), (64, 1024)]
    for shape in _sample(starts, budget, rng):
        mb = _Micro(rng)
        h = mb.input(shape)
        for _ in range(min(budget.copies, 4)):
            h = mb.b.concat(inputs=[h, h], axis=1)
        out.append(mb.model(f"micro/concat/{'x'.join(map(str, shape))}", [h]))
    for shape in _sample([s for s in SIZES if s[1] >= 64], budget, rng):
        mb = _Micro(rng)
        h = mb.input(shape)
        for i in range(budget.copies):
            part = shape[1] // 4 * (1 + i % 3)
            a, b = mb.b.split(input=h, axis=1, sizes=[part, shape[1] - part])
            h = mb.b.concat(inputs=[b, a], axis=1)
        out.append(mb.model(f"micro/split/{'x'.join(map(str, shape))}", [h]))
    perms4 = [(0, 2, 1, 3), (0, 1, 3, 2), (0, 3, 1, 2), (0, 2, 3, 1), (0, 3, 2, 1), (1, 0, 2, 3)]
    shapes4 = [(1, 16, 64, 64), (1, 64, 28, 28), (4, 64, 64, 16), (1, 256, 56, 56), (2, 12, 64, 64)]
    for shape in _sample(shapes4, budget, rng):
        mb = _Micro(rng)
        x = mb.input(shape)
        outs = [mb.b.transpose(input=x, perm=p) for p in perms4[:budget.copies]]
        out.append(mb.model(f"micro/transpose/{'x'.join(map(str, shape))}", outs))
    return out


def micro_models(budget: Budget, seed: int = 0) -> List[Model]:
    """Every micro-model of a budget (seeded samples of the grids)."""
    rng = np.random.default_rng(seed)
    out = []
    for family in (matmul_models, conv_models, pool_models, eltwise_models, batchnorm_models,
                   copy_models):
        out += family(budget, rng)
    return out


def zoo_models(names: Sequence[str], seed: int = 0, progress: Progress = None) -> List[Model]:
    """Training graphs: each zoo graph and its one-step greedy variant under
    analytic/cpu (the merged convs and matmuls an optimizer creates)."""
    from xflowrl import zoo  # pylint: disable=import-outside-toplevel
    from xflowrl.engine import CostModel, XferSet  # pylint: disable=import-outside-toplevel
    from xflowrl.env import EnvConfig, GraphEnv  # pylint: disable=import-outside-toplevel
    from xflowrl.executor.weights import random_inputs, random_weights  # pylint: disable=import-outside-toplevel
    from xflowrl.search.baselines import GREEDY_MAX_STEPS  # pylint: disable=import-outside-toplevel
    from xflowrl.search.greedy import greedy_search  # pylint: disable=import-outside-toplevel
    xfers = XferSet.from_name("default")
    out = []
    for name in names:
        original = zoo.get_graph(name)
        weights = random_weights(original, seed, gain=zoo.weight_gain(name))
        feeds = random_inputs(original, seed)
        env = GraphEnv(original, xfers, CostModel("analytic", profile="cpu"),
                       EnvConfig(max_steps=GREEDY_MAX_STEPS))
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


def design(graphs: Sequence[object], thresholds_mb: Mapping[str, float]
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


def hinge_column(graphs: Sequence[object], cls: str, threshold_mb: float) -> np.ndarray:
    """Per graph, the backend's summed MB above `threshold_mb` of class `cls`."""
    zero = {c: [0.0, 0.0, 0.0, 0.0, 0.0] for c in cost_fit.CLASSES}
    fixed = np.array([g.cost(_backend(zero)) for g in graphs])
    unit = dict(zero, **{cls: [0.0, 0.0, 0.0, 1.0, threshold_mb]})
    backend = _backend(unit)
    return np.array([g.cost(backend) for g in graphs]) - fixed


def fit_profile(graphs: Sequence[object], measured_ms: np.ndarray,
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
