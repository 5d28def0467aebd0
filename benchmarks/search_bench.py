"""Where search matters: one-step greedy against TASO's backtracking search.

For every graph x cost model x rule set: the initial cost, one-step greedy
(`xflowrl.search.greedy_search`, no step limit), TASO's search
(`XferSet.search`) at every alpha x budget, the candidate locations at reset
(`GraphEnv.reset()`'s location mask) and the gap

    gap % = 100 * (greedy cost - best search cost) / initial cost

(positive: search beats greedy). Prints one JSON line per setting, writes all
of them to --out_json and a markdown table to --out_md (docs/benchmark.md).

    python benchmarks/search_bench.py                      # docs/benchmark.md's tables
    python benchmarks/search_bench.py --quick              # small_cnn, small budgets
    python benchmarks/search_bench.py --graphs=bert --cost_models=onednn \
        --cost_cache=results/cost_cache.tsv

Settings already in --out_json are kept and skipped (`--resume`, default on),
so a long run can be split into several commands that fill one file; the
markdown table is always written from the whole file.

Cost models are named `backend/profile` for the analytic roofline
(`analytic/cpu`, `analytic/v100`) and by backend for the measured ones
(`onednn`, `cudnn`), which use --cost_cache.

Search runs carry a wall-clock limit (--time_limit); a run that stopped on it
before its budget is marked `time_limit_hit` (its cost is what it had found).

`--onnx` adds ONNX files, each one more graph named by its file name without
.onnx (with `--onnx` and no `--graphs`, only those; `--input_shape`
NAME=D1,D2,... fixes their inputs of dynamic dimensions). Their rows are
resumed by that name too: `--noresume` after changing a file. A file that
cannot be imported ends the script with one error line (exit status 2).

    python benchmarks/search_bench.py --onnx=my_model.onnx --cost_models=analytic/cpu
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Dict, Iterable, List, Optional, Sequence

from absl import app, flags
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.optimize import parse_input_shapes
from xflowrl.rules.sets import RULE_SETS
from xflowrl.runs import cost_model_from_spec, exit_on_bad_input, model_name, model_source
from xflowrl.search import greedy_search

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", [g for g in zoo.GRAPHS if g != "small_cnn"],
                  "Zoo graphs (default: every graph of zoo.GRAPHS but small_cnn; with --onnx "
                  "and no --graphs: none).")
flags.DEFINE_list("onnx", [], "Your own ONNX files, each one more graph named by its file name "
                  "without .onnx.")
flags.DEFINE_multi_string("input_shape", [], "NAME=D1,D2,...: the static shape of an --onnx "
                          "file's input of dynamic dimensions (repeat for several inputs).")
flags.DEFINE_list("cost_models", ["analytic/cpu", "analytic/v100"],
                  "Cost models: analytic/<profile>, fitted/<profile>, onednn or cudnn.")
flags.DEFINE_list("rules", ["default", "builtin+taso", "generated", "taso"],
                  f"Rule sets, names of xflowrl.rules.sets.RULE_SETS {list(RULE_SETS)}: "
                  "default and builtin+taso (the thesis') are the faithful ones; generated "
                  "and taso alone lack the compound built-ins (docs/benchmark.md).")
flags.DEFINE_list("alphas", ["1.0", "1.05", "1.2"], "TASO search alphas.")
flags.DEFINE_list("budgets", ["1000", "10000"], "TASO search budgets (expansions).")
flags.DEFINE_float("time_limit", 30.0, "Seconds per search run (0: none).")
flags.DEFINE_integer("max_locations", DEFAULT_MAX_LOCATIONS,
                     "L, locations per xfer of the environment.")
flags.DEFINE_string("cost_cache", "results/cost_cache.tsv",
                    "Cache of measured op costs (onednn, cudnn).")
flags.DEFINE_string("out_json", "results/search_bench/search_bench.json",
                    "All settings' results (a JSON list).")
flags.DEFINE_string("out_md", "results/search_bench/search_bench.md", "The markdown table.")
flags.DEFINE_bool("resume", True, "Keep settings already in --out_json and skip them.")
flags.DEFINE_bool("report_only", False, "Only rewrite --out_md from --out_json (no runs).")
flags.DEFINE_bool("quick", False, "small_cnn, analytic/cpu, the --rules sets, alpha 1.0/1.2, "
                  "budgets 50/200: a smoke test of the script (seconds).")

GAP_THRESHOLD = 1.0  # % of the initial cost: "search matters" from here (issue 14)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One row of the table."""
    graph: str
    cost_model: str
    rules: str

    @property
    def key(self) -> str:
        return f"{self.graph}|{self.cost_model}|{self.rules}"


def location_counts(env: GraphEnv) -> Dict[str, int]:
    """Candidates at reset: locations in the mask, xfers with one, and how many
    candidates lower the cost (the choices greedy ranks)."""
    obs = env.reset()
    noop = len(obs.xfer_mask) - 1
    mask = obs.location_mask[:noop]
    delta = np.where(mask, obs.locations.dense_cost_delta()[:noop], 0.0)
    return {"locations": int(mask.sum()), "xfers_with_locations": int(obs.xfer_mask[:noop].sum()),
            "improving_locations": int((delta < -1e-9).sum())}


def run_greedy(graph: Graph, xfers: XferSet, cost_model: CostModel,
               max_locations: int) -> dict:
    """Greedy without a step limit, plus the location counts at reset."""
    env = GraphEnv(graph, xfers, cost_model,
                   EnvConfig(max_steps=NO_STEP_LIMIT, max_locations=max_locations))
    counts = location_counts(env)
    start = time.time()
    episode = greedy_search(env)
    return {"cost_ms": episode.final_cost, "steps": len(episode.applied),
            "seconds": time.time() - start, "applied": [n for n, _ in episode.applied],
            **counts}


def run_search(graph: Graph, xfers: XferSet, cost_model: CostModel, alpha: float,
               budget: int, time_limit: float) -> dict:
    """One TASO search run."""
    r = xfers.search(graph, cost_model, alpha=alpha, budget=budget, time_limit_s=time_limit)
    hit = bool(time_limit > 0 and r.expansions < budget and r.seconds >= time_limit)
    return {"alpha": alpha, "budget": budget, "time_limit": time_limit, "cost_ms": r.best_cost,
            "expansions": r.expansions, "enqueued": r.enqueued, "seconds": r.seconds,
            "time_limit_hit": hit, "queue_emptied": bool(r.expansions < budget and not hit),
            "steps": len(r.applied), "applied": list(r.applied), "repeated": False}


def run_setting(setting: Setting, alphas: Sequence[float], budgets: Sequence[int],
                time_limit: float, max_locations: int, cost_cache: Optional[str],
                graph: Optional[Graph] = None) -> dict:
    """Greedy and every search of one (graph, cost model, rule set); `graph`:
    the graph named `setting.graph` (None: the zoo graph of that name)."""
    graph = zoo.get_graph(setting.graph) if graph is None else graph
    cost_model = cost_model_from_spec(setting.cost_model, cost_cache)
    xfers = XferSet.from_name(setting.rules)
    initial = graph.cost(cost_model)
    greedy = run_greedy(graph, xfers, cost_model, max_locations)
    searches = []
    for alpha in alphas:
        previous = None
        for budget in sorted(budgets):
            if previous is not None and previous["queue_emptied"]:
                # The search is deterministic: once the queue emptied, a larger
                # budget repeats the same run.
                searches.append(dict(previous, budget=budget, repeated=True))
                continue
            previous = run_search(graph, xfers, cost_model, alpha, budget, time_limit)
            searches.append(previous)
    best = min(searches, key=lambda s: (s["cost_ms"], s["budget"], s["alpha"]))
    return {"graph": setting.graph, "cost_model": setting.cost_model, "rules": setting.rules,
            "ops": graph.num_ops(), "xfers": len(xfers), "initial_cost_ms": initial,
            "greedy": greedy, "search": searches,
            "best_search": {k: best[k] for k in ("alpha", "budget", "cost_ms")},
            "greedy_change_pct": 100 * (greedy["cost_ms"] - initial) / initial,
            "search_change_pct": 100 * (best["cost_ms"] - initial) / initial,
            "gap_pct": 100 * (greedy["cost_ms"] - best["cost_ms"]) / initial}


def markdown_table(rows: Iterable[dict]) -> str:
    """A gap matrix (graph x cost model/rule set), then one table per rule set:
    costs as % change from the initial graph."""
    rows = list(rows)
    rule_sets = sorted({r["rules"] for r in rows}, key=_rules_order)
    columns = sorted({(r["rules"], r["cost_model"]) for r in rows},
                     key=lambda c: (_rules_order(c[0]), c[1]))
    graphs = sorted({r["graph"] for r in rows})
    by_key = {(r["graph"], r["rules"], r["cost_model"]): r for r in rows}
    lines = ["Gap % = 100 * (greedy - best search) / initial cost; bold where >= "
             f"{GAP_THRESHOLD:g} (search beats greedy); `t`: some search run stopped on "
             "its time limit.", "",
             "| graph | " + " | ".join(f"{r} {c}" for r, c in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for g in graphs:
        cells = []
        for rule_set, cost_model in columns:
            r = by_key.get((g, rule_set, cost_model))
            if r is None:
                cells.append("")
                continue
            mark = "t" if any(s["time_limit_hit"] for s in r["search"]) else ""
            gap = r["gap_pct"]
            cells.append(f"**{gap:+.2f}**{mark}" if gap >= GAP_THRESHOLD else f"{gap:+.2f}{mark}")
        lines.append(f"| {g} | " + " | ".join(cells) + " |")
    for rule_set in rule_sets:
        lines += ["", f"### Rule set `{rule_set}`", ""]
        lines += _detail_table([r for r in rows if r["rules"] == rule_set])
    lines += ["", "Cells: cost change from the initial graph in % (negative: faster); "
              "greedy adds (steps, seconds), search cells (expansions, seconds) with "
              "`*` = stopped by the time limit (the cost is what it had found), `e` = the "
              "queue emptied (every graph within alpha of the best was expanded; a larger "
              "budget repeats the run, which is then not rerun). Locations: candidates at "
              "reset (`GraphEnv.reset()`), in brackets those that lower the cost."]
    return "\n".join(lines) + "\n"


def _rules_order(name: str) -> tuple:
    order = ["default", "builtin+taso", "generated", "taso", "builtin"]
    return (order.index(name) if name in order else len(order), name)


def _detail_table(rows: List[dict]) -> List[str]:
    rows = sorted(rows, key=lambda r: (r["cost_model"], r["graph"]))
    configs = sorted({(s["budget"], s["alpha"]) for r in rows for s in r["search"]})
    head = ["graph", "cost model", "ops", "initial ms", "locations (improving)",
            "greedy % (steps, s)"]
    head += [f"a{a:g} b{b}" for b, a in configs]
    head += ["gap %"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        init, g = r["initial_cost_ms"], r["greedy"]
        cells = [r["graph"], r["cost_model"], str(r["ops"]), f"{init:.4g}",
                 f"{g['locations']} ({g['improving_locations']})",
                 f"{_pct(g['cost_ms'], init)} ({g['steps']}, {g['seconds']:.1f})"]
        by_config = {(s["budget"], s["alpha"]): s for s in r["search"]}
        for c in configs:
            s = by_config.get(c)
            if s is None:
                cells.append("")
                continue
            mark = "*" if s["time_limit_hit"] else ("e" if s["queue_emptied"] else "")
            cells.append(f"{_pct(s['cost_ms'], init)} ({s['expansions']}{mark}, "
                         f"{s['seconds']:.0f})")
        gap = r["gap_pct"]
        cells.append(f"**{gap:+.2f}**" if gap >= GAP_THRESHOLD else f"{gap:+.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _pct(cost: float, initial: float) -> str:
    return f"{100 * (cost - initial) / initial:+.2f}"


def load_rows(path: str) -> List[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)


def save(rows: List[dict], out_json: str, out_md: str) -> None:
    for path in (out_json, out_md):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(out_json, "w") as f:
        json.dump(rows, f, indent=1)
    with open(out_md, "w") as f:
        f.write(markdown_table(rows))


def main(argv):
    del argv
    graphs, cost_models, rules = FLAGS.graphs, FLAGS.cost_models, FLAGS.rules
    alphas = [float(a) for a in FLAGS.alphas]
    budgets = [int(b) for b in FLAGS.budgets]
    out_json, out_md = FLAGS.out_json, FLAGS.out_md
    if FLAGS.quick:
        graphs, cost_models, alphas, budgets = ["small_cnn"], ["analytic/cpu"], [1.0, 1.2], [50, 200]
        out_json = os.path.join(os.path.dirname(out_json), "quick.json")
        out_md = os.path.join(os.path.dirname(out_md), "quick.md")
    for name in rules:
        if name not in RULE_SETS:
            raise app.UsageError(f"unknown rule set {name!r}; choose from {list(RULE_SETS)}")
    rows = load_rows(out_json) if FLAGS.resume and not FLAGS.quick else []
    if FLAGS.report_only:
        save(load_rows(out_json), out_json, out_md)
        print(markdown_table(load_rows(out_json)))
        return
    done = {Setting(r["graph"], r["cost_model"], r["rules"]).key for r in rows}
    if FLAGS.onnx and not FLAGS["graphs"].present:
        graphs = []  # only the model files (--quick: with its budgets)
    shapes = parse_input_shapes(FLAGS.input_shape)
    files = {model_name(path): path for path in FLAGS.onnx}  # graph name -> model file
    for path in files.values():
        model_source(path, shapes)  # read now: a bad file fails before any run
    for graph in list(graphs) + list(files):
        for cost_model in cost_models:
            for rule_set in rules:
                setting = Setting(graph, cost_model, rule_set)
                if setting.key in done:
                    continue
                path = files.get(graph)
                row = run_setting(setting, alphas, budgets, FLAGS.time_limit,
                                  FLAGS.max_locations, FLAGS.cost_cache,
                                  model_source(path, shapes).graph if path else None)
                if path:
                    row["onnx"] = path
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k not in ("greedy", "search")}
                                 | {"greedy_steps": row["greedy"]["steps"]}), flush=True)
                save(rows, out_json, out_md)
    save(rows, out_json, out_md)
    print(markdown_table(rows))


if __name__ == "__main__":
    app.run(exit_on_bad_input(main))
