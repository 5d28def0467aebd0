"""Micro-models: tiny engine graphs, each a few or many copies of one op
configuration, over generic grids of shapes (docs/runtime.md, "A cost
model fitted from micro-benchmarks").

What `xflowrl.measure.calibration` times to fit the fitted cost backend:
matmuls of many M/K/N (including the wide merged shapes rewrites create: N
a multiple of K), batched matmuls, convs of many sizes, strides, groups and
kernels (enlarged 3x3/5x5 included), pools, element-wise chains,
batch-norms, concats, splits and transposes. Each model is a chain (one
input, one output) where the op keeps its shape, else a fan-out from one
tensor; copies have distinct weights, so onnxruntime merges nothing. Matmul
and conv models take enough copies to stream twice the last-level cache in
weights (`cold_copies`), as a real graph does. The grids are generic: no
configuration is taken from a graph the calibration is checked on.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, NamedTuple, Tuple

import numpy as np

from xflowrl.engine import Graph


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much `xflowrl.measure.calibration.calibrate` measures.

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


class Model(NamedTuple):
    """One timed graph: a micro-model or a training graph."""
    name: str               # "micro/<family>/<config>" or "<zoo graph>/<variant>"
    graph: Graph            # engine Graph
    weights: Dict[str, np.ndarray]
    feeds: Dict[str, np.ndarray]


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
