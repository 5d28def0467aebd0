"""End-to-end inference time of an ONNX model in onnxruntime.

The second way to run a graph for real, next to TensorFlow through onnx-tf
(`xflowrl.measure.tf_runtime`). The model is serialized and loaded into an
`onnxruntime.InferenceSession` on the CPU execution provider with:

- **one intra-op thread and one inter-op thread, sequential execution.** The
  CPU cost profiles (`analytic/cpu`, `onednn`, the fitted `cpu_fitted`
  profile) model one core running one op at a time, so the runtime that
  checks them runs the same way. `threads` changes it (0: onnxruntime's
  default, one thread per core).
- **all graph optimizations** (`ORT_ENABLE_ALL`, onnxruntime's default):
  constant folding, conv+batch-norm folding, conv+add(+relu) and
  matmul+add fusions, the NCHWc layout transformer. That is what a user
  gets, and what the fitted cost model predicts
  (docs/engine.md, "The cpu_fitted profile"). `optimized_model_path` writes
  the model onnxruntime actually runs, to inspect those fusions.

Time: `warmup` untimed calls, then `repeats` calls of `session.run`
(outputs returned as numpy arrays; feeds are numpy arrays made once), each
timed twice: wall time (`time.perf_counter`) and the CPU time of the calling
thread (`time.thread_time`). With one intra-op thread onnxruntime runs the
whole inference on the calling thread, so its CPU time is the inference's
compute time without the time the thread spent waiting for a core. On a
shared machine that is the figure to compare: on the project's 2-core box,
with other users' processes running (the scheduler's autogroups share
the cores between sessions whatever their nice values), ResNet-18 measured
46-63 ms wall but 17.5-18.1 ms thread CPU time over 60 calls, the latter
matching the sum of onnxruntime's own kernel times (17.97 ms). Session
creation (which runs the graph optimizers) is not timed.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional

import numpy as np

DEFAULT_THREADS = 1


class OrtMeasurement(NamedTuple):
    median_ms: float          # median wall time of an inference
    times_ms: List[float]     # every timed call, wall
    cpu_median_ms: float      # median CPU time of the calling thread
    cpu_times_ms: List[float]


def make_session(model, *, threads: int = DEFAULT_THREADS,
                 optimized_model_path: Optional[str] = None, optimize: bool = True):
    """An onnxruntime CPU session for an `onnx.ModelProto` (see module docstring).

    Args:
      model: an `onnx.ModelProto`.
      threads: intra-op threads (0: onnxruntime's default).
      optimized_model_path: where to write the optimized model, if given.
      optimize: False disables every graph optimization (for comparisons).
    """
    import onnxruntime as ort  # pylint: disable=g-import-not-at-top
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    options.log_severity_level = 3
    if optimized_model_path:
        options.optimized_model_filepath = optimized_model_path
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def run_onnx(model, feeds: Mapping[str, np.ndarray], **kwargs) -> Dict[str, np.ndarray]:
    """Outputs of one onnxruntime call, by output name (kwargs: `make_session`)."""
    session = make_session(model, **kwargs)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds))))


def make_runner(model, feeds: Mapping[str, np.ndarray],
                **kwargs) -> Callable[[], List[np.ndarray]]:
    """Creates the session once; the returned callable runs one inference (as
    `measure_onnx` times it). For callers that interleave several models.
    kwargs: `make_session`."""
    session = make_session(model, **kwargs)
    names = [o.name for o in session.get_outputs()]
    inputs = {name: np.ascontiguousarray(value) for name, value in feeds.items()}
    return lambda: session.run(names, inputs)


def measure_onnx(model, feeds: Mapping[str, np.ndarray], *, warmup: int = 3,
                 repeats: int = 10, threads: int = DEFAULT_THREADS,
                 optimize: bool = True) -> OrtMeasurement:
    """Times an ONNX model in onnxruntime.

    Args:
      model: an `onnx.ModelProto`.
      feeds: a value for every graph input, by name.
      warmup: untimed calls first (at least 1).
      repeats: timed calls; their median is reported.
      threads: intra-op threads (default 1; see the module docstring).
      optimize: onnxruntime's graph optimizations on (default) or off.

    Raises:
      ValueError: warmup < 1 or repeats < 1.
    """
    if warmup < 1 or repeats < 1:
        raise ValueError(f"need warmup >= 1 and repeats >= 1, got {warmup}, {repeats}")
    infer = make_runner(model, feeds, threads=threads, optimize=optimize)
    for _ in range(warmup):
        infer()
    times, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.thread_time()
        infer()
        cpu.append(1e3 * (time.thread_time() - start_cpu))
        times.append(1e3 * (time.perf_counter() - start))
    return OrtMeasurement(statistics.median(times), times, statistics.median(cpu), cpu)


def measure_graph(graph, weights: Optional[Mapping[str, np.ndarray]] = None,
                  feeds: Optional[Mapping[str, np.ndarray]] = None, *, seed: int = 0,
                  **kwargs) -> OrtMeasurement:
    """Exports an engine graph to ONNX and times it with `measure_onnx`.

    Args:
      graph: a `Graph`.
      weights: weight values by name (default: `random_weights(graph, seed)`).
      feeds: input values by name (default: `random_inputs(graph, seed)`).
      seed: seeds the default weights and inputs.
      **kwargs: `warmup`, `repeats`, `threads`, `optimize`.
    """
    from xflowrl.measure.export import export_with_values  # pylint: disable=g-import-not-at-top
    model, feeds = export_with_values(graph, weights, feeds, seed)
    return measure_onnx(model, feeds, **kwargs)
