"""The cudnn cost backend on a GPU, against the GPU-like analytic profile;
prints JSON.

    python benchmarks/cudnn_bench.py [--graphs=squeezenet1_1,bert]
        [--taso_budget=100] [--taso_time_limit_s=90] [--out=FILE]

Needs an engine built with the cudnn backend on a machine with a CUDA device
(docs/engine.md, "The cudnn backend"); it imports nothing but the engine, the
zoo, the environment (for greedy) and numpy, so it runs where TensorFlow is
not installed. Per graph:

- **costs**: the graph's total under cudnn (measured here), the analytic
  `v100` profile (the GPU-like setting of the reproduction) and the
  analytic `h100` profile; per op type, each backend's share.
- **stability**: a second, fresh cudnn model measures the graph again (no
  memo shared): `spread` is max/min - 1 of the two totals.
- **measuring time**: seconds for the first (cold) and a second (memoized)
  costing of the graph, and how many op configurations were measured.
- **search under cudnn**: one-step greedy (`xflowrl.search.greedy_walk`, the
  environment's rule: the cheapest candidate among the first L locations of
  each xfer, ties to the lowest xfer then location; stop when none is
  cheaper) and TASO's search
  at `--taso_budget`, each optimising the measured cudnn cost.
- **do the GPU-like profile's gains hold on a GPU**: greedy and TASO's
  search optimising the analytic v100 cost, their final graphs re-costed
  under cudnn.
- **`--runtime`**: every graph above run end to end on the GPU in PyTorch
  (`xflowrl.measure.torch_runtime`), outputs checked against the reference
  executor, then timed as a CUDA graph and eagerly; `--agent_results` adds
  the graphs that train_mf.py / train_mb.py runs recorded, and
  `--generalist_results` the held-out graphs of train_generalist.py runs
  (the policy's and greedy's).
- **`--from_json`**: the Markdown tables of an earlier `--out` file
  (docs/engine.md, "Measured on a GPU").

Costs are milliseconds; `change_pct` is (final - initial) / initial * 100.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional

from absl import app, flags
import numpy as np

from xflowrl import zoo
from xflowrl.engine import (
    CostModel,
    DEFAULT_MAX_LOCATIONS,
    GPU_PROFILE,
    Graph,
    XferSet,
    available_backends,
)
from xflowrl.engine.cost import cost_model_from_spec
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.results.thesis import THESIS_GRAPHS
from xflowrl.search.greedy import greedy_walk

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", list(THESIS_GRAPHS), "Zoo graphs to measure.")
flags.DEFINE_integer("taso_budget", 100, "TASO's search budget (graphs expanded).")
flags.DEFINE_float("taso_time_limit_s", 90.0, "Wall-clock limit of each TASO search.")
flags.DEFINE_integer("max_locations", DEFAULT_MAX_LOCATIONS, "L, as the environment's.")
flags.DEFINE_string("out", "", "Also write the JSON here.")
flags.DEFINE_string("md", "", "Also write the Markdown tables (docs/engine.md's) here.")
flags.DEFINE_string("from_json", "", "Measure nothing: print the Markdown tables of this "
                    "earlier --out file.")
flags.DEFINE_bool("runtime", False, "Also run every graph and its searches' graphs on the "
                  "GPU in PyTorch (xflowrl.measure.torch_runtime): outputs checked "
                  "against the reference executor, end-to-end time measured.")
flags.DEFINE_list("agent_results", [], "--runtime: result.json files of train_mf.py or "
                  "train_mb.py runs on these graphs; each agent's graph (its substitutions "
                  "replayed on the zoo graph) is run beside the searches' graphs.")
flags.DEFINE_list("generalist_results", [], "--runtime: result.json files of "
                  "experiments/train_generalist.py runs: on each held-out graph, the policy's "
                  "graph (replayed) and greedy's, run on the GPU ('generalist' in the JSON).")
flags.DEFINE_bool("graph_timing", True, "The cudnn backends time each op's runs replayed "
                  "from a CUDA graph (the default); false: one run per pair of events.")
flags.DEFINE_bool("fuse_conv_relu", True, "--runtime: a convolution with a fused ReLU "
                  "is one cuDNN call (the engine's op); false: a convolution, then a ReLU.")
flags.DEFINE_integer("rounds", 5, "--runtime: rounds over the variants (interleaved).")
flags.DEFINE_integer("repeats", 20, "--runtime: timed runs per variant and round.")
flags.DEFINE_float("tolerance", 1e-3, "--runtime: largest relative output error "
                   "(float32, TF32 off) accepted against the reference executor.")


def change_pct(initial: float, final: float) -> float:
    return (final - initial) / initial * 100.0


def greedy(graph: Graph, xfers: XferSet, model: CostModel, max_locations: int) -> Dict:
    """One-step greedy (`xflowrl.search.greedy_walk`: the environment's rule,
    without its observations, which need TensorFlow)."""
    start = time.perf_counter()
    env = GraphEnv(graph, xfers, model, EnvConfig(max_locations=max_locations))
    walk = greedy_walk(env)
    return {"graph": walk.graph, "steps": len(walk.applied), "initial_ms": env.initial_cost,
            "final_ms": walk.cost, "change_pct": change_pct(env.initial_cost, walk.cost),
            "seconds": time.perf_counter() - start}


def taso(graph: Graph, xfers: XferSet, model: CostModel) -> Dict:
    start = time.perf_counter()
    result = xfers.search(graph, model, budget=FLAGS.taso_budget,
                          time_limit_s=FLAGS.taso_time_limit_s)
    return {"graph": result.graph, "steps": len(result.applied),
            "initial_ms": result.initial_cost, "final_ms": result.best_cost,
            "change_pct": change_pct(result.initial_cost, result.best_cost),
            "seconds": time.perf_counter() - start}


def by_type(graph: Graph, models: Dict[str, CostModel]) -> Dict[str, Dict[str, float]]:
    """Per op type, each model's ms summed over the graph's ops of that type."""
    types = [op.type for op in graph.ops()]
    out: Dict[str, Dict[str, float]] = {}
    for label, model in models.items():
        for t, ms in zip(types, graph.op_costs(model)):
            if ms:
                row = out.setdefault(t, {})
                row[label] = row.get(label, 0.0) + ms
    return out


def timed(fn: Callable[[], float]) -> List[float]:
    start = time.perf_counter()
    value = fn()
    return [value, time.perf_counter() - start]


def public(result: Dict) -> Dict:
    return {k: v for k, v in result.items() if k != "graph"}


def agent_graphs(paths: List[str], xfers: XferSet) -> Dict[str, Dict[str, Dict]]:
    """Per zoo graph, per label (the result file's folders), the agent's
    graph: its recorded substitutions replayed on the zoo graph, and the
    cost change its run recorded under the run's own cost model."""
    out: Dict[str, Dict[str, Dict]] = {}
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        model_free = "agent_applied" in run
        applied = run["agent_applied" if model_free else "controller_cheapest_applied"]
        final = run["agent_cost_ms" if model_free else "controller_cheapest_cost_ms"]
        graph = xfers.replay(zoo.get_graph(run["graph"]),
                             [(x, int(location)) for x, location in applied])
        recosted = graph.cost(cost_model_from_spec(run["cost_model"]))
        if abs(recosted - final) > 1e-9 * max(final, 1.0):
            raise ValueError(f"{path}: the replayed graph costs {recosted} ms under "
                             f"{run['cost_model']}, the run recorded {final} ms")
        label = "agent " + "/".join(os.path.normpath(os.path.dirname(path)).split(os.sep)[-3:])
        out.setdefault(run["graph"], {})[label] = {
            "graph": graph, "cost_model": run["cost_model"],
            "recorded_change_pct": change_pct(run["initial_cost_ms"], final)}
    return out


def measure_graph(name: str, cudnn: CostModel, xfers: XferSet,
                  agents: Optional[Dict[str, Dict]] = None) -> Dict:
    graph = zoo.get_graph(name)
    v100 = CostModel("analytic", profile=GPU_PROFILE)
    h100 = CostModel("analytic", profile="h100")
    before = cudnn.num_new_measurements
    cold, cold_s = timed(lambda: graph.cost(cudnn))
    measured = cudnn.num_new_measurements - before
    warm, warm_s = timed(lambda: graph.cost(cudnn))
    # A fresh model: every configuration of this graph measured again.
    again = graph.cost(CostModel("cudnn", graph_timing=FLAGS.graph_timing))
    row: Dict = {
        "ops": graph.num_ops(),
        "cost_ms": {"cudnn": cold, "analytic_v100": graph.cost(v100),
                    "analytic_h100": graph.cost(h100)},
        "stability": {"first_ms": cold, "second_model_ms": again,
                      "spread": max(cold, again) / min(cold, again) - 1.0},
        "measuring": {"cold_s": cold_s, "memoized_s": warm_s, "configs_measured": measured,
                      "memoized_equal": warm == cold},
        "by_type_ms": by_type(graph, {"cudnn": cudnn, "analytic_h100": h100}),
    }
    searches, graphs = {}, {"original": graph}
    for method, run in (("greedy", lambda m: greedy(graph, xfers, m, FLAGS.max_locations)),
                        ("taso", lambda m: taso(graph, xfers, m))):
        on_gpu = run(cudnn)
        on_v100 = run(v100)
        recosted = on_v100["graph"].cost(cudnn)
        graphs[f"{method}_cudnn"] = on_gpu["graph"]
        graphs[f"{method}_analytic_v100"] = on_v100["graph"]
        searches[method] = {
            "optimising_cudnn": public(on_gpu),
            "optimising_analytic_v100": {
                **public(on_v100),
                "cudnn_initial_ms": cold,
                "cudnn_final_ms": recosted,
                "cudnn_change_pct": change_pct(cold, recosted),
            },
        }
    row["search"] = searches
    if FLAGS.runtime:
        for label, agent in (agents or {}).items():
            graphs[label] = agent["graph"]
        row["runtime"] = measure_runtime(name, graphs, cudnn)
        for label, agent in (agents or {}).items():
            row["runtime"][label]["recorded"] = {"cost_model": agent["cost_model"],
                                                 "change_pct": agent["recorded_change_pct"]}
    return row


def measure_runtime(name: str, graphs: Dict[str, Graph], cudnn: CostModel,
                    gain: Optional[float] = None) -> Dict:
    """Each variant run on the GPU: its outputs against the reference
    executor's outputs of the original graph (one set of feeds serves all),
    then CUDA-graph and eager times, interleaved over `--rounds`."""
    from xflowrl.executor.reference import execute
    from xflowrl.executor.weights import random_inputs, random_weights
    from xflowrl.measure.torch_runtime import TorchProgram
    original = graphs["original"]
    # Weights drawn by role, so that values stay finite through deep graphs.
    gain = zoo.weight_gain(name) if gain is None else gain
    feeds = {**random_weights(original, seed=0, dtype=np.float64, gain=gain),
             **random_inputs(original, seed=0, dtype=np.float64)}
    expected = execute(original, feeds)
    programs: Dict[str, Any] = {}
    out: Dict[str, Dict[str, Any]] = {}
    for label, graph in graphs.items():
        program = TorchProgram(graph, feeds, fuse_conv_relu=FLAGS.fuse_conv_relu)
        error = program.check(expected)
        if error > FLAGS.tolerance:
            raise AssertionError(f"{label}: outputs differ from the reference executor's "
                                 f"by {error:.3g} (relative), over --tolerance")
        programs[label] = program
        out[label] = {"cudnn_estimate_ms": graph.cost(cudnn), "max_relative_error": error,
                      "graph_ms": [], "eager_ms": []}
    for _ in range(FLAGS.rounds):
        for label, program in programs.items():
            for mode in ("graph", "eager"):
                timing = program.time(mode, warmup=5, repeats=FLAGS.repeats)
                out[label][f"{mode}_ms"].append(timing["median_ms"])
    base = out["original"]
    for label, row in out.items():
        for mode in ("graph", "eager"):
            samples = row.pop(f"{mode}_ms")
            row[mode] = {"median_ms": statistics.median(samples), "min_ms": min(samples),
                         "max_ms": max(samples)}
        row["estimated_change_pct"] = change_pct(base["cudnn_estimate_ms"],
                                                 row["cudnn_estimate_ms"])
    for label, row in out.items():
        for mode in ("graph", "eager"):
            row[f"measured_change_pct_{mode}"] = change_pct(
                out["original"][mode]["median_ms"], row[mode]["median_ms"])
    return out


def generalist_markdown(runs: List[Dict]) -> List[str]:
    """Per held-out graph, over the generalist runs (seeds): estimated and
    measured (CUDA graph) changes of greedy's and the policy's graphs, the
    median and [min, max] over the runs; then how often the policy's median
    is within 2 points of greedy's, and slower than the original."""
    def spread(values: List[float]) -> str:
        return (f"{statistics.median(values):+.1f}% "
                f"[{min(values):+.1f}, {max(values):+.1f}]")
    seeds = ", ".join(str(run["seed"]) for run in runs)
    lines = ["", f"Generalists under {runs[0]['cost_model']}, seeds {seeds}: median "
             "[min, max] over the seeds.", "",
             "| held-out graph | greedy, estimated | policy, estimated | greedy, measured | "
             "policy, measured |", "|---|---|---|---|---|"]
    within = slower = 0
    names = list(runs[0]["graphs"])
    for name in names:
        rows = [run["graphs"][name] for run in runs]
        measured = {k: [r["runtime"][k]["measured_change_pct_graph"] for r in rows]
                    for k in ("greedy", "policy")}
        lines.append(
            f"| {name} | {rows[0]['estimated_change_pct']['greedy']:+.1f}% | "
            f"{spread([r['estimated_change_pct']['policy'] for r in rows])} | "
            f"{spread(measured['greedy'])} | {spread(measured['policy'])} |")
        policy, greedy_ = statistics.median(measured["policy"]), statistics.median(
            measured["greedy"])
        within += abs(policy - greedy_) <= 2.0
        slower += policy > 0.0
    errors = [r["runtime"][k]["max_relative_error"] for run in runs
              for r in run["graphs"].values() for k in r["runtime"]]
    lines += ["", f"Measured (median over seeds): the policy within 2 points of greedy on "
              f"{within} of {len(names)} graphs; slower than the original on {slower}. "
              f"Largest relative output error against the reference executor: "
              f"{max(errors):.1e}."]
    return lines


def markdown(report: Dict) -> str:
    """The tables of docs/engine.md ("Measured on a GPU") from a report."""
    def pct(x: float) -> str:
        return f"{x:+.1f}%"
    runner = {True: "; PyTorch runner: conv+ReLU one cuDNN call",
              False: "; PyTorch runner: conv, then a ReLU kernel",
              None: ""}[report.get("fuse_conv_relu", False)]
    # Reports from before the flag timed launch by launch.
    timing = ("; cudnn timing: CUDA-graph replays" if report.get("graph_timing")
              else "; cudnn timing: one run per pair of events")
    lines = [f"Device: {report['device']}; TASO's budget {report['taso_budget']}{runner}"
             f"{timing}."]
    if report["graphs"]:
        lines += ["", "| graph | analytic v100 | analytic h100 | cudnn | cudnn again "
                  "(spread) | greedy on cudnn | greedy on v100, re-costed on cudnn | "
                  "TASO on cudnn |", "|---|---|---|---|---|---|---|---|"]
    for name, g in report["graphs"].items():
        c, s, q = g["cost_ms"], g["stability"], g["search"]
        lines.append(
            f"| {name} | {c['analytic_v100']:.3f} | {c['analytic_h100']:.3f} | "
            f"{c['cudnn']:.3f} | {s['second_model_ms']:.3f} ({s['spread'] * 100:.1f}%) | "
            f"{pct(q['greedy']['optimising_cudnn']['change_pct'])} | "
            f"{pct(q['greedy']['optimising_analytic_v100']['cudnn_change_pct'])} | "
            f"{pct(q['taso']['optimising_cudnn']['change_pct'])} |")
    labels = ["original", "greedy_analytic_v100", "taso_analytic_v100", "greedy_cudnn",
              "taso_cudnn"]
    timed = [(name, g) for name, g in report["graphs"].items() if "runtime" in g]
    if timed:
        lines += ["", "| graph | graph optimised by | cudnn estimate, ms (change) | "
                  "measured, CUDA graph, ms [range] (change) | measured, eager, ms [range] "
                  "(change) | max. rel. error |", "|---|---|---|---|---|---|"]
    for name, g in timed:
        for label in labels + sorted(set(g["runtime"]) - set(labels)):
            r = g["runtime"][label]
            cells = [f"{r['cudnn_estimate_ms']:.3f} ({pct(r['estimated_change_pct'])})"]
            for mode in ("graph", "eager"):
                m = r[mode]
                cells.append(f"{m['median_ms']:.3f} [{m['min_ms']:.3f}-{m['max_ms']:.3f}] "
                             f"({pct(r[f'measured_change_pct_{mode}'])})")
            shown = label.replace("_", " ") if label in labels else label
            lines.append(f"| {name} | {shown} | " + " | ".join(cells)
                         + f" | {r['max_relative_error']:.1e} |")
    runs = report.get("generalist", [])
    if runs:
        lines += generalist_markdown(runs)
    return "\n".join(lines) + "\n"


def measure_generalist(path: str, cudnn: CostModel, xfers: XferSet) -> Dict:
    """Each held-out graph of a generalist run: the original, greedy's graph
    (this file's greedy under the run's cost model) and the policy's
    (its recorded substitutions replayed, checked against its recorded
    cost), run on the GPU."""
    from xflowrl import corpus
    with open(path) as f:
        run = json.load(f)
    model = cost_model_from_spec(run["cost_model"])
    specs = {spec.name: spec for spec in corpus.specs("held_out")}
    out = {}
    for row in run["held_out"]:
        spec = specs[row["graph"]]
        graph = spec.build()
        policy = xfers.replay(graph, [(x, int(location)) for x, location in
                                      row["policy_applied"]])
        if abs(policy.cost(model) - row["policy_ms"]) > 1e-9 * max(row["policy_ms"], 1.0):
            raise ValueError(f"{path}: {row['graph']}: the replayed policy graph costs "
                             f"{policy.cost(model)} ms, the run recorded {row['policy_ms']}")
        greedy_graph = greedy(graph, xfers, model, FLAGS.max_locations)["graph"]
        runtime = measure_runtime(row["graph"], {"original": graph, "greedy": greedy_graph,
                                                 "policy": policy}, cudnn, spec.weight_gain)
        out[row["graph"]] = {
            "estimated_change_pct": {
                "greedy": change_pct(row["initial_ms"], greedy_graph.cost(model)),
                "greedy_recorded": change_pct(row["initial_ms"], row["greedy_ms"]),
                "policy": change_pct(row["initial_ms"], row["policy_ms"])},
            "runtime": runtime}
        print(f"[cudnn_bench] generalist {row['graph']}", file=sys.stderr, flush=True)
    return {"result": path, "cost_model": run["cost_model"], "seed": run["seed"],
            "graphs": out}


def device_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             check=True, timeout=30)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv):
    del argv
    if FLAGS.from_json:
        with open(FLAGS.from_json) as f:
            print(markdown(json.load(f)), end="")
        return
    if "cudnn" not in available_backends():
        sys.exit("cudnn_bench: this engine was built without the cudnn backend "
                 f"(backends: {available_backends()}); see docs/engine.md")
    # Raises ValueError without a CUDA device.
    cudnn = CostModel("cudnn", graph_timing=FLAGS.graph_timing)
    xfers = XferSet.default()
    report = {"device": device_name(), "taso_budget": FLAGS.taso_budget,
              "graph_timing": FLAGS.graph_timing,
              "fuse_conv_relu": FLAGS.fuse_conv_relu if FLAGS.runtime else None,
              "taso_time_limit_s": FLAGS.taso_time_limit_s,
              "max_locations": FLAGS.max_locations, "rules": len(xfers), "graphs": {}}
    agents = agent_graphs(FLAGS.agent_results, xfers)
    for name in FLAGS.graphs:
        start = time.perf_counter()
        report["graphs"][name] = measure_graph(name, cudnn, xfers, agents.get(name))
        print(f"[cudnn_bench] {name}: {time.perf_counter() - start:.1f} s", file=sys.stderr,
              flush=True)
        if FLAGS.out:  # after each graph, so that a long run keeps what it measured
            with open(FLAGS.out, "w") as f:
                f.write(json.dumps(report, indent=1, sort_keys=True) + "\n")
    if FLAGS.generalist_results:
        report["generalist"] = [measure_generalist(path, cudnn, xfers)
                                for path in FLAGS.generalist_results]
        if FLAGS.out:
            with open(FLAGS.out, "w") as f:
                f.write(json.dumps(report, indent=1, sort_keys=True) + "\n")
    if FLAGS.md:
        with open(FLAGS.md, "w") as f:
            f.write(markdown(report))
    print(json.dumps(report, indent=1, sort_keys=True))


if __name__ == "__main__":
    app.run(main)
