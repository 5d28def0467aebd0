"""The summary of `plan_time_bench.py`'s calls: per source tree the
planner's CPU against TASO's search's, timed side by side, and each later
tree against the first, setting by setting.

Defines no flags, so tests and other scripts import it beside any benchmark.
"""

from __future__ import annotations

from collections import Counter
import json
import statistics
from typing import Any, Dict, List, Sequence, Tuple

from eqsat_time import spread

# What a planning run hands over and how it got there: a later tree whose
# runs differ in any of these did not just get faster.
RESULT_FIELDS = ("cost_ms", "route", "real_steps", "rule_enumerations", "applies",
                 "decisions", "nodes", "stopped")


def summarise(calls: List[dict], trees: Sequence[str]) -> Dict[str, Any]:
    """Per tree: its runs, their real steps summed (and their detour
    searches' real steps and successes, where the calls have them) and
    their stops counted; the spread over settings of the planner's median
    CPU, of its ratio to TASO's median CPU, and in how many settings it is
    within TASO's (and each setting's ratio, `by_setting`); the same for
    its CPU until the graph it hands over was first seen (`cpu_to_best`,
    where the calls have it: a planner given TASO's time would hand over
    that graph); per later tree: its median CPU over the first tree's per
    setting, and the runs whose results differ from the first tree's."""
    by: Dict[Tuple[str, str, str], List[dict]] = {}
    for c in calls:
        if "error" not in c:
            by.setdefault((c["method"], c["tree"], c["setting"]), []).append(c)
    settings = sorted({c["setting"] for c in calls})

    def medians(method: str, tree: str, field: str = "cpu_seconds") -> Dict[str, float]:
        return {s: statistics.median(c[field] for c in by[(method, tree, s)])
                for s in settings
                if (method, tree, s) in by and all(field in c for c in by[(method, tree, s)])}

    out: Dict[str, Any] = {"settings": len(settings),
                           "errors": [c for c in calls if "error" in c]}
    taso = medians("taso", trees[0])
    if taso:
        out["taso"] = {"cpu_seconds": spread(list(taso.values()))}
    first = medians("plan", trees[0])
    for tree in trees:
        plan = medians("plan", tree)
        if not plan:
            continue
        runs = [c for (method, t, _), cs in by.items() if method == "plan" and t == tree
                for c in cs]
        entry: Dict[str, Any] = {"cpu_seconds": spread(list(plan.values())),
                                 "runs": len(runs),
                                 "real_steps": sum(c["real_steps"] for c in runs),
                                 **_detours(runs),
                                 "stops": dict(sorted(Counter(c["stopped"] for c in runs)
                                                      .items()))}
        both = [s for s in plan if s in taso]
        if both:
            entry["over_taso"] = spread([plan[s] / max(taso[s], 1e-6) for s in both])
            entry["within_taso_time"] = sum(plan[s] <= taso[s] for s in both)
            entry["within_taso_time_of"] = len(both)
            to_best = medians("plan", tree, "cpu_to_best")
            timed = [s for s in both if s in to_best]
            if timed:  # reports from before the field have none
                entry["to_best_over_taso"] = spread([to_best[s] / max(taso[s], 1e-6)
                                                     for s in timed])
                entry["best_within_taso_time"] = sum(to_best[s] <= taso[s] for s in timed)
                entry["best_within_taso_time_of"] = len(timed)
            entry["by_setting"] = {
                s: {"over_taso": plan[s] / max(taso[s], 1e-6),
                    **({"to_best_over_taso": to_best[s] / max(taso[s], 1e-6)}
                       if s in to_best else {})}
                for s in both}
        if tree != trees[0]:
            common = [s for s in plan if s in first]
            if common:
                ratios = [plan[s] / max(first[s], 1e-6) for s in common]
                entry["over_first_tree"] = spread(ratios)
                entry["faster_than_first_tree"] = sum(r < 1.0 for r in ratios)
            entry["results_differ"] = _differing(by, tree, trees[0], settings)
        out[f"plan {tree}"] = entry
    return out


def _detours(runs: List[dict]) -> Dict[str, int]:
    """The detour searches' real steps and successes over `runs` (reports
    from before the fields have none)."""
    if not runs or any("detour_real_steps" not in c for c in runs):
        return {}
    return {"detour_real_steps": sum(c["detour_real_steps"] for c in runs),
            "detours_found": sum(c["detours_found"] for c in runs)}


def _differing(by: Dict[Tuple[str, str, str], List[dict]], tree: str, first: str,
               settings: Sequence[str]) -> List[str]:
    """'setting seed N' for each run whose results differ between the two trees."""
    out = []
    for s in settings:
        theirs = {c["seed"]: c for c in by.get(("plan", first, s), [])}
        for c in by.get(("plan", tree, s), []):
            other = theirs.get(c["seed"])
            if other is not None and any(c.get(f) != other.get(f) for f in RESULT_FIELDS):
                out.append(f"{s} seed {c['seed']}")
    return sorted(set(out))


def summary_of_report(path: str) -> Dict[str, Any]:
    """The summary of a report the benchmark saved (`--out_json`), made again
    from its calls."""
    with open(path) as f:
        saved = json.load(f)
    return summarise(saved["calls"], saved["trees"])


def handed_over_differs(path: str, against: str) -> List[str]:
    """'setting seed N' for each planner run of the report at `path` whose
    handed-over graph or route (`cost_ms`, `route`) differs from that of
    the same setting and seed in the report at `against` (first trees; runs
    only one of them has are left out): two configurations compared, each
    run in its own report."""
    def runs(report: str) -> Dict[Tuple[str, int], dict]:
        with open(report) as f:
            saved = json.load(f)
        first = saved["trees"][0]
        return {(c["setting"], c["seed"]): c for c in saved["calls"]
                if c["method"] == "plan" and c["tree"] == first and "error" not in c}
    mine, theirs = runs(path), runs(against)
    return sorted(f"{s} seed {seed}" for (s, seed), c in mine.items()
                  if (s, seed) in theirs and any(c[f] != theirs[(s, seed)][f]
                                                 for f in ("cost_ms", "route")))
