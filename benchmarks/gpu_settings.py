"""The GPU check of the settings where looking ahead pays, without flags:
reading the exported graphs, checking their outputs, timing them
interleaved, the verdict per setting and the table
(benchmarks/gpu_settings_bench.py is the command and documents the method;
tests import this module beside other flag-defining ones)."""

import dataclasses
import datetime
import gzip
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FORMAT = "xflowrl-gpu-settings-check"
VERSION = 1
LABELS = ("original", "greedy", "taso", "eqsat", "plan")
# The methods whose graphs may beat greedy's ("plan": the engine planner's,
# added by benchmarks/plan_bench.py --export_graphs).
LOOKAHEAD = ("taso", "eqsat", "plan")


# ----------------------------------------------------------------- the files


def file_setting_name(path: str) -> str:
    """The setting a file is named for (`a__b__c.json[.gz]` -> `a/b/c`)."""
    base = os.path.basename(path)
    for ext in (".json.gz", ".json"):
        if base.endswith(ext):
            base = base[:-len(ext)]
    return base.replace("__", "/")


def read_export(path: str) -> Dict[str, Any]:
    """One exported setting (.json or .json.gz).

    Raises:
      ValueError: the file is not an exported setting.
    """
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:  # type: ignore[operator]
        data = json.load(f)
    if not isinstance(data, dict) or not {"setting", "cost_model", "graphs"} <= set(data):
        raise ValueError(f"{path}: not an exported setting (needs setting, cost_model, "
                         "graphs)")
    if "original" not in data["graphs"]:
        raise ValueError(f"{path}: no original graph")
    for label, entry in data["graphs"].items():
        if not {"estimated_ms", "graph"} <= set(entry):
            raise ValueError(f"{path}: graph {label!r} lacks estimated_ms or graph")
    return data


def export_files(folder: str) -> List[str]:
    """The exported settings of `folder`, sorted by name.

    Raises:
      ValueError: no such folder, or no exported setting in it.
    """
    if not os.path.isdir(folder):
        raise ValueError(f"no folder {folder}")
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder)
                   if f.endswith(".json") or f.endswith(".json.gz"))
    if not files:
        raise ValueError(f"no .json or .json.gz files in {folder} "
                         "(experiments/lookahead_settings.py --export_graphs writes them)")
    return files


def setting_batch(data: Dict[str, Any]) -> int:
    """The batch of an exported setting: its `batch`, else the name's `@bN`, else 1."""
    if "batch" in data:
        return int(data["batch"])
    match = re.search(r"@b(\d+)$", data["setting"])
    return int(match.group(1)) if match else 1


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def graph_key(graph_data: Dict[str, Any]) -> str:
    """Equal for graphs with equal `Graph.to_data`."""
    return json.dumps(graph_data, sort_keys=True, separators=(",", ":"))


def ordered_labels(graphs: Dict[str, Any]) -> List[str]:
    """original, greedy, taso, eqsat (those present), then any others."""
    return [k for k in LABELS if k in graphs] + sorted(set(graphs) - set(LABELS))


# ---------------------------------------------------------------- the checks


def weight_gain(setting: str) -> float:
    """The zoo's weight gain for the setting's graph (sqrt(2) for a graph
    the zoo does not know)."""
    from xflowrl import zoo  # pylint: disable=import-outside-toplevel
    name = setting.split("/")[0]
    return zoo.weight_gain(name) if name in zoo.GRAPHS else 2.0 ** 0.5


def make_feeds(original, setting: str, seed: int) -> Dict[str, np.ndarray]:
    from xflowrl.executor.weights import (  # pylint: disable=import-outside-toplevel
        random_inputs,
        random_weights,
    )
    return {**random_weights(original, seed=seed, dtype=np.float64, gain=weight_gain(setting)),
            **random_inputs(original, seed=seed, dtype=np.float64)}


def relative_error(got: List[np.ndarray], expected: List[np.ndarray]) -> float:
    """TorchProgram.check's measure: the largest |got - expected| over each
    output's largest |expected|, worst output.

    Raises:
      ValueError: output counts or shapes differ, or a value is not finite.
    """
    if len(got) != len(expected):
        raise ValueError(f"{len(got)} outputs, expected {len(expected)}")
    worst = 0.0
    for k, (g, e) in enumerate(zip(got, expected)):
        g, e = np.asarray(g), np.asarray(e)
        if g.shape != e.shape:
            raise ValueError(f"output {k}: shape {g.shape}, expected {e.shape}")
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(e))):
            raise ValueError(f"output {k} is not finite")
        worst = max(worst, float(np.max(np.abs(g - e)) / max(float(np.max(np.abs(e))), 1e-30)))
    return worst


def check_result(error: Optional[float], tolerance: float,
                 failure: Optional[str] = None) -> Dict[str, Any]:
    if failure is not None:
        return {"passed": False, "max_relative_error": None, "error": failure}
    assert error is not None
    passed = error <= tolerance
    return {"passed": passed, "max_relative_error": error,
            "error": None if passed else f"relative error {error:.3g} over {tolerance:g}"}


# ------------------------------------------------------------------- timing


def round_stats(samples: List[float]) -> Dict[str, Any]:
    median = statistics.median(samples)
    return {"median_ms": median, "min_ms": min(samples), "max_ms": max(samples),
            "spread_pct": 100.0 * (max(samples) - min(samples)) / median,
            "rounds_ms": samples}


def time_interleaved(programs: Dict[str, Any], modes: List[str], rounds: int, warmup: int,
                     repeats: int, deadline: float) -> Tuple[Dict[str, Dict[str, Any]], int]:
    """Round after round, each program in turn, every mode: the median of
    `repeats` runs per round. Stops after the second round once `deadline`
    (time.monotonic) has passed. Returns per label and mode the round
    statistics, and the rounds run."""
    samples: Dict[str, Dict[str, List[float]]] = {k: {m: [] for m in modes} for k in programs}
    for program in programs.values():  # capture, autotune, first-touch: outside the rounds
        for mode in modes:
            program.time(mode, warmup=warmup, repeats=1)
    done = 0
    for _ in range(rounds):
        if done >= 2 and time.monotonic() > deadline:
            break
        for label, program in programs.items():
            for mode in modes:
                samples[label][mode].append(
                    program.time(mode, warmup=warmup, repeats=repeats)["median_ms"])
        done += 1
    return {k: {m: round_stats(v) for m, v in by_mode.items()}
            for k, by_mode in samples.items()}, done


# ---------------------------------------------------------------- a setting


def change_pct(base: float, value: float) -> float:
    return 100.0 * (value / base - 1.0)


def best_method(row: Dict[str, Any]) -> Optional[str]:
    """The exported look-ahead method with the lowest estimate, where that
    is below greedy's (None otherwise)."""
    graphs = row["graphs"]
    if "greedy" not in graphs:
        return None
    candidates = [m for m in LOOKAHEAD if m in graphs]
    if not candidates:
        return None
    best = min(candidates, key=lambda m: (graphs[m]["estimated_ms"], LOOKAHEAD.index(m)))
    greedy = graphs["greedy"]["estimated_ms"]
    return best if graphs[best]["estimated_ms"] < greedy * (1 - 1e-9) else None


def targets_a_gpu(cost_model: str) -> bool:
    """Whether a cost model spec estimates a GPU's time: the GPU-like
    analytic profile, cuDNN's measurements and the learned GPU models. A
    setting found under a CPU cost model (analytic/cpu, onednn, fitted)
    claims nothing about a GPU, so its timing there confirms nothing."""
    from xflowrl.engine.cost import GPU_PROFILE  # pylint: disable=import-outside-toplevel
    backend, _, profile = cost_model.partition("/")
    return backend in ("cudnn", "learned") or (backend == "analytic" and profile == GPU_PROFILE)


def verdict(row: Dict[str, Any]) -> Dict[str, Any]:
    """Whether the best method's measured gain beats greedy's beyond the
    spread (module docstring, "confirmed")."""
    graphs = row["graphs"]
    best = best_method(row)
    out: Dict[str, Any] = {"best": best, "confirmed": None, "measured_gap_pts": None,
                           "noise_pts": None, "rounds_best_faster": None, "reason": None}
    if not targets_a_gpu(row["cost_model"]):
        out["reason"] = (f"its estimates are for a CPU ({row['cost_model']}): timed here, "
                         "not judged")
        return out
    if best is None:
        out["reason"] = "no exported graph beats greedy's estimate"
        return out
    if graphs[best].get("same_as") == "greedy":
        out["reason"] = f"{best}'s graph is greedy's graph"
        return out
    involved = ("original", "greedy", best)
    if not all(graphs[k]["check"]["passed"] for k in involved):
        out["reason"] = "an output check failed"
        return out
    if any("graph" not in graphs[k] for k in involved):
        out["reason"] = "not timed"
        return out
    base = graphs["original"]["graph"]["median_ms"]
    g, b = graphs["greedy"]["graph"], graphs[best]["graph"]
    out["measured_gap_pts"] = 100.0 * (g["median_ms"] - b["median_ms"]) / base
    out["noise_pts"] = 100.0 * max(g["max_ms"] - g["min_ms"], b["max_ms"] - b["min_ms"]) / base
    out["rounds_best_faster"] = sum(x < y for x, y in zip(b["rounds_ms"], g["rounds_ms"]))
    out["confirmed"] = bool(out["measured_gap_pts"] > out["noise_pts"])
    return out


@dataclasses.dataclass(frozen=True)
class CheckConfig:
    """How a setting is checked and timed (gpu_settings_bench.py's flags)."""
    dry_run: bool = False
    rounds: int = 7
    repeats: int = 20
    warmup: int = 3
    modes: Tuple[str, ...] = ("graph", "eager")
    tolerance: float = 1e-3             # float32 on the GPU vs the float64 reference
    reference_tolerance: float = 1e-6   # dry run: float64 vs float64
    seed: int = 0


def torch_program(graph, feeds: Dict[str, np.ndarray]) -> Any:
    from xflowrl.measure.torch_runtime import TorchProgram  # pylint: disable=C0415
    return TorchProgram(graph, feeds)


def run_setting(data: Dict[str, Any], config: CheckConfig, expected_cache: Dict[str, Any],
                deadline: float,
                make_program: Callable[[Any, Dict[str, np.ndarray]], Any] = torch_program
                ) -> Dict[str, Any]:
    """Checks (and unless `config.dry_run`, times) one exported setting's
    graphs. `make_program(graph, feeds)` builds what runs a graph on the
    GPU (a TorchProgram: `check(expected)`, `time(mode, warmup, repeats)`);
    `expected_cache` keeps the reference outputs of originals across
    settings; no round after the second starts past `deadline`
    (time.monotonic)."""
    from xflowrl.engine import graph_from_data  # pylint: disable=import-outside-toplevel
    from xflowrl.executor.reference import execute  # pylint: disable=import-outside-toplevel
    start = time.monotonic()
    name = data["setting"]
    labels = ordered_labels(data["graphs"])
    graphs = {k: graph_from_data(data["graphs"][k]["graph"]) for k in labels}
    original = graphs["original"]
    base_estimate = data["graphs"]["original"]["estimated_ms"]
    feeds = make_feeds(original, name, config.seed)
    key = name.split("/")[0] + graph_key(data["graphs"]["original"]["graph"])
    if key not in expected_cache:  # settings of one graph share its outputs
        expected_cache[key] = execute(original, feeds)
    expected = expected_cache[key]
    row: Dict[str, Any] = {"cost_model": data["cost_model"], "batch": setting_batch(data),
                           "graphs": {}}
    first_of: Dict[str, str] = {}
    for label in labels:
        entry = data["graphs"][label]
        k = graph_key(entry["graph"])
        same_as = first_of.setdefault(k, label)
        row["graphs"][label] = {
            "ops": graphs[label].num_ops(), "estimated_ms": entry["estimated_ms"],
            "estimated_change_pct": change_pct(base_estimate, entry["estimated_ms"]),
            "same_as": None if same_as == label else same_as}
    distinct = [k for k in labels if row["graphs"][k]["same_as"] is None]
    checks: Dict[str, Dict[str, Any]] = {}
    programs: Dict[str, Any] = {}
    for label in distinct:
        try:
            if config.dry_run:
                error = relative_error(execute(graphs[label], feeds), expected)
                checks[label] = check_result(error, config.reference_tolerance)
            else:
                program = make_program(graphs[label], feeds)
                checks[label] = check_result(program.check(expected), config.tolerance)
                if checks[label]["passed"]:
                    programs[label] = program
        except (ValueError, KeyError, NotImplementedError, RuntimeError) as e:
            checks[label] = check_result(None, 0.0, f"{type(e).__name__}: {e}")
    timings: Dict[str, Dict[str, Any]] = {}
    if programs:
        timings, row["rounds"] = time_interleaved(programs, list(config.modes), config.rounds,
                                                  config.warmup, config.repeats, deadline)
    for label in labels:
        g = row["graphs"][label]
        source = g["same_as"] or label
        g["check"] = checks[source]
        g.update(timings.get(source, {}))
    for mode in config.modes:
        if mode in row["graphs"]["original"]:
            base = row["graphs"]["original"][mode]["median_ms"]
            for g in row["graphs"].values():
                if mode in g:
                    g[f"measured_change_pct_{mode}"] = change_pct(base, g[mode]["median_ms"])
    row.update(verdict(row))
    row["seconds"] = time.monotonic() - start
    return row


# ------------------------------------------------------------------ report


def environment(dry_run: bool) -> Dict[str, Any]:
    """The card, driver, CUDA/cuDNN/torch versions, date and commit."""
    env: Dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit(), "python": sys.version.split()[0], "numpy": np.__version__}
    if dry_run:
        env["device"] = "none (dry run: numpy reference executor)"
        return env
    import torch  # pylint: disable=import-outside-toplevel
    env.update({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                "driver": nvidia_smi("driver_version")})
    return env


def nvidia_smi(field: str) -> str:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True, timeout=30)
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def commit() -> str:
    if os.environ.get("XFLOWRL_COMMIT"):
        return os.environ["XFLOWRL_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_ROOT,
                              capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=_ROOT, capture_output=True, text=True,
                               timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+local changes" if dirty else "")


def _pct(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:+.1f}%"


def markdown(report: Dict[str, Any]) -> str:
    """The short table: per setting and method, estimated and measured
    change, the graph's spread, the outputs check and the verdict."""
    c = report["config"]
    how = ("dry run: outputs checked by the reference executor, nothing timed"
           if c["dry_run"] else f"up to {c['rounds']} rounds x {c['repeats']} runs per graph")
    batches = f"batch {c['batch']}" if c["batch"] else "every batch"
    lines = [f"Device: {report['environment']['device']}; {batches}; {how}; "
             f"commit {report['environment']['commit']}.", "",
             "| setting | method | estimated % | measured % (graph) | spread | outputs | "
             "confirmed |", "|---|---|---|---|---|---|---|"]
    for name, row in report["settings"].items():
        for label, g in row["graphs"].items():
            if label == "original":
                continue
            spread = f"{g['graph']['spread_pct']:.1f}%" if "graph" in g else "—"
            same = f" (= {g['same_as']})" if g["same_as"] else ""
            outputs = "ok" if g["check"]["passed"] else "FAILED"
            confirmed = ""
            if label == row["best"]:
                confirmed = {True: "yes", False: "no", None: "—"}[row["confirmed"]]
            lines.append(f"| `{name}` | {label}{same} | {_pct(g['estimated_change_pct'])} | "
                         f"{_pct(g.get('measured_change_pct_graph'))} | {spread} | "
                         f"{outputs} | {confirmed} |")
    unjudged = [f"- `{name}`: {row['reason']}" for name, row in report["settings"].items()
                if row["confirmed"] is None and row["reason"]]
    if unjudged and not c["dry_run"]:
        lines += ["", "Not judged:"] + unjudged
    s = report["summary"]
    lines += ["", f"{s['settings']} settings ({s['skipped']} skipped); outputs ok on "
              f"{s['outputs_ok']}; best method confirmed on {s['confirmed']} of {s['judged']} "
              f"judged; {s['seconds']:.0f} s."]
    return "\n".join(lines)


def summarise(report: Dict[str, Any], seconds: float) -> None:
    rows = report["settings"].values()
    report["summary"] = {
        "settings": len(report["settings"]), "skipped": len(report["skipped"]),
        "outputs_ok": sum(all(g["check"]["passed"] for g in r["graphs"].values())
                          for r in rows),
        "judged": sum(r["confirmed"] is not None for r in rows),
        "confirmed": sum(bool(r["confirmed"]) for r in rows), "seconds": seconds}


def write(report: Dict[str, Any], path: str) -> None:
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            f.write(json.dumps(report, indent=1) + "\n")


def load_exports(folder: str, only: Sequence[str] = (),
                 batch: int = 0) -> List[Tuple[str, Dict[str, Any]]]:
    """The exported settings of `folder` as (path, data), sorted by file name.

    Raises:
      ValueError: no exported setting there, a name of `only` has no file, or
        no file is at `batch` (0: every batch).
    """
    exports = [(path, read_export(path)) for path in export_files(folder)]
    known = {data["setting"] for _, data in exports}
    unknown = sorted(set(only) - known)
    if unknown:
        raise ValueError(f"no file for the settings {unknown}; {folder} has {sorted(known)}")
    batches = sorted({setting_batch(data) for _, data in exports})
    if batch and batch not in batches:
        raise ValueError(f"the exported graphs are at batch {batches}, none at {batch} "
                         "(they are timed as exported)")
    return exports


def check_all(exports: List[Tuple[str, Dict[str, Any]]], config: CheckConfig, *,
              only: Sequence[str] = (), batch: int = 0, max_seconds: float = 400.0,
              out: str = "", graphs_dir: str = "",
              environment_info: Optional[Dict[str, Any]] = None,
              make_program: Callable[[Any, Dict[str, np.ndarray]], Any] = torch_program,
              after_setting: Optional[Callable[[], None]] = None) -> Dict[str, Any]:
    """Every exported setting of `batch` (0: every batch; of `only`, where given), one after
    the other: the report (and `out`, rewritten after each setting).
    `environment_info`: what `environment` says (default: asked here);
    `after_setting`: called after each setting (e.g. to free GPU memory)."""
    start = time.monotonic()
    deadline = start + max_seconds
    report: Dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "mode": "dry_run" if config.dry_run else "cuda",
        "environment": (environment(config.dry_run) if environment_info is None
                        else environment_info),
        "config": {**dataclasses.asdict(config), "graphs_dir": graphs_dir, "batch": batch,
                   "max_seconds": max_seconds},
        "files": {}, "settings": {}, "skipped": {}}
    expected_cache: Dict[str, Any] = {}
    for path, data in exports:
        name = data["setting"]
        if file_setting_name(path) != name:
            print(f"[gpu_settings] note: {path} holds setting {name}", file=sys.stderr)
        if only and name not in only:
            continue
        if batch and setting_batch(data) != batch:
            report["skipped"][name] = f"batch {setting_batch(data)}"
            continue
        if time.monotonic() > deadline:
            report["skipped"][name] = f"max_seconds {max_seconds:g} passed"
            continue
        report["files"][name] = {"file": os.path.basename(path), "sha256": sha256(path)}
        row = report["settings"][name] = run_setting(data, config, expected_cache, deadline,
                                                     make_program)
        ok = all(g["check"]["passed"] for g in row["graphs"].values())
        print(f"[gpu_settings] {name}: {row['seconds']:.1f} s, outputs "
              f"{'ok' if ok else 'FAILED'}, confirmed {row['confirmed']}", file=sys.stderr,
              flush=True)
        summarise(report, time.monotonic() - start)
        write(report, out)
        if after_setting is not None:
            after_setting()
    summarise(report, time.monotonic() - start)
    write(report, out)
    return report
