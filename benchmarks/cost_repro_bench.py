"""Reproducibility of the onednn cost backend across processes; prints JSON.

    python benchmarks/cost_repro_bench.py [--processes=3] [--graphs=resnet50,bert]
        [--warmup=N --repeats=N] [--worker_pythonpath=DIR] [--write_reference]

Runs `--processes` fresh Python processes one after the other (never two at
once, so they do not compete with each other). Each builds every zoo graph
(`xflowrl.zoo.GRAPHS` by default) and measures it with a new
`CostModel("onednn")` whose cache is an empty temporary file: nothing is
reused between processes, or between graphs of one process. It reports the
total estimated cost of each graph and the time of every op configuration.

Per graph the report gives the totals of the processes, their median and
spread (max/min - 1), how long one measurement of the graph took, and the op
configurations whose variation moved the total most (node count times the
max - min of its time across processes). The goal of the backend
(docs/engine.md) is a spread under 5% on every graph.

`--worker_pythonpath` runs the worker processes on another checkout (e.g. a
copy of an older commit with its built engine), so that an old and a new
backend are measured by the same script. `--write_reference` writes the
median time of every configuration across the processes as the shipped
reference table (`xflowrl.engine.cost.REFERENCE_PATH`, a cost cache file)
and its provenance beside it (`.json`).

Run at normal priority on an otherwise quiet machine: the figures are only
as good as the CPU time the processes get.
"""

import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("processes", 3, "Fresh processes, run one after the other.")
flags.DEFINE_list("graphs", [], "Zoo graphs to measure (default: all of zoo.GRAPHS).")
flags.DEFINE_integer("warmup", None, "CostModel warmup (default: the backend's).")
flags.DEFINE_integer("repeats", None, "CostModel repeats (default: the backend's).")
flags.DEFINE_integer("top", 3, "Op configurations listed per graph.")
flags.DEFINE_list("worker_pythonpath", [],
                  "PYTHONPATH of the worker processes (default: this checkout); with "
                  "several, their processes alternate and each gets its own report.")
flags.DEFINE_bool("write_reference", False,
                  "Write the per-configuration medians as the shipped reference table.")
flags.DEFINE_string("reference_path", "",
                    "Where --write_reference writes (default: cost.REFERENCE_PATH).")
flags.DEFINE_string("worker", "", "Internal: measure these graphs (comma list) and "
                    "print one JSON line.")


def _read_cache(path: str) -> Dict[str, float]:
    table = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                key, ms = line.rstrip("\n").rsplit("\t", 1)
                table[key] = float(ms)
    return table


def measure_graphs(names: List[str]) -> Dict[str, dict]:
    """In this process: per graph, its total, per-config times and node counts.

    Each graph gets its own backend and empty cache file, so every
    configuration it pays for is measured in this process.
    """
    from xflowrl import zoo  # the worker's checkout
    from xflowrl.engine import CostModel
    kwargs = {k: v for k, v in (("warmup", FLAGS.warmup), ("repeats", FLAGS.repeats))
              if v is not None}
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = os.path.join(tmp, f"{name}.tsv")
            graph = zoo.get_graph(name)
            model = CostModel("onednn", cache_path=path, **kwargs)
            start = time.perf_counter()
            costs = graph.op_costs(model)
            seconds = time.perf_counter() - start
            table = _read_cache(path)
            # A node's cost is its configuration's memoized time, bit for bit.
            by_value = {}
            for key, ms in table.items():
                by_value.setdefault(ms, []).append(key)
            counts = {}
            for c in costs:
                keys = by_value.get(c, [])
                if len(keys) == 1:
                    counts[keys[0]] = counts.get(keys[0], 0) + 1
            out[name] = {"total_ms": sum(costs), "seconds": seconds,
                         "configs": table, "nodes": counts}
    return out


def _spread(values: List[float]) -> float:
    return max(values) / min(values) - 1.0 if min(values) > 0 else float("inf")


def summarize(runs: List[Dict[str, dict]], top: int) -> Dict[str, dict]:
    """Per graph: totals, median, spread and the configurations varying most."""
    report = {}
    for name in [n for n in runs[0] if all(n in r for r in runs)]:
        totals = [r[name]["total_ms"] for r in runs]
        configs = runs[0][name]["configs"]
        nodes = runs[0][name]["nodes"]
        movers = []
        for key in configs:
            times = [r[name]["configs"][key] for r in runs if key in r[name]["configs"]]
            n = nodes.get(key, 1)
            movers.append({"config": key, "nodes": n,
                           "ms": [round(t, 4) for t in times],
                           "spread": round(_spread(times), 4),
                           "total_range_ms": round(n * (max(times) - min(times)), 4)})
        movers.sort(key=lambda m: -m["total_range_ms"])
        report[name] = {
            "totals_ms": [round(t, 3) for t in totals],
            "median_ms": round(statistics.median(totals), 3),
            "spread": round(_spread(totals), 4),
            "configs": len(configs),
            "seconds_per_process": [round(r[name]["seconds"], 1) for r in runs],
            "top_varying": movers[:top],
        }
    return report


def write_reference(runs: List[Dict[str, dict]], path: str, graphs: List[str]) -> int:
    """Writes per-configuration medians (cost cache format) and a provenance file."""
    samples: Dict[str, List[float]] = {}
    for run in runs:
        for name in run:
            for key, ms in run[name]["configs"].items():
                samples.setdefault(key, []).append(ms)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        for key in sorted(samples):
            f.write(f"{key}\t{statistics.median(samples[key]):.6g}\n")
    meta = {
        "command": "python " + " ".join(sys.argv),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": _cpu_name(), "cpus": os.cpu_count(), "platform": platform.platform(),
        "processes": len(runs), "graphs": graphs, "configs": len(samples),
        "value": "median over processes of each process's backend estimate",
        "warmup": FLAGS.warmup or "CostModel default",
        "repeats": FLAGS.repeats or "CostModel default",
    }
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    return len(samples)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def run_worker(names: List[str], root: str) -> Dict[str, dict]:
    """One fresh process measuring `names` on checkout `root`; its parsed JSON."""
    cmd = [sys.executable, os.path.abspath(__file__), f"--worker={','.join(names)}"]
    for flag in ("warmup", "repeats"):
        if getattr(FLAGS, flag) is not None:
            cmd.append(f"--{flag}={getattr(FLAGS, flag)}")
    env = dict(os.environ, PYTHONPATH=root)
    proc = subprocess.run(cmd, env=env, cwd=root, check=True, capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv):
    del argv
    if FLAGS.worker:
        if FLAGS.worker == "all":
            from xflowrl import zoo  # the worker's checkout
            names = list(zoo.GRAPHS)
        else:
            names = FLAGS.worker.split(",")
        print(json.dumps(measure_graphs(names)))
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, here)  # this checkout's xflowrl, whatever is installed
    names = FLAGS.graphs or ["all"]  # "all": each worker's own zoo.GRAPHS
    roots = FLAGS.worker_pythonpath or [here]
    runs = {root: [] for root in roots}
    load_before = os.getloadavg()
    for _ in range(FLAGS.processes):
        for root in roots:  # alternate, so that load drifts hit every variant
            runs[root].append(run_worker(names, root))
    report = {"processes": FLAGS.processes, "warmup": FLAGS.warmup,
              "repeats": FLAGS.repeats, "nice": os.nice(0), "cpu": _cpu_name(),
              "load_avg_before": load_before, "load_avg_after": os.getloadavg(),
              "variants": {}}
    for root in roots:
        graphs = summarize(runs[root], FLAGS.top)
        report["variants"][root] = {
            "max_spread": max(g["spread"] for g in graphs.values()), "graphs": graphs}
    if FLAGS.write_reference:
        from xflowrl.engine import cost
        path = FLAGS.reference_path or cost.REFERENCE_PATH
        mine = here if here in runs else roots[0]  # this checkout's backend
        graphs = sorted(runs[mine][0])
        report["reference"] = {"path": path, "measured_by": mine,
                               "configs": write_reference(runs[mine], path, graphs)}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    app.run(main)
