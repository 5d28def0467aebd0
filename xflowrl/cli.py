"""The `xflowrl` command: optimise, inspect and time your own ONNX models.

    xflowrl optimize model.onnx -o out.onnx [--method=greedy|taso|eqsat|mf|mb|policy:DIR|plan[:DIR]]
                     [--cost_model=SPEC] [--budget=N] [--input_shape NAME=D1,D2,...]
                     [--device=auto|cpu|cuda|torch-cpu] [--batch=N]
                     [--dtype=float32|bfloat16|float16] [--timing=graph|eager]
    xflowrl inspect model.onnx
    xflowrl measure a.onnx b.onnx [--device=...] [--batch=N] [--dtype=...]
    xflowrl calibrate [-o profile.json] [--device=cpu|cuda]

Exit codes: 0 success (also when `optimize` writes the original unchanged
because nothing made it faster); 2 bad input (a missing, unreadable or
unsupported model, an output that cannot be written, a bad option, a device
that is not here: `--device=cuda` without PyTorch or a GPU), with one
message naming the file, node, op or what is missing; 1 when `optimize`
refuses because the optimised model's outputs differ. Nothing is written on
failure. docs/cli.md has the details.
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


def _add_device_options(parser: argparse.ArgumentParser) -> None:
    from xflowrl.measure import devices  # pylint: disable=import-outside-toplevel
    from xflowrl.optimize.target import DTYPES  # pylint: disable=import-outside-toplevel
    parser.add_argument("--device", choices=devices.DEVICES, default=devices.AUTO,
                        help="where outputs are checked and models timed: cuda (PyTorch on "
                             "the GPU), cpu (onnxruntime), torch-cpu (the GPU path run in "
                             "PyTorch on the CPU, for testing), auto (default: cuda where "
                             "PyTorch sees a GPU, else cpu)")
    parser.add_argument("--batch", type=int, default=0,
                        help="the first dimension of every input (default: the model's own, "
                             "1 where dynamic)")
    parser.add_argument("--dtype", choices=DTYPES, default="float32",
                        help="the precision the GPU runs the models in (default float32; "
                             "the CPU runs float32 only)")


def _parser() -> argparse.ArgumentParser:
    from xflowrl.optimize import methods, target  # pylint: disable=import-outside-toplevel
    from xflowrl.rules.sets import DEFAULT_RULE_SET  # pylint: disable=import-outside-toplevel
    parser = argparse.ArgumentParser(
        prog="xflowrl", description="Optimise ONNX models with verified graph substitutions "
        "(greedy, TASO's search, equality saturation, reinforcement-learning "
        "agents or a planner).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    opt = sub.add_parser(
        "optimize", help="rewrite a model; write it only if it computes the same and is faster",
        description="Rewrites MODEL with verified substitutions, checks in onnxruntime (and "
        "on a GPU target in PyTorch on the GPU) that the result computes the same outputs "
        "(else refuses, exit 1) and times both interleaved on the target device (the GPU "
        "where one is found, else the CPU): unless the optimised model is faster beyond the "
        "measured spread, the original is written unchanged. Writes OUTPUT and a JSON "
        "report beside it, naming the device and runtime that decided.")
    opt.add_argument("model", help="the .onnx file to optimise")
    opt.add_argument("-o", "--output", required=True, help="where to write the model")
    opt.add_argument("--method", default="greedy",
                     help=f"one of {', '.join(methods.METHODS)} (default greedy)")
    opt.add_argument("--cost_model", default="",
                     help="backend[/profile] the method minimises: fitted/cpu (onnxruntime "
                          "on this kind of CPU; `xflowrl calibrate` fits your machine), "
                          "analytic/cpu, analytic/v100 (GPU-like), learned/CARD (learned on "
                          "a GPU), onednn, fitted/PATH.json (default: the device's, "
                          f"{target.DEFAULT_COST_MODEL} on the CPU; on a GPU learned/CARD "
                          f"where one was learned on your card, else "
                          f"{target.DEFAULT_GPU_COST_MODEL})")
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
    _add_device_options(opt)
    opt.add_argument("--timing", choices=("graph", "eager"), default="",
                     help="the GPU timing that decides: graph (CUDA-graph replay, the "
                          "kernels alone; default on a GPU) or eager (one launch per op)")
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
        "measure", help="end-to-end time of models, interleaved, on the GPU or in "
        "onnxruntime and TensorFlow",
        description="Times the models on the same inputs, interleaved (rounds in random "
        "order): on a GPU in PyTorch (CUDA-graph replay and eager), on the CPU in "
        "onnxruntime (one thread) and TensorFlow (onnx-tf); prints the median and range of "
        "the round medians and each model's change against the first.")
    mea.add_argument("models", nargs="+", help="two or more .onnx files with the same inputs")
    mea.add_argument("--runtimes", default="ort,tf", help="on the CPU: ort, tf or both "
                     "(default ort,tf)")
    mea.add_argument("--rounds", type=int, default=7)
    mea.add_argument("--repeats", type=int, default=5, help="timed calls per round")
    _add_input_options(mea)
    _add_device_options(mea)
    mea.add_argument("--json", action="store_true", help="print JSON instead of a table")

    cal = sub.add_parser(
        "calibrate", help="fit a cost model to this machine: the CPU's or the GPU's",
        description="--device=cpu (default): times single operators over a range of shapes "
        "in onnxruntime on this machine and fits the `fitted` cost model's coefficients; use "
        "the file with --cost_model=fitted/PATH. --device=cuda: times the learned GPU cost "
        "model's data set (graphs end to end, CUDA-graph replay) on this machine's GPU, adds "
        "it to the card's data and refits `learned/CARD`.")
    cal.add_argument("-o", "--output", default="",
                     help="where the profile goes (default: results/fitted_local.json on "
                          "the CPU; on a GPU the card's learned profile in the package)")
    cal.add_argument("--budget", choices=("quick", "full"), default="quick",
                     help="quick: a few minutes; full: more shapes, more runs")
    cal.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                     help="the cost model to fit: cpu (fitted, default) or cuda (learned)")
    cal.add_argument("--batch", default="1,8,32",
                     help="--device=cuda: comma-separated batch sizes to time (1,8,32)")
    cal.add_argument("--dtype", default="float32,bfloat16",
                     help="--device=cuda: comma-separated precisions to time "
                          "(float32,bfloat16)")
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
        workdir=args.workdir, device=args.device, batch=args.batch, dtype=args.dtype,
        timing_mode=args.timing)
    report = optimize_file(options, progress)
    progress.done()
    print(report.table())
    print()
    print(f"wrote {args.output}: {report.written} ({report.reason})")
    print(f"decided by: {report.device['decided_by']} (batch {report.device['batch']}; "
          f"cost model {report.cost_model}, priced in {report.device['cost_model_dtype']})")
    if report.device.get("fallback"):
        print(f"note: {report.device['fallback']}")
    if report.fixed_inputs:
        kept = ("the written model has the static shapes given with --input_shape"
                if report.written.startswith("optimized") else
                "the original was written unchanged, with its dynamic dimensions")
        print(f"note: inputs {sorted(report.fixed_inputs)} had dynamic dimensions; {kept}")
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
                            inputs=args.inputs, device=args.device, batch=args.batch,
                            dtype=args.dtype)
    print(json.dumps(result, indent=2) if args.json else measurement_text(result))
    return EXIT_OK


def _calibrate_cuda(args, progress: _Progress) -> int:
    from xflowrl.measure import devices  # pylint: disable=import-outside-toplevel
    from xflowrl.optimize.model_io import check_writable  # pylint: disable=import-outside-toplevel
    try:
        batch = [int(b) for b in args.batch.split(",") if b]
    except ValueError:
        raise _bad(f"--batch={args.batch}: comma-separated positive integers") from None
    dtypes = [d for d in args.dtype.split(",") if d]
    if args.output:
        if not args.output.endswith(".json"):
            raise _bad(f"{args.output}: the profile is a .json file")
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        check_writable(args.output)
    missing = devices.cuda_missing()
    if missing is not None:
        raise _bad(f"--device=cuda: {missing}")
    try:
        from xflowrl.measure.gpu_calibration import (  # pylint: disable=import-outside-toplevel
            calibrate_cuda,
        )
    except ImportError as e:
        raise _bad(f"--device=cuda: this xflowrl has no GPU calibration ({e})") from None
    try:
        result = calibrate_cuda(args.output or None, batch=batch, dtype=dtypes,
                                budget=args.budget, progress=progress)
    except ValueError as e:
        raise _bad(f"--device=cuda: {e}") from None
    progress.done()
    print(f"wrote {result['path']}: {result['records']} new timings on {result['card']} "
          f"({result['records_total']} in {result['data']}) in {result['seconds']:.0f} s")
    print(f"use it with: xflowrl optimize MODEL -o OUT --device=cuda "
          f"--cost_model=learned/{result['card']} (the default for --device=cuda on this "
          f"card where the profile is in the package)")
    return EXIT_OK


def _calibrate(args, progress: _Progress) -> int:
    from xflowrl.measure.calibration import calibrate  # pylint: disable=import-outside-toplevel
    from xflowrl.optimize.model_io import check_writable  # pylint: disable=import-outside-toplevel
    if args.device == "cuda":
        return _calibrate_cuda(args, progress)
    args.output = args.output or os.path.join("results", "fitted_local.json")
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
