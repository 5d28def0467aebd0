"""The summary of `eqsat_time_bench.py`'s calls: per method and tree the
spread of per-setting medians, equality saturation against TASO's search,
and each later source tree against the first, setting by setting.

Defines no flags, so tests and other scripts import it beside any benchmark.
"""

from __future__ import annotations

import json
import statistics
from typing import Any, Dict, List, Sequence


def spread(values: Sequence[float]) -> Dict[str, float]:
    """Median, quartiles and range."""
    v = sorted(values)
    if len(v) == 1:
        q = [v[0]] * 3
    else:
        q = statistics.quantiles(v, n=4, method="inclusive")
    return {"median": statistics.median(v), "p25": q[0], "p75": q[2], "min": v[0],
            "max": v[-1], "n": len(v)}


def summarise(calls: List[dict], trees: Sequence[str]) -> dict:
    """Per method and tree: spread of per-setting medians; eqsat / TASO ratios."""
    by: Dict[tuple, List[dict]] = {}
    for c in calls:
        if "error" in c:
            continue
        by.setdefault((c["method"], c["tree"], c["setting"]), []).append(c)
    settings = sorted({c["setting"] for c in calls})
    out: Dict[str, Any] = {}

    def per_setting(method: str, tree: str, key: str) -> Dict[str, float]:
        return {s: statistics.median(c[key] for c in by[(method, tree, s)])
                for s in settings if (method, tree, s) in by}
    taso = per_setting("taso", trees[0], "seconds")
    taso_cpu = per_setting("taso", trees[0], "cpu_seconds")
    if taso:
        out["taso"] = {"seconds": spread(list(taso.values())),
                       "cpu_seconds": spread(list(taso_cpu.values()))}
    for tree in trees:
        eq = per_setting("eqsat", tree, "seconds")
        eq_cpu = per_setting("eqsat", tree, "cpu_seconds")
        entry: Dict[str, Any] = {"seconds": spread(list(eq.values())),
                                 "cpu_seconds": spread(list(eq_cpu.values())),
                                 "over_60s": sorted(s for s, v in eq.items() if v > 60)}
        # Eqsat's second start (`EqsatConfig.descent_start`), where it ran:
        # its seconds per setting (median over rounds) and which settings.
        second = {s: statistics.median(c.get("second_start_seconds", 0.0)
                                       for c in by[("eqsat", tree, s)])
                  for s in settings if ("eqsat", tree, s) in by}
        second = {s: v for s, v in second.items() if v > 0}
        if second:
            entry["second_start_seconds"] = spread(list(second.values()))
            entry["second_start_settings"] = sorted(second)
        if taso:
            # Per setting and round: the ratio of the calls made side by side.
            # Each phase against TASO's whole search too, and extraction's
            # share of eqsat's seconds: which phase keeps eqsat above TASO.
            ratios: List[float] = []
            phases: Dict[str, List[float]] = {"saturation": [], "extraction": []}
            shares: List[float] = []
            for s in settings:
                for e, t in zip(by.get(("eqsat", tree, s), []), by.get(("taso", trees[0], s), [])):
                    taso_seconds = max(t["seconds"], 1e-3)
                    ratios.append(e["seconds"] / taso_seconds)
                    if "saturation_seconds" in e and "extraction_seconds" in e:
                        for phase, values in phases.items():
                            values.append(e[f"{phase}_seconds"] / taso_seconds)
                        both = e["saturation_seconds"] + e["extraction_seconds"]
                        if both > 0:
                            shares.append(e["extraction_seconds"] / both)
            entry["ratio_eqsat_over_taso"] = spread(ratios)
            for phase, values in phases.items():
                if values:
                    entry[f"{phase}_over_taso"] = spread(values)
            if shares:
                entry["extraction_share"] = spread(shares)
            entry["faster_than_taso"] = sum(eq[s] < taso[s] for s in eq if s in taso)
            above = []
            for s in settings:
                e_runs, t_runs = by.get(("eqsat", tree, s), []), by.get(("taso", trees[0], s), [])
                if e_runs and t_runs:
                    worst = max(r["cost_ms"] for r in e_runs)
                    if worst > min(r["cost_ms"] for r in t_runs) + 1e-6 * e_runs[0]["initial_ms"]:
                        above.append(s)
            entry["above_taso"] = above
        if tree != trees[0]:
            # Saturated e-graphs unlike the first tree's, per setting: those
            # whose runs stopped on the time limit (in either tree) apart.
            differs: List[str] = []
            timed: List[str] = []
            for s in settings:
                mine, first = by.get(("eqsat", tree, s), []), by.get(("eqsat", trees[0], s), [])
                if not mine or not first:
                    continue
                if {r["digest"] for r in mine} != {r["digest"] for r in first}:
                    stopped = {r["stop_reason"] for r in mine + first}
                    (timed if "time_limit" in stopped else differs).append(s)
            entry["digest_differs"] = differs
            # Per setting: this tree's median over the first tree's, in CPU
            # and in each phase's seconds.
            for key, name in (("cpu_seconds", "cpu"), ("saturation_seconds", "saturation"),
                              ("extraction_seconds", "extraction")):
                mine_k = per_setting("eqsat", tree, key)
                first_k = per_setting("eqsat", trees[0], key)
                ratio = [mine_k[s] / first_k[s] for s in mine_k if first_k.get(s, 0) > 0]
                if ratio:
                    entry[f"{name}_over_first"] = spread(ratio)
                if key == "cpu_seconds":
                    entry["cpu_faster_than_first"] = sum(r < 1 for r in ratio)
            entry["digest_differs_time_limited"] = timed
            entry["cost_differs"] = sorted(
                s for s in settings if by.get(("eqsat", tree, s)) and by.get(("eqsat", trees[0], s))
                and abs(by[("eqsat", tree, s)][0]["cost_ms"] - by[("eqsat", trees[0], s)][0]["cost_ms"])
                > 1e-9 * by[("eqsat", tree, s)][0]["initial_ms"])
            # Settings whose ILP programs ended otherwise than the first
            # tree's (e.g. a program skipped in one): both statuses (the
            # first round's) and both median CPU seconds.
            cpu_mine = per_setting("eqsat", tree, "cpu_seconds")
            cpu_first = per_setting("eqsat", trees[0], "cpu_seconds")
            entry["status_differs"] = {
                s: {"statuses": [by[("eqsat", trees[0], s)][0]["ilp_status"],
                                 by[("eqsat", tree, s)][0]["ilp_status"]],
                    "cpu_seconds": [cpu_first[s], cpu_mine[s]]}
                for s in settings if by.get(("eqsat", tree, s)) and by.get(("eqsat", trees[0], s))
                and "ilp_status" in by[("eqsat", tree, s)][0]
                and by[("eqsat", tree, s)][0]["ilp_status"]
                != by[("eqsat", trees[0], s)][0].get("ilp_status")}
        out[f"eqsat {tree}"] = entry
    return out


def summary_of_report(path: str) -> dict:
    """The summary of a report `eqsat_time_bench.py --out_json` saved, from its calls."""
    with open(path) as f:
        saved = json.load(f)
    return summarise(saved["calls"], saved["trees"])
