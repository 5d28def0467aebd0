"""Optimise one ONNX file end to end, and hand over only a model that is
right and faster.

`optimize_file(options)`:

1. checks that the output can be written (before any work), reads and
   imports the model (`model_io.load_model`);
2. rewrites its graph with the chosen method under the chosen cost model
   (`methods.optimise`);
3. exports the result with the model's own weights, interface and metadata;
4. runs the original and the optimised model in onnxruntime on the same
   inputs and compares every output (`verify.same_outputs`): if they differ
   it refuses (`Refused`) and writes nothing;
5. times both, interleaved (`verify.faster`): unless the optimised model is
   faster beyond the measured spread, in a first pass and in an independent
   second one, the original is written unchanged (`allow_slower` writes
   the optimised one anyway);
6. writes the model and the report (`OptimizeReport`, JSON) atomically.

The report has the before/after figures side by side: estimated cost under
the cost model, and measured time in onnxruntime.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Callable, Dict, List, Optional, Tuple

from xflowrl.optimize import methods, model_io, verify
from xflowrl.optimize.model_io import BadInput
from xflowrl.rules.sets import DEFAULT_RULE_SET

REPORT_VERSION = 2
DEFAULT_COST_MODEL = "fitted/cpu"


class Refused(RuntimeError):
    """The optimised model computes something else; nothing was written."""


@dataclasses.dataclass(frozen=True)
class OptimizeOptions:
    """What `optimize_file` does.

    Attributes:
      model: the input .onnx file.
      output: where the optimised model goes.
      method: `methods.METHODS` (policy:DIR names a trained policy).
      cost_model: "backend" or "backend/profile" (`xflowrl.runs.cost_model_from_spec`).
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
    """
    model: str
    output: str
    method: str = "greedy"
    cost_model: str = DEFAULT_COST_MODEL
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
      fixed_inputs: inputs whose dynamic dimensions were fixed: the written
        model has these static shapes.
      seconds: wall time per phase.
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

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, default=float)

    def table(self) -> str:
        """The before/after table (Markdown), estimated and measured side by side."""
        est = self.estimated
        rows = [("estimated cost (" + self.cost_model + ")", f"{est['before_ms']:.4f} ms",
                 f"{est['after_ms']:.4f} ms", f"{est['change']:+.2f}%")]
        if self.measured:
            before, after = self.measured["before"], self.measured["after"]
            rows.append(("measured, onnxruntime 1 thread, CPU ms (median [min, max] of rounds)",
                         _spread_text(before), _spread_text(after),
                         f"{self.measured['change']:+.2f}%"))
        rows.append(("engine ops", str(self.ops["before"]), str(self.ops["after"]),
                     _what(self.applied)))
        lines = ["| | original | optimised | change |", "|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
        return "\n".join(lines)


def _what(applied) -> str:
    """What a method changed: its substitutions, or an extracted graph
    (equality saturation names none)."""
    return f"{len(applied)} substitutions" if applied else "an extracted graph"


def _spread_text(s: dict) -> str:
    return f"{s['median_ms']:.3f} ms [{s['min_ms']:.3f}, {s['max_ms']:.3f}]"


def optimize_file(options: OptimizeOptions,
                  progress: Optional[Callable[[str], None]] = None) -> OptimizeReport:
    """Runs steps 1-6 of the module docstring.

    Raises:
      BadInput: the input cannot be read or imported, an option is invalid,
        or the output cannot be written (nothing written).
      Refused: the optimised model's outputs differ (nothing written).
    """
    from xflowrl.engine import XferSet  # pylint: disable=import-outside-toplevel
    from xflowrl.runs import cost_model_from_spec  # pylint: disable=import-outside-toplevel

    say = progress or (lambda line: None)
    seconds: Dict[str, float] = {}
    clock = time.time()
    methods.parse_method(options.method)
    for path in (options.output, options.report_path):
        model_io.check_writable(path)
    if os.path.abspath(options.output) == os.path.abspath(options.model):
        raise BadInput(f"{options.output}: the output would overwrite the input; give "
                       f"another file name")
    cost_model = _cost_model(options.cost_model, cost_model_from_spec)
    xfers = _rules(options.rules, XferSet)
    say(f"reading {options.model}")
    user = model_io.load_model(options.model, options.input_shapes)
    feeds = (verify.load_feeds(options.inputs, user.proto) if options.inputs
             else verify.random_feeds(user.proto, options.seed, user.fixed_inputs))
    seconds["import"] = time.time() - clock

    clock = time.time()
    say(f"{user.graph.num_ops()} engine ops; optimising with {options.method} under "
        f"{cost_model.name}")
    found = methods.optimise(user.graph, options.method, xfers, cost_model,
                             budget=options.budget, seed=options.seed,
                             workdir=options.workdir, progress=say)
    seconds["optimize"] = found.seconds
    before_ms = user.graph.cost(cost_model)
    estimated = {"before_ms": before_ms, "after_ms": found.cost,
                 "change": 100.0 * (found.cost / before_ms - 1.0)}
    ops = {"before": user.graph.num_ops(), "after": found.graph.num_ops()}
    fixed = {k: list(v) for k, v in user.fixed_inputs.items()}

    def report(written: str, reason: str, measured=None, outputs=None) -> OptimizeReport:
        return OptimizeReport(REPORT_VERSION, options.model, options.output, options.method,
                              cost_model.name, options.rules, written, reason, estimated,
                              measured, outputs, found.applied, ops, fixed, seconds,
                              found.found_by)

    if found.graph == user.graph:
        say("no substitution lowers the estimated cost: writing the original unchanged")
        model_io.copy_model_file(options.model, options.output, user.external_data)
        return _save(report("original", f"{options.method} found no substitution that "
                                        f"lowers the estimated cost under {cost_model.name}"),
                     options)

    clock = time.time()
    by = (f"greedy (cheaper than {options.method})"
          if found.found_by == "greedy" and options.method != "greedy" else options.method)
    provenance = (f"{_what(found.applied)} by {by} under "
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
    if not options.verify_speed:
        model_io.write_model(optimized, options.output, user.external_data)
        return _save(report("optimized", "outputs match; speed not measured "
                                         "(--noverify_speed)", None, outputs), options)

    clock = time.time()
    say(f"timing original and optimised in onnxruntime ({options.rounds} interleaved rounds)")
    repeats = _repeats(user.proto, feeds)
    speed = verify.faster(user.proto, optimized, feeds, rounds=options.rounds,
                          repeats=repeats, seed=options.seed)
    confirmation = None
    if speed.faster:
        # A second, independent pass (fresh sessions, another order) must agree:
        # on a busy machine one pass can favour either model throughout.
        say("confirming with a second timing pass")
        confirmation = verify.faster(user.proto, optimized, feeds, rounds=options.rounds,
                                     repeats=repeats, seed=options.seed + 1)
    seconds["measure"] = time.time() - clock
    measured = {"runtime": "onnxruntime (1 thread), CPU time of the inference thread",
                "before": speed.original, "after": speed.optimized, "change": speed.change,
                "faster": speed.faster and (confirmation is None or confirmation.faster),
                "before_wall": speed.original_wall, "after_wall": speed.optimized_wall,
                "confirmation": None if confirmation is None else {
                    "before": confirmation.original, "after": confirmation.optimized,
                    "change": confirmation.change, "faster": confirmation.faster}}
    if confirmation is not None:
        speed = dataclasses.replace(speed, faster=confirmation.faster)
    if speed.faster:
        model_io.write_model(optimized, options.output, user.external_data)
        return _save(report("optimized", f"outputs match and it runs {-speed.change:.1f}% "
                                         f"faster (in two timing passes every round beat the "
                                         f"original's fastest)",
                            measured, outputs), options)
    if options.allow_slower:
        model_io.write_model(optimized, options.output, user.external_data)
        return _save(report("optimized, slower allowed",
                            f"outputs match but it is not faster beyond the measured spread "
                            f"({speed.change:+.1f}%); written because of --allow_slower",
                            measured, outputs), options)
    model_io.copy_model_file(options.model, options.output, user.external_data)
    return _save(report("original", f"the optimised model is not faster beyond the measured "
                                    f"spread ({speed.change:+.1f}% median); the original is "
                                    f"written unchanged (--allow_slower writes it anyway)",
                        measured, outputs), options)


def _repeats(proto, feeds) -> int:
    """Timed calls per round: about 0.2 s of work, 1 to 5 calls."""
    from xflowrl.measure.ort_runtime import measure_onnx  # pylint: disable=import-outside-toplevel
    once = measure_onnx(proto, feeds, warmup=1, repeats=1).median_ms
    return max(1, min(5, int(200.0 / max(once, 1e-3))))


def _cost_model(spec: str, make):
    try:
        return make(spec)
    except (ValueError, RuntimeError) as e:
        raise BadInput(f"--cost_model={spec}: {e}") from None


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
