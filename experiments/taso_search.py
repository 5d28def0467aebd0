"""TASO's backtracking search (thesis Algorithm 1) on one graph: the baseline.

    python experiments/taso_search.py --graph=resnet50 --alpha=1.05 --budget=1000
    python experiments/taso_search.py --onnx=my_model.onnx   # your own model

--onnx=PATH searches a user's ONNX file instead of a zoo graph (--input_shape
NAME=D1,D2,... fixes inputs of dynamic dimensions); <graph> below is then the
file's name without .onnx. A file that cannot be read or imported ends the
script with one error line (exit status 2).

Writes to --results_dir/<graph>/taso_search/: result.json (the baseline
runner's record, `xflowrl.search.Baselines`: TASO's search with its
substitutions and their locations in order and its trace of best cost against
expansions and seconds, and one-step greedy's result under the same rules and
cost model; beside it the initial and final costs and op counts),
result.md (a table with the initial, greedy and search rows that says whether
the search found anything greedy did not), and the optimised graph's op list
(graph.json); for --onnx also the optimised model (graph.onnx, with the
model's own weights, input/output names, opset and metadata).
"""

import dataclasses

from absl import app, flags, logging
import common

from xflowrl.engine.xfers import TASO_ALPHA, TASO_BUDGET
from xflowrl.entry_points import change_table, save_graph, save_result
from xflowrl.env import NO_STEP_LIMIT
from xflowrl.search import Baselines, run_greedy, run_taso

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
    graph, cost_model = env.initial_graph, env.cost_model
    logging.info("graph %s: %d ops, %d xfers, cost model %s", source.name,
                 graph.num_ops(), len(env.xfers), cost_model.name)
    greedy, _ = run_greedy(env)
    taso, best = run_taso(env, FLAGS.alpha, FLAGS.budget, FLAGS.time_limit)
    record = Baselines(greedy=greedy, taso=taso, max_locations=env.config.max_locations)

    out_dir = settings.results_folder("taso_search")
    summary = {
        "graph": source.name, "cost_model": cost_model.name, **record.to_json(),
        "initial_cost_ms": env.initial_cost, "final_cost_ms": taso.cost_ms,
        "improvement": 1 - taso.cost_ms / env.initial_cost,
        "initial_ops": graph.num_ops(), "final_ops": best.num_ops(),
        "expansions_per_second": taso.expansions / max(taso.seconds, 1e-9),
        "search_vs_greedy_pct": 100 * (taso.cost_ms / greedy.cost_ms - 1),
    }
    if source.model is not None:
        summary["onnx"] = source.model.path
    gap = summary["search_vs_greedy_pct"]
    verdict = (f"The search beats one-step greedy by {-gap:.2f}%." if gap < -1e-4 else
               f"One-step greedy beats the search by {gap:.2f}%." if gap > 1e-4 else
               "The search only matches one-step greedy.")
    rows = [("initial", env.initial_cost, "", ""),
            (f"one-step greedy ({greedy.steps} steps)", greedy.cost_ms, "",
             f"{greedy.seconds:.2f}"),
            (f"TASO search (alpha {FLAGS.alpha}, budget {FLAGS.budget})", taso.cost_ms,
             str(taso.expansions), f"{taso.seconds:.2f}")]
    table = change_table(rows, env.initial_cost)
    names = ", ".join(name for name, _ in taso.applied)
    save_result(out_dir, summary, markdown=(
        f"# TASO search on {source.name} ({cost_model.name} cost, {FLAGS.rules} "
        f"rules)\n\n| | cost (ms) | change | expanded | seconds |\n"
        f"|---|---|---|---|---|\n{table}\n\n{verdict}\n\nSubstitutions applied "
        f"by the search: {names or 'none'}\n"))
    if source.model is None:
        save_graph(out_dir, best)  # zoo graphs: the op list only
    else:
        source.save_graph(out_dir, best, seed=0, provenance=(
            f"{taso.steps} substitutions by TASO's search (alpha {FLAGS.alpha}, "
            f"budget {FLAGS.budget}) under {cost_model.name} ({settings.rules} rules)"))
    print(table)
    print(f"{verdict} {taso.expansions} expansions in {taso.seconds:.1f} s; results in {out_dir}")


if __name__ == "__main__":
    app.run(common.exit_on_bad_input(main))
