"""Per-kernel onnxruntime timings of an engine graph, traced back to its ops.

What the fitted cost backend is fitted to (`xflowrl.measure.cost_fit`): an
engine graph exported to ONNX runs in onnxruntime with the session settings
of `xflowrl.measure.ort_runtime` (one thread, all graph optimizations) and
its profiler on (`profile_kernels`). Each profiled kernel (a node of
onnxruntime's *optimized* graph, fusions applied) is traced back to the
engine op it executes (`attribute`): a fused Conv to the engine's conv2d
(its folded batch-norm, bias, residual add and activation cost nothing
separately), a FusedMatMul to the matmul, the activation kernel of a matmul
with a fused activation to an element-wise row. The NCHWc layout reorders
onnxruntime inserts (ReorderInput, ReorderOutput) have no engine op; they
become copy rows of 8 bytes per element (read and written), which is how
the backend prices them (docs/engine.md, "Layout reorders").

A kernel's time is the 10th percentile of its profiled durations
(`kernel_time`): on a shared machine a long kernel is often preempted
midway, and its median wall time then measures the other processes (BERT's
merged matmul: 2.6 ms fastest, 10.6 ms median), while the end-to-end
thread CPU time stays close to the fastest runs.
"""

from __future__ import annotations

import collections
import json
import os
import re
import tempfile
import time
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from xflowrl.engine import Graph

CHAIN_TYPES = ("batchnorm", "broadcast_add", "relu", "sigmoid", "tanh", "add")
ACTIVATION_KERNELS = ("Relu", "Sigmoid", "Tanh")
REORDER_KERNELS = ("ReorderInput", "ReorderOutput")

KernelKey = Tuple[str, str]  # (node name in onnxruntime's optimized graph, op type)


class KernelProfile(NamedTuple):
    """What one profiled session measured."""
    kernels: Dict[KernelKey, List[float]]   # per kernel, its durations (ms), one per run
    e2e_ms: List[float]                     # per run, CPU time of the calling thread
    args: Dict[KernelKey, dict]             # per kernel, the profiler's args (shapes)


class Attributed(NamedTuple):
    """A profiled kernel traced to an engine op (index into `graph.ops()`,
    -1 for a layout reorder) and its time."""
    op_index: int
    kind: str       # "op", "activation" (a matmul's separate activation), "reorder"
    ms: float
    elements: float  # reorders only: elements of the reordered tensor


def kernel_time(times: List[float]) -> float:
    """A kernel's time (ms): the 10th percentile of its profiled durations."""
    return float(np.percentile(times, 10))


def profile_kernels(model, feeds: Mapping[str, np.ndarray], runs: int,
                    warmup: int = 3) -> KernelProfile:
    """Runs an ONNX model `warmup + runs` times with onnxruntime's profiler on.

    Args:
      model: an `onnx.ModelProto`.
      feeds: a value for every graph input.
      runs: profiled runs kept (the warm-up runs' kernels are dropped).
      warmup: untimed runs first.

    Returns:
      Per kernel its last `runs` durations; the end-to-end CPU time of the
      calling thread per run (with one intra-op thread the whole inference
      runs there); the profiler's node args.
    """
    import onnxruntime as ort  # pylint: disable=import-outside-toplevel
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    options.enable_profiling = True
    feeds = {k: np.ascontiguousarray(v) for k, v in feeds.items()}
    with tempfile.TemporaryDirectory() as tmp:
        options.profile_file_prefix = os.path.join(tmp, "profile")
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        for _ in range(warmup):
            session.run(None, feeds)
        e2e = []
        for _ in range(runs):
            start = time.thread_time()
            session.run(None, feeds)
            e2e.append(1e3 * (time.thread_time() - start))
        with open(session.end_profiling()) as f:
            events = json.load(f)
    kernels: Dict[KernelKey, List[float]] = collections.defaultdict(list)
    args: Dict[KernelKey, dict] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            key = (e["name"][:-len("_kernel_time")], e["args"]["op_name"])
            kernels[key].append(e["dur"] / 1e3)
            args[key] = e["args"]
    return KernelProfile({k: v[-runs:] for k, v in kernels.items()}, e2e, args)


def _guid(node_name: str) -> Optional[int]:
    """The engine guid in an exported node's name (`<type>_<guid>[_...]`)."""
    # onnxruntime names a fused node "fused <first node>..." (MatMulAddFusion).
    if node_name.startswith("fused "):
        node_name = node_name[len("fused "):]
    match = re.match(r"^([a-z_0-9]+?)_(\d+)(?:_|$)", node_name)
    return int(match.group(2)) if match else None


def _first_shape(shapes: List[dict]) -> Tuple[int, ...]:
    return tuple(next(iter(shapes[0].values()))) if shapes else ()


def attribute(graph, profile: KernelProfile) -> Tuple[List[Attributed], float]:
    """Traces every profiled kernel of `graph`'s export to an engine op.

    Args:
      graph: the engine `Graph` that was exported (node names carry guids).
      profile: its `profile_kernels`.

    Returns:
      The attributed kernels and the time (ms) of kernels traced to nothing.
    """
    ops = graph.ops()
    index = {op.guid: i for i, op in enumerate(ops)}
    producers = {i: [index[g] for g, _ in op.inputs] for i, op in enumerate(ops)}
    consumers = collections.defaultdict(list)
    for reader, ins in producers.items():
        for p in ins:
            consumers[p].append(reader)
    claimed = set()
    rows: List[Attributed] = []
    unattributed = 0.0
    for (name, op_type), times in profile.kernels.items():
        ms = kernel_time(times)
        if op_type in REORDER_KERNELS:
            shape = _first_shape(profile.args[(name, op_type)].get("output_type_shape", []))
            if op_type == "ReorderInput":
                shape = _first_shape(profile.args[(name, op_type)].get("input_type_shape", []))
            rows.append(Attributed(-1, "reorder", ms, float(np.prod(shape)) if shape else 0.0))
            continue
        guid = _guid(name)
        i = index.get(guid) if guid is not None else None
        # A conv writing a graph output carries the output's name: start from
        # every conv (the shape match below picks one).
        unnamed_conv = i is None and op_type == "Conv"
        if unnamed_conv:
            i = next((j for j, op in enumerate(ops) if op.type == "conv2d"), None)
        if i is None:
            unattributed += ms
            continue
        t = ops[i].type
        if op_type == "Conv":
            # Walk back through the fused chain to the conv whose shapes match.
            want = [tuple(next(iter(s.values()))) for s in profile.args[(name, op_type)]
                    ["input_type_shape"][:2]]
            frontier, found = [i], None
            if unnamed_conv:
                frontier = [j for j, op in enumerate(ops) if op.type == "conv2d"][::-1]
            while frontier and found is None:
                j = frontier.pop()
                if ops[j].type == "conv2d":
                    shapes = [tuple(ops[p].output_shapes[k]) for p, (_, k) in
                              zip(producers[j], ops[j].inputs)]
                    if shapes[:2] == want and j not in claimed:
                        found = j
                elif ops[j].type in CHAIN_TYPES:
                    frontier.extend(producers[j])
            if found is None:
                unattributed += ms
                continue
            claimed.add(found)
            rows.append(Attributed(found, "op", ms, 0.0))
        elif op_type in ("MatMul", "FusedMatMul") and t == "transpose":
            readers = [c for c in consumers[i] if ops[c].type == "matmul"]
            if not readers:
                unattributed += ms
                continue
            rows.append(Attributed(readers[0], "op", ms, 0.0))
        elif op_type in ACTIVATION_KERNELS and t in ("matmul", "broadcast_add"):
            rows.append(Attributed(i, "activation", ms, 0.0))
        else:
            rows.append(Attributed(i, "op", ms, 0.0))
    return rows, unattributed


def features(graph, kernel: Attributed) -> Tuple[str, float, float]:
    """The fitted backend's (class, FLOPs, bytes) of an attributed kernel:
    `fitted_features` of its engine op; an element-wise row for a separate
    activation; a copy row for a layout reorder. Class "" for ops the
    backend does not fit (opaque ops, views)."""
    from xflowrl.engine import fitted_features  # pylint: disable=import-outside-toplevel
    if kernel.kind == "reorder":
        return "copy", 0.0, 8.0 * kernel.elements
    ops = graph.ops()
    op = ops[kernel.op_index]
    if kernel.kind == "activation":
        out = float(np.prod(op.output_shapes[0]))
        return "eltwise", out, 8.0 * out
    by_guid = {o.guid: o for o in ops}
    shapes = [by_guid[g].output_shapes[k] for g, k in op.inputs]
    return fitted_features(op.type, shapes, **dict(op.params))


def graph_times(profile: KernelProfile) -> dict:
    """Kernel count, summed kernel times and median end-to-end time: what
    `cost_fit.overhead_scale` fits."""
    return {"kernels": len(profile.kernels),
            "kernel_ms": float(sum(kernel_time(v) for v in profile.kernels.values())),
            "e2e_ms": float(np.median(profile.e2e_ms))}


def profile_rows(graphs: Mapping[str, Tuple[Graph, Mapping[str, np.ndarray],
                                            Mapping[str, np.ndarray]]],
                 runs: int, passes: int) -> Tuple[list, List[dict]]:
    """Profiles graphs interleaved and returns the fit's rows and per-graph times.

    Args:
      graphs: by name ("<graph>/<variant>"), (engine graph, weights, feeds).
      runs: profiled runs per graph and pass.
      passes: passes over all graphs (each kernel's time over all passes).

    Returns:
      (`cost_fit.Row`s of every attributed kernel with a fitted class,
       per graph {"graph", "variant", "kernels", "e2e_ms", "kernel_ms",
       "unattributed_ms"}).
    """
    from xflowrl.measure.cost_fit import Row  # pylint: disable=import-outside-toplevel
    from xflowrl.onnx_io import to_onnx  # pylint: disable=import-outside-toplevel
    models = {name: to_onnx(g, w, check=False) for name, (g, w, _) in graphs.items()}
    merged = {name: KernelProfile(collections.defaultdict(list), [], {}) for name in graphs}
    for _ in range(passes):
        for name, (_, _, feeds) in graphs.items():
            p = profile_kernels(models[name], feeds, runs)
            for key, values in p.kernels.items():
                merged[name].kernels[key].extend(values)
            merged[name].e2e_ms.extend(p.e2e_ms)
            merged[name].args.update(p.args)
    rows, per_graph = [], []
    for name, (graph, _, _) in graphs.items():
        attributed, unattributed = attribute(graph, merged[name])
        for kernel in attributed:
            cls, flops, nbytes = features(graph, kernel)
            if cls:
                guid = graph.ops()[kernel.op_index].guid if kernel.op_index >= 0 else -1
                rows.append(Row(name, guid, cls, flops, nbytes, kernel.ms))
        graph_name, _, variant = name.partition("/")
        per_graph.append({"graph": graph_name, "variant": variant,
                          **graph_times(merged[name]), "unattributed_ms": unattributed})
    return rows, per_graph
