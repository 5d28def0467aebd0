"""Fits the fitted cost backend's coefficients to onnxruntime on this machine.

    python experiments/fit_cost_model.py [--method=micro] [--budget=full]
        [--output=xflowrl/engine/data/fitted_cpu.json]
    python experiments/fit_cost_model.py --method=profile [--graphs=...] [--runs=20]
    python experiments/fit_cost_model.py --refit_from=<earlier profile output> [--hold_out=...]

Two methods (docs/runtime.md, "A cost model fitted from micro-benchmarks"):

- `micro` (default): `xflowrl.measure.calibration.calibrate`: micro-models
  of every op class over generic grids of shapes, and the training graphs
  with their greedy variants, timed end to end; one joint fit over all
  classes. `--budget` quick (about a minute) or full.
- `profile` (the method before issue 26): every graph of `--graphs` and its
  greedy and TASO variants under `--optimize_with` run with onnxruntime's
  profiler on (`xflowrl.measure.ort_profile.profile_rows`); per-class fits
  of the profiled kernels (`xflowrl.measure.cost_fit.fit`), and the
  executor's overhead fitted over the graphs and folded in.
  `--refit_from` refits such a file's stored rows without profiling;
  `--hold_out` leaves graphs' rows out.

Output: a JSON profile that `CostModel("fitted", profile=<path>)` loads.
"""

from __future__ import annotations

import json
import time

from absl import app, flags, logging

from xflowrl import zoo
from xflowrl.engine import XferSet
from xflowrl.engine.cost import DEFAULT_COST_SPEC, fitted_profile_path
from xflowrl.engine.xfers import DEFAULT_RULE_SET, TASO_ALPHA, TASO_BUDGET
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.executor.weights import random_inputs, random_weights
from xflowrl.measure import calibration, cost_fit, ort_profile
from xflowrl.runs import cost_model_from_spec
from xflowrl.search.greedy import greedy_search

FLAGS = flags.FLAGS
flags.DEFINE_enum("method", "micro", ["micro", "profile"], "micro: calibration.calibrate "
                  "(micro-benchmarks + training graphs, end to end); profile: per-kernel "
                  "profiles of --graphs and their variants.")
flags.DEFINE_enum("budget", "full", sorted(calibration.BUDGETS), "micro: how much to measure.")
flags.DEFINE_list("graphs", list(calibration.TRAINING_GRAPHS), "profile: zoo graphs to profile.")
flags.DEFINE_list("optimize_with", [DEFAULT_COST_SPEC], "profile: cost models whose greedy and "
                  "TASO variants are profiled too.")
flags.DEFINE_list("taso_graphs", ["squeezenet1_1", "resnet18", "resnet50", "bert",
                                  "resnet50_taso"],
                  "profile: graphs whose TASO variant is profiled (TASO on inception_v3 "
                  "takes minutes).")
flags.DEFINE_integer("taso_budget", TASO_BUDGET, "profile: TASO search budget.")
flags.DEFINE_integer("runs", 20, "profile: profiled runs per graph and pass.")
flags.DEFINE_integer("passes", 2, "profile: interleaved passes over all graphs.")
flags.DEFINE_integer("seed", 0, "Weights, inputs (and micro: sampled configurations).")
flags.DEFINE_string("output", fitted_profile_path("cpu"), "Where the profile goes.")
flags.DEFINE_list("hold_out", [], "profile/refit: graphs whose rows (original and variants) "
                  "are left out of the fit.")
flags.DEFINE_string("refit_from", "", "Profile nothing: refit from the rows and graph times "
                    "stored in an earlier --method=profile output file.")


def variants(name: str, xfers: XferSet) -> dict:
    """The original and its greedy (and TASO) variants under each cost model,
    distinct graphs only, by "<graph>/<variant>"."""
    original = zoo.get_graph(name)
    weights = random_weights(original, FLAGS.seed, gain=zoo.weight_gain(name))
    feeds = random_inputs(original, FLAGS.seed)
    out = {"original": original}
    for spec in FLAGS.optimize_with:
        model = cost_model_from_spec(spec)
        env = GraphEnv(original, xfers, model, EnvConfig(max_steps=NO_STEP_LIMIT))
        greedy_search(env)
        out[f"greedy[{spec}]"] = env.graph
        if name in FLAGS.taso_graphs and FLAGS.taso_budget > 0:
            out[f"taso[{spec}]"] = xfers.search(original, model, alpha=TASO_ALPHA,
                                                budget=FLAGS.taso_budget).graph
    unique, seen = {}, set()
    for key, graph in out.items():
        if graph.hash() not in seen:
            seen.add(graph.hash())
            unique[f"{name}/{key}"] = (graph, weights, feeds)
    return unique


def main(argv):
    del argv
    if FLAGS.method == "micro" and not FLAGS.refit_from:
        result = calibration.calibrate(FLAGS.output, budget=FLAGS.budget, seed=FLAGS.seed,
                                       progress=logging.info)
        print(json.dumps(result, indent=1))
        return
    if FLAGS.refit_from:
        with open(FLAGS.refit_from) as f:
            earlier = json.load(f)
        if not earlier.get("rows") or "graphs" not in earlier:
            raise app.UsageError(f"{FLAGS.refit_from} stores no profiled rows: --refit_from "
                                 "takes a --method=profile output")
        rows, per_graph = cost_fit.read_rows(earlier), earlier["graphs"]
        command = earlier["command"] + f" (refit: --refit_from={FLAGS.refit_from})"
    else:
        xfers = XferSet.from_name(DEFAULT_RULE_SET)
        todo = {}
        for name in FLAGS.graphs:
            start = time.time()
            todo.update(variants(name, xfers))
            logging.info("%s: variants in %.0f s", name, time.time() - start)
        rows, per_graph = ort_profile.profile_rows(todo, FLAGS.runs, FLAGS.passes)
        command = "python experiments/fit_cost_model.py --method=profile " + " ".join(
            f"--{k}={','.join(v) if isinstance(v, list) else v}" for k, v in (
                ("graphs", FLAGS.graphs), ("optimize_with", FLAGS.optimize_with),
                ("taso_graphs", FLAGS.taso_graphs), ("runs", FLAGS.runs),
                ("passes", FLAGS.passes), ("seed", FLAGS.seed)))
    if FLAGS.hold_out:
        rows = [r for r in rows if r.graph.split("/")[0] not in FLAGS.hold_out]
        per_graph = [g for g in per_graph if g["graph"] not in FLAGS.hold_out]
        command += f" --hold_out={','.join(FLAGS.hold_out)}"
    coefficients, stats = cost_fit.fit(rows)
    scale, per_kernel = cost_fit.overhead_scale(per_graph)
    report = {
        "description": "fitted cost backend: per op class ms = c0 + c1*GFLOP + c2*MB + "
                       "c3*max(0, MB - c4) (experiments/fit_cost_model.py --method=profile); "
                       "onnxruntime 1 thread, all graph optimizations",
        "command": command,
        "machine": calibration.machine(),
        "method": "profile",
        "coefficients": cost_fit.fold_overhead(coefficients, scale, per_kernel),
        "overhead_scale": scale,
        "per_kernel_overhead_ms": per_kernel,
        "fit": stats,
        "graphs": per_graph,
        "rows": [r._asdict() for r in rows],
    }
    cost_fit.write_profile(FLAGS.output, report)
    print(json.dumps({k: report[k] for k in ("coefficients", "overhead_scale",
                                             "per_kernel_overhead_ms", "fit", "graphs")},
                     indent=1))


if __name__ == "__main__":
    app.run(main)
