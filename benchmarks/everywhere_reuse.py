"""What a cache of multi-location actions could save the deployed planner, at
most; prints JSON.

    python benchmarks/everywhere_reuse.py [--settings=NAME,...] [--seeds=0]
        [--max_real_steps=1000]
    python benchmarks/everywhere_reuse.py --from_json=REPORT.json

The deployed engine planner (`xflowrl optimize --method=plan`: multi-location
actions, identical ops merged, one detour, 1,000 real steps) spends most of
its CPU on nasnet_a with the `tensat` rules in `XferSet.apply_everywhere`,
which enumerates the rule on the whole graph again after each application
(docs/planning.md, "Multi-location actions"). Before anyone builds a cache
of those calls, this measures what one could skip. Per setting and seed it
plans once with every `apply_everywhere` call recorded (the graph it starts
from, the rule, the canonical hash after each application, its
enumerations, this thread's CPU seconds), then counts in call order:

- `start_seen`: calls that start from a graph an earlier call of the same
  rule started from or passed through: a cache keyed by (graph hash, rule)
  could hand over the rest of that earlier call without enumerating;
- `converging`: calls that reach such a graph at some point, start
  included: from there on an earlier call did the same work. Their CPU
  from that point on is counted, shared out evenly over the call's
  enumerations.

Both are ceilings. A hit is exact only where the earlier call had as many
applications left and built the graph with the same op order: a graph's
hash is canonical, the order an enumeration lists locations in (and so
which of two equally cheap ones is taken) is not. TASO's search (alpha
1.05, budget 1,000) is timed in the same process before the setting's
first seed, as `benchmarks/plan_bench.py` times it: `plan_cpu_minus_converging`
against `taso_cpu` says whether such a cache alone could bring the planner
within TASO's time, and `everywhere_speedup_to_taso_cpu` how many times
cheaper the multi-location actions would have to become for the planner
to take TASO's CPU time (None where the rest of its work alone takes
longer), beside `other_cpu_over_taso_cpu` in the summary: the rest of the
planner's work against TASO's time. The summary gives ranges over the
rows; `--from_json` prints it again from a saved report.
"""

from __future__ import annotations

import json
import sys
import time
from typing import List, Optional, Sequence

from absl import app, flags

from everywhere_calls import ceilings, recorded  # benchmarks/, the script's folder
from xflowrl.engine.xfers import TASO_ALPHA, TASO_BUDGET
from xflowrl.planning import deployed_config, plan
from xflowrl.search.settings import LookaheadSetting, load_settings

FLAGS = flags.FLAGS
flags.DEFINE_list("settings", ["nasnet_a/tensat/analytic-v100",
                               "nasnet_a/tensat_full/analytic-v100"],
                  "setting names of the shipped list (xflowrl.search.settings)")
flags.DEFINE_list("seeds", ["0"], "planner seeds")
flags.DEFINE_integer("max_real_steps", 1000, "the planner's budget (the deployed one: 1,000)")
flags.DEFINE_string("from_json", None, "print the summary of a saved report's rows again "
                    "(runs nothing)")


def run(setting: LookaheadSetting, seeds: Sequence[int], max_real_steps: int) -> List[dict]:
    """TASO's search timed once, then one recorded planning run per seed."""
    env = setting.environment()
    cpu = time.thread_time()
    env.xfers.search(env.initial_graph, env.cost_model, alpha=TASO_ALPHA, budget=TASO_BUDGET,
                     max_ops=env.max_ops, max_locations=env.config.max_locations)
    taso_cpu = time.thread_time() - cpu
    rows = []
    for seed in seeds:
        env = setting.environment()
        config = deployed_config(max_real_steps=max_real_steps, seed=seed)
        with recorded(env.xfers) as calls:
            cpu = time.thread_time()
            result = plan(env, config)
            cpu = time.thread_time() - cpu
        counts = ceilings(calls)
        everywhere = sum(c.cpu_seconds for c in calls)
        rows.append({
            "setting": setting.name, "seed": seed, "change_pct": round(result.change_pct, 4),
            "plan_cpu": round(cpu, 3), "taso_cpu": round(taso_cpu, 3),
            "everywhere_calls": len(calls),
            "everywhere_enumerations": sum(c.enumerations for c in calls),
            "everywhere_cpu": round(everywhere, 3),
            **{name: {k: round(v, 3) for k, v in c.items()} for name, c in counts.items()},
            "plan_cpu_minus_converging": round(cpu - counts["converging"]["cpu_seconds"], 3),
            "everywhere_speedup_to_taso_cpu": speedup_to(taso_cpu, cpu, everywhere),
        })
    return rows


def speedup_to(target: float, total: float, part: float) -> Optional[float]:
    """How many times faster `part` of `total` must become for `total` to
    reach `target`; None where the rest alone exceeds it."""
    rest = total - part
    if rest >= target:
        return None
    return round(max(part / (target - rest), 1.0), 2) if part > 0 else 1.0


def summary(rows: Sequence[dict]) -> dict:
    """Ranges over the rows, and how many a cache alone would bring within
    TASO's time."""
    def span(values):
        values = list(values)
        return [round(min(values), 3), round(max(values), 3)] if values else None
    return {
        "rows": len(rows),
        "everywhere_share_of_plan_cpu": span(r["everywhere_cpu"] / r["plan_cpu"] for r in rows),
        "converging_share_of_everywhere_cpu": span(
            r["converging"]["cpu_seconds"] / r["everywhere_cpu"] for r in rows
            if r["everywhere_cpu"] > 0),
        "plan_cpu_over_taso_cpu": span(r["plan_cpu"] / r["taso_cpu"] for r in rows),
        "other_cpu_over_taso_cpu": span(
            (r["plan_cpu"] - r["everywhere_cpu"]) / r["taso_cpu"] for r in rows),
        "plan_cpu_minus_converging_over_taso_cpu": span(
            r["plan_cpu_minus_converging"] / r["taso_cpu"] for r in rows),
        "within_taso_cpu_with_the_cache": sum(
            r["plan_cpu_minus_converging"] <= r["taso_cpu"] for r in rows),
        "everywhere_speedup_to_taso_cpu": span(
            r["everywhere_speedup_to_taso_cpu"] for r in rows
            if r["everywhere_speedup_to_taso_cpu"] is not None),
        "out_of_reach_without_everywhere": sum(
            r["everywhere_speedup_to_taso_cpu"] is None for r in rows),
    }


def main(argv):
    del argv
    if FLAGS.from_json:
        with open(FLAGS.from_json) as f:
            rows = json.load(f)["rows"]
        print(json.dumps({"benchmark": "everywhere_reuse", "summary": summary(rows),
                          "rows": rows}, indent=1))
        return
    by_name = {s.name: s for s in load_settings()}
    unknown = [name for name in FLAGS.settings if name not in by_name]
    if unknown:
        raise app.UsageError(f"unknown settings {unknown}; the list has {sorted(by_name)}")
    rows = []
    for name in FLAGS.settings:
        rows += run(by_name[name], [int(s) for s in FLAGS.seeds], FLAGS.max_real_steps)
        print(json.dumps(rows[-1]), flush=True, file=sys.stderr)
    print(json.dumps({"benchmark": "everywhere_reuse", "summary": summary(rows), "rows": rows},
                     indent=1))


if __name__ == "__main__":
    app.run(main)
