"""Inference time and memory of a graph run in TensorFlow through onnx-tf.

The graph is exported to ONNX (`xflowrl.onnx_io.to_onnx`: weight-side ops
such as folded batch-norms are precomputed), prepared with
`onnx_tf.backend.prepare` and called through the prepared module's
`tf.function` (graph mode, TensorFlow's default thread pools: one intra-op
thread per core), outputs copied back to numpy.

Time: `warmup` untimed calls (the first traces the function), then the
median wall time (`time.perf_counter`) of `repeats` calls, each including
the copy of the outputs to numpy.

`interleaved_graph_times` times several graphs of one model in
interleaved rounds (experiments/train_mb.py's initial, controller's and
greedy's graphs).

Memory: TensorFlow's own CPU allocator statistics. TensorFlow reports no
statistics for its default CPU allocator; they need
`TF_CPU_ALLOCATOR_USE_BFC=true` before TensorFlow is first imported.
Importing this module changes nothing: every function here that imports
TensorFlow calls `enable_memory_stats()` first, which sets the variable (if
unset) only while TensorFlow is not imported yet. A program that imports
TensorFlow before its first measurement calls `enable_memory_stats()`
itself, before that import; otherwise the memory fields are None.
`get_memory_info("CPU:0")["current"]` is read before `prepare` (after a
garbage collection: what earlier work still holds is not counted) and again
after the warm-up; the difference is `resident_bytes`: the weights (onnx-tf
holds the initializers as constants allocated by the same allocator) and the
feeds. Then `reset_memory_stats("CPU:0")`; after the timed calls the
allocator's peak minus the pre-`prepare` level is `peak_bytes`: the most
bytes this model held at once during an inference: weights, every
activation and temporary buffer TensorFlow allocates, feeds and outputs,
rounded up to the BFC allocator's bins. It excludes memory that kernels
allocate outside TensorFlow's allocator (oneDNN's internal scratchpads,
Eigen thread-pool buffers), Python objects and the program itself. Without
allocator statistics the memory fields are None.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from xflowrl.engine import CostModel, Graph

BFC_ENV = "TF_CPU_ALLOCATOR_USE_BFC"


def enable_memory_stats() -> bool:
    """Asks for TensorFlow's BFC CPU allocator, which keeps statistics.

    Sets `TF_CPU_ALLOCATOR_USE_BFC=true` unless it is set already or
    TensorFlow is imported already (then the choice is made and a change
    would only mislead). Returns whether the variable asks for the BFC
    allocator; `memory_stats_available()` says whether TensorFlow obeyed.
    """
    if "tensorflow" not in sys.modules:
        os.environ.setdefault(BFC_ENV, "true")
    return os.environ.get(BFC_ENV, "").lower() in ("true", "1")


def _tensorflow():
    """TensorFlow, imported after `enable_memory_stats()`."""
    enable_memory_stats()
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return tf


class Measurement(NamedTuple):
    median_ms: float                 # median inference time
    times_ms: List[float]            # every timed call
    peak_bytes: Optional[int]        # allocator peak of the model during the timed calls
    resident_bytes: Optional[int]    # held by the model before them (weights, feeds)

    @property
    def activation_peak_bytes(self) -> Optional[int]:
        """Peak beyond what was already allocated: activations and temporaries."""
        if self.peak_bytes is None or self.resident_bytes is None:  # both or neither
            return None
        return self.peak_bytes - self.resident_bytes


def memory_stats_available() -> bool:
    """Whether TensorFlow reports CPU allocator statistics in this process."""
    tf = _tensorflow()
    try:
        tf.config.experimental.get_memory_info("CPU:0")
        return True
    except ValueError:
        return False


def measure_onnx(model, feeds: Mapping[str, np.ndarray], *, warmup: int = 3,
                 repeats: int = 10) -> Measurement:
    """Times an ONNX model in TensorFlow and records its allocator peak.

    Args:
      model: an `onnx.ModelProto`.
      feeds: a value for every graph input, by name.
      warmup: untimed calls first (at least 1: the first call traces).
      repeats: timed calls; their median is reported.

    Returns:
      The measurement (see the module docstring for what it includes).

    Raises:
      ValueError: warmup < 1 or repeats < 1.
    """
    if warmup < 1 or repeats < 1:
        raise ValueError(f"need warmup >= 1 and repeats >= 1, got {warmup}, {repeats}")
    tf = _tensorflow()
    import onnx_tf.backend  # pylint: disable=g-import-not-at-top

    from xflowrl.tracing import grappler_defaults  # pylint: disable=g-import-not-at-top
    with grappler_defaults():
        stats = memory_stats_available()
        if stats:
            gc.collect()
            baseline = tf.config.experimental.get_memory_info("CPU:0")["current"]
        rep = onnx_tf.backend.prepare(model)
        inputs = {name: tf.constant(value) for name, value in feeds.items()}

        def infer() -> Dict[str, np.ndarray]:
            outputs = rep.tf_module(**inputs)
            return {k: v.numpy() for k, v in outputs.items()}

        for _ in range(warmup):
            infer()
        resident = peak = None
        if stats:
            tf.config.experimental.reset_memory_stats("CPU:0")
            resident = tf.config.experimental.get_memory_info("CPU:0")["current"] - baseline
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            infer()
            times.append(1e3 * (time.perf_counter() - start))
        if stats:
            peak = tf.config.experimental.get_memory_info("CPU:0")["peak"] - baseline
    return Measurement(statistics.median(times), times, peak, resident)


def make_runner(model, feeds: Mapping[str, np.ndarray]) -> Callable[[], Dict[str, np.ndarray]]:
    """Prepares an ONNX model once; the returned callable runs one inference
    (as `measure_onnx` times it: the traced module, outputs copied to numpy).
    For callers that interleave the timing of several models; they call it
    inside `xflowrl.tracing.grappler_defaults()`, as `measure_onnx` runs
    (`xflowrl.measure.compare.time_models` does)."""
    tf = _tensorflow()
    import onnx_tf.backend  # pylint: disable=g-import-not-at-top
    rep = onnx_tf.backend.prepare(model)
    inputs = {name: tf.constant(value) for name, value in feeds.items()}

    def infer() -> Dict[str, np.ndarray]:
        return {k: v.numpy() for k, v in rep.tf_module(**inputs).items()}

    return infer


def measure_graph(graph, weights: Optional[Mapping[str, np.ndarray]] = None,
                  feeds: Optional[Mapping[str, np.ndarray]] = None, *, seed: int = 0,
                  **kwargs) -> Measurement:
    """Exports an engine graph to ONNX and measures it with `measure_onnx`.

    Args:
      graph: a `Graph`.
      weights: weight values by name (default: `random_weights(graph, seed)`).
      feeds: input values by name (default: `random_inputs(graph, seed)`).
      seed: seeds the default weights and inputs.
      **kwargs: `warmup`, `repeats`.
    """
    from xflowrl.measure.export import export_with_values  # pylint: disable=g-import-not-at-top
    model, feeds = export_with_values(graph, weights, feeds, seed)
    return measure_onnx(model, feeds, **kwargs)


def interleaved_graph_times(graphs: Mapping[str, "Graph"], cost_model: "CostModel",
                            weights: Optional[Mapping[str, np.ndarray]] = None,
                            feeds: Optional[Mapping[str, np.ndarray]] = None, *,
                            rounds: int, seed: int = 0) -> Dict[str, object]:
    """End-to-end times (ms) of several graphs of one model, the same weights
    and inputs for all, measured in `rounds` interleaved rounds (each: one
    `measure_graph` per graph, the median of 10 calls after 2 warm-up
    calls), so that the machine's drift falls on all of them alike.

    Args:
      graphs: name -> `Graph`, timed in this order every round.
      cost_model: the `CostModel` whose estimate goes beside each time.
      weights, feeds, seed: as `measure_graph`'s.
      rounds: how many rounds.

    Returns:
      name -> {"median_ms", "min_ms", "max_ms" (over the rounds),
      "estimated_ms"}, and "rounds".
    """
    times: Dict[str, List[float]] = {name: [] for name in graphs}
    for _ in range(rounds):
        for name, graph in graphs.items():
            times[name].append(measure_graph(graph, weights, feeds, seed=seed, warmup=2,
                                             repeats=10).median_ms)
    out: Dict[str, object] = {
        name: {"median_ms": float(np.median(t)), "min_ms": min(t), "max_ms": max(t),
               "estimated_ms": graphs[name].cost(cost_model)}
        for name, t in times.items()}
    out["rounds"] = rounds
    return out
