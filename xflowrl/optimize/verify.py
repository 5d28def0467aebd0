"""Checks before an optimised model is handed over: same outputs, and faster.

`same_outputs` runs the original and the optimised model in onnxruntime on
the same inputs and compares every output (`np.allclose` with `rtol`, `atol`
scaled by the output's magnitude, NaN equal to NaN). `faster` times both,
interleaved (`xflowrl.measure.compare.time_models`: rounds in a fresh random
order, the median of several calls per round, in CPU time of the inference
thread and in wall time), and calls the optimised model faster only when its
slowest round beats the original's fastest one in CPU time: a gain inside the
measured spread is no gain.

Inputs: the user's (an .npz file, by input name) or random ones
(`random_feeds`): floats uniform in [-1, 1); integers in {0, 1} (safe as
token ids for any vocabulary and as attention masks); booleans random.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np
import onnx
from onnx import helper

from xflowrl.optimize.model_io import BadInput


def input_shape(info: onnx.ValueInfoProto, fixed: Mapping[str, tuple]) -> tuple:
    """An input's shape: `fixed`'s where given, dynamic dimensions as 1."""
    if info.name in fixed:
        return tuple(fixed[info.name])
    return tuple(d.dim_value if d.HasField("dim_value") else 1
                 for d in info.type.tensor_type.shape.dim)


def graph_inputs(proto: onnx.ModelProto) -> List[onnx.ValueInfoProto]:
    """The model's run-time inputs (declared inputs that are not initializers)."""
    initializers = {t.name for t in proto.graph.initializer}
    return [i for i in proto.graph.input if i.name not in initializers]


def random_feeds(proto: onnx.ModelProto, seed: int = 0,
                 fixed: Optional[Mapping[str, tuple]] = None) -> Dict[str, np.ndarray]:
    """Random values for every run-time input of `proto` (see module
    docstring); dynamic dimensions take `fixed`'s shape, else 1."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in graph_inputs(proto):
        shape = input_shape(info, fixed or {})
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type))
        if dtype.kind == "f":
            value = rng.uniform(-1, 1, shape).astype(dtype)
        elif dtype.kind in "iu":
            value = rng.integers(0, 2, shape).astype(dtype)
        elif dtype.kind == "b":
            value = rng.integers(0, 2, shape).astype(bool)
        else:
            raise BadInput(f"input {info.name!r} has element type {dtype}; give its values "
                           f"with --inputs=FILE.npz")
        feeds[info.name] = value
    return feeds


def load_feeds(path: str, proto: onnx.ModelProto) -> Dict[str, np.ndarray]:
    """Inputs from an .npz file, one array per run-time input of `proto`.

    Raises:
      BadInput: unreadable, or an input missing from the file.
    """
    try:
        with np.load(path) as data:
            feeds = {k: data[k] for k in data.files}
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: cannot read inputs (an .npz file by input name): {e}") from None
    missing = [i.name for i in graph_inputs(proto) if i.name not in feeds]
    if missing:
        raise BadInput(f"{path}: no values for the model's inputs {missing}")
    return {i.name: feeds[i.name] for i in graph_inputs(proto)}


@dataclasses.dataclass
class OutputCheck:
    """How the optimised model's outputs compare with the original's.

    Attributes:
      same: every output within tolerance.
      max_abs_error, max_rel_error: over all outputs.
      mismatched: outputs outside tolerance.
      rtol, atol: the tolerances used.
    """
    same: bool
    max_abs_error: float
    max_rel_error: float
    mismatched: List[str]
    rtol: float
    atol: float


def same_outputs(original: onnx.ModelProto, optimized: onnx.ModelProto,
                 feeds: Mapping[str, np.ndarray], rtol: float = 1e-4,
                 atol: float = 1e-5) -> OutputCheck:
    """Runs both models in onnxruntime on `feeds` and compares outputs by
    name; `atol` is relative to each output's largest magnitude (at least 1)."""
    from xflowrl.measure.ort_runtime import run_onnx  # pylint: disable=import-outside-toplevel
    expected, actual = run_onnx(original, feeds), run_onnx(optimized, feeds)
    if set(expected) != set(actual):
        return OutputCheck(False, float("inf"), float("inf"),
                           sorted(set(expected) ^ set(actual)), rtol, atol)
    worst_abs = worst_rel = 0.0
    mismatched = []
    for name, want in expected.items():
        got = actual[name]
        if want.shape != got.shape or want.dtype != got.dtype:
            mismatched.append(name)
            worst_abs = worst_rel = float("inf")
            continue
        abs_error, rel_error, same = compare_arrays(want, got, rtol, atol)
        worst_abs, worst_rel = max(worst_abs, abs_error), max(worst_rel, rel_error)
        if not same:
            mismatched.append(name)
    return OutputCheck(not mismatched, worst_abs, worst_rel, mismatched, rtol, atol)


def compare_arrays(want: np.ndarray, got: np.ndarray, rtol: float,
                   atol: float) -> Tuple[float, float, bool]:
    """(the worst absolute error, the worst relative error, whether all
    agree) of `got` against `want`, of one shape, in float64: an element
    agrees where both are NaN or it is within `rtol` and `atol` times the
    output's scale (its largest magnitude, at least 1)."""
    a, b = np.asarray(want, np.float64), np.asarray(got, np.float64)
    scale = max(1.0, float(np.nanmax(np.abs(a), initial=0.0)))
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.where(both_nan, 0.0, np.abs(a - b))
    rel = diff / np.maximum(np.abs(a), 1e-30)
    return (float(np.nanmax(diff, initial=0.0)),
            float(np.nanmax(np.where(diff == 0, 0.0, rel), initial=0.0)),
            bool(np.all(both_nan | np.isclose(a, b, rtol=rtol, atol=atol * scale))))


@dataclasses.dataclass
class SpeedCheck:
    """Interleaved timing of the original and the optimised model.

    Attributes:
      runtime: where they ran ("ort": onnxruntime, one thread).
      original, optimized: `xflowrl.measure.compare.spread` of round medians
        (ms) of the calling thread's CPU time: with one intra-op thread the
        whole inference runs there, so this is its compute time without the
        time spent waiting for a core on a busy machine.
      original_wall, optimized_wall: the same for wall-clock time.
      faster: the optimised model's slowest round beat the original's
        fastest (CPU time).
      change: median change of the optimised model, in % of the original (CPU time).
    """
    runtime: str
    original: dict
    optimized: dict
    faster: bool
    change: float
    original_wall: Optional[dict] = None
    optimized_wall: Optional[dict] = None


def faster(original: onnx.ModelProto, optimized: onnx.ModelProto,
           feeds: Mapping[str, np.ndarray], rounds: int = 7, repeats: int = 5,
           warmup: int = 1, seed: int = 0, runtime: str = "ort") -> SpeedCheck:
    """Times both models interleaved (see module docstring)."""
    from xflowrl.measure.compare import time_models  # pylint: disable=import-outside-toplevel
    times = time_models({"original": original, "optimized": optimized}, feeds, [runtime],
                        rounds, warmup, repeats, np.random.default_rng(seed))
    before, after = times["original"][f"{runtime}/cpu"], times["optimized"][f"{runtime}/cpu"]
    return SpeedCheck(runtime, before, after, after["max_ms"] < before["min_ms"],
                      100.0 * (after["median_ms"] / before["median_ms"] - 1.0),
                      times["original"][f"{runtime}/wall"], times["optimized"][f"{runtime}/wall"])
