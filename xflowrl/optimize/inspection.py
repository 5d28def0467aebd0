"""What xflowrl sees in a model (`xflowrl inspect`) and how fast two models
run (`xflowrl measure`).

`inspect_model` reports the engine ops the importer made, the ONNX nodes it
kept opaque and why, the xfers that have locations on the graph (with
their counts and the best estimated change each offers) and the estimated
cost under each cost model. `measure_models` times two models on the same
inputs, interleaved: on a GPU target in PyTorch (CUDA-graph replay and
eager, `xflowrl.measure.torch_runtime`), on the CPU in onnxruntime (one
thread) and TensorFlow (onnx-tf).
"""

from __future__ import annotations

import collections
from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from xflowrl.engine.cost import DEFAULT_COST_SPEC, GPU_COST_SPEC
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
from xflowrl.optimize import model_io, verify
from xflowrl.optimize.model_io import BadInput
from xflowrl.rules.sets import DEFAULT_RULE_SET

# Cost models `inspect` prices a graph with unless told otherwise: the ones
# every build has and that need no measurement.
DEFAULT_COST_MODELS = (DEFAULT_COST_SPEC, GPU_COST_SPEC, "fitted/cpu")


def _opaque_reason(op_type: str, domain: str) -> str:
    from xflowrl.onnx_io import ops as onnx_ops  # pylint: disable=import-outside-toplevel
    from xflowrl.onnx_io.importer import _SLOW_FOLD  # pylint: disable=import-outside-toplevel
    if domain not in ("", "ai.onnx"):
        return f"custom domain {domain}: no engine operator"
    if op_type in onnx_ops.HANDLERS:
        return ("an engine operator, but in a form the engine lacks (attributes, rank, "
                "or a shape input computed at run time)")
    if op_type in _SLOW_FOLD:
        return "no engine operator (constant inputs are not folded: too slow to evaluate)"
    return "no engine operator: costed by output size, never rewritten"


def inspect_model(path: str, input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
                  cost_models: Sequence[str] = DEFAULT_COST_MODELS,
                  rules: str = DEFAULT_RULE_SET,
                  max_locations: int = DEFAULT_MAX_LOCATIONS) -> dict:
    """A JSON-ready description of the model at `path` (see module docstring).

    Raises:
      BadInput: the model cannot be read or imported; a cost model or rule
        set name is unknown.
    """
    from xflowrl.engine import XferSet  # pylint: disable=import-outside-toplevel
    from xflowrl.entry_points import cost_model_from_spec  # pylint: disable=import-outside-toplevel
    from xflowrl.onnx_io.common import decode_opaque  # pylint: disable=import-outside-toplevel

    user = model_io.load_model(path, input_shapes)
    graph = user.graph
    counts: collections.Counter = collections.Counter()
    opaque: Dict[str, dict] = {}
    for op in graph.ops():
        if op.type != "opaque":
            counts[op.type] += 1
            continue
        node = decode_opaque(op.params["opaque_type"]).node
        key = f"{node.domain + '.' if node.domain else ''}{node.op_type}"
        entry = opaque.setdefault(key, {"count": 0, "why": _opaque_reason(node.op_type,
                                                                          node.domain),
                                        "nodes": []})
        entry["count"] += 1
        if len(entry["nodes"]) < 5:
            entry["nodes"].append(node.name or "(unnamed)")
    models = {}
    for spec in cost_models:
        try:
            models[spec] = cost_model_from_spec(spec)
        except (ValueError, RuntimeError) as e:
            raise BadInput(f"cost model {spec!r}: {e}") from None
    try:
        xfers = XferSet.from_name(rules)
    except ValueError as e:
        raise BadInput(f"--rules={rules}: {e}") from None
    locations = xfers.locations(graph, max_locations)
    costs = {spec: graph.cost(model) for spec, model in models.items()}
    valid = []
    candidate_costs = {spec: locations.costs(model) for spec, model in models.items()}
    for x in locations.active_xfers():
        row = {"xfer": xfers.names[int(x)], "locations": int(locations.counts[int(x)])}
        for spec, table in candidate_costs.items():
            best = float(np.nanmin(table[int(x)]))
            row[f"best change, {spec}"] = round(100.0 * (best / costs[spec] - 1.0), 4)
        valid.append(row)
    return {
        "model": path,
        "inputs": {i.name: list(verify.input_shape(i, user.fixed_inputs))
                   for i in verify.graph_inputs(user.proto)},
        "fixed_inputs": {k: list(v) for k, v in user.fixed_inputs.items()},
        "opset": {o.domain or "ai.onnx": o.version for o in user.proto.opset_import},
        "onnx_nodes": len(user.proto.graph.node),
        "engine_ops": dict(sorted(counts.items())),
        "opaque_ops": dict(sorted(opaque.items())),
        "weights_mb": round(sum(np.asarray(v).nbytes for v in user.weights.values()) / 2**20, 3),
        "external_data": user.external_data,
        "estimated_cost_ms": {k: round(v, 6) for k, v in costs.items()},
        "rules": rules,
        "valid_xfers": sorted(valid, key=lambda r: -r["locations"]),
    }


def inspection_text(info: dict) -> str:
    """`inspect_model`'s result as readable text."""
    lines = [f"{info['model']}: {info['onnx_nodes']} ONNX nodes, opset {info['opset']}, "
             f"weights {info['weights_mb']} MB"
             + (" (external data)" if info["external_data"] else "")]
    lines.append("inputs: " + ", ".join(f"{k} {v}" for k, v in info["inputs"].items()))
    if info["fixed_inputs"]:
        lines.append("  (dynamic dimensions fixed by --input_shape)")
    engine = sum(info["engine_ops"].values())
    lines.append(f"engine ops ({engine}): " + ", ".join(f"{k} {v}"
                                                       for k, v in info["engine_ops"].items()))
    kept = sum(e["count"] for e in info["opaque_ops"].values())
    lines.append(f"opaque ops ({kept}): kept verbatim, costed, never rewritten")
    for op_type, entry in info["opaque_ops"].items():
        lines.append(f"  {op_type} x{entry['count']}: {entry['why']}")
    lines.append("estimated cost: " + ", ".join(f"{k} {v:.4f} ms"
                                                for k, v in info["estimated_cost_ms"].items()))
    valid = info["valid_xfers"]
    lines.append(f"xfers with locations ({len(valid)} of the {info['rules']} rule set):")
    if not valid:
        lines.append("  none: no rule matches this graph")
    for row in valid:
        changes = ", ".join(f"{k.split(', ', 1)[1]} {v:+.2f}%" for k, v in row.items()
                            if k.startswith("best change"))
        lines.append(f"  {row['xfer']}: {row['locations']} locations; best change {changes}")
    return "\n".join(lines)


def measure_models(paths: Sequence[str], runtimes: Sequence[str] = ("ort", "tf"),
                   rounds: int = 7, repeats: int = 5, warmup: int = 1,
                   input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
                   inputs: Optional[str] = None, seed: int = 0, device: str = "cpu",
                   batch: int = 0, dtype: str = "float32") -> dict:
    """End-to-end times of the models at `paths` on the same inputs,
    interleaved; per model and runtime the spread of round medians (ms,
    wall clock on the CPU, CUDA events on a GPU). The models must have the
    same inputs.

    Args:
      paths: the .onnx files.
      runtimes: on the CPU, "ort" and/or "tf".
      rounds, repeats, warmup: rounds, timed calls per round, untimed calls.
      input_shapes: static shapes of dynamic inputs.
      inputs: an .npz file of input values (None: random).
      seed: the random inputs and the rounds' order.
      device: one of `xflowrl.measure.devices.DEVICES`: on "cuda" (and
        "torch-cpu", its stand-in) each model's engine graph runs in
        PyTorch (runtimes "torch-graph" and "torch-eager"; a model with an
        op PyTorch lacks gets an error naming it), `runtimes` unused.
      batch: the first dimension of every input (0: the model's own).
      dtype: the precision on a GPU target (the CPU runs float32 only).

    Raises:
      BadInput: a model cannot be read, their inputs differ, or the device
        or precision is not available.
    """
    import onnx  # pylint: disable=import-outside-toplevel

    from xflowrl.measure import devices  # pylint: disable=import-outside-toplevel
    try:
        target = devices.resolve(device)
    except (ValueError, devices.DeviceUnavailable) as e:
        raise BadInput(str(e)) from None
    if dtype != "float32" and target.torch_device is None:
        raise BadInput(f"--dtype={dtype}: the CPU (onnxruntime, TensorFlow) runs the models' "
                       f"float32 only; {dtype} needs --device=cuda"
                       + (f" ({target.why})" if target.why else ""))
    if batch:
        input_shapes = model_io.batch_input_shapes(paths[0], batch, input_shapes)
    if target.torch_device is not None:
        return _measure_on_device(paths, target, rounds, repeats, warmup, input_shapes,
                                  inputs, seed, dtype)

    from xflowrl.measure.compare import (  # pylint: disable=import-outside-toplevel
        RUNTIMES,
        time_models,
    )
    from xflowrl.onnx_io.importer import read_model  # pylint: disable=import-outside-toplevel
    unknown = sorted(set(runtimes) - set(RUNTIMES))
    if unknown:
        raise BadInput(f"unknown runtimes {unknown}; choose from {list(RUNTIMES)}")
    protos: Dict[str, onnx.ModelProto] = {}
    for path in paths:
        if not isinstance(path, str) or not path:
            raise BadInput("give the paths of the models to measure")
        try:
            protos[path] = read_model(path)
        except ValueError as e:
            raise BadInput(model_io._with_path(path, e)) from None  # pylint: disable=protected-access
    first = protos[paths[0]]
    fixed = {k: tuple(v) for k, v in dict(input_shapes or {}).items()}
    feeds = (verify.load_feeds(inputs, first) if inputs
             else verify.random_feeds(first, seed, fixed))
    for path, proto in protos.items():
        names = sorted(i.name for i in verify.graph_inputs(proto))
        if names != sorted(feeds):
            raise BadInput(f"{path}: inputs {names} differ from {paths[0]}'s {sorted(feeds)}")
    results: Dict[str, dict] = {path: {} for path in paths}
    for runtime in runtimes:
        try:
            times = time_models(protos, feeds, [runtime], rounds, warmup, repeats,
                                np.random.default_rng(seed))
        except Exception as e:  # a runtime that cannot run a model says why
            for path in paths:
                results[path][runtime] = {"error": f"{type(e).__name__}: {e}"}
            continue
        for path in paths:
            results[path][runtime] = times[path][f"{runtime}/wall"]
    return {"models": list(paths), "rounds": rounds, "repeats": repeats,
            "inputs": {k: list(v.shape) for k, v in feeds.items()}, "times": results,
            "device": {"asked": target.asked, "device": target.name, "why": target.why,
                       "dtype": "float32"}}


def _measure_on_device(paths: Sequence[str], target, rounds: int, repeats: int, warmup: int,
                       input_shapes: Optional[Mapping[str, Sequence[int]]],
                       inputs: Optional[str], seed: int, dtype: str) -> dict:
    """`measure_models` on a GPU target: each model's engine graph in PyTorch."""
    from xflowrl.measure import torch_runtime  # pylint: disable=import-outside-toplevel
    from xflowrl.measure.compare import spread  # pylint: disable=import-outside-toplevel
    if dtype not in torch_runtime.DTYPES:
        raise BadInput(f"--dtype={dtype}: choose from {', '.join(torch_runtime.DTYPES)}")
    device = target.torch_device
    users = {}
    for path in paths:
        if not isinstance(path, str) or not path:
            raise BadInput("give the paths of the models to measure")
        users[path] = model_io.load_model(path, input_shapes)
    first = users[paths[0]].proto
    feeds = (verify.load_feeds(inputs, first) if inputs
             else verify.random_feeds(first, seed, users[paths[0]].fixed_inputs))
    for path, user in users.items():
        names = sorted(i.name for i in verify.graph_inputs(user.proto))
        if names != sorted(feeds):
            raise BadInput(f"{path}: inputs {names} differ from {paths[0]}'s {sorted(feeds)}")
    modes = torch_runtime.MODES[device]
    results: Dict[str, dict] = {path: {} for path in paths}
    programs = {}
    for path, user in users.items():
        try:
            programs[path] = torch_runtime.TorchProgram(
                user.graph, {**user.weights, **feeds}, dtype=dtype, device=device)
        except (NotImplementedError, KeyError, ValueError, RuntimeError) as e:
            for mode in modes:
                results[path][f"torch-{mode}"] = {"error": f"{type(e).__name__}: {e}"}
    for mode in modes:
        if programs:
            times = torch_runtime.interleaved_times(programs, mode, rounds, warmup, repeats,
                                                    np.random.default_rng(seed))
            for path, values in times.items():
                results[path][f"torch-{mode}"] = spread(values)
    env = torch_runtime.environment(device)
    return {"models": list(paths), "rounds": rounds, "repeats": repeats,
            "inputs": {k: list(v.shape) for k, v in feeds.items()}, "times": results,
            "device": {"asked": target.asked, "device": target.name, "why": target.why,
                       "dtype": dtype, "environment": env}}


def measurement_text(result: dict) -> str:
    """`measure_models`' result as a table (change against the first model)."""
    paths = result["models"]
    runtimes = list(result["times"][paths[0]])
    info = result.get("device") or {}
    head = []
    if info:
        env = info.get("environment") or {}
        card = f" ({env['card']})" if env.get("card") else ""
        head = [f"device: {info['device']}{card}, {info['dtype']}"
                + (f"; {info['why']}" if info.get("why") else ""), ""]
    lines = ["| model | " + " | ".join(f"{r} ms, median [min, max]" for r in runtimes)
             + " | " + " | ".join(f"{r} change" for r in runtimes) + " |",
             "|---|" + "---|" * (2 * len(runtimes))]
    base = result["times"][paths[0]]
    for path in paths:
        row = result["times"][path]
        cells, changes = [], []
        for r in runtimes:
            s = row[r]
            if "error" in s:
                cells.append(f"error: {s['error'][:60]}")
                changes.append("")
                continue
            cells.append(f"{s['median_ms']:.3f} [{s['min_ms']:.3f}, {s['max_ms']:.3f}]")
            changes.append("" if path == paths[0] or "error" in base[r] else
                           f"{100 * (s['median_ms'] / base[r]['median_ms'] - 1):+.2f}%")
        lines.append(f"| {path} | " + " | ".join(cells) + " | " + " | ".join(changes) + " |")
    return "\n".join(head + lines)
