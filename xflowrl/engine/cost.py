"""Cost models: the estimated runtime of a graph, summed over its ops.

Four backends share one interface (docs/engine.md):

- ``analytic``: a deterministic roofline (FLOPs, bytes moved, kernel launches)
  over a device profile (``cpu``, ``v100``, ``h100``); the default in tests.
- ``onednn``: each op configuration timed once on this CPU with oneDNN, on
  one pinned thread (thread CPU time; the median of three rounds, each the
  10th percentile of its share of `repeats` batches after warm-up);
  memoized, and cached on disk when ``cache_path`` is given. With
  ``reference=True`` (or ``cache_path="reference"``) the shipped table of
  every zoo graph's configurations (`REFERENCE_PATH`) is loaded read-only and
  only configurations missing from it are measured, so that runs reproduce.
- ``cudnn``: cuDNN/cuBLAS on GPU 0 (median of `repeats` runs, CUDA events),
  where built and available; `cudnn_plan` shows what it runs for an op (in every build).
- ``fitted``: what onnxruntime (one thread) does on this machine: per op
  class a linear model of FLOPs and bytes fitted to end-to-end timings of
  micro-benchmarks and training graphs (coefficients in
  ``xflowrl/engine/data/fitted_<profile>.json``, written by
  ``xflowrl.measure.calibration.calibrate`` through
  ``experiments/fit_cost_model.py``), and onnxruntime's fusions
  in graph context (a batch-norm, bias, residual add or activation after a
  conv costs nothing). The only backend whose graph cost is not a plain sum
  of context-free op costs; ``Graph.op_costs`` reports the in-context costs
  and every consumer (graph cost, search, candidate costs) uses them.
- ``learned``: a GPU card's end-to-end CUDA-graph time in PyTorch, per
  precision: per op class a linear model of kernels, FLOPs and bytes
  fitted to whole-graph timings on that card (coefficients in
  ``xflowrl/engine/data/learned_<card>.json``, fitted by
  ``experiments/fit_learned_cost.py`` / `xflowrl.measure.learned_fit`
  from the timings in ``data/gpu_times/<card>.jsonl``). Named
  ``learned/<card>[:<precision>]`` (`parse_learned_profile`); batch enters
  through the graph's shapes. Context free and computed natively: as fast
  as the analytic backend.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence, Set

from xflowrl import _engine
from xflowrl.ops import ACTIVATIONS, PADDINGS

BACKENDS = ("analytic", "onednn", "cudnn", "fitted", "learned")
# The cost model where none is named: the analytic backend on the cpu
# profile. Entry points that name a cost model as one string write it
# "backend/profile" (`DEFAULT_COST_SPEC`).
DEFAULT_BACKEND = "analytic"
DEFAULT_PROFILE = "cpu"
DEFAULT_COST_SPEC = f"{DEFAULT_BACKEND}/{DEFAULT_PROFILE}"
# The GPU-like analytic profile, the stand-in for the thesis' GPU: the
# default of the model-based agent's runs and of the generalist policy.
GPU_PROFILE = "v100"
GPU_COST_SPEC = f"{DEFAULT_BACKEND}/{GPU_PROFILE}"
# The learned card where a spec names none ("learned", or an analytic
# profile name, cpu or v100, that an entry point's --profile defaults to).
GPU_PROFILE_LEARNED_DEFAULT = "h200"
# Fitted profiles ship as package data beside the onednn reference table.
PROFILES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
FITTED_CLASSES = ("conv", "matmul", "pool", "eltwise", "batchnorm", "concat", "copy")
# The learned backend: the analytic profile that prices ops of no class
# (opaque ones), and the precision where a spec names none.
LEARNED_FALLBACK = "h100"
LEARNED_DEFAULT_DTYPE = "float32"
_DTYPE_ALIASES = {"float32": "float32", "fp32": "float32", "f32": "float32",
                  "bfloat16": "bfloat16", "bf16": "bfloat16",
                  "float16": "float16", "fp16": "float16", "half": "float16"}


def parse_learned_profile(profile: str) -> tuple:
    """(card or .json path, precision) of a learned profile "<card>[:<precision>]":
    "h200" -> ("h200", "float32"), "h200:bf16" -> ("h200", "bfloat16").

    Raises:
      ValueError: an unknown precision.
    """
    card, _, dtype = profile.partition(":")
    dtype = dtype or LEARNED_DEFAULT_DTYPE
    if dtype.lower() not in _DTYPE_ALIASES:
        raise ValueError(f"unknown precision {dtype!r} in learned profile {profile!r}; "
                         f"choose from {sorted(set(_DTYPE_ALIASES.values()))}")
    return card, _DTYPE_ALIASES[dtype.lower()]


def learned_profile_path(card: str) -> str:
    """The coefficient file of a learned card: a name (``h200`` ->
    ``xflowrl/engine/data/learned_h200.json``) or a path to a .json file."""
    if card.endswith(".json"):
        return card
    return os.path.join(PROFILES_DIR, f"learned_{card}.json")


def learned_cards() -> List[str]:
    """The cards with a shipped learned profile."""
    return sorted(f[len("learned_"):-5] for f in os.listdir(PROFILES_DIR)
                  if f.startswith("learned_") and f.endswith(".json"))


def load_learned_coefficients(profile: str) -> Dict[str, List[float]]:
    """Per op class, [ms per kernel, ms per GFLOP, ms per MB] of a learned
    profile "<card>[:<precision>]".

    Raises:
      ValueError: no such card, or no coefficients for that precision.
    """
    card, dtype = parse_learned_profile(profile)
    path = learned_profile_path(card)
    if not os.path.exists(path):
        raise ValueError(f"no learned cost profile for card {card!r} ({path}); shipped: "
                         f"{learned_cards()}; time one with `xflowrl calibrate "
                         "--device=cuda` (xflowrl.measure.gpu_calibration)")
    with open(path) as f:
        data = json.load(f)
    dtypes = data.get("dtypes", {})
    if dtype not in dtypes:
        raise ValueError(f"learned profile {card!r} has no {dtype} coefficients "
                         f"(it has: {sorted(dtypes)}); time that precision with "
                         "`xflowrl calibrate --device=cuda`")
    return {cls: [float(v) for v in row]
            for cls, row in dtypes[dtype]["coefficients"].items()}


def fitted_profile_path(profile: str) -> str:
    """The coefficient file of a fitted profile: a name (``cpu`` ->
    ``xflowrl/engine/data/fitted_cpu.json``) or a path to a .json file."""
    if profile.endswith(".json"):
        return profile
    return os.path.join(PROFILES_DIR, f"fitted_{profile}.json")


def load_fitted_coefficients(profile: str) -> Dict[str, List[float]]:
    """Per op class, [ms, ms per GFLOP, ms per MB] of a fitted profile.

    Raises:
      ValueError: no such profile, or a file without a "coefficients" table.
    """
    path = fitted_profile_path(profile)
    if not os.path.exists(path):
        raise ValueError(f"no fitted cost profile {profile!r} ({path}); fit one with "
                         "experiments/fit_cost_model.py (xflowrl.measure.calibration)")
    with open(path) as f:
        data = json.load(f)
    if "coefficients" not in data:
        raise ValueError(f"{path}: no 'coefficients' table")
    return {cls: [float(v) for v in row] for cls, row in data["coefficients"].items()}

# The onednn times of every op configuration of the zoo graphs, measured on
# the project's machine (provenance in the .json beside it; regenerate with
# `python benchmarks/cost_repro_bench.py --write_reference`). Read-only.
REFERENCE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                              "onednn_reference.tsv")
# Default `repeats` of the measured backends.
_ONEDNN_REPEATS = 41
_CUDNN_REPEATS = 21
# `cache_path` value that means "the reference table" (e.g. --cost_cache=reference).
REFERENCE = "reference"


def cache_keys(path: str) -> Set[str]:
    """The configuration keys of a cost cache file (empty if it is missing)."""
    keys = set()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    keys.add(line.rstrip("\n").rsplit("\t", 1)[0])
    return keys


class CostModel:
    """One cost backend; op measurements are memoized for its lifetime."""

    def __init__(self, backend: str = DEFAULT_BACKEND, *, profile: str = DEFAULT_PROFILE,
                 cache_path: Optional[str] = None, warmup: int = 5,
                 repeats: Optional[int] = None, reference: bool = False,
                 graph_timing: Optional[bool] = None):
        """Creates a backend.

        Args:
          backend: one of BACKENDS.
          profile: device profile of the analytic backend; for the fitted
            backend the name of a coefficient file (`fitted_profile_path`);
            for the learned backend "<card>[:<precision>]"
            (`parse_learned_profile`). `backend` may also be a whole spec,
            "learned/h200:bf16", which then wins over `profile`.
          cache_path: measured backends: a text file of cached timings, read
            and appended to. For onednn, REFERENCE ("reference") means
            `reference=True` and no cache file.
          warmup: measured backends: untimed runs before timing (at least).
          repeats: measured backends: timed samples (onednn: batches of at
            least 1 ms, split over three rounds, default 41; cudnn: replays
            of a CUDA graph of 20 runs, or single runs without graph timing,
            the median is kept, default 21).
          reference: onednn only: load `REFERENCE_PATH` read-only (it wins
            over `cache_path`); only configurations missing from it are
            measured (counted by `num_new_measurements`).
          graph_timing: cudnn only (None: True there): time an op's runs
            replayed from a CUDA graph, the GPU's time without the host's
            launches; False: one run per pair of events, launch included
            (docs/engine.md, "Measured on a GPU"). A cache file holds the
            timings of one choice.

        Raises:
          ValueError: unknown backend or profile, a backend not built here,
            or a reference for a backend other than onednn.
        """
        if "/" in backend:  # "learned/h200:bf16", "analytic/v100": a whole spec
            backend, _, profile = backend.partition("/")
        if backend == "onednn" and cache_path == REFERENCE:
            cache_path, reference = None, True
        if reference and backend != "onednn":
            raise ValueError(f"the reference cost table is for onednn, not {backend!r}")
        if graph_timing is not None and backend != "cudnn":
            raise ValueError(f"graph timing is for the cudnn backend, not {backend!r}")
        if backend == "analytic":
            handle = _engine.analytic_backend(profile)
        elif backend == "onednn":
            handle = _engine.onednn_backend(
                cache_path or "", warmup, _ONEDNN_REPEATS if repeats is None else repeats,
                REFERENCE_PATH if reference else "")
        elif backend == "fitted":
            name = os.path.basename(profile)[:-5] if profile.endswith(".json") else profile
            handle = _engine.fitted_backend(name, load_fitted_coefficients(profile))
        elif backend == "learned":
            # The analytic profiles entry points default to name no card.
            card, dtype = parse_learned_profile(
                GPU_PROFILE_LEARNED_DEFAULT if profile in (DEFAULT_PROFILE, GPU_PROFILE)
                else profile)
            name = os.path.basename(card)[:-5] if card.endswith(".json") else card
            suffix = "" if dtype == LEARNED_DEFAULT_DTYPE else f":{dtype}"
            handle = _engine.learned_backend(
                name + suffix, load_learned_coefficients(f"{card}:{dtype}"), LEARNED_FALLBACK)
        elif backend == "cudnn":
            handle = _engine.cudnn_backend(
                cache_path or "", warmup, _CUDNN_REPEATS if repeats is None else repeats,
                graph_timing is not False)
        else:
            raise ValueError(f"unknown cost backend {backend!r}; choose from {BACKENDS}")
        self.backend = backend
        self.handle = handle
        self.reference = bool(reference)
        loaded = set()
        if backend in ("onednn", "cudnn"):
            loaded = cache_keys(cache_path) if cache_path else set()
            if reference:
                loaded |= cache_keys(REFERENCE_PATH)
        self._num_loaded = len(loaded)

    @classmethod
    def from_handle(cls, backend: str, handle) -> "CostModel":
        """A `CostModel` around a native backend handle built elsewhere (e.g.
        the unit-coefficient backends of `xflowrl.measure.learned_fit`)."""
        model = cls.__new__(cls)
        model.backend = backend
        model.handle = handle
        model.reference = False
        model._num_loaded = 0
        return model

    @property
    def num_new_measurements(self) -> int:
        """Configurations this model measured itself (not loaded from a file)."""
        return self.handle.num_measured - self._num_loaded

    @property
    def name(self) -> str:
        return self.handle.name

    def __repr__(self) -> str:
        return f"CostModel({self.name!r})"


def cost_model_from_spec(spec: str, cost_cache: Optional[str] = None) -> CostModel:
    """A cost model named `backend` or `backend/profile`.

    Args:
      spec: e.g. "analytic", "analytic/cpu", "fitted/cpu", "onednn", "cudnn",
        "learned/h200", "learned/h200:bf16".
      cost_cache: measured backends' cache file ("" or None: none); the
        analytic and fitted backends ignore it.

    Returns:
      The `CostModel` (the backend's default profile where none is named).
    """
    backend, _, profile = spec.partition("/")
    return CostModel(backend, profile=profile or DEFAULT_PROFILE, cache_path=cost_cache or None)


def available_backends() -> tuple:
    """The backends this build can construct (a GPU is checked at creation)."""
    names = ["analytic", "fitted", "learned"]
    if _engine.onednn_built():
        names.append("onednn")
    if _engine.cudnn_built():
        names.append("cudnn")
    return tuple(names)


def _native_op(op_type: str, input_shapes, params):
    raw = dict(params)
    for key, names in (("padding", PADDINGS), ("activation", ACTIVATIONS)):
        if isinstance(raw.get(key), str):
            raw[key] = names.index(raw[key].upper())
    type_id = _engine.op_type_id(op_type)
    if type_id < 0:
        raise ValueError(f"unknown op type {op_type!r}")
    return type_id, raw, [tuple(s) for s in input_shapes]


def fitted_features(op_type: str, input_shapes: Sequence[Sequence[int]],
                    weight_side: bool = False, **params):
    """(op class, FLOPs, bytes) that the fitted backend prices for one op;
    class "" for ops it does not fit. Arguments as for `cudnn_plan`."""
    type_id, raw, shapes = _native_op(op_type, input_shapes, params)
    return _engine.fitted_features(type_id, raw, shapes, weight_side)


def cudnn_plan(op_type: str, input_shapes: Sequence[Sequence[int]], **params) -> str:
    """Describes what the cudnn backend runs for one op; works in every build.

    Args:
      op_type: an engine op name ("conv2d", "matmul", "add", ...).
      input_shapes: the shapes of the op's inputs (outputs are inferred).
      **params: engine parameters (stride_h, padding, activation, axis, ...);
        padding and activation may be given by name ("SAME", "RELU").

    Returns:
      One line: the cuDNN/cuBLAS call and descriptor dims, GEMM sizes or copy
      geometry, and any approximation (see docs/engine.md).

    Raises:
      ValueError: unknown op, bad shapes, or an op the backend never measures.
    """
    return _engine.cudnn_plan(*_native_op(op_type, input_shapes, params))


def cudnn_check(op_type: str, input_shapes: Sequence[Sequence[int]], **params) -> None:
    """Builds the op's cuDNN descriptors and checks cuDNN's output dims.

    Needs the cudnn build but no GPU (cuDNN descriptors are host objects).
    Arguments as for `cudnn_plan`.

    Raises:
      ValueError: not built, or cuDNN rejects a descriptor or disagrees with
        the engine's output shape.
    """
    _engine.cudnn_check(*_native_op(op_type, input_shapes, params))
