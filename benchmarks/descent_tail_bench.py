"""What one-step greedy misses past the environment's L, and what going on
over every location costs; prints JSON.

    python benchmarks/descent_tail_bench.py [--graphs=inception_v3] [--rules=taso]
        [--cost_models=analytic/v100,learned/h100] [--out_json=PATH]

Equality saturation's descent (its ILP's start and its floor) is one-step
greedy under the environment's L (`greedy_walk`), then, from its graph,
one-step greedy over every location (`greedy_walk_every_location`, the
candidates TASO's search weighs). Per setting (zoo graph x rule set x cost
model, batch 1) this benchmark runs both, as `equality_saturation` does,
and reports each one's CPU seconds (this thread), the tail's steps and the
costs; and, on greedy's graph, every xfer whose improving candidates lie
past its first L locations: its locations, the improving ones, and how
many of those are within L. The summary gives, per cost model, the
median and largest CPU of the tail and the settings where it went on.
Each setting's row goes to stderr as it ends; the report (summary and
rows) to stdout at the end.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Dict, List

from absl import app, flags
import numpy as np

from search_matrix import zoo_graph
from xflowrl.engine import XferSet
from xflowrl.entry_points import cost_model_from_spec
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.search.greedy import EVERY_LOCATION, greedy_walk, greedy_walk_every_location

FLAGS = flags.FLAGS
ZOO = ("squeezenet1_1", "resnet18", "vgg19", "resnext50", "resnet50_taso", "bert", "vit",
       "resnet50", "nasrnn", "inception_v3", "nasnet_a")
flags.DEFINE_list("graphs", list(ZOO), "Zoo graphs (batch 1).")
flags.DEFINE_list("rules", ["tensat", "taso", "default", "generated", "primitive"], "Rule sets.")
flags.DEFINE_list("cost_models", ["analytic/v100"], "Cost models.")
flags.DEFINE_string("out_json", "", "Also write the report here.")


def hidden_improving(env: GraphEnv, graph, cost: float) -> List[Dict]:
    """The xfers of `graph` whose improving candidates lie past the first L
    of their locations: name, locations, improving ones, those within L."""
    locs = env.xfers.locations(graph, EVERY_LOCATION, env.max_ops)
    counts = locs.count_array
    flat = locs.flat_costs(env.cost_model)
    limit = env.config.max_locations
    out, start = [], 0
    for x in locs.active_xfers():
        n = int(counts[x])
        # Improving as one-step greedy counts it: by more than 1e-9 % of the
        # initial cost (`greedy_walk`'s min_improvement).
        improving = np.flatnonzero(flat[start:start + n] < cost - 1e-11 * env.initial_cost)
        start += n
        if len(improving) and improving[-1] >= limit:
            out.append({"xfer": env.xfers.names[x], "locations": n,
                        "improving": len(improving),
                        "improving_within_l": int((improving < limit).sum())})
    return out


def run_setting(graph_name: str, rules: str, cost_model: str) -> Dict:
    xfers = XferSet.from_name(rules)
    env = GraphEnv(zoo_graph(graph_name), xfers, cost_model_from_spec(cost_model),
                   EnvConfig(max_steps=NO_STEP_LIMIT))
    start = time.thread_time()
    walk = greedy_walk(env)
    walk_cpu = time.thread_time() - start
    start = time.thread_time()
    tail = greedy_walk_every_location(env, walk.graph)
    tail_cpu = time.thread_time() - start
    initial = env.initial_cost
    return {"setting": f"{graph_name}/{rules}/{cost_model}", "walk_cpu_s": walk_cpu,
            "tail_cpu_s": tail_cpu, "walk_steps": len(walk.applied),
            "tail_steps": len(tail.applied), "tail_xfers": sorted({n for n, _ in tail.applied}),
            "walk_change_pct": 100.0 * (walk.cost - initial) / initial,
            "tail_change_pct": 100.0 * (tail.cost - initial) / initial,
            "hidden_improving": hidden_improving(env, walk.graph, walk.cost)}


def summary(rows: List[Dict]) -> Dict:
    out = {}
    for model in FLAGS.cost_models:
        mine = [r for r in rows if r["setting"].endswith("/" + model)]
        cpu = [r["tail_cpu_s"] for r in mine]
        out[model] = {"settings": len(mine), "tail_cpu_s_median": statistics.median(cpu),
                      "tail_cpu_s_max": max(cpu),
                      "went_on": [r["setting"] for r in mine if r["tail_steps"]]}
    return out


def main(argv):
    del argv
    rows = []
    for model in FLAGS.cost_models:
        for graph_name in FLAGS.graphs:
            for rules in FLAGS.rules:
                rows.append(run_setting(graph_name, rules, model))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)  # progress
    report = {"benchmark": "descent_tail_bench", "summary": summary(rows), "rows": rows}
    print(json.dumps(report, indent=1))
    if FLAGS.out_json:
        with open(FLAGS.out_json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    app.run(main)
