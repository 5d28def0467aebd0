"""The zoo table (docs/zoo.md): size, estimated cost and the two search
baselines of every graph, under one cost model.

    python benchmarks/zoo_bench.py [--graphs=vit,nasrnn] [--taso_budget=1000]
        [--taso_time_limit_s=300] [--verify] [--exclude=XFER,...]
        [--onnx_check [--onnx_tf]]

Prints JSON: per graph, the op count and op counts by type, the estimated
cost (`CostModel("analytic")`, profile cpu, by default), the valid locations
and the xfers with one at reset (default rules, L=200, as `make_env`), one-step
greedy (cost, steps, seconds; no step limit, as in `run_baselines`), TASO's
backtracking search (alpha, budget, optional time limit: cost, expansions,
seconds, whether the time limit stopped it, substitutions applied by name
and count) and the peak resident memory of the process that did it. Each
graph runs in a fresh subprocess so that its peak RSS is its own.

`--verify` runs the original graph and greedy's and TASO's results through
the float64 reference executor on the same random values (`random_weights`,
`random_inputs`, `zoo.weight_gain`) and reports
whether they agree (rtol 1e-4, as tests/rules/semantics_test.py). `--exclude`
drops xfers by name (e.g. to see what one rule contributes).

`--onnx_check` exports each full graph with random weights
(`xflowrl.executor.weights.random_weights`; gain 0.2 for the softmax-free
transformers, whose values are cubic in their input per layer) to ONNX,
checks it with `onnx.checker` and runs it in onnxruntime (and onnx-tf with
`--onnx_tf`): the outputs must match the float64 reference executor (rtol 1e-3, atol 1e-4 of the largest
output); the seconds spent are reported.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from typing import Dict

from absl import app, flags
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.engine.cost import DEFAULT_BACKEND, DEFAULT_PROFILE
from xflowrl.engine.xfers import (
    TASO_ALPHA,
    TASO_BUDGET,
    peak_rss_mb,
)
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.executor import reference as executor
from xflowrl.executor.weights import random_inputs, random_weights
from xflowrl.rules.sets import DEFAULT_RULE_SET, load_rule_set
from xflowrl.search.greedy import greedy_search

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["vit", "nasnet_a", "resnext50", "nasrnn", "vgg19"],
                  "Zoo graphs (names of xflowrl.zoo.GRAPHS).")
flags.DEFINE_string("rules", DEFAULT_RULE_SET, "Rule set (xflowrl.rules.sets.RULE_SETS).")
flags.DEFINE_list("exclude", [], "Xfer names dropped from the rule set (e.g. one that "
                  "rewrites a graph unsoundly).")
flags.DEFINE_string("cost_model", DEFAULT_BACKEND, "Cost backend.")
flags.DEFINE_string("profile", DEFAULT_PROFILE, "Cost-model profile.")
flags.DEFINE_float("taso_alpha", TASO_ALPHA, "TASO's relaxation alpha.")
flags.DEFINE_integer("taso_budget", TASO_BUDGET, "TASO's budget (expansions); 0 skips it.")
flags.DEFINE_float("taso_time_limit_s", 0.0, "Stops TASO's search after this many "
                   "seconds (0: no limit).")
flags.DEFINE_integer("greedy_max_steps", NO_STEP_LIMIT, "Step cap of greedy (default: "
                     "in effect none).")
flags.DEFINE_bool("onnx_check", False, "Also export to ONNX and run in onnxruntime.")
flags.DEFINE_bool("onnx_tf", False, "With --onnx_check: run the model in onnx-tf too.")
flags.DEFINE_bool("verify", False, "Run greedy's and TASO's graphs and the original through "
                  "the float64 reference executor on the same random values.")
flags.DEFINE_bool("isolate", True, "Run each graph in a subprocess of its own.")



def _onnx_check(graph, name: str) -> Dict[str, object]:
    """Exports `graph` with random weights and compares onnxruntime with the
    reference executor; raises AssertionError on a mismatch."""
    import onnx
    import onnxruntime

    from xflowrl.onnx_io import to_onnx
    start = time.time()
    values = _random_values(graph, name, np.float32)
    inputs = {k: values[k] for k in graph.inputs()}
    model = to_onnx(graph, {k: v for k, v in values.items() if k not in inputs})
    onnx.checker.check_model(model)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    want = executor.execute(graph, {k: v.astype(np.float64) for k, v in values.items()})
    row: Dict[str, object] = {"onnx_nodes": len(model.graph.node)}
    runs = {"onnxruntime": lambda: session.run(None, inputs)}
    if FLAGS.onnx_tf:
        import onnx_tf.backend
        runs["onnx_tf"] = lambda: [np.asarray(v) for v in
                                   onnx_tf.backend.prepare(model).run(inputs)]
    for backend, run in runs.items():
        worst = 0.0
        for g, w in zip(run(), want):
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4 * np.abs(w).max(),
                                       err_msg=f"{name} in {backend}")
            worst = max(worst, float(np.abs(g - w).max() / np.abs(w).max()))
        row[f"{backend}_max_error_relative_to_max_output"] = worst
    row["seconds"] = time.time() - start
    return row


def _xfers() -> XferSet:
    rules = load_rule_set(FLAGS.rules)
    unknown = set(FLAGS.exclude) - {r.name for r in rules}
    if unknown:
        raise ValueError(f"--exclude names no xfer of {FLAGS.rules!r}: {sorted(unknown)}")
    return XferSet([r for r in rules if r.name not in FLAGS.exclude])


def _random_values(graph, name: str, dtype) -> Dict[str, np.ndarray]:
    """Random inputs and weights (`random_weights`: He-normal convs and
    matmuls, gain 0.2 for the softmax-free transformers)."""
    return {**random_weights(graph, seed=0, dtype=dtype, gain=zoo.weight_gain(name)),
            **random_inputs(graph, seed=0, dtype=dtype)}


class _Verifier:
    """Compares graphs with the original on one set of float64 random values."""

    def __init__(self, original, name: str):
        self.feeds = _random_values(original, name, np.float64)
        self.want = executor.execute(original, self.feeds)
        if not all(np.all(np.isfinite(w)) for w in self.want):
            raise ValueError(f"{name}: the original's outputs are not finite")

    def __call__(self, graph) -> Dict[str, object]:
        got = executor.execute(graph, self.feeds)
        error = max(float(np.abs(g - w).max() / np.abs(w).max()) for g, w in zip(got, self.want))
        same = all(np.allclose(g, w, rtol=1e-4, atol=1e-8 * np.abs(w).max())
                   for g, w in zip(got, self.want))
        return {"equivalent": bool(same), "max_error_relative_to_max_output": error}


def bench_graph(name: str) -> Dict[str, object]:
    """The table row of one graph (see the module docstring)."""
    start = time.time()
    env = GraphEnv(zoo.get_graph(name), _xfers(),
                   CostModel(FLAGS.cost_model, profile=FLAGS.profile),
                   EnvConfig(max_steps=FLAGS.greedy_max_steps))
    graph = env.initial_graph
    verify = _Verifier(graph, name) if FLAGS.verify else None
    obs = env.reset()
    per_xfer = obs.location_mask[:-1].sum(axis=1)
    row: Dict[str, object] = {
        "ops": graph.num_ops(),
        "op_counts": dict(sorted(graph.op_counts().items())),
        "cost_ms": graph.cost(env.cost_model),
        "locations_at_reset": int(per_xfer.sum()),
        "xfers_with_locations": {env.xfers.names[x]: int(n)
                                 for x, n in enumerate(per_xfer) if n},
        "setup_seconds": time.time() - start,
    }
    start = time.time()
    greedy = greedy_search(env)
    row["greedy"] = {"cost_ms": greedy.final_cost, "steps": len(greedy.applied),
                     "seconds": time.time() - start,
                     "hit_step_cap": len(greedy.applied) >= FLAGS.greedy_max_steps,
                     "applied": dict(collections.Counter(x for x, _ in greedy.applied))}
    if verify:
        row["greedy"]["verify"] = verify(env.graph)
    if FLAGS.taso_budget > 0:
        result = env.xfers.search(graph, env.cost_model, alpha=FLAGS.taso_alpha,
                                  budget=FLAGS.taso_budget,
                                  time_limit_s=FLAGS.taso_time_limit_s)
        row["taso"] = {"cost_ms": result.best_cost, "alpha": FLAGS.taso_alpha,
                       "budget": FLAGS.taso_budget, "expansions": result.expansions,
                       "enqueued": result.enqueued, "seconds": result.seconds,
                       "time_limit_s": FLAGS.taso_time_limit_s,
                       "stopped_by_time_limit": bool(
                           FLAGS.taso_time_limit_s > 0
                           and result.expansions <= FLAGS.taso_budget
                           and result.seconds >= FLAGS.taso_time_limit_s),
                       "applied": dict(collections.Counter(result.applied_names))}
        if verify:
            row["taso"]["verify"] = verify(result.graph)
    if FLAGS.onnx_check:
        row["onnx_check"] = _onnx_check(graph, name)
    row["peak_rss_mib"] = peak_rss_mb()
    return row


def _run_isolated(name: str) -> Dict[str, object]:
    """`bench_graph(name)` in a fresh Python process (its own peak RSS), with
    this process' command-line flags."""
    flags_out = [a for a in sys.argv[1:]
                 if not a.startswith(("--graphs", "--isolate", "--noisolate"))]
    cmd = [sys.executable, os.path.abspath(__file__), f"--graphs={name}", "--noisolate",
           *flags_out]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["graphs"][name]


def main(argv):
    del argv
    report = {"command": " ".join(["python benchmarks/zoo_bench.py", *sys.argv[1:]]),
              "rules": FLAGS.rules, "excluded": FLAGS.exclude,
              "cost_model": FLAGS.cost_model, "profile": FLAGS.profile,
              "graphs": {}}
    for name in FLAGS.graphs:
        report["graphs"][name] = (_run_isolated(name) if FLAGS.isolate
                                  else bench_graph(name))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    app.run(main)
