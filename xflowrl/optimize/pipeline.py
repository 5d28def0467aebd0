"""Optimise one ONNX file end to end, and hand over only a model that is
right and faster on the target device.

`optimize_file(options)`:

1. checks that the output can be written (before any work), resolves the
   target device (`xflowrl.measure.devices`: the GPU where PyTorch sees
   one, else the CPU; `--device=cuda` without either is a `BadInput`
   naming what is missing), reads and imports the model
   (`model_io.load_model`; `batch` fixes its inputs' first dimension);
2. rewrites its graph with the chosen method under the chosen cost model
   (`methods.optimise`; by default the device's:
   `target.default_cost_model`);
3. exports the result with the model's own weights, interface and metadata;
4. runs the original and the optimised model in onnxruntime on the same
   inputs and compares every output (`verify.same_outputs`): if they differ
   it refuses (`Refused`) and writes nothing. On a GPU target both engine
   graphs also run on the device in PyTorch, in float32 and in the chosen
   precision (`on_device.same_outputs`), and must agree there too;
5. times both, interleaved, on the target device: onnxruntime on the CPU
   (`verify.faster`) or PyTorch on the GPU (`on_device.faster`: CUDA-graph
   replay by default, in the chosen precision). Unless the optimised model
   is faster beyond the measured spread, in a first pass and in an
   independent second one, the original is written unchanged
   (`allow_slower` writes the optimised one anyway). Where the GPU runtime
   lacks an op of either graph, the report names it and the CPU path
   decides (steps 4 and 5 in onnxruntime alone);
6. writes the model and the report (`OptimizeReport`, JSON) atomically.

The report has the before/after figures side by side: estimated cost under
the cost model, and measured time on the device that decided, which it
names (`OptimizeReport.device`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from xflowrl.measure import devices
from xflowrl.optimize import methods, model_io, on_device, target, verify
from xflowrl.optimize.model_io import BadInput
from xflowrl.rules.sets import DEFAULT_RULE_SET

REPORT_VERSION = 3
class Refused(RuntimeError):
    """The optimised model computes something else; nothing was written."""


@dataclasses.dataclass(frozen=True)
class OptimizeOptions:
    """What `optimize_file` does.

    Attributes:
      model: the input .onnx file.
      output: where the optimised model goes.
      method: `methods.METHODS` (policy:DIR names a trained policy).
      cost_model: "backend" or "backend/profile" (`xflowrl.entry_points.cost_model_from_spec`);
        "" for the target device's default (`target.default_cost_model`).
      rules: a named rule set (`xflowrl.rules.sets.RULE_SETS`).
      budget: the method's budget (0: its default; `methods`).
      input_shapes: static shapes for dynamic inputs, by name.
      inputs: an .npz file of input values for the checks (None: random).
      allow_slower: write the optimised model even if it is not faster.
      verify_speed: time the models (False: skip step 5 and write the
        optimised model if its outputs match; the report says so).
      rounds: interleaved timing rounds.
      rtol: relative tolerance of the output check.
      report: where the JSON report goes (None: `<output without .onnx>.report.json`).
      seed: seeds the learned methods and the random inputs.
      workdir: where learned methods keep checkpoints (None: a temporary folder).
      device: the target device, one of `xflowrl.measure.devices.DEVICES`
        ("auto": the GPU where PyTorch sees one, else the CPU).
      batch: the first dimension of every run-time input (0: the model's
        own, 1 where dynamic); the cost model prices the graph at this
        batch and the checks and timings run at it.
      dtype: the precision the GPU target runs in, one of `target.DTYPES` (the
        CPU target runs the model's float32 only).
      timing_mode: the GPU timing that decides, "graph" (CUDA-graph replay)
        or "eager" ("": the device's first, CUDA graph on a GPU).
    """
    model: str
    output: str
    method: str = "greedy"
    cost_model: str = ""
    rules: str = DEFAULT_RULE_SET
    budget: int = 0
    input_shapes: Optional[Dict[str, Tuple[int, ...]]] = None
    inputs: Optional[str] = None
    allow_slower: bool = False
    verify_speed: bool = True
    rounds: int = 7
    rtol: float = 1e-4
    report: Optional[str] = None
    seed: int = 0
    workdir: Optional[str] = None
    device: str = devices.AUTO
    batch: int = 0
    dtype: str = "float32"
    timing_mode: str = ""

    @property
    def report_path(self) -> str:
        if self.report:
            return self.report
        stem = self.output[:-5] if self.output.endswith(".onnx") else self.output
        return stem + ".report.json"


@dataclasses.dataclass
class OptimizeReport:
    """What `optimize_file` did (written as JSON, `version` REPORT_VERSION).

    Attributes:
      written: "optimized" (the optimised model), "original" (the original,
        unchanged: nothing helped, or it was not faster) or "optimized,
        slower allowed".
      reason: one sentence on why.
      estimated: cost-model figures: {"before_ms", "after_ms", "change"}.
      measured: onnxruntime figures ({"before", "after"}: spreads of round
        medians of the inference thread's CPU time, ms, which decide;
        "before_wall", "after_wall": the same in wall time; "change",
        "faster"; "confirmation": the second pass, run only when the first
        found it faster), or None when not timed.
      outputs: the output check (`verify.OutputCheck` as a dict).
      applied: the substitutions the method found, [xfer name, location]
        (also when the original was written); the planner's routes hold
        ["merge_identical_ops", -1] where identical ops were merged.
      found_by: who found them: the method, or "greedy" where a learned
        method's step-limit walk found the cheaper graph
        (`methods.MethodResult.found_by`; since version 2).
      ops: {"before", "after"} op counts of the engine graph.
      fixed_inputs: inputs whose dynamic dimensions were fixed for the
        search, checks and timings; an optimised model is written with these
        static shapes, the original (written "original") keeps its own.
      seconds: wall time per phase.
      device: where the checks and timings ran and who decided (since
        version 3): "asked" (the `--device` given), "device" ("cpu", "cuda"
        or "torch-cpu"), "why" (how "auto" chose), "decided_by" ("cpu:
        onnxruntime" or the PyTorch runtime in words), "runtime", "mode",
        "environment" (PyTorch, card, CUDA and cuDNN versions), "dtype",
        "batch" (the first dimension of the first run-time input: the batch
        where the model has one, a sequence length where it has none),
        "cost_model_dtype" (the precision the cost model priced),
        "fallback" (why a GPU target was decided on the CPU: the ops the GPU
        runtime lacks; else None).
      device_outputs: the output check on the GPU target
        (`on_device.DeviceOutputCheck` as a dict), None where none ran.
    """
    version: int
    model: str
    output: str
    method: str
    cost_model: str
    rules: str
    written: str
    reason: str
    estimated: dict
    measured: Optional[dict]
    outputs: Optional[dict]
    applied: List[Tuple[str, int]]
    ops: dict
    fixed_inputs: Dict[str, List[int]]
    seconds: Dict[str, float]
    found_by: str
    device: Dict[str, Any] = dataclasses.field(default_factory=dict)
    device_outputs: Optional[dict] = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, default=float)

    def table(self) -> str:
        """The before/after table (Markdown), estimated and measured side by side."""
        est = self.estimated
        rows = [("estimated cost (" + self.cost_model + ")", f"{est['before_ms']:.4f} ms",
                 f"{est['after_ms']:.4f} ms", f"{est['change']:+.2f}%")]
        if self.measured:
            before, after = self.measured["before"], self.measured["after"]
            rows.append((f"measured, {self.measured['runtime']}, ms (median [min, max] of "
                         f"rounds)",
                         _spread_text(before), _spread_text(after),
                         f"{self.measured['change']:+.2f}%"))
        rows.append(("engine ops", str(self.ops["before"]), str(self.ops["after"]),
                     _what(self.applied, est["after_ms"] < est["before_ms"])))
        lines = ["| | original | optimised | change |", "|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
        return "\n".join(lines)


def _what(applied, cheaper: bool) -> str:
    """What a method changed: its substitutions; an extracted graph where
    it names none but found a cheaper graph (equality saturation); else
    nothing."""
    if applied:
        return f"{len(applied)} substitutions"
    return "an extracted graph" if cheaper else "no substitution"


def _spread_text(s: dict) -> str:
    return f"{s['median_ms']:.3f} ms [{s['min_ms']:.3f}, {s['max_ms']:.3f}]"


def _batch_of(feeds: Dict[str, Any]) -> Optional[int]:
    """The first dimension of the first run-time input (None: no inputs)."""
    for value in feeds.values():
        return int(value.shape[0]) if getattr(value, "ndim", 0) else None
    return None


def optimize_file(options: OptimizeOptions,
                  progress: Optional[Callable[[str], None]] = None,
                  runtime: Optional[Any] = None) -> OptimizeReport:
    """Runs steps 1-6 of the module docstring.

    Args:
      options: what to do.
      progress: called with one line per phase.
      runtime: the GPU target's runtime (`on_device.TorchRuntime` or an
        object with its `device`, `mode`, `name`, `environment()` and
        `program(graph, feeds, dtype)`): given, it replaces the one
        `options.device` names (tests use a stand-in).

    Raises:
      BadInput: the input cannot be read or imported, an option is invalid,
        the device asked for is not here, or the output cannot be written
        (nothing written).
      Refused: the optimised model's outputs differ (nothing written).
    """
    from xflowrl.engine import XferSet  # pylint: disable=import-outside-toplevel
    from xflowrl.entry_points import cost_model_from_spec  # pylint: disable=import-outside-toplevel

    say = progress or (lambda line: None)
    seconds: Dict[str, float] = {}
    clock = time.time()
    methods.parse_method(options.method)
    for path in (options.output, options.report_path):
        model_io.check_writable(path)
    if os.path.abspath(options.output) == os.path.abspath(options.model):
        raise BadInput(f"{options.output}: the output would overwrite the input; give "
                       f"another file name")
    device = target.resolve_device(options, runtime)
    target.check_options(options, device)
    cost_model, cost_dtype = target.priced_cost_model(
        options.cost_model or target.default_cost_model(device.name), options.dtype,
        cost_model_from_spec)
    xfers = _rules(options.rules, XferSet)
    say(f"reading {options.model}")
    shapes = options.input_shapes
    if options.batch:
        shapes = model_io.batch_input_shapes(options.model, options.batch, shapes)
    user = model_io.load_model(options.model, shapes)
    feeds = (verify.load_feeds(options.inputs, user.proto) if options.inputs
             else verify.random_feeds(user.proto, options.seed, user.fixed_inputs))
    seconds["import"] = time.time() - clock
    device_info: Dict[str, Any] = {
        "asked": options.device, "device": device.name, "why": device.why,
        "decided_by": "cpu: onnxruntime (1 thread)", "runtime": "onnxruntime", "mode": None,
        "environment": None, "dtype": options.dtype, "batch": _batch_of(feeds),
        "cost_model_dtype": cost_dtype,
        "fallback": None}

    clock = time.time()
    say(f"{user.graph.num_ops()} engine ops; optimising with {options.method} under "
        f"{cost_model.name} for {device.name}")
    found = methods.optimise(user.graph, options.method, xfers, cost_model,
                             budget=options.budget, seed=options.seed,
                             workdir=options.workdir, progress=say)
    seconds["optimize"] = found.seconds
    before_ms = user.graph.cost(cost_model)
    estimated = {"before_ms": before_ms, "after_ms": found.cost,
                 "change": 100.0 * (found.cost / before_ms - 1.0)}
    ops = {"before": user.graph.num_ops(), "after": found.graph.num_ops()}
    fixed = {k: list(v) for k, v in user.fixed_inputs.items()}
    device_outputs: Optional[dict] = None

    def report(written: str, reason: str, measured=None, outputs=None) -> OptimizeReport:
        return OptimizeReport(REPORT_VERSION, options.model, options.output, options.method,
                              cost_model.name, options.rules, written, reason, estimated,
                              measured, outputs, found.applied, ops, fixed, seconds,
                              found.found_by, device_info, device_outputs)

    if found.graph == user.graph:
        say("no substitution lowers the estimated cost: writing the original unchanged")
        device_info["decided_by"] = "the method: nothing to check or time"
        model_io.copy_model_file(options.model, options.output, user.external_data)
        return _save(report("original", f"{options.method} found no substitution that "
                                        f"lowers the estimated cost under {cost_model.name}"),
                     options)

    clock = time.time()
    by = (f"greedy (cheaper than {options.method})"
          if found.found_by == "greedy" and options.method != "greedy" else options.method)
    provenance = (f"{_what(found.applied, cheaper=True)} by {by} under "
                  f"{cost_model.name} ({options.rules} rules)")
    optimized = model_io.to_model(user, found.graph, provenance)
    say("checking outputs in onnxruntime")
    check = verify.same_outputs(user.proto, optimized, feeds, rtol=options.rtol)
    seconds["check"] = time.time() - clock
    if not check.same:
        raise Refused(f"{options.model}: the optimised model's outputs {check.mismatched} "
                      f"differ from the original's (max abs error {check.max_abs_error:.3g}, "
                      f"rtol {check.rtol}); nothing written. Please report this with the model.")
    outputs = dataclasses.asdict(check)

    # Step 4 on a GPU target: the same outputs on the device, in float32 and
    # in the asked precision; where its runtime cannot run a graph, the CPU
    # path decides and the report says why.
    gpu: Any = None  # the GPU target's runtime, where it checked the outputs
    programs: Dict[str, Any] = {}  # the checked programs in the asked precision
    if device.torch_device is not None:
        clock = time.time()
        gpu, device_outputs = _check_on_device(runtime, device, options, user, found.graph,
                                               feeds, device_info, programs, say)
        seconds["check"] += time.time() - clock

    if not options.verify_speed:
        device_info["decided_by"] = device_info["decided_by"].split(":")[0] + ": outputs only"
        model_io.write_model(optimized, options.output, user.external_data)
        return _save(report("optimized", "outputs match; speed not measured "
                                         "(--noverify_speed)", None, outputs), options)

    clock = time.time()
    measured = None
    if gpu is not None:
        try:
            measured, faster = _time_on_device(gpu, programs["original"],
                                               programs["optimized"], options, say)
            where = f"on {device_info['decided_by']}"
        except RuntimeError as e:  # e.g. a CUDA-graph capture PyTorch refuses
            _fall_back(device_info, f"timing on the GPU failed ({type(e).__name__}: {e})", say)
    if measured is None:
        measured, faster = _time_on_cpu(user.proto, optimized, feeds, options, say)
        where = "in onnxruntime on the CPU"
    seconds["measure"] = time.time() - clock
    change = measured["change"]
    if faster:
        model_io.write_model(optimized, options.output, user.external_data)
        return _save(report("optimized", f"outputs match and it runs {-change:.1f}% "
                                         f"faster {where} (in two timing passes every round "
                                         f"beat the original's fastest)",
                            measured, outputs), options)
    if options.allow_slower:
        model_io.write_model(optimized, options.output, user.external_data)
        return _save(report("optimized, slower allowed",
                            f"outputs match but it is not faster {where} beyond the measured "
                            f"spread ({change:+.1f}%); written because of --allow_slower",
                            measured, outputs), options)
    model_io.copy_model_file(options.model, options.output, user.external_data)
    return _save(report("original", f"the optimised model is not faster {where} beyond the "
                                    f"measured spread ({change:+.1f}% median); the original "
                                    f"is written unchanged (--allow_slower writes it anyway)",
                        measured, outputs), options)


def _check_on_device(runtime, device: devices.Device, options: OptimizeOptions, user,
                     graph, feeds, device_info: Dict[str, Any], programs: Dict[str, Any],
                     say) -> Tuple[Any, Optional[dict]]:
    """Step 4 on the GPU target: (its runtime, the device's output check as
    a dict); `programs` receives the checked programs in the asked
    precision. (None, None) where the runtime cannot run either graph (the
    fallback recorded in `device_info`).

    Raises:
      BadInput: the original's outputs are not finite in the asked precision.
      Refused: the optimised graph's outputs differ on the device.
    """
    gpu = _gpu_target(runtime, device, options, user, graph, device_info, say)
    if gpu is None:
        return None, None
    say(f"checking outputs on {device.name} ({options.dtype})")
    try:
        check = on_device.same_outputs(gpu, user.graph, graph, {**user.weights, **feeds},
                                       options.dtype, rtol=options.rtol, keep=programs)
    except on_device.OriginalNotFinite as e:
        raise BadInput(f"{options.model}: {e}; give other inputs with --inputs, or "
                       f"another --dtype") from None
    except (NotImplementedError, KeyError, RuntimeError, TypeError) as e:
        _fall_back(device_info, f"the GPU runtime cannot run the graphs "
                                f"({type(e).__name__}: {e})", say)
        return None, None
    if not check.same:
        raise Refused(f"{options.model}: on {device.name} the optimised model's "
                      f"outputs differ from the original's: {check.reason}; "
                      f"nothing written. Please report this with the model.")
    return gpu, dataclasses.asdict(check)


def _gpu_target(runtime, device: devices.Device, options: OptimizeOptions, user, graph,
                device_info: Dict[str, Any], say):
    """The GPU target's runtime, with `device_info` filled in; None (and
    the fallback recorded) where its runtime lacks an op of either graph."""
    lacking = list(dict.fromkeys(on_device.missing_ops(user.graph)
                                 + on_device.missing_ops(graph)))
    if lacking:
        shown = ", ".join(lacking[:5]) + (f" and {len(lacking) - 5} more" if len(lacking) > 5
                                           else "")
        _fall_back(device_info, f"the GPU runtime (PyTorch) has no form for {shown}", say)
        return None
    if runtime is None:
        try:
            runtime = on_device.TorchRuntime(device.torch_device or "cuda",
                                             options.timing_mode or None)
        except (ValueError, RuntimeError) as e:
            raise BadInput(f"--device={device.name}: {e}") from None
    device_info.update(runtime=runtime.name, mode=runtime.mode,
                       environment=runtime.environment(),
                       decided_by=f"{device.name}: {runtime.name}, {options.dtype}")
    return runtime


def _fall_back(device_info: Dict[str, Any], why: str, say) -> None:
    device_info["fallback"] = f"{why}: checked and timed on the CPU (onnxruntime) instead"
    device_info["decided_by"] = "cpu: onnxruntime (1 thread), the GPU target's fallback"
    say(device_info["fallback"])


def _time_on_device(runtime, before, after, options: OptimizeOptions, say):
    """Step 5 on the GPU target, with the programs step 4 checked:
    (measured, faster)."""
    repeats = on_device.repeats_for(before, runtime.mode)
    say(f"timing original and optimised on the device ({runtime.mode}, {options.dtype}, "
        f"{options.rounds} interleaved rounds of {repeats})")
    speed, confirmation, faster = _two_passes(
        lambda seed: on_device.faster(runtime, before, after, rounds=options.rounds,
                                      repeats=repeats, seed=seed), options.seed, say)
    unit = "device time (CUDA events)" if runtime.device == "cuda" else "wall time"
    measured = {"runtime": f"{runtime.name}, {options.dtype}, {unit}",
                "before": speed.original, "after": speed.optimized, "change": speed.change,
                "faster": faster, "repeats": repeats,
                "confirmation": _pass_dict(confirmation)}
    return measured, faster


def _time_on_cpu(proto, optimized, feeds, options: OptimizeOptions, say):
    """Step 5 on the CPU: (measured, faster)."""
    say(f"timing original and optimised in onnxruntime ({options.rounds} interleaved rounds)")
    repeats = _repeats(proto, feeds)
    speed, confirmation, faster = _two_passes(
        lambda seed: verify.faster(proto, optimized, feeds, rounds=options.rounds,
                                   repeats=repeats, seed=seed), options.seed, say)
    measured = {"runtime": "onnxruntime (1 thread), CPU time of the inference thread",
                "before": speed.original, "after": speed.optimized, "change": speed.change,
                "faster": faster,
                "before_wall": speed.original_wall, "after_wall": speed.optimized_wall,
                "confirmation": _pass_dict(confirmation)}
    return measured, faster


def _two_passes(time_pass: Callable[[int], Any], seed: int, say):
    """(the first timing pass, the second or None, faster): where the first
    finds the optimised model faster, a second, independent pass (fresh
    sessions or programs, another order) must agree; on a busy machine one
    pass can favour either model throughout."""
    speed = time_pass(seed)
    confirmation = None
    if speed.faster:
        say("confirming with a second timing pass")
        confirmation = time_pass(seed + 1)
    return speed, confirmation, speed.faster and (confirmation is None or confirmation.faster)


def _pass_dict(speed) -> Optional[dict]:
    return None if speed is None else {"before": speed.original, "after": speed.optimized,
                                       "change": speed.change, "faster": speed.faster}


def _repeats(proto, feeds) -> int:
    """Timed calls per round: about 0.2 s of work, 1 to 5 calls."""
    from xflowrl.measure.ort_runtime import measure_onnx  # pylint: disable=import-outside-toplevel
    once = measure_onnx(proto, feeds, warmup=1, repeats=1).median_ms
    return max(1, min(5, int(200.0 / max(once, 1e-3))))


def _rules(name: str, xfer_set):
    try:
        return xfer_set.from_name(name)
    except ValueError as e:
        raise BadInput(f"--rules={name}: {e}") from None


def _save(report: OptimizeReport, options: OptimizeOptions) -> OptimizeReport:
    folder = os.path.dirname(os.path.abspath(options.report_path))
    import tempfile  # pylint: disable=import-outside-toplevel
    fd, tmp = tempfile.mkstemp(prefix=".report.", dir=folder)
    with os.fdopen(fd, "w") as f:
        f.write(report.to_json())
    os.replace(tmp, options.report_path)
    return report
