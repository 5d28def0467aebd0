"""Checks before an optimised model is handed over, on the target device:
same outputs, and faster, in PyTorch (`xflowrl.measure.torch_runtime`).

The GPU counterpart of `verify` (onnxruntime on the CPU). Both engine
graphs, the original and the optimised, run with the model's own weights
and the same inputs:

- **Outputs** (`same_outputs`): in float32 (TF32 off) the optimised
  graph's outputs must match the original's within `rtol` (and `atol`
  relative to each output's largest magnitude), as in `verify`. In a
  reduced precision (bfloat16, float16) both graphs also run in that
  precision and each is compared with the original's float32 outputs: the
  optimised graph's error may be at most `LOW_PRECISION_SLACK` times the
  original's own plus the precision's rounding step (`LOW_PRECISION_FLOOR`),
  so that a rewrite exact in float32 but unstable in the lower precision
  (an overflow in float16, say) is refused too. Non-finite outputs of the
  optimised graph where the original's are finite are a mismatch.
- **Speed** (`faster`): both programs timed interleaved
  (`torch_runtime.interleaved_times`: rounds in a fresh random order, the
  median of several runs per round) in the chosen precision and mode (CUDA
  graph or eager); the optimised graph is faster only when its slowest
  round beats the original's fastest one, as in `verify.faster`.

`TorchRuntime` builds the programs; a test can hand `optimize_file` another
object with the same `program` method and attributes (a stand-in that
reports chosen times, say).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from xflowrl.optimize import verify
from xflowrl.optimize.verify import SpeedCheck

# A reduced-precision run of the optimised graph may be off the float32
# original by this many times the original's own reduced-precision error...
LOW_PRECISION_SLACK = 4.0
# ... plus about one rounding step of the precision (relative to the output's
# largest magnitude): bfloat16 keeps 8 significant bits, float16 11.
LOW_PRECISION_FLOOR = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


class TorchRuntime:
    """Builds `torch_runtime.TorchProgram`s on one device (module docstring).

    Attributes:
      device: the `torch_runtime` device, "cuda" or "cpu" (the stand-in,
        which sets PyTorch to one intra-op thread).
      mode: the timing mode that decides: "graph" (CUDA-graph replay, the
        default on a GPU) or "eager" (the only one on the CPU).
      name: what decided, in words, for the report.
    """

    def __init__(self, device: str = "cuda", mode: Optional[str] = None):
        from xflowrl.measure import torch_runtime  # pylint: disable=import-outside-toplevel
        if device not in torch_runtime.MODES:
            raise ValueError(f"device must be one of {tuple(torch_runtime.MODES)}, "
                             f"got {device!r}")
        modes = torch_runtime.MODES[device]
        mode = mode or modes[0]
        if mode not in modes:
            raise ValueError(f"timing mode {mode!r} is not available on {device}; "
                             f"choose from {modes}")
        self.device, self.mode = device, mode
        if device == "cpu":
            # The stand-in times one thread: on a shared machine PyTorch's
            # intra-op threads wait for cores and spread the rounds widely.
            import torch  # pylint: disable=import-outside-toplevel
            torch.set_num_threads(1)
        env = torch_runtime.environment(device)
        how = {"graph": "CUDA-graph replay", "eager": "eager"}[mode]
        where = env.get("card", "GPU") if device == "cuda" else "CPU (the GPU path's stand-in)"
        self.name = f"PyTorch {env['torch']} on {where}, {how}"
        self._env = env

    def environment(self) -> Dict[str, Any]:
        """The PyTorch version, device and card (`torch_runtime.environment`)."""
        return dict(self._env)

    def program(self, graph, feeds: Mapping[str, np.ndarray], dtype: str):
        """`graph` bound to `feeds` in `dtype` on this device."""
        from xflowrl.measure import torch_runtime  # pylint: disable=import-outside-toplevel
        return torch_runtime.TorchProgram(graph, feeds, dtype=dtype, device=self.device)


def missing_ops(graph) -> List[str]:
    """The ops of `graph` the PyTorch runtime has no form for (empty: it runs)."""
    from xflowrl.measure import torch_runtime  # pylint: disable=import-outside-toplevel
    return torch_runtime.unsupported_ops(graph)


@dataclasses.dataclass
class DeviceOutputCheck:
    """How the optimised graph's outputs compare with the original's on the device.

    Attributes:
      same: float32 within tolerance and, in a reduced precision, its error
        within the bound of the module docstring.
      max_abs_error, max_rel_error: float32, optimised against original.
      mismatched: float32 outputs (by index) outside tolerance.
      rtol, atol: the float32 tolerances.
      dtype: the precision timed.
      error_original, error_optimized: in `dtype` (not float32), each
        graph's largest error against the original's float32 outputs,
        relative to the output's magnitude (None in float32).
      bound: the largest `error_optimized` accepted (None in float32).
      reason: why not `same`, or "".
    """
    same: bool
    max_abs_error: float
    max_rel_error: float
    mismatched: List[int]
    rtol: float
    atol: float
    dtype: str
    error_original: Optional[float] = None
    error_optimized: Optional[float] = None
    bound: Optional[float] = None
    reason: str = ""


class OriginalNotFinite(ValueError):
    """The original graph's outputs are not finite in the asked precision."""


def _compare(want: List[np.ndarray], got: List[np.ndarray], rtol: float, atol: float):
    worst_abs = worst_rel = 0.0
    mismatched = []
    for k, (a, b) in enumerate(zip(want, got)):
        if a.shape != b.shape:
            mismatched.append(k)
            worst_abs = worst_rel = float("inf")
            continue
        abs_error, rel_error, same = verify.compare_arrays(a, b, rtol, atol)
        worst_abs, worst_rel = max(worst_abs, abs_error), max(worst_rel, rel_error)
        if not same:
            mismatched.append(k)
    return worst_abs, worst_rel, mismatched


def _error(got: List[np.ndarray], reference: List[np.ndarray]) -> float:
    """`torch_runtime.relative_error`, with non-finite outputs as infinity."""
    from xflowrl.measure import torch_runtime  # pylint: disable=import-outside-toplevel
    try:
        return torch_runtime.relative_error(got, reference)
    except ValueError:
        return float("inf")


def same_outputs(runtime, original, optimized, feeds: Mapping[str, np.ndarray], dtype: str,
                 rtol: float = 1e-4, atol: float = 1e-5,
                 keep: Optional[Dict[str, Any]] = None) -> DeviceOutputCheck:
    """Runs both engine graphs on the runtime's device and compares their
    outputs (module docstring). `keep`, where given, receives the programs
    in `dtype` under "original" and "optimized" (for the timing).

    Raises:
      OriginalNotFinite: the original's outputs are not finite in `dtype`
        (or in float32): nothing to compare against.
    """
    programs = {"original": runtime.program(original, feeds, "float32")}
    want = programs["original"].outputs()
    if not all(np.all(np.isfinite(w)) for w in want):
        raise OriginalNotFinite("the original model's float32 outputs on the device are not "
                                "finite with these inputs")
    programs["optimized"] = runtime.program(optimized, feeds, "float32")
    got = programs["optimized"].outputs()
    worst_abs, worst_rel, mismatched = _compare(want, got, rtol, atol)
    check = DeviceOutputCheck(not mismatched and len(want) == len(got), worst_abs, worst_rel,
                              mismatched, rtol, atol, dtype)
    if len(want) != len(got):
        check.reason = f"{len(got)} outputs against the original's {len(want)}"
    elif mismatched:
        check.reason = f"float32 outputs {mismatched} differ"
    if dtype == "float32":
        if keep is not None:
            keep.update(programs)
        return check
    programs = {"original": runtime.program(original, feeds, dtype)}
    low_original = _error(programs["original"].outputs(), want)
    if not np.isfinite(low_original):
        raise OriginalNotFinite(f"the original model's outputs are not finite in {dtype} "
                                f"with these inputs")
    programs["optimized"] = runtime.program(optimized, feeds, dtype)
    low_optimized = _error(programs["optimized"].outputs(), want)
    if keep is not None:
        keep.update(programs)
    bound = LOW_PRECISION_SLACK * low_original + LOW_PRECISION_FLOOR[dtype]
    check.error_original, check.error_optimized, check.bound = (low_original, low_optimized,
                                                                bound)
    if not low_optimized <= bound:
        check.same = False
        check.reason = (check.reason + "; " if check.reason else "") + (
            f"in {dtype} its error against the float32 original is {low_optimized:.3g}, above "
            f"{bound:.3g} ({LOW_PRECISION_SLACK:g} x the original's {low_original:.3g} + "
            f"{LOW_PRECISION_FLOOR[dtype]:.3g})")
    return check


def faster(runtime, original_program, optimized_program, rounds: int = 7, repeats: int = 20,
           warmup: int = 3, seed: int = 0) -> SpeedCheck:
    """Times two programs of the runtime interleaved (module docstring); a
    `verify.SpeedCheck` whose spreads are of round medians in ms of device
    time (CUDA events on a GPU, the wall clock on the CPU stand-in)."""
    from xflowrl.measure import torch_runtime  # pylint: disable=import-outside-toplevel
    from xflowrl.measure.compare import spread  # pylint: disable=import-outside-toplevel
    times = torch_runtime.interleaved_times(
        {"original": original_program, "optimized": optimized_program}, runtime.mode, rounds,
        warmup, repeats, np.random.default_rng(seed))
    before, after = spread(times["original"]), spread(times["optimized"])
    return SpeedCheck(f"torch/{runtime.mode}", before, after,
                      after["max_ms"] < before["min_ms"],
                      100.0 * (after["median_ms"] / before["median_ms"] - 1.0))


def repeats_for(program, mode: str, target_ms: float = 200.0, most: int = 20) -> int:
    """Timed runs per round: about `target_ms` of work, 1 to `most` runs."""
    once = program.time(mode, warmup=1, repeats=1)["median_ms"]
    return max(1, min(most, int(target_ms / max(once, 1e-3))))
