"""TASO's backtracking search (thesis Algorithm 1) on one graph: the baseline.

    python experiments/taso_search.py --graph=resnet50 --alpha=1.05 --budget=1000

Writes to --results_dir/<graph>/taso_search/: result.json (costs, the
substitutions applied in order, the trace of best cost against expansions and
seconds), result.md, and the optimised graph's op list (graph.json).
"""

import json
import os
import time

from absl import app
from absl import flags
from absl import logging

from xflowrl.graphs import BACKENDS, CostModel, XferSet, zoo
from xflowrl.graphs.xfers import RULE_SETS

FLAGS = flags.FLAGS
flags.DEFINE_string("graph", "resnet50", f"Graph to optimise; one of {zoo.GRAPHS}.")
flags.DEFINE_enum("rules", "default", list(RULE_SETS), "Rule set (xflowrl.graphs.xfers."
                  "RULE_SETS): default = built-ins + generated; builtin+taso = the thesis'.")
flags.DEFINE_float("alpha", 1.05, "Relaxation: queue graphs cheaper than alpha * best.")
flags.DEFINE_integer("budget", 1000, "Graphs expanded (popped from the queue).")
flags.DEFINE_float("time_limit", 0.0, "Stop after this many seconds (0: none).")
flags.DEFINE_enum("cost_model", "analytic", BACKENDS, "Cost backend.")
flags.DEFINE_string("profile", "cpu", "Device profile of the analytic backend.")
flags.DEFINE_string("cost_cache", "results/cost_cache.tsv",
                    "On-disk cache of measured op costs (measured backends).")
flags.DEFINE_string("results_dir", "results", "Where results are written.")


def main(argv):
    del argv
    graph = zoo.get_graph(FLAGS.graph)
    cost_model = CostModel(FLAGS.cost_model, profile=FLAGS.profile,
                           cache_path=FLAGS.cost_cache)
    xfers = XferSet.from_name(FLAGS.rules)
    logging.info("graph %s: %d ops, %d xfers, cost model %s", FLAGS.graph,
                 graph.num_ops(), len(xfers), cost_model.name)
    start = time.time()
    result = xfers.search(graph, cost_model, alpha=FLAGS.alpha, budget=FLAGS.budget,
                          time_limit_s=FLAGS.time_limit)
    wall = time.time() - start

    out_dir = os.path.join(FLAGS.results_dir, FLAGS.graph, "taso_search")
    os.makedirs(out_dir, exist_ok=True)
    summary = {
        "graph": FLAGS.graph, "cost_model": cost_model.name, "alpha": FLAGS.alpha,
        "budget": FLAGS.budget, "initial_cost_ms": result.initial_cost,
        "final_cost_ms": result.best_cost,
        "improvement": 1 - result.best_cost / result.initial_cost,
        "initial_ops": graph.num_ops(), "final_ops": result.graph.num_ops(),
        "expansions": result.expansions, "enqueued": result.enqueued,
        "seconds": wall, "expansions_per_second": result.expansions / max(wall, 1e-9),
        "applied": result.applied,
        "trace": [{"expansions": e, "seconds": s, "best_cost_ms": c}
                  for e, s, c in result.trace],
    }
    with open(os.path.join(out_dir, "result.json"), "w") as f:
        json.dump(summary, f, indent=2)
    with open(os.path.join(out_dir, "graph.json"), "w") as f:
        json.dump([op._asdict() for op in result.graph.ops()], f)
    with open(os.path.join(out_dir, "result.md"), "w") as f:
        f.write(f"# TASO search on {FLAGS.graph}\n\n"
                f"| cost model | alpha | budget | initial ms | final ms | change | "
                f"expanded | seconds |\n|---|---|---|---|---|---|---|---|\n"
                f"| {cost_model.name} | {FLAGS.alpha} | {FLAGS.budget} | "
                f"{result.initial_cost:.4f} | {result.best_cost:.4f} | "
                f"{-100 * summary['improvement']:+.2f}% | {result.expansions} | "
                f"{wall:.2f} |\n\nSubstitutions applied: "
                f"{', '.join(result.applied) or 'none'}\n")
    print(f"{FLAGS.graph}: {result.initial_cost:.4f} ms -> {result.best_cost:.4f} ms "
          f"({-100 * summary['improvement']:+.2f}%), {result.expansions} expansions in "
          f"{wall:.1f} s, {len(result.applied)} substitutions; results in {out_dir}")


if __name__ == "__main__":
    app.run(main)
