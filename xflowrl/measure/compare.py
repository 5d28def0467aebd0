"""Interleaved end-to-end timing of several ONNX models (the same graph's variants).

Shared by `benchmarks/runtime_bench.py` and `experiments/baselines.py`: the
variants of one graph (the original and its optimized versions) are each
prepared once per runtime, then timed in rounds; every round runs all of
them in a fresh random order, so that load on a shared machine falls on all
variants alike. A round yields the median of its timed calls; `spread`
summarizes the round medians (median, quartiles, extremes).

Runtimes: "ort" (onnxruntime, `xflowrl.measure.ort_runtime`: one intra-op
thread) and "tf" (TensorFlow through onnx-tf, `xflowrl.measure.tf_runtime`).
Two clocks per call: wall time, and CPU time (`CPU_CLOCKS`): of the calling
thread for onnxruntime (with one intra-op thread the whole inference runs
there), of the whole process for TensorFlow (its threads' work, not its
latency). See docs/runtime.md for why the CPU clock matters on a shared box.
TensorFlow's runners are prepared and timed under its own graph-optimiser
defaults (`xflowrl.tracing.grappler_defaults`).
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, Dict, List

import numpy as np

RUNTIMES = ("ort", "tf")
CPU_CLOCKS: Dict[str, Callable[[], float]] = {"ort": time.thread_time,
                                              "tf": time.process_time}


def make_runner(runtime: str, model, feeds) -> Callable[[], object]:
    """One prepared inference of `model` (an `onnx.ModelProto`) on `feeds`
    in `runtime` ("ort" or "tf"); call it to run once."""
    if runtime == "ort":
        from xflowrl.measure import ort_runtime  # pylint: disable=import-outside-toplevel
        return ort_runtime.make_runner(model, feeds)
    if runtime == "tf":
        from xflowrl.measure import tf_runtime  # pylint: disable=import-outside-toplevel
        return tf_runtime.make_runner(model, feeds)
    raise ValueError(f"unknown runtime {runtime!r}; choose ort or tf")


def _optimiser_defaults(runtime: str) -> contextlib.AbstractContextManager:
    """TensorFlow's graph-optimiser defaults for its runners; nothing for onnxruntime."""
    if runtime == "tf":
        from xflowrl.tracing import grappler_defaults  # pylint: disable=import-outside-toplevel
        return grappler_defaults()
    return contextlib.nullcontext()


def interleaved_times(runners: Dict[str, Callable[[], object]], rounds: int, warmup: int,
                      repeats: int, rng: np.random.Generator,
                      cpu_clock: Callable[[], float]) -> Dict[str, Dict[str, List[float]]]:
    """Per runner and clock ("wall", "cpu"), the median (ms) of `repeats`
    timed calls in each round; the runners take turns in a fresh random order
    every round (after `warmup` untimed calls each)."""
    names = list(runners)
    out: Dict[str, Dict[str, List[float]]] = {name: {"wall": [], "cpu": []} for name in names}
    for _ in range(rounds):
        for i in rng.permutation(len(names)):
            run = runners[names[i]]
            for _ in range(warmup):
                run()
            wall, cpu = [], []
            for _ in range(repeats):
                start, start_cpu = time.perf_counter(), cpu_clock()
                run()
                cpu.append(1e3 * (cpu_clock() - start_cpu))
                wall.append(1e3 * (time.perf_counter() - start))
            out[names[i]]["wall"].append(float(np.median(wall)))
            out[names[i]]["cpu"].append(float(np.median(cpu)))
    return out


def spread(values: List[float]) -> dict:
    """Median, quartiles and extremes of round medians (ms), and the rounds."""
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return {"median_ms": float(med), "q1_ms": float(q1), "q3_ms": float(q3),
            "min_ms": float(min(values)), "max_ms": float(max(values)),
            "rounds_ms": [round(v, 4) for v in values]}


def time_models(models: Dict[str, object], feeds, runtimes: List[str], rounds: int,
                warmup: int, repeats: int,
                rng: np.random.Generator) -> Dict[str, Dict[str, dict]]:
    """Times ONNX `models` (by key) in each of `runtimes` ("ort", "tf"),
    interleaved (`interleaved_times`); each runtime's sessions are prepared
    together and dropped before the next runtime's. Returns, per key,
    `{"<runtime>/<clock>": spread(...)}` for the wall and CPU clocks."""
    measured: Dict[str, Dict[str, dict]] = {key: {} for key in models}
    for runtime in runtimes:
        with _optimiser_defaults(runtime):
            runners = {key: make_runner(runtime, model, feeds) for key, model in models.items()}
            times = interleaved_times(runners, rounds, warmup, repeats, rng,
                                      CPU_CLOCKS[runtime])
        for key, per_clock in times.items():
            for clock, values in per_clock.items():
                measured[key][f"{runtime}/{clock}"] = spread(values)
        del runners
    return measured
