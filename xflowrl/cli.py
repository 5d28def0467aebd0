"""The `xflowrl` command: optimise, inspect and time your own ONNX models.

    xflowrl optimize model.onnx -o out.onnx [--method=greedy|taso|eqsat|mf|mb|policy:DIR|plan[:DIR]]
                     [--cost_model=fitted/cpu] [--budget=N] [--input_shape NAME=D1,D2,...]
    xflowrl inspect model.onnx
    xflowrl measure a.onnx b.onnx
    xflowrl calibrate [-o profile.json]

Exit codes: 0 success (also when `optimize` writes the original unchanged
because nothing made it faster); 2 bad input (a missing, unreadable or
unsupported model, an output that cannot be written, a bad option), with one
message naming the file, node or op; 1 when `optimize` refuses because the
optimised model's outputs differ. Nothing is written on failure. docs/cli.md
has the details.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import List, Optional

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT = 0, 1, 2


class _Progress:
    """One progress line on stderr: rewritten in place on a terminal,
    one line per update (at most every `every` seconds) elsewhere."""

    def __init__(self, quiet: bool = False, every: float = 1.0):
        self.quiet, self.every = quiet, every
        self.tty = sys.stderr.isatty()
        self.start, self.last, self.width = time.time(), 0.0, 0

    def __call__(self, line: str) -> None:
        if self.quiet:
            return
        now = time.time()
        text = f"[{now - self.start:6.1f} s] {line}"
        if self.tty:
            sys.stderr.write("\r" + text.ljust(self.width))
            self.width = len(text)
            sys.stderr.flush()
        elif now - self.last >= self.every or not line.startswith(("greedy:", "taso:")):
            sys.stderr.write(text + "\n")
            self.last = now

    def done(self) -> None:
        if self.tty and self.width and not self.quiet:
            sys.stderr.write("\n")
            self.width = 0


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input_shape", action="append", default=[], metavar="NAME=D1,D2,...",
                        help="static shape of an input declared with dynamic dimensions "
                             "(repeat for several inputs), e.g. input_ids=1,128")
    parser.add_argument("--inputs", metavar="FILE.npz",
                        help="input values for the checks and timings (default: random: "
                             "floats in [-1, 1), integers in {0, 1})")


def _parser() -> argparse.ArgumentParser:
    from xflowrl.optimize import methods, pipeline  # pylint: disable=import-outside-toplevel
    from xflowrl.rules.sets import DEFAULT_RULE_SET  # pylint: disable=import-outside-toplevel
    parser = argparse.ArgumentParser(
        prog="xflowrl", description="Optimise ONNX models with verified graph substitutions "
        "(greedy, TASO's search or reinforcement-learning agents).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    opt = sub.add_parser(
        "optimize", help="rewrite a model; write it only if it computes the same and is faster",
        description="Rewrites MODEL with verified substitutions, checks in onnxruntime that "
        "the result computes the same outputs (else refuses, exit 1) and times both "
        "interleaved: unless the optimised model is faster beyond the measured spread, the "
        "original is written unchanged. Writes OUTPUT and a JSON report beside it.")
    opt.add_argument("model", help="the .onnx file to optimise")
    opt.add_argument("-o", "--output", required=True, help="where to write the model")
    opt.add_argument("--method", default="greedy",
                     help=f"one of {', '.join(methods.METHODS)} (default greedy)")
    opt.add_argument("--cost_model", default=pipeline.DEFAULT_COST_MODEL,
                     help="backend[/profile] the method minimises: fitted/cpu (onnxruntime "
                          "on this kind of CPU; `xflowrl calibrate` fits your machine), "
                          "analytic/cpu, analytic/v100 (GPU-like), onednn, fitted/PATH.json "
                          f"(default {pipeline.DEFAULT_COST_MODEL})")
    opt.add_argument("--rules", default=DEFAULT_RULE_SET, help="rule set (default: built-ins + "
                     "generated)")
    budgets = methods.DEFAULT_BUDGET
    opt.add_argument("--budget", type=int, default=0,
                     help=f"the method's budget: greedy/policy steps (no limit), TASO graphs "
                          f"expanded ({budgets['taso']}), eqsat e-nodes "
                          f"({budgets['eqsat']}), mf training episodes "
                          f"({budgets['mf']}), mb rounds ({budgets['mb']}), plan real steps "
                          f"({budgets['plan']})")
    _add_input_options(opt)
    opt.add_argument("--allow_slower", action="store_true",
                     help="write the optimised model even if it is not measurably faster")
    opt.add_argument("--no_timing", action="store_true",
                     help="skip the timing: write the optimised model if its outputs match")
    opt.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds (7)")
    opt.add_argument("--rtol", type=float, default=1e-4, help="output tolerance (1e-4)")
    opt.add_argument("--report", help="where the JSON report goes (default: OUTPUT with "
                                      ".report.json in place of .onnx)")
    opt.add_argument("--workdir", help="where the learned methods keep checkpoints and logs "
                                       "(default: a temporary folder)")
    opt.add_argument("--seed", type=int, default=0)
    opt.add_argument("--quiet", action="store_true", help="no progress lines")

    ins = sub.add_parser(
        "inspect", help="ops, opaque ops and why, valid xfers, estimated costs",
        description="Imports MODEL and says what the engine sees: engine ops, the ONNX "
        "nodes kept opaque and why, the xfers with locations and the best estimated change "
        "of each, and the estimated cost under each cost model.")
    ins.add_argument("model")
    ins.add_argument("--cost_models", default=",".join(_default_cost_models()),
                     help="comma-separated cost models to price with")
    ins.add_argument("--rules", default=DEFAULT_RULE_SET)
    ins.add_argument("--input_shape", action="append", default=[], metavar="NAME=D1,D2,...",
                     help="static shape of a dynamic input (repeatable)")
    ins.add_argument("--json", action="store_true", help="print JSON instead of text")

    mea = sub.add_parser(
        "measure", help="end-to-end time of models, interleaved, in onnxruntime and TensorFlow",
        description="Times the models on the same inputs, interleaved (rounds in random "
        "order), in onnxruntime (one thread) and TensorFlow (onnx-tf); prints the median and "
        "range of the round medians and each model's change against the first.")
    mea.add_argument("models", nargs="+", help="two or more .onnx files with the same inputs")
    mea.add_argument("--runtimes", default="ort,tf", help="ort, tf or both (default ort,tf)")
    mea.add_argument("--rounds", type=int, default=7)
    mea.add_argument("--repeats", type=int, default=5, help="timed calls per round")
    _add_input_options(mea)
    mea.add_argument("--json", action="store_true", help="print JSON instead of a table")

    cal = sub.add_parser(
        "calibrate", help="fit the fitted cost model to this machine",
        description="Times single operators over a range of shapes in onnxruntime on this "
        "machine and fits the `fitted` cost model's coefficients; use the file with "
        "--cost_model=fitted/PATH.")
    cal.add_argument("-o", "--output", default=os.path.join("results", "fitted_local.json"),
                     help="where the profile goes (default results/fitted_local.json)")
    cal.add_argument("--budget", choices=("quick", "full"), default="quick",
                     help="quick: a few minutes; full: more shapes, more runs")
    return parser


def _default_cost_models() -> List[str]:
    from xflowrl.optimize.inspection import (  # pylint: disable=import-outside-toplevel
        DEFAULT_COST_MODELS,
    )
    return list(DEFAULT_COST_MODELS)


def _optimize(args, progress: _Progress) -> int:
    from xflowrl.optimize import (  # pylint: disable=import-outside-toplevel
        OptimizeOptions,
        optimize_file,
        parse_input_shapes,
    )
    if args.rounds < 1:
        raise _bad("--rounds must be at least 1")
    options = OptimizeOptions(
        model=args.model, output=args.output, method=args.method, cost_model=args.cost_model,
        rules=args.rules, budget=args.budget, input_shapes=parse_input_shapes(args.input_shape),
        inputs=args.inputs, allow_slower=args.allow_slower, verify_speed=not args.no_timing,
        rounds=args.rounds, rtol=args.rtol, report=args.report, seed=args.seed,
        workdir=args.workdir)
    report = optimize_file(options, progress)
    progress.done()
    print(report.table())
    print()
    print(f"wrote {args.output}: {report.written} ({report.reason})")
    if report.fixed_inputs:
        print(f"note: inputs {sorted(report.fixed_inputs)} had dynamic dimensions; the written "
              f"model has the static shapes given with --input_shape")
    print(f"report: {options.report_path}")
    return EXIT_OK


def _inspect(args) -> int:
    from xflowrl.optimize import parse_input_shapes  # pylint: disable=import-outside-toplevel
    from xflowrl.optimize.inspection import (  # pylint: disable=import-outside-toplevel
        inspect_model,
        inspection_text,
    )
    specs = [s for s in args.cost_models.split(",") if s]
    info = inspect_model(args.model, parse_input_shapes(args.input_shape), specs, args.rules)
    print(json.dumps(info, indent=2) if args.json else inspection_text(info))
    return EXIT_OK


def _measure(args) -> int:
    from xflowrl.optimize import parse_input_shapes  # pylint: disable=import-outside-toplevel
    from xflowrl.optimize.inspection import (  # pylint: disable=import-outside-toplevel
        measure_models,
        measurement_text,
    )
    if len(args.models) < 2:
        raise _bad("measure needs at least two models (e.g. the original and the optimised)")
    if args.rounds < 1 or args.repeats < 1:
        raise _bad("--rounds and --repeats must be at least 1")
    result = measure_models(args.models, [r for r in args.runtimes.split(",") if r],
                            args.rounds, args.repeats,
                            input_shapes=parse_input_shapes(args.input_shape),
                            inputs=args.inputs)
    print(json.dumps(result, indent=2) if args.json else measurement_text(result))
    return EXIT_OK


def _calibrate(args, progress: _Progress) -> int:
    from xflowrl.measure.calibration import calibrate  # pylint: disable=import-outside-toplevel
    from xflowrl.optimize.model_io import check_writable  # pylint: disable=import-outside-toplevel
    folder = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(folder, exist_ok=True)
    check_writable(args.output)
    if not args.output.endswith(".json"):
        raise _bad(f"{args.output}: the profile is a .json file")
    result = calibrate(args.output, budget=args.budget, progress=progress)
    progress.done()
    print(f"wrote {result['path']}: {result['rows']} timed operator configurations in "
          f"{result['seconds']:.0f} s")
    print(f"use it with: xflowrl optimize MODEL -o OUT --cost_model=fitted/{result['path']}")
    return EXIT_OK


def _bad(message: str):
    from xflowrl.optimize import BadInput  # pylint: disable=import-outside-toplevel
    return BadInput(message)


def main(argv: Optional[List[str]] = None) -> int:
    """Runs one subcommand; returns the exit code (see module docstring)."""
    args = _parser().parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from xflowrl.optimize import BadInput, Refused  # pylint: disable=import-outside-toplevel
    progress = _Progress(quiet=getattr(args, "quiet", False))
    try:
        if args.command == "optimize":
            return _optimize(args, progress)
        if args.command == "inspect":
            return _inspect(args)
        if args.command == "measure":
            return _measure(args)
        return _calibrate(args, progress)
    except BadInput as e:
        progress.done()
        print(f"xflowrl {args.command}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Refused as e:
        progress.done()
        print(f"xflowrl {args.command}: refused: {e}", file=sys.stderr)
        return EXIT_REFUSED


def console_main() -> None:
    """The console script's entry point."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()
