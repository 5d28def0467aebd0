"""TASO's backtracking search (thesis Algorithm 1) on one graph: the baseline.

    python experiments/taso_search.py --graph=resnet50 --alpha=1.05 --budget=1000
    python experiments/taso_search.py --onnx=my_model.onnx   # your own model

--onnx=PATH searches a user's ONNX file instead of a zoo graph (--input_shape
NAME=D1,D2,... fixes inputs of dynamic dimensions); <graph> below is then the
file's name without .onnx. A file that cannot be read or imported ends the
script with one error line (exit status 2).

Writes to --results_dir/<graph>/taso_search/: result.json (costs, the
substitutions applied in order, the trace of best cost against expansions and
seconds, and one-step greedy's result under the same rules and cost model),
result.md (a table with the initial, greedy and search rows that says whether
the search found anything greedy did not), and the optimised graph's op list
(graph.json); for --onnx also the optimised model (graph.onnx, with the
model's own weights, input/output names, opset and metadata).
"""

import dataclasses
import time

from absl import app, flags, logging
import common

from xflowrl.engine.xfers import TASO_ALPHA, TASO_BUDGET
from xflowrl.env import NO_STEP_LIMIT
from xflowrl.runs import change_table, save_graph, save_result
from xflowrl.search import greedy_search

FLAGS = flags.FLAGS
common.define_env_flags("resnet50")
flags.DEFINE_float("alpha", TASO_ALPHA, "Relaxation: queue graphs cheaper than alpha * best.")
flags.DEFINE_integer("budget", TASO_BUDGET, "Graphs expanded (popped from the queue).")
flags.DEFINE_float("time_limit", 0.0, "Stop after this many seconds (0: none).")


def main(argv):
    del argv
    # Greedy runs without a step limit (it stops when nothing improves).
    settings = dataclasses.replace(common.run_settings(), max_steps=NO_STEP_LIMIT)
    source = settings.source()
    env = settings.make_env()
    graph, xfers, cost_model = env.initial_graph, env.xfers, env.cost_model
    logging.info("graph %s: %d ops, %d xfers, cost model %s", source.name,
                 graph.num_ops(), len(xfers), cost_model.name)
    start = time.time()
    greedy = greedy_search(env)
    greedy_seconds = time.time() - start
    start = time.time()
    result = xfers.search(graph, cost_model, alpha=FLAGS.alpha, budget=FLAGS.budget,
                          time_limit_s=FLAGS.time_limit)
    wall = time.time() - start

    out_dir = settings.results_folder("taso_search")
    summary = {
        "graph": source.name, "cost_model": cost_model.name, "alpha": FLAGS.alpha,
        "budget": FLAGS.budget, "initial_cost_ms": result.initial_cost,
        "final_cost_ms": result.best_cost,
        "improvement": 1 - result.best_cost / result.initial_cost,
        "initial_ops": graph.num_ops(), "final_ops": result.graph.num_ops(),
        "expansions": result.expansions, "enqueued": result.enqueued,
        "seconds": wall, "expansions_per_second": result.expansions / max(wall, 1e-9),
        "applied": result.applied,
        "greedy": {"cost_ms": greedy.final_cost, "steps": len(greedy.applied),
                   "seconds": greedy_seconds, "applied": greedy.applied},
        "search_vs_greedy_pct": 100 * (result.best_cost / greedy.final_cost - 1),
        "trace": [{"expansions": e, "seconds": s, "best_cost_ms": c}
                  for e, s, c in result.trace],
    }
    if source.model is not None:
        summary["onnx"] = source.model.path
    gap = summary["search_vs_greedy_pct"]
    verdict = (f"The search beats one-step greedy by {-gap:.2f}%." if gap < -1e-4 else
               f"One-step greedy beats the search by {gap:.2f}%." if gap > 1e-4 else
               "The search only matches one-step greedy.")
    rows = [("initial", result.initial_cost, "", ""),
            (f"one-step greedy ({len(greedy.applied)} steps)", greedy.final_cost, "",
             f"{greedy_seconds:.2f}"),
            (f"TASO search (alpha {FLAGS.alpha}, budget {FLAGS.budget})", result.best_cost,
             str(result.expansions), f"{wall:.2f}")]
    table = change_table(rows, result.initial_cost)
    save_result(out_dir, summary, markdown=(
        f"# TASO search on {source.name} ({cost_model.name} cost, {FLAGS.rules} "
        f"rules)\n\n| | cost (ms) | change | expanded | seconds |\n"
        f"|---|---|---|---|---|\n{table}\n\n{verdict}\n\nSubstitutions applied "
        f"by the search: {', '.join(result.applied) or 'none'}\n"))
    if source.model is None:
        save_graph(out_dir, result.graph)  # zoo graphs: the op list only
    else:
        source.save_graph(out_dir, result.graph, seed=0, provenance=(
            f"{len(result.applied)} substitutions by TASO's search (alpha {FLAGS.alpha}, "
            f"budget {FLAGS.budget}) under {cost_model.name} ({settings.rules} rules)"))
    print(table)
    print(f"{verdict} {result.expansions} expansions in {wall:.1f} s; results in {out_dir}")

if __name__ == "__main__":
    app.run(common.exit_on_bad_input(main))
