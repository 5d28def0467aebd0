"""`xflowrl optimize --device=cuda` over the zoo's ONNX exports: the GPU figure.

Run by scripts/gpu/optimize_check.sh (the one command a session runs on a
lent GPU). For every zoo graph of `GRAPHS` at batch 1 and 16 (the
transformers, which have no batch dimension: sequence 64 and 512 for BERT,
64 and 576 patches for ViT) and in float32 and bfloat16, it exports the
graph with seeded random weights as ONNX (`xflowrl.onnx_io.save_onnx`), runs
`xflowrl optimize --device=cuda --method=greedy` on it in this process
(`xflowrl.cli.main`) and keeps the report: the cost model used, the
estimated change, the change measured on the device (CUDA-graph replay,
interleaved rounds), what was written and which device and runtime decided.
Nothing of this needs TensorFlow (greedy, onnxruntime, PyTorch).

`--dry_run` runs the same loop here on the CPU: the GPU path's stand-in
(`--device=torch-cpu`), small graphs (`DRY_GRAPHS`, the zoo's reduced
sizes) at batch 1 and 2, two rounds; a few minutes.

Writes `--out` (JSON: the environment and one row per run) and prints a
table. Runs past `--max_seconds` are skipped and listed as such.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import os
import platform
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

# Graph, the builder's arguments at batch 1 and at the large setting.
GRAPHS: Tuple[Tuple[str, Dict[str, Any], Dict[str, Any]], ...] = (
    ("squeezenet1_1", {}, {"batch_size": 16}),
    ("resnet18", {}, {"batch_size": 16}),
    ("resnet50", {}, {"batch_size": 16}),
    ("inception_v3", {}, {"batch_size": 16}),
    ("bert", {}, {"seq_len": 512}),
    ("vit", {}, {"patches": 576}),
)
DRY_GRAPHS = ("small_cnn", "resnext50", "bert", "vit")
DTYPES = ("float32", "bfloat16")


def _builder_args(name: str, large: bool, dry_run: bool) -> Tuple[Dict[str, Any], int]:
    """(builder arguments, the batch the row names)."""
    from xflowrl import zoo  # pylint: disable=import-outside-toplevel
    if not dry_run:
        for graph, small_args, large_args in GRAPHS:
            if graph == name:
                return dict(large_args if large else small_args), 16 if large else 1
        raise ValueError(name)
    args = dict(zoo.REDUCED.get(name, {}))
    builder = zoo._BUILDERS[name]  # pylint: disable=protected-access
    params = inspect.signature(builder).parameters
    if large:
        if "batch_size" in params:
            args["batch_size"] = 2
        elif "seq_len" in params:
            args["seq_len"] = 2 * args.get("seq_len", 64)
        elif "patches" in params:
            args["patches"] = 2 * args.get("patches", 64)
    return args, 2 if large else 1


def _export(name: str, args: Dict[str, Any], folder: str) -> Tuple[str, int]:
    """The zoo graph as an ONNX file with seeded random weights; (path, its
    first input's first dimension)."""
    from xflowrl import zoo  # pylint: disable=import-outside-toplevel
    from xflowrl.entry_points import zoo_weights  # pylint: disable=import-outside-toplevel
    from xflowrl.onnx_io import save_onnx  # pylint: disable=import-outside-toplevel
    graph = zoo.get_graph(name, **args)
    tag = "_".join(f"{k}{v}" for k, v in sorted(args.items())) or "default"
    path = os.path.join(folder, f"{name}_{tag}.onnx")
    if not os.path.exists(path):
        save_onnx(graph, zoo_weights(name, graph, 0), path)
    first = next(op for op in graph.ops() if op.type == "input")
    return path, int(first.output_shapes[0][0])


def _optimize(path: str, out: str, device: str, dtype: str, batch: int, rounds: int,
              cost_model: str) -> Tuple[int, str, Optional[dict]]:
    """(exit code, stderr, report) of `xflowrl optimize` run in this process."""
    from xflowrl import cli  # pylint: disable=import-outside-toplevel
    argv = ["optimize", path, "-o", out, "--quiet", f"--device={device}", f"--dtype={dtype}",
            f"--rounds={rounds}", "--method=greedy"]
    if batch:
        argv.append(f"--batch={batch}")
    if cost_model:
        argv.append(f"--cost_model={cost_model}")
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = cli.main(argv)
        except Exception as e:  # a row says what broke; the others still run  # pylint: disable=broad-except
            code = 99
            print(f"{type(e).__name__}: {e}", file=sys.stderr)
    report_path = out[:-5] + ".report.json"
    report = None
    if code == 0 and os.path.exists(report_path):
        with open(report_path) as f:
            report = json.load(f)
    return code, stderr.getvalue().strip()[-800:], report


def _row(name: str, args: Dict[str, Any], batch: int, dtype: str, code: int, stderr: str,
         report: Optional[dict], seconds: float) -> Dict[str, Any]:
    row: Dict[str, Any] = {"graph": name, "builder_args": args, "batch": batch, "dtype": dtype,
                           "exit_code": code, "seconds": round(seconds, 1)}
    if report is None:
        row["error"] = stderr
        return row
    measured = report.get("measured") or {}
    device = report.get("device") or {}
    row.update(cost_model=report["cost_model"],
               cost_model_dtype=device.get("cost_model_dtype"),
               estimated_change=report["estimated"]["change"],
               measured_change=measured.get("change"),
               confirmation_change=(measured.get("confirmation") or {}).get("change"),
               before_ms=(measured.get("before") or {}).get("median_ms"),
               after_ms=(measured.get("after") or {}).get("median_ms"),
               written=report["written"], reason=report["reason"],
               decided_by=device.get("decided_by"), fallback=device.get("fallback"),
               runtime=measured.get("runtime"), substitutions=len(report["applied"]),
               device_outputs=report.get("device_outputs"), ops=report["ops"])
    return row


def _environment(device: str) -> Dict[str, Any]:
    env: Dict[str, Any] = {"python": platform.python_version(), "target": device,
                           "commit": os.environ.get("XFLOWRL_COMMIT", "")}
    try:
        from xflowrl.measure import torch_runtime  # pylint: disable=import-outside-toplevel
        env.update(torch_runtime.environment("cuda" if device == "cuda" else "cpu"))
    except Exception as e:  # pylint: disable=broad-except
        env["torch_error"] = f"{type(e).__name__}: {e}"
    for package in ("numpy", "onnx", "onnxruntime"):
        try:
            env[package] = __import__(package).__version__
        except Exception:  # pylint: disable=broad-except
            env[package] = None
    return env


def table(rows: List[Dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    def pct(value):
        return "" if value is None else f"{value:+.1f}%"
    lines = ["| graph | batch | dtype | cost model | estimated | measured (pass 1) | written | "
             "decided by |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r or "skipped" in r:
            what = r.get("skipped") or f"exit {r['exit_code']}: {r['error'][:80]}"
            lines.append(f"| {r['graph']} | {r['batch']} | {r['dtype']} | | | | {what} | |")
            continue
        decided = (r["decided_by"] or "").split(",")[0]
        if r.get("fallback"):
            decided += " (fallback)"
        lines.append(f"| {r['graph']} | {r['batch']} | {r['dtype']} | {r['cost_model']} | "
                     f"{pct(r['estimated_change'])} | {pct(r['measured_change'])} | "
                     f"{r['written']} | {decided} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON report")
    parser.add_argument("--dry_run", action="store_true",
                        help="here on the CPU: PyTorch's CPU stand-in, small graphs")
    parser.add_argument("--graphs", default="", help="comma-separated subset of the graphs")
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--batches", default="1,16", help="1 and/or 16 (the large setting)")
    parser.add_argument("--rounds", type=int, default=0, help="timing rounds (7; dry run 2)")
    parser.add_argument("--cost_model", default="",
                        help="the cost model (default: the device's, docs/cli.md)")
    parser.add_argument("--max_seconds", type=float, default=420.0,
                        help="skip the runs that would start after this")
    parser.add_argument("--models_dir", default="", help="where the ONNX exports go")
    args = parser.parse_args(argv)
    device = "torch-cpu" if args.dry_run else "cuda"
    names = ([n for n in args.graphs.split(",") if n] if args.graphs else
             list(DRY_GRAPHS) if args.dry_run else [g[0] for g in GRAPHS])
    large_flags = [b.strip() == "16" for b in args.batches.split(",") if b.strip()]
    dtypes = [d for d in args.dtypes.split(",") if d]
    rounds = args.rounds or (2 if args.dry_run else 7)
    folder = args.models_dir or tempfile.mkdtemp(prefix="optimize_check.")
    os.makedirs(folder, exist_ok=True)
    start = time.time()
    rows: List[Dict[str, Any]] = []
    result = {"environment": _environment(device), "rounds": rounds, "rows": rows,
              "command": " ".join(["scripts/gpu/optimize_check.py"] + list(argv or sys.argv[1:]))}
    for large in large_flags:
        for dtype in dtypes:
            for name in names:
                builder_args, batch = _builder_args(name, large, args.dry_run)
                if time.time() - start > args.max_seconds:
                    rows.append({"graph": name, "builder_args": builder_args, "batch": batch,
                                 "dtype": dtype, "skipped": "skipped: --max_seconds"})
                    continue
                clock = time.time()
                path, first_dim = _export(name, builder_args, folder)
                # --batch where the graph has a batch dimension (the transformers' first
                # dimension is their sequence: the model's own shape is used).
                batch_flag = first_dim if "batch_size" in builder_args or first_dim == batch \
                    else 0
                out = os.path.join(folder, f"out_{os.path.basename(path)[:-5]}_{dtype}.onnx")
                code, stderr, report = _optimize(path, out, device, dtype, batch_flag, rounds,
                                                 args.cost_model)
                row = _row(name, builder_args, batch, dtype, code, stderr, report,
                           time.time() - clock)
                rows.append(row)
                print(f"[optimize_check] {name} batch {batch} {dtype}: "
                      f"{row.get('written', row.get('error', ''))[:120]} "
                      f"({row['seconds']:.0f} s)", flush=True)
                with open(args.out, "w") as f:  # after every row: a killed run keeps them
                    json.dump(result, f, indent=1, default=str)
    result["seconds"] = round(time.time() - start, 1)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(table(rows))
    done = [r for r in rows if "written" in r]
    slower = [r for r in done if r["written"] == "optimized" and (r["measured_change"] or 0) > 0]
    print(f"\n{len(done)} of {len(rows)} runs done; optimised models written: "
          f"{sum(r['written'] == 'optimized' for r in done)}; written but measured slower: "
          f"{len(slower)}; fallbacks to the CPU: {sum(bool(r.get('fallback')) for r in done)}")
    return 0 if len(done) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
