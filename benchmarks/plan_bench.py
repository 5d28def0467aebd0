"""The engine planner on the settings where looking ahead pays; prints JSON.

    python benchmarks/plan_bench.py [--settings=all|NAME,...] [--seeds=0,1,2]
        [--simulations=16] [--root_actions=16] [--prior=xfer]
        [--rollout_steps=0] [--max_real_steps=5000] [--time_limit_s=60]
        [--everywhere] [--neutral_everywhere=search|root|detours] [--merge_identical] [--restarts=N] [--stall_real_steps=N] [--detours=N] [--detour_expansions=N]
        [--markdown=PATH] [--export_graphs=DIR]
        [--cprofile=N]
        [--rows=results/plan_bench/rows.jsonl] [--taso_rows=results/plan_bench/taso_rows.jsonl]

For each setting of the shipped list (`xflowrl.search.settings`: a graph,
rule set, cost model and batch where the best method known beats one-step
greedy by at least a point) and each seed, `xflowrl.planning.plan` with
the given configuration, from the same graph under the same rules, cost
model, L and size cap as the benchmark that made the list
(`benchmarks/search_bench.py`, no step limit). One row per (setting,
seed) is appended to `--rows` as it finishes, so an interrupted run
resumes where it stopped (rows of another configuration are kept apart by
their `config` and not reused).

Printed per setting: the list's initial cost and each method's change
(greedy, TASO's search, equality saturation, random descents, the best),
the planner's median [min, max] change over the seeds, its real steps
(expansions: an environment step's engine work each) and seconds, the
milliseconds per real step, and the issue's tests: `within_1pt_of_best`
(the median within one point of the best known), `beats_taso` (where the
best known beats TASO's search by at least a point: the median below
TASO's), `not_worse_than_greedy` (every seed); `greedy_merging`, one-step
greedy with identical ops merged in the input and after every step
(`xflowrl.engine.dedupe`, what equality saturation does by storing each
e-node once; the list's `greedy_merging_ms` where it has one, computed
here otherwise), with `gap_is_merging` where that alone reaches the best
known (a gap that lies in merging, not in looking ahead); TASO's search's seconds and expansions (alpha 1.05,
budget 1,000) in the benchmark run the list comes from, and whether the
planner's median real steps stay within those expansions (the same unit:
one enumeration and costing of a graph's candidates; seconds of two runs
on a shared machine compare less well). TASO's search is also run here
(alpha 1.05, budget 1,000, the planner's L and size cap) right before
each planning run, once per setting and seed, and timed like the planner
(wall and this thread's CPU seconds; rows in `--taso_rows`, one per
setting and seed, resumable; a row without a seed, from a file written
when TASO ran once per setting before the first seed, is seed 0's):
`within_taso_time` says whether the planner's median CPU seconds over
the seeds stay within the median of those searches', each pair two runs
of one process in the same minute, so that a machine whose speed drifts
over the hour (it does here, by up to 1.7 times) slows both alike. Then
the counts over the settings.
"""

from __future__ import annotations

import cProfile
import dataclasses
import json
import os
import pstats
import statistics
import sys
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from absl import app, flags

from xflowrl.engine.xfers import TASO_ALPHA, TASO_BUDGET
from xflowrl.env import NO_STEP_LIMIT
from xflowrl.planning import PlanConfig, plan
from xflowrl.planning.search import NEUTRAL_EVERYWHERE
from xflowrl.search.settings import LookaheadSetting, load_settings, settings_source

FLAGS = flags.FLAGS
flags.DEFINE_string("settings", "all", "'all' or comma-separated setting names")
flags.DEFINE_string("seeds", "0,1,2", "comma-separated seeds")
flags.DEFINE_integer("simulations", PlanConfig.simulations, "simulations per decision")
flags.DEFINE_integer("root_actions", PlanConfig.root_actions, "Gumbel-top-k at the root")
flags.DEFINE_string("prior", PlanConfig.prior, "xfer[:T], cost[:T], uniform or policy:DIR")
flags.DEFINE_integer("rollout_steps", PlanConfig.rollout_steps, "greedy rollout at leaves")
flags.DEFINE_integer("max_real_steps", PlanConfig.max_real_steps, "expansions per run")
flags.DEFINE_float("time_limit_s", PlanConfig.time_limit_s, "seconds per run")
flags.DEFINE_bool("greedy_start", PlanConfig.greedy_start, "start from greedy's descent")
flags.DEFINE_bool("everywhere", PlanConfig.everywhere, "multi-location actions too")
flags.DEFINE_enum("neutral_everywhere", PlanConfig.neutral_everywhere, NEUTRAL_EVERYWHERE,
                  "where the search takes multi-location actions of no estimated gain")
flags.DEFINE_bool("merge_identical", PlanConfig.merge_identical,
                  "merge identical ops in every graph built")
flags.DEFINE_integer("patience", PlanConfig.patience,
                     "searches again from a graph with nothing cheaper below")
flags.DEFINE_bool("count_enumerations", PlanConfig.count_enumerations,
                  "--max_real_steps bounds every engine call: expansions and the "
                  "multi-location actions' single-rule enumerations together")
flags.DEFINE_integer("restarts", PlanConfig.restarts,
                     "times planning goes back to the first graph when it stalls")
flags.DEFINE_integer("stall_real_steps", PlanConfig.stall_real_steps,
                     "stop after this many real steps without a cheaper graph once past "
                     "greedy's (unset: never)")
flags.DEFINE_integer("detours", PlanConfig.detours,
                     "detour searches before planning stops (xflowrl.planning.detour)")
flags.DEFINE_integer("detour_expansions", PlanConfig.detour_expansions,
                     "expansions per detour search")
flags.DEFINE_string("rows", "results/plan_bench/rows.jsonl", "the rows, appended (resume)")
flags.DEFINE_string("taso_rows", "results/plan_bench/taso_rows.jsonl",
                    "TASO's search timed here, one row per setting, appended (resume)")
flags.DEFINE_string("markdown", None, "also write the table of the settings as Markdown here")
flags.DEFINE_integer("cprofile", 0, "print the N functions of most own time of each planning "
                     "run (cProfile) to stderr (0: no profile); the run's CPU seconds then "
                     "include the profiler's")
flags.DEFINE_string("export_graphs", None,
                    "a folder of the GPU check's graphs (benchmarks/data/lookahead_graphs): "
                    "add the planner's graph (the first seed's) to each setting's file there")

# Points by which the planner may trail the best known method and still
# count as reaching it (the planner's first target).
WITHIN_PT = 1.0
# Changes closer than this (points) are ties: the same graph's cost summed
# in another order.
TIE_PT = 1e-6


def _config(seed: int) -> PlanConfig:
    return PlanConfig(prior=FLAGS.prior, simulations=FLAGS.simulations,
                      root_actions=FLAGS.root_actions, rollout_steps=FLAGS.rollout_steps,
                      max_real_steps=FLAGS.max_real_steps,
                      count_enumerations=FLAGS.count_enumerations,
                      time_limit_s=FLAGS.time_limit_s,
                      greedy_start=FLAGS.greedy_start, everywhere=FLAGS.everywhere,
                      neutral_everywhere=FLAGS.neutral_everywhere,
                      merge_identical=FLAGS.merge_identical, patience=FLAGS.patience,
                      restarts=FLAGS.restarts, stall_real_steps=FLAGS.stall_real_steps,
                      detours=FLAGS.detours,
                      detour_expansions=FLAGS.detour_expansions, seed=seed)


def _config_key(config: PlanConfig) -> Dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(config).items() if k != "seed"}


def _read_rows(path: str, fields: Iterable[str]) -> List[dict]:
    """The rows in `path` (none where there is no file).

    Raises:
      ValueError: a row whose config lacks one of `fields` (today's
        `PlanConfig`'s but the seed): a row of an older layout.
    """
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for i, row in enumerate(rows, 1):
        missing = sorted(set(fields) - set(row["config"]))
        if missing:
            raise ValueError(f"{path}: row {i}'s config lacks {missing} (a row of an older "
                             "layout); this benchmark reads the current one only: run it "
                             "again with another --rows file")
    return rows


def run_row(setting: LookaheadSetting, config: PlanConfig) -> dict:
    """One planning run on `setting`, as a row."""
    env = setting.environment()
    if abs(env.initial_cost / setting.initial_ms - 1) > 1e-6:
        raise ValueError(f"{setting.name}: initial cost {env.initial_cost} ms here, "
                         f"{setting.initial_ms} ms in the list: not the same setting")
    profile = cProfile.Profile() if FLAGS.cprofile else None
    cpu = time.thread_time()
    if profile is not None:
        profile.enable()
    result = plan(env, config)
    if profile is not None:
        profile.disable()
    cpu = time.thread_time() - cpu
    if profile is not None:
        print(f"== {setting.name} seed {config.seed}: {cpu:.2f} s CPU", file=sys.stderr)
        pstats.Stats(profile, stream=sys.stderr).sort_stats("tottime").print_stats(
            FLAGS.cprofile)
    return {"setting": setting.name, "seed": config.seed, "config": _config_key(config),
            "change_pct": result.change_pct, "real_steps": result.real_steps,
            "engine_calls_to_best": result.engine_calls_to_best, "cpu_seconds": cpu,
            "applies": result.applies, "rule_enumerations": result.rule_enumerations,
            "decisions": result.decisions, "nodes": result.nodes,
            "route_length": len(result.applied), "seconds": result.seconds,
            "stopped": result.stopped}


def taso_row(setting: LookaheadSetting) -> dict:
    """TASO's search (alpha 1.05, budget 1,000) on `setting`, from the
    planner's graph under its rules, cost model, L and size cap, timed as
    the planner is: wall and this thread's CPU seconds."""
    env = setting.environment()
    cpu, wall = time.thread_time(), time.perf_counter()
    result = env.xfers.search(env.initial_graph, env.cost_model, alpha=TASO_ALPHA,
                              budget=TASO_BUDGET, max_ops=env.max_ops,
                              max_locations=env.config.max_locations)
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    return {"setting": setting.name, "alpha": TASO_ALPHA, "budget": TASO_BUDGET,
            "change_pct": 100.0 * (result.best_cost / env.initial_cost - 1.0),
            "expansions": result.expansions, "seconds": wall, "cpu_seconds": cpu}


def greedy_merging(setting: LookaheadSetting) -> float:
    """One-step greedy's change (% of the original's cost) with identical
    ops merged in the input and after every step (`xflowrl.engine.dedupe`):
    what equality saturation gets from storing each e-node once, given to
    greedy; the planner's `merge_identical` compares with this. It is the
    planner's greedy start with no decision after it."""
    result = plan(setting.environment(),
                  PlanConfig(merge_identical=True, max_decisions=0,
                             max_real_steps=NO_STEP_LIMIT, time_limit_s=3600.0))
    return result.change_pct


def taso_runs() -> Dict[str, dict]:
    """TASO's search at alpha 1.05, budget 1,000, per setting name, from the
    benchmark rows the list was made from (`settings_source()`): its
    seconds and expansions there."""
    out: Dict[str, dict] = {}
    for path in settings_source().get("benchmark_json", []):
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for row in json.load(f):
                batch = int(row.get("batch") or 1)
                name = (f"{row['graph']}/{row['rules']}/{row['cost_model'].replace('/', '-')}"
                        + (f"@b{batch}" if batch != 1 else ""))
                for search in row.get("search", []):
                    if search["alpha"] == 1.05 and search["budget"] == 1000:
                        out[name] = {"seconds": search["seconds"],
                                     "expansions": search["expansions"]}
    return out


def summarise(setting: LookaheadSetting, rows: List[dict],
              taso: Optional[dict] = None,
              taso_here: Optional[List[dict]] = None) -> dict:
    """The setting's line of the printed JSON (module docstring)."""
    changes = [r["change_pct"] for r in rows]
    median = statistics.median(changes)
    methods = {m: round(setting.change_pct(m), 3) for m in setting.costs_ms}
    best = 100.0 * (setting.best_ms / setting.initial_ms - 1.0)
    # The list's figure where it has one (the same computation, made when
    # the list was).
    listed = setting.greedy_merging_pct
    merged_greedy = listed if listed is not None else greedy_merging(setting)
    out: Dict[str, Any] = {
        "setting": setting.name, "initial_ms": setting.initial_ms, **methods,
        "greedy_merging": round(merged_greedy, 3),
        "gap_is_merging": merged_greedy <= best + 1e-6,
        "best_known": round(best, 3), "plan_median": round(median, 3),
        "plan_range": [round(min(changes), 3), round(max(changes), 3)],
        "real_steps_median": statistics.median(r["real_steps"] for r in rows),
        "seconds_median": round(statistics.median(r["seconds"] for r in rows), 2),
        "ms_per_real_step": round(1000 * statistics.median(
            r["seconds"] / max(r["real_steps"], 1) for r in rows), 2),
        "stopped": sorted({r["stopped"] for r in rows}),
        "within_1pt_of_best": median <= best + WITHIN_PT,
        "not_worse_than_greedy": max(changes) <= setting.change_pct("greedy") + TIE_PT,
        "beyond_best_known": median < best - TIE_PT,
    }
    if taso is not None:
        out["taso_seconds"] = round(taso["seconds"], 2)
        out["taso_expansions"] = taso["expansions"]
        out["real_steps_within_taso_expansions"] = (out["real_steps_median"]
                                                    <= taso["expansions"])
    cpu = [r["cpu_seconds"] for r in rows if "cpu_seconds" in r]
    if len(cpu) == len(rows):
        out["cpu_seconds_median"] = round(statistics.median(cpu), 2)
        out["cpu_seconds_range"] = [round(min(cpu), 2), round(max(cpu), 2)]
    if taso_here:
        taso_cpu = statistics.median(r["cpu_seconds"] for r in taso_here)
        out["taso_here_seconds"] = round(statistics.median(r["seconds"] for r in taso_here), 2)
        out["taso_here_cpu_seconds"] = round(taso_cpu, 2)
        out["taso_here_runs"] = len(taso_here)
        # TASO's search draws nothing at random: every seed's run gives one
        # change, and the median says so without trusting the first row.
        out["taso_here_change_pct"] = round(statistics.median(
            r["change_pct"] for r in taso_here), 3)
        if "cpu_seconds_median" in out:
            out["within_taso_time"] = statistics.median(cpu) <= taso_cpu
    if "taso" in methods and setting.change_pct("taso") - best >= WITHIN_PT:
        out["beats_taso"] = median < setting.change_pct("taso") - TIE_PT
    return out


def main(argv):
    del argv
    settings = load_settings()
    if FLAGS.settings != "all":
        wanted = FLAGS.settings.split(",")
        unknown = sorted(set(wanted) - {s.name for s in settings})
        if unknown:
            sys.exit(f"unknown settings {unknown}; the list has {[s.name for s in settings]}")
        settings = [s for s in settings if s.name in wanted]
    seeds = [int(s) for s in FLAGS.seeds.split(",")]
    os.makedirs(os.path.dirname(FLAGS.rows) or ".", exist_ok=True)
    key = _config_key(_config(0))
    done = {(r["setting"], r["seed"]): r for r in _read_rows(FLAGS.rows, key)
            if r["config"] == key}
    taso_done: Dict[Tuple[str, int], dict] = {}
    if FLAGS.taso_rows and os.path.exists(FLAGS.taso_rows):
        with open(FLAGS.taso_rows) as f:
            taso_done = {(r["setting"], r.get("seed", 0)): r
                         for r in map(json.loads, filter(str.strip, f))}
    # Seeds in the outer loop: a short run already covers every setting once.
    for seed in seeds:
        for setting in settings:
            if FLAGS.taso_rows and (setting.name, seed) not in taso_done:
                # Right before this seed's planning run: the two timed under
                # the load of the same minute.
                taso_done[(setting.name, seed)] = dict(taso_row(setting), seed=seed)
                os.makedirs(os.path.dirname(FLAGS.taso_rows) or ".", exist_ok=True)
                with open(FLAGS.taso_rows, "a") as f:
                    f.write(json.dumps(taso_done[(setting.name, seed)]) + "\n")
            if (setting.name, seed) in done:
                continue
            row = run_row(setting, _config(seed))
            done[(setting.name, seed)] = row
            with open(FLAGS.rows, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{setting.name} seed {seed}: {row['change_pct']:+.2f}% "
                  f"(greedy {setting.change_pct('greedy'):+.2f}%), {row['real_steps']} real "
                  f"steps, {row['seconds']:.1f} s, {row['stopped']}", file=sys.stderr, flush=True)
    taso = taso_runs()
    lines = [summarise(s, [done[(s.name, seed)] for seed in seeds], taso.get(s.name),
                       [taso_done[(s.name, seed)] for seed in seeds
                        if (s.name, seed) in taso_done])
             for s in settings]
    counts = {
        "settings": len(lines),
        "within_1pt_of_best": sum(line["within_1pt_of_best"] for line in lines),
        "not_worse_than_greedy": sum(line["not_worse_than_greedy"] for line in lines),
        "beyond_best_known": sum(line["beyond_best_known"] for line in lines),
        "gap_is_merging": sum(line["gap_is_merging"] for line in lines),
        "real_steps_within_taso_expansions": sum(
            line.get("real_steps_within_taso_expansions", False) for line in lines),
        "within_taso_time": sum(line.get("within_taso_time", False) for line in lines),
        "beats_taso": f"{sum(line.get('beats_taso', False) for line in lines)} of "
                      f"{sum('beats_taso' in line for line in lines)}",
        "graphs_beyond_greedy_by_1pt": sorted({
            line["setting"].split("/")[0] for line in lines
            if line["plan_median"] <= line["greedy"] - WITHIN_PT}),
    }
    print(json.dumps({"config": key, "seeds": seeds, "settings_source": settings_source(),
                      "counts": counts, "settings": lines}, indent=1))
    if FLAGS.markdown:
        with open(FLAGS.markdown, "w") as f:
            f.write(markdown_table(lines))
    if FLAGS.export_graphs:
        export_graphs(settings, _config(seeds[0]), FLAGS.export_graphs)


def export_graphs(settings: List[LookaheadSetting], config: PlanConfig, folder: str) -> None:
    """Adds `graphs["plan"]` (the graph `config` hands over, its estimate,
    the configuration and seed) to each setting's file of the GPU check in
    `folder` (`experiments/lookahead_settings.py --export_graphs` writes
    them); a setting without a file is skipped with a line on stderr."""
    for setting in settings:
        path = os.path.join(folder, setting.name.replace("/", "__") + ".json")
        if not os.path.exists(path):
            print(f"{setting.name}: no {path}, not exported", file=sys.stderr)
            continue
        result = plan(setting.environment(), config)
        with open(path) as f:
            data = json.load(f)
        data["graphs"]["plan"] = {"estimated_ms": result.cost, "graph": result.graph.to_data(),
                                  "seed": config.seed, "config": _config_key(config)}
        with open(path, "w") as f:
            json.dump(data, f)
        print(f"{setting.name}: plan {result.change_pct:+.2f}% -> {path}", file=sys.stderr)


def _pct(value: Optional[float]) -> str:
    return "" if value is None else f"{value:+.2f}%"


def markdown_table(lines: List[dict]) -> str:
    """The settings' lines as a Markdown table (changes in % of the initial
    cost; the planner's median [min, max] over the seeds; CPU seconds of
    the planner, median over the seeds, and of TASO's search run here)."""
    out = ["| setting | greedy | TASO | eqsat | random | greedy merging | best known "
           "| planner, median [range] | real steps | TASO expansions | within 1 pt "
           "| beats TASO | not above greedy | planner CPU s | TASO CPU s here "
           "| within TASO time |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    yes_no: Dict[Any, str] = {True: "yes", False: "no"}
    for line in lines:
        low, high = line["plan_range"]
        beats = yes_no.get(line.get("beats_taso"), "")
        out.append(
            f"| `{line['setting']}` | {_pct(line.get('greedy'))} | {_pct(line.get('taso'))} "
            f"| {_pct(line.get('eqsat'))} | {_pct(line.get('random'))} "
            f"| {_pct(line['greedy_merging'])} | {_pct(line['best_known'])} "
            f"| {_pct(line['plan_median'])} [{low:+.2f}, {high:+.2f}] "
            f"| {line['real_steps_median']:.0f} | {line.get('taso_expansions', '')} "
            f"| {yes_no[line['within_1pt_of_best']]} | {beats} "
            f"| {yes_no[line['not_worse_than_greedy']]} "
            f"| {line.get('cpu_seconds_median', '')} | {line.get('taso_here_cpu_seconds', '')} "
            f"| {yes_no.get(line.get('within_taso_time'), '')} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    app.run(main)
