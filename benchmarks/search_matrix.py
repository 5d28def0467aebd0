"""The benchmark matrix of `search_bench.py` without its flags: the settings,
the methods (one-step greedy, TASO's search, equality saturation, random
descents) run on one setting, the rows' summary (best known, winners, gap)
and the Markdown tables. search_bench.py is the command; tests and Ray
workers import this module (a module defining flags can be imported only
once per process beside the others)."""


from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from typing import Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from landscape import Landscape, random_descent
from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
from xflowrl.entry_points import cost_model_from_spec, model_source, zoo_source
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.search import greedy_search
from xflowrl.search.eqsat import EqsatConfig, equality_saturation

METHODS = ("greedy", "taso", "eqsat", "random")
# Where each method's results live in a row ("search": TASO's runs, the
# name rows had before the other methods came in).
METHOD_KEYS = {"greedy": "greedy", "taso": "search", "eqsat": "eqsat", "random": "descent"}

GAP_THRESHOLD = 1.0  # % of the initial cost: "search matters" from here
WINNER_TOLERANCE = 1e-6  # of the initial cost: costs this close reach best_known together
MISSING = "—"  # a method that did not run (or rows of older runs)

# --quick: the settings and the small limits.
QUICK_SETTINGS = (("small_cnn", "analytic/cpu", None),  # None: every --rules set
                  ("squeezenet1_1", "analytic/v100", "generated"))
QUICK_ALPHAS, QUICK_BUDGETS = (1.0, 1.2), (50, 200)
# 3,000 e-nodes: squeezenet1_1's detour is in the e-graph from the second
# iteration on (2,892 e-nodes); the node limit, not the clock, ends saturation.
QUICK_EQSAT = dict(time_limit_s=10.0, node_limit=3_000, ilp_time_limit_s=2.0)
QUICK_DESCENTS = 5


@dataclasses.dataclass(frozen=True)
class Setting:
    """One row of the table."""
    graph: str
    cost_model: str
    rules: str
    batch: int = 1

    @property
    def key(self) -> str:
        key = f"{self.graph}|{self.cost_model}|{self.rules}"
        return key if self.batch == 1 else f"{key}|batch={self.batch}"


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """What every setting runs (the flags, or --quick's limits).

    Attributes:
      methods: of METHODS, the ones to run.
      alphas, budgets: TASO's search, every alpha x budget.
      time_limit: seconds per TASO search run (0: none).
      max_locations: L of the environment (greedy's location counts, descents).
      cost_cache: measured backends' cache of op costs.
      eqsat: equality saturation's limits (`check_outputs` is set per graph).
      eqsat_check_max_ops: check eqsat's outputs on graphs of at most this
        many ops.
      descent_seeds: one random descent per seed.
    """
    methods: Sequence[str] = METHODS
    alphas: Sequence[float] = (1.0, 1.05, 1.2)
    budgets: Sequence[int] = (1000, 10000)
    time_limit: float = 30.0
    max_locations: int = DEFAULT_MAX_LOCATIONS
    cost_cache: Optional[str] = None
    eqsat: EqsatConfig = EqsatConfig()
    eqsat_check_max_ops: int = 150
    descent_seeds: Sequence[int] = tuple(range(10))


# ---------------------------------------------------------------------------
# The methods.

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


def run_searches(graph: Graph, xfers: XferSet, cost_model: CostModel,
                 alphas: Sequence[float], budgets: Sequence[int], time_limit: float
                 ) -> List[dict]:
    """TASO's search at every alpha x budget."""
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
    return searches


def run_eqsat(graph: Graph, xfers: XferSet, cost_model: CostModel, config: EqsatConfig,
              check_max_ops: int) -> dict:
    """Equality saturation; the outputs checked where the graph has at most
    `check_max_ops` ops. A run that raises is recorded as {"error": ...}."""
    config = dataclasses.replace(config, check_outputs=graph.num_ops() <= check_max_ops)
    out: dict = {"config": dataclasses.asdict(config), "check_outputs": config.check_outputs}
    try:
        r = equality_saturation(graph, xfers, cost_model, config)
    except Exception as error:  # pylint: disable=broad-except
        # One setting's defect must not end a matrix of hours; the row says it.
        print(f"equality saturation failed: {type(error).__name__}: {error}", flush=True)
        return out | {"error": f"{type(error).__name__}: {error}"}
    return out | {
        "cost_ms": r.best_cost, "handed_over": r.handed_over,
        "greedy_extraction_cost_ms": r.greedy_cost, "ilp_cost_ms": r.ilp_cost,
        "ilp_status": r.ilp_status, "ilp_programs": r.ilp_programs, "ilp_start": r.ilp_start, "ilp_gap_pct": r.ilp_gap_percent,
        "stop_reason": r.stop_reason, "iterations": r.iterations, "e_nodes": r.e_nodes,
        "e_classes": r.e_classes, "saturation_seconds": r.saturation_seconds,
        "extraction_seconds": r.extraction_seconds, "seconds": r.seconds,
        "outputs_checked": r.outputs_checked, "skipped_rules": len(r.skipped_rules),
        "descent_tail_steps": r.descent_tail_steps, "start": r.start,
        "descent_start": r.descent_start._asdict() if r.descent_start is not None else None}


def run_descents(graph: Graph, xfers: XferSet, cost_model: CostModel, max_locations: int,
                 seeds: Sequence[int]) -> dict:
    """One random descent per seed (its own generator): every end cost, the
    best and the median."""
    start = time.time()
    land = Landscape(graph, xfers, cost_model, max_locations)
    ends = [random_descent(land, graph, np.random.default_rng(seed)) for seed in seeds]
    costs = [c for c, _ in ends]
    return {"episodes": len(seeds), "seeds": list(seeds), "costs_ms": costs,
            "steps": [s for _, s in ends], "best_cost_ms": min(costs),
            "median_cost_ms": statistics.median(costs), "worst_cost_ms": max(costs),
            "seconds": time.time() - start}


# ---------------------------------------------------------------------------
# One setting.

def method_cost(row: dict, method: str) -> Optional[float]:
    """The cost (ms) `method` reached in `row`; None where it did not run
    (or failed)."""
    if method == "greedy":
        return row["greedy"]["cost_ms"] if "greedy" in row else None
    if method == "taso":
        return row["best_search"]["cost_ms"] if row.get("search") else None
    if method == "eqsat":
        return row.get("eqsat", {}).get("cost_ms")
    if method == "random":
        return row["descent"]["best_cost_ms"] if "descent" in row else None
    raise ValueError(f"unknown method {method!r}")


def summarize(row: dict) -> dict:
    """The comparison of a row's methods (rows of older runs too: then over
    the methods they have): best_known_ms, winners, each method's change
    from the initial cost in %, gap_pct and taso_gap_pct (None where greedy,
    or TASO, did not run)."""
    initial = row["initial_cost_ms"]
    costs = {m: method_cost(row, m) for m in METHODS}
    costs = {m: c for m, c in costs.items() if c is not None}
    out: dict = {f"{m}_change_pct": 100 * (c - initial) / initial for m, c in costs.items()}
    best = min(costs.values()) if costs else None
    out["best_known_ms"] = best
    out["best_known_change_pct"] = None if best is None else 100 * (best - initial) / initial
    out["winners"] = [m for m, c in costs.items()
                      if best is not None and c <= best + WINNER_TOLERANCE * initial]
    greedy = costs.get("greedy")
    out["gap_pct"] = None if greedy is None else 100 * (greedy - best) / initial
    out["taso_gap_pct"] = (None if greedy is None or "taso" not in costs
                           else 100 * (greedy - costs["taso"]) / initial)
    return out


def pending_methods(row: Optional[dict], methods: Sequence[str]) -> List[str]:
    """The methods of `methods` that `row` (None: no row yet) lacks."""
    return [m for m in methods if row is None or METHOD_KEYS[m] not in row]


def drop_methods(row: dict, methods: Sequence[str]) -> dict:
    """`row` without the results of `methods` (so that they run again), its
    summary recomputed over what is left."""
    keys = ({METHOD_KEYS[m] for m in methods} | {f"{m}_change_pct" for m in methods}
            | ({"best_search"} if "taso" in methods else set()))
    kept = {k: v for k, v in row.items() if k not in keys}
    return kept | summarize(kept)


def run_setting(setting: Setting, config: BenchConfig, graph: Optional[Graph] = None,
                previous: Optional[dict] = None) -> dict:
    """Runs the methods of `config` on one setting; `graph`: the graph named
    `setting.graph` (None: the zoo graph of that name at `setting.batch`);
    `previous`: a row of this setting whose methods are kept, not rerun."""
    graph = zoo_graph(setting.graph, setting.batch) if graph is None else graph
    cost_model = cost_model_from_spec(setting.cost_model, config.cost_cache)
    xfers = XferSet.from_name(setting.rules)
    row = dict(previous) if previous is not None else {
        "graph": setting.graph, "cost_model": setting.cost_model, "rules": setting.rules,
        "ops": graph.num_ops(), "xfers": len(xfers), "initial_cost_ms": graph.cost(cost_model)}
    if setting.batch != 1:
        row["batch"] = setting.batch
    todo = pending_methods(previous, config.methods)
    if "greedy" in todo:
        row["greedy"] = run_greedy(graph, xfers, cost_model, config.max_locations)
    if "taso" in todo:
        searches = run_searches(graph, xfers, cost_model, config.alphas, config.budgets,
                                config.time_limit)
        best = min(searches, key=lambda s: (s["cost_ms"], s["budget"], s["alpha"]))
        row["search"] = searches
        row["best_search"] = {k: best[k] for k in ("alpha", "budget", "cost_ms")}
    if "eqsat" in todo:
        row["eqsat"] = run_eqsat(graph, xfers, cost_model, config.eqsat,
                                 config.eqsat_check_max_ops)
    if "random" in todo:
        row["descent"] = run_descents(graph, xfers, cost_model, config.max_locations,
                                      config.descent_seeds)
    row.pop("search_change_pct", None)  # older rows' name of taso_change_pct
    return row | summarize(row)


def zoo_graph(name: str, batch: int = 1) -> Graph:
    """The zoo graph `name` at `batch` (ValueError: its builder takes no batch)."""
    return zoo_source(name, batch).graph


class Task(NamedTuple):
    """One setting to run: where its graph comes from and the row it extends."""
    setting: Setting
    onnx: Optional[str]           # the model file; None: the zoo graph
    previous: Optional[dict]      # a kept row lacking some methods


def run_task(task: Task, config: BenchConfig,
             input_shapes: Optional[Mapping[str, Sequence[int]]] = None) -> dict:
    """Builds the task's graph and runs its setting (in-process or as a Ray
    task: graphs do not travel, names and paths do)."""
    graph = model_source(task.onnx, input_shapes).graph if task.onnx else None
    row = run_setting(task.setting, config, graph, task.previous)
    if task.onnx:
        row["onnx"] = task.onnx
    return row


def row_key(row: dict) -> str:
    return Setting(row["graph"], row["cost_model"], row["rules"], row.get("batch", 1)).key


def run_tasks(tasks: Sequence[Task], config: BenchConfig, on_row: Callable[[dict], None],
              input_shapes: Optional[Mapping[str, Sequence[int]]] = None, workers: int = 1,
              ray_address: str = "") -> None:
    """Runs `tasks`, calling `on_row` with each row as it is done: one after
    the other here (`workers` 1), or as Ray tasks `workers` at a time."""
    if workers <= 1:
        for task in tasks:
            on_row(run_task(task, config, input_shapes))
        return
    import ray  # pylint: disable=import-outside-toplevel

    from xflowrl.ray_jobs.runner import _init_ray  # pylint: disable=import-outside-toplevel
    shut_down = _init_ray(ray_address, workers)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_task)
        waiting, running = list(tasks), {}
        while waiting or running:
            while waiting and len(running) < workers:
                task = waiting.pop(0)
                running[remote.remote(task, config, input_shapes)] = task
            finished, _ = ray.wait(list(running), num_returns=1)
            running.pop(finished[0])
            on_row(ray.get(finished[0]))
    finally:
        if shut_down:
            ray.shutdown()


def run_matrix(settings: Sequence[Setting], config: BenchConfig, rows: List[dict],
               out_json: str, out_md: str, onnx: Optional[Mapping[str, str]] = None,
               input_shapes: Optional[Mapping[str, Sequence[int]]] = None, workers: int = 1,
               ray_address: str = "") -> List[dict]:
    """Runs every setting that `rows` lacks, or whose row lacks a method of
    `config`, saving all rows (JSON and markdown) as each one is done.

    Args:
      settings: the settings, in order.
      config: what each runs.
      rows: rows kept from an earlier run (updated in place).
      out_json, out_md: where the rows and their tables go.
      onnx: graph name -> model file for the graphs that are ONNX files.
      input_shapes, workers, ray_address: see `run_tasks`.

    Returns:
      `rows`, the new ones appended in the order they finished.
    """
    onnx = onnx or {}
    index = {row_key(r): i for i, r in enumerate(rows)}
    tasks = []
    for setting in settings:
        previous = rows[index[setting.key]] if setting.key in index else None
        if pending_methods(previous, config.methods):
            tasks.append(Task(setting, onnx.get(setting.graph), previous))

    def on_row(row: dict) -> None:
        key = row_key(row)
        if key in index:
            rows[index[key]] = row
        else:
            index[key] = len(rows)
            rows.append(row)
        print(json.dumps(_headline(row)), flush=True)
        save(rows, out_json, out_md)

    run_tasks(tasks, config, on_row, input_shapes, workers, ray_address)
    save(rows, out_json, out_md)
    return rows


def _headline(row: dict) -> dict:
    """A row without its per-method details, for the log line."""
    out = {k: v for k, v in row.items() if k not in METHOD_KEYS.values()}
    if "eqsat" in row:
        out["eqsat_stop"] = row["eqsat"].get("stop_reason", row["eqsat"].get("error"))
    return out


# ---------------------------------------------------------------------------
# Markdown.

# TENSAT's published speed-ups over the unoptimised graph with TASO's rules
# on a GPU, TASO's search -> equality saturation (Yang et al., MLSys 2021,
# arXiv 2101.01332, Table 2), in %; VGG-19's is not among those quoted here.
TENSAT_PUBLISHED = {"nasrnn": (45.4, 68.9), "squeezenet1_1": (6.7, 24.5),
                    "nasnet_a": (1.9, 7.3), "inception_v3": (6.3, 10.0),
                    "resnext50": (5.5, 8.8), "bert": (8.5, 9.2)}
TENSAT_GRAPHS = ("bert", "resnext50", "nasnet_a", "nasrnn", "inception_v3",
                 "squeezenet1_1", "vgg19")


def _speedup(change_pct: float) -> float:
    """A cost change (%, negative: cheaper) as a speed-up over the original
    (%), TENSAT's unit: original / optimised - 1."""
    return 100.0 * (1.0 / (1.0 + change_pct / 100.0) - 1.0)


def _eqsat_seconds(eqsat: dict) -> float:
    """Equality saturation's optimising time: saturation and extraction,
    the output check apart (TASO's search checks nothing)."""
    if "saturation_seconds" in eqsat:
        return eqsat["saturation_seconds"] + eqsat["extraction_seconds"]
    return eqsat["seconds"]


def summary_markdown(rows: Iterable[dict]) -> str:
    """Equality saturation against TASO's search (cost and time, per rule
    set and cost model) and, for the `tensat` rules, beside TENSAT's
    published figures."""
    rows = [r for r in rows if r.get("eqsat_change_pct") is not None
            and r.get("taso_change_pct") is not None]
    if not rows:
        return ""
    lines = ["### Equality saturation against TASO's search", "",
             "Per rule set and cost model: on how many graphs eqsat ends below, at or above "
             "the best TASO run (within 1e-6 of the initial cost: at), and the median over "
             "graphs of eqsat's seconds (saturation and extraction, the output check "
             "apart) and of TASO's at alpha 1.05, budget 1000 (its default) with their "
             "ratio.", "",
             "| rules | cost model | graphs | eqsat below | at | above (graphs) | eqsat s "
             "(median) | TASO a1.05 b1000 s (median) | median ratio eqsat / TASO |",
             "|---|---|---|---|---|---|---|---|---|"]
    groups: Dict[tuple, List[dict]] = {}
    for r in rows:
        groups.setdefault((r["rules"], r["cost_model"]), []).append(r)
    for (rules, cost_model), group in sorted(groups.items(),
                                             key=lambda kv: (_rules_order(kv[0][0]), kv[0][1])):
        below = at = 0
        above: List[str] = []
        eq_s, taso_s, ratios = [], [], []
        for r in group:
            d = r["eqsat_change_pct"] - r["taso_change_pct"]
            if d < -1e-4:
                below += 1
            elif d > 1e-4:
                above.append(f"{r['graph']} {d:+.2f}")
            else:
                at += 1
            default = [t for t in r.get("search", [])
                       if t["alpha"] == 1.05 and t["budget"] == 1000]
            if "seconds" in r["eqsat"] and default:
                seconds = _eqsat_seconds(r["eqsat"])
                eq_s.append(seconds)
                taso_s.append(default[0]["seconds"])
                ratios.append(seconds / max(default[0]["seconds"], 1e-3))
        med = (lambda xs: f"{statistics.median(xs):.1f}" if xs else "—")
        ratio = f"{statistics.median(ratios):.1f}" if ratios else "—"
        lines.append(f"| {rules} | {cost_model} | {len(group)} | {below} | {at} | "
                     f"{len(above)}{' (' + ', '.join(above) + ')' if above else ''} | "
                     f"{med(eq_s)} | {med(taso_s)} | {ratio} |")
    tensat = {r["graph"]: r for r in rows if r["rules"] == "tensat" and r.get("batch", 1) == 1}
    if tensat:
        lines += ["", "### TENSAT's graphs with the `tensat` rules, beside TENSAT's figures", "",
                  "Speed-up over the original graph in % (original / optimised - 1): ours "
                  "estimated by the row's cost model, TENSAT's measured on a GPU with TASO's "
                  "cost model choosing (its paper, Table 2).", "",
                  "| graph | cost model | TASO's search (ours) | eqsat (ours) | greedy (ours) | "
                  "TASO's search (TENSAT) | eqsat (TENSAT) |", "|---|---|---|---|---|---|---|"]
        for g in TENSAT_GRAPHS:
            if g not in tensat:
                continue
            r = tensat[g]
            published = TENSAT_PUBLISHED.get(g)
            lines.append(f"| {g} | {r['cost_model']} | {_speedup(r['taso_change_pct']):.1f} | "
                         f"{_speedup(r['eqsat_change_pct']):.1f} | "
                         f"{_speedup(r['greedy_change_pct']):.1f} | "
                         f"{published[0] if published else '—'} | "
                         f"{published[1] if published else '—'} |")
    return "\n".join(lines)


def markdown_table(rows: Iterable[dict]) -> str:
    """A gap matrix (graph x rule set/cost model), then per rule set the
    methods side by side and TASO's runs; costs as % change from the initial
    graph."""
    rows = list(rows)
    rule_sets = sorted({r["rules"] for r in rows}, key=_rules_order)
    columns = sorted({(r["rules"], r["cost_model"]) for r in rows},
                     key=lambda c: (_rules_order(c[0]), c[1]))
    graphs = sorted({(r["graph"], r.get("batch", 1)) for r in rows})
    by_key = {(r["graph"], r.get("batch", 1), r["rules"], r["cost_model"]): r for r in rows}
    lines = ["Gap % = 100 * (greedy - best known) / initial cost, the best known being the "
             "lowest cost of greedy, TASO's search, equality saturation and random descents; "
             f"bold where >= {GAP_THRESHOLD:g} (something beats greedy); `t`: some TASO run "
             "stopped on its time limit.", "",
             "| graph | " + " | ".join(f"{r} {c}" for r, c in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for g, batch in graphs:
        cells = []
        for rule_set, cost_model in columns:
            r = by_key.get((g, batch, rule_set, cost_model))
            if r is None:
                cells.append("")
                continue
            mark = "t" if any(s["time_limit_hit"] for s in r.get("search", [])) else ""
            cells.append(_gap_cell(summarize(r)["gap_pct"]) + mark)
        lines.append(f"| {_graph_label(g, batch)} | " + " | ".join(cells) + " |")
    for rule_set in rule_sets:
        in_set = [r for r in rows if r["rules"] == rule_set]
        lines += ["", f"### Rule set `{rule_set}`", ""]
        lines += _methods_table(in_set)
        if any(r.get("search") for r in in_set):
            lines += ["", f"TASO's search under `{rule_set}`, every alpha x budget:", ""]
            lines += _taso_table(in_set)
    lines += ["", "Methods' cells: cost change from the initial graph in % (negative: faster). "
              "Best TASO: its cheapest run (alpha, budget; `*` = that run stopped on its time "
              "limit). Eqsat: equality saturation's graph (why saturation stopped, e-nodes, "
              "seconds of the whole run, the ILP's status). Best descent: the best of the "
              "random descents (their median). Winner: the methods that reached the best "
              f"known cost (all: every one that ran). `{MISSING}`: not run.",
              "",
              "TASO's cells: (expansions, seconds) with `*` = stopped by the time limit (the "
              "cost is what it had found), `e` = the queue emptied (every graph within alpha "
              "of the best was expanded; a larger budget repeats the run, which is then not "
              "rerun). Locations: candidates at reset (`GraphEnv.reset()`), in brackets those "
              "that lower the cost."]
    summary = summary_markdown(rows)
    if summary:
        lines += ["", summary]
    return "\n".join(lines) + "\n"


def _rules_order(name: str) -> tuple:
    order = ["default", "builtin+taso", "generated", "taso", "builtin"]
    return (order.index(name) if name in order else len(order), name)


def _graph_label(graph: str, batch: int) -> str:
    return graph if batch == 1 else f"{graph} (batch {batch})"


def _sorted(rows: List[dict]) -> List[dict]:
    return sorted(rows, key=lambda r: (r["cost_model"], r["graph"], r.get("batch", 1)))


def _gap_cell(gap: Optional[float]) -> str:
    if gap is None:
        return MISSING
    return f"**{gap:+.2f}**" if gap >= GAP_THRESHOLD else f"{gap:+.2f}"


def _methods_table(rows: List[dict]) -> List[str]:
    head = ["graph", "cost model", "ops", "initial ms", "greedy %",
            "best TASO % (alpha, budget)", "eqsat % (stop, e-nodes, s, ILP)",
            "best descent % (median)", "best known %", "winner", "gap %"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in _sorted(rows):
        init, s = r["initial_cost_ms"], summarize(r)
        cells = [_graph_label(r["graph"], r.get("batch", 1)), r["cost_model"], str(r["ops"]),
                 f"{init:.4g}",
                 _pct(r["greedy"]["cost_ms"], init) if "greedy" in r else MISSING,
                 _taso_cell(r), _eqsat_cell(r), _descent_cell(r),
                 MISSING if s["best_known_ms"] is None else _pct(s["best_known_ms"], init),
                 _winner_cell(r, s["winners"]), _gap_cell(s["gap_pct"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _taso_cell(row: dict) -> str:
    if not row.get("search"):
        return MISSING
    best = row["best_search"]
    run = next((s for s in row["search"] if s["alpha"] == best["alpha"]
                and s["budget"] == best["budget"]), {})
    mark = "*" if run.get("time_limit_hit") else ""
    return (f"{_pct(best['cost_ms'], row['initial_cost_ms'])} "
            f"(a{best['alpha']:g}, b{best['budget']}{mark})")


def _eqsat_cell(row: dict) -> str:
    e = row.get("eqsat")
    if e is None:
        return MISSING
    if "error" in e:
        return f"error ({e['error'][:60]})"
    return (f"{_pct(e['cost_ms'], row['initial_cost_ms'])} ({e['stop_reason']}, "
            f"{e['e_nodes']}, {e['seconds']:.0f}, {e['ilp_status']})")


def _descent_cell(row: dict) -> str:
    d = row.get("descent")
    if d is None:
        return MISSING
    init = row["initial_cost_ms"]
    return f"{_pct(d['best_cost_ms'], init)} ({_pct(d['median_cost_ms'], init)})"


def _winner_cell(row: dict, winners: List[str]) -> str:
    ran = [m for m in METHODS if method_cost(row, m) is not None]
    if len(ran) > 1 and winners == ran:
        return "all"
    return ", ".join(winners) or MISSING


def _taso_table(rows: List[dict]) -> List[str]:
    rows = [r for r in _sorted(rows) if r.get("search")]
    configs = sorted({(s["budget"], s["alpha"]) for r in rows for s in r["search"]})
    head = ["graph", "cost model", "locations (improving)", "greedy % (steps, s)"]
    head += [f"a{a:g} b{b}" for b, a in configs]
    head += ["TASO gap %"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        init, g = r["initial_cost_ms"], r.get("greedy")
        cells = [_graph_label(r["graph"], r.get("batch", 1)), r["cost_model"]]
        if g is None:
            cells += [MISSING, MISSING]
        else:
            cells += [f"{g['locations']} ({g['improving_locations']})",
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
        cells.append(_gap_cell(summarize(r)["taso_gap_pct"]))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _pct(cost: float, initial: float) -> str:
    return f"{100 * (cost - initial) / initial:+.2f}"


# ---------------------------------------------------------------------------
# Files and the command line.

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


def plan_settings(graphs: Sequence[str], onnx_graphs: Sequence[str], batches: Sequence[int],
                  cost_models: Sequence[str], rules: Sequence[str]) -> List[Setting]:
    """Every graph x batch x cost model x rule set; batches other than 1
    only for zoo graphs whose builder takes one (the others are named once
    on stdout)."""
    settings = []
    for graph in list(graphs) + list(onnx_graphs):
        for batch in batches:
            if batch != 1:
                try:
                    if graph in onnx_graphs:
                        raise ValueError(f"{graph}: an ONNX file's shapes are its own "
                                         "(--input_shape)")
                    zoo_graph(graph, batch)
                except ValueError as error:
                    print(f"skipping batch {batch}: {error}", flush=True)
                    continue
            settings += [Setting(graph, cost_model, rule_set, batch)
                         for cost_model in cost_models for rule_set in rules]
    return settings


