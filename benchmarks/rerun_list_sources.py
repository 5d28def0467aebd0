"""Runs methods again on every source file of the settings list, and says
what changed.

The settings list (`xflowrl/search/data/lookahead_settings.json`) is made
from benchmark files (`source.benchmark_json`), each one search_bench.py
run. After a change to a method (equality saturation, usually), each file
is copied into --out_dir without that method's results, and
search_bench.py runs it again on the copy's rows, with the graphs,
batches, cost models, rule sets, TASO's alphas and budgets, the number of
random descents and eqsat's limits read from the file's rows (--extra:
more search_bench.py flags); every other method's figures stay the
file's. It then prints one JSON line per file and method: rows; how many
rows the method ends lower, the same or higher (within 1e-6 of the
initial cost), each changed row with its figures; how many rows it ends
above TASO's search and above greedy; for eqsat, in how many a second
start ran (and in how many of those none ran before, with their seconds)
and in how many the graph handed over came from it; the median wall
seconds of its runs before and after.

    python benchmarks/rerun_list_sources.py --out_dir=results/list_rerun
    python benchmarks/rerun_list_sources.py --out_dir=results/list_rerun --report_only

The copy is written once; search_bench.py runs what its rows lack and
saves each row as it finishes, so a second command resumes an
interrupted one. The remade list then comes from
`experiments/lookahead_settings.py --bench_json=<the copies>`.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
from typing import Any, Dict, List, Optional

from absl import app, flags

from search_matrix import drop_methods

FLAGS = flags.FLAGS
flags.DEFINE_string("settings", "xflowrl/search/data/lookahead_settings.json",
                    "The settings list whose source files are run again.")
flags.DEFINE_string("out_dir", "results/list_rerun", "Where the copies and their tables go.")
flags.DEFINE_list("rerun", ["eqsat"], "Methods run again (search_bench.py --rerun).")
flags.DEFINE_integer("workers", 2, "search_bench.py --workers.")
flags.DEFINE_list("extra", [], "More search_bench.py flags, e.g. --eqsat_descent_start=never.")
flags.DEFINE_bool("report_only", False, "Only compare the copies with their sources.")

_HERE = os.path.dirname(os.path.abspath(__file__))
_TOL = 1e-6   # of the initial cost: the same cost


def _key(row: Dict[str, Any]) -> tuple:
    return (row["graph"], row.get("batch", 1), row["cost_model"], row["rules"])


def bench_flags(rows: List[Dict[str, Any]]) -> List[str]:
    """search_bench.py's flags that give back exactly `rows`' settings and
    methods' parameters; ValueError where the rows are not one product of
    graphs x batches x cost models x rule sets, or mix parameters."""
    axes = [sorted({k[i] for k in map(_key, rows)}, key=str) for i in range(4)]
    if len(rows) != len(set(map(_key, rows))) or \
            len(rows) != len(list(itertools.product(*axes))):
        raise ValueError("the rows are not one graphs x batches x cost models x rules product")
    runs = {(s["alpha"], s["budget"]) for r in rows for s in r["search"]}
    alphas = sorted({a for a, _ in runs})
    budgets = sorted({b for _, b in runs})
    if runs != set(itertools.product(alphas, budgets)):
        raise ValueError(f"TASO's runs are not one alphas x budgets product: {sorted(runs)}")
    descents = {r["descent"]["episodes"] for r in rows if r.get("descent")}
    if len(descents) != 1:
        raise ValueError(f"rows with different numbers of random descents: {descents}")
    graphs, batches, cost_models, rules = axes
    eqsat = [f"--{flag}={value}" for flag, value in _eqsat_flags(rows).items()]
    return eqsat + [f"--graphs={','.join(graphs)}", f"--batches={','.join(map(str, batches))}",
            f"--cost_models={','.join(cost_models)}", f"--rules={','.join(rules)}",
            f"--alphas={','.join(map(str, alphas))}",
            f"--budgets={','.join(map(str, budgets))}", f"--descents={descents.pop()}"]


# search_bench.py's eqsat flags, by the field of `EqsatConfig` they set.
_EQSAT_FLAGS = {"time_limit_s": "eqsat_time_limit", "node_limit": "eqsat_node_limit",
                "ilp_time_limit_s": "eqsat_ilp_time_limit", "backoff": "eqsat_backoff",
                "multi_pattern_iterations": "eqsat_multi_pattern_iterations",
                "seed_descent": "eqsat_seed_descent"}


def _eqsat_flags(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The eqsat flags the rows ran with (their `eqsat.config`), so that a
    rerun runs with the same limits; ValueError where the rows differ."""
    configs = {json.dumps({k: r["eqsat"]["config"].get(k) for k in _EQSAT_FLAGS},
                          sort_keys=True) for r in rows if r.get("eqsat")}
    if len(configs) > 1:
        raise ValueError(f"rows with different eqsat settings: {sorted(configs)}")
    if not configs:
        return {}
    config = json.loads(configs.pop())
    return {_EQSAT_FLAGS[k]: str(v).lower() if isinstance(v, bool) else v
            for k, v in config.items() if v is not None}


def compare(before: List[Dict[str, Any]], after: List[Dict[str, Any]],
            method: str) -> Dict[str, Any]:
    """How `method`'s cost moved, row by row, and where it ends above
    TASO's search and greedy after; for eqsat, in how many rows a second
    start ran (`SaturationResult.descent_start`), in how many the graph
    handed over came from it, and, per changed row, which start's; the median wall seconds of its
    runs before and after, and of the second starts."""
    old = {_key(r): r for r in before}
    counts: Dict[str, Any] = {"rows": len(after), "lower": 0, "same": 0, "higher": 0,
                              "above_taso": 0, "above_greedy": 0, "second_starts": 0,
                              "new_second_starts": 0, "from_second_start": 0, "changed": []}
    seconds: Dict[str, List[float]] = {"before": [], "after": []}
    second_seconds: List[float] = []
    new_second_seconds: List[float] = []   # where no second start ran before
    for row in after:
        tol = _TOL * row["initial_cost_ms"]
        cost = row[method]["cost_ms"]
        was = old[_key(row)][method]["cost_ms"]
        move = "lower" if cost < was - tol else "higher" if cost > was + tol else "same"
        counts[move] += 1
        name = "/".join(map(str, _key(row)))
        if move != "same":
            counts["changed"].append(
                {"setting": name, "before_pct": _pct(row, was), "after_pct": _pct(row, cost),
                 "start": row[method].get("start")})
        taso = min(s["cost_ms"] for s in row["search"])
        counts["above_taso"] += cost > taso + tol
        counts["above_greedy"] += cost > row["greedy"]["cost_ms"] + tol
        second = row[method].get("descent_start")
        counts["from_second_start"] += row[method].get("start") == "descent"
        if second is not None:
            counts["second_starts"] += 1
            second_seconds.append(second["seconds"])
            if old[_key(row)][method].get("descent_start") is None:
                counts["new_second_starts"] += 1
                new_second_seconds.append(second["seconds"])
        seconds["before"].append(old[_key(row)][method]["seconds"])
        seconds["after"].append(row[method]["seconds"])
    # Wall seconds of the method's runs (the machine's load included).
    counts["seconds_median"] = {k: _median(v) for k, v in seconds.items()}
    counts["second_start_seconds_median"] = _median(second_seconds)
    # The new ones' seconds, where a change made the second start run more.
    counts["new_second_start_seconds"] = (
        {"min": round(min(new_second_seconds), 3), "median": _median(new_second_seconds),
         "max": round(max(new_second_seconds), 3)} if new_second_seconds else None)
    return counts


def _median(values: List[float]) -> Optional[float]:
    return round(float(statistics.median(values)), 3) if values else None


def _pct(row: Dict[str, Any], cost: float) -> float:
    return round(100.0 * (cost - row["initial_cost_ms"]) / row["initial_cost_ms"], 2)


def main(argv):
    del argv
    with open(FLAGS.settings) as f:
        sources = json.load(f)["source"]["benchmark_json"]
    missing = [s for s in sources if not os.path.exists(s)]
    if missing:
        raise app.UsageError(f"the list's source files are missing: {missing} (run from "
                             "the repository's root)")
    os.makedirs(FLAGS.out_dir, exist_ok=True)
    for source in sources:
        with open(source) as f:
            before = json.load(f)
        copy = os.path.join(FLAGS.out_dir, os.path.basename(source))
        if not FLAGS.report_only:
            if not os.path.exists(copy):
                with open(copy + ".tmp", "w") as f:
                    json.dump([drop_methods(r, FLAGS.rerun) for r in before], f, indent=1)
                os.replace(copy + ".tmp", copy)
            command = [sys.executable, os.path.join(_HERE, "search_bench.py"),
                       "--methods=greedy,taso,eqsat,random", f"--workers={FLAGS.workers}",
                       f"--out_json={copy}", f"--out_md={copy[:-len('.json')]}.md",
                       *bench_flags(before), *FLAGS.extra]
            print("[rerun_list_sources]", " ".join(command[1:]), file=sys.stderr, flush=True)
            # Its rows' lines go to stderr, as progress: stdout is this script's.
            subprocess.run(command, check=True, stdout=sys.stderr)
        if not os.path.exists(copy):   # --report_only before any run
            print(f"[rerun_list_sources] no copy of {source} in {FLAGS.out_dir}",
                  file=sys.stderr)
            continue
        with open(copy) as f:
            after = json.load(f)
        for method in FLAGS.rerun:
            print(json.dumps({"source": source, "copy": copy, "method": method,
                              **compare(before, after, method)}), flush=True)


if __name__ == "__main__":
    app.run(main)
