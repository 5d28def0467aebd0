"""Two configurations of benchmarks/model_plan_bench.py side by side; prints
Markdown tables.

    python benchmarks/model_plan_compare.py --off=OFF_ROWS.jsonl --on=ON_ROWS.jsonl[,...]
        [--off_config=train_steps=1500,check_simulations=0,single_actions=0]
        [--on_config=single_actions=1] [--logs=LOG.err,...]

1. Per setting and seed: each configuration's cost (% of the initial), real
   steps to it and in all, model steps and decisions, the engine planner's
   result and real steps to it (the same in both rows: checked), and
   whether each reaches it with at most a tenth of its real steps.
2. Per setting: the medians over seeds, as the benchmark's reports count
   the target (the median cost reaches the engine planner's median, the
   median real steps within a tenth of its median).
3. With `--logs` (the benchmark's `--verbose` stderr of the `--on` runs):
   per setting, the root actions checked on the real graph by kind (a whole
   xfer / an xfer at its cheapest location): how many, the search's
   backed-up value minus the value with the real reward, the value head's
   value of the real graph built minus the most its cost can still fall to
   the engine planner's result (where positive, at least that much too
   high), and the decisions taken of each kind.
"""

from __future__ import annotations

import collections
import json
import re
import statistics
from typing import Dict, List

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("off", None, "comma-separated rows files of the first configuration")
flags.DEFINE_string("on", None, "comma-separated rows files of the second configuration")
flags.DEFINE_string("off_config", "train_steps=1500,check_simulations=0,single_actions=0",
                    "config fields a first-configuration row must have")
flags.DEFINE_string("on_config", "single_actions=1", "config fields a second-configuration row must have")
flags.DEFINE_string("logs", "", "comma-separated --verbose logs of the second configuration")
REACHED_PT = 0.0005   # as benchmarks/model_plan_bench.py
_BEFORE = {"real_root_rewards": True, "check_simulations": 0, "engine_prior": "cost",
           "single_actions": False}


def _rows(paths: str, fields: str) -> List[dict]:
    want = {k: int(v) for k, v in (f.split("=") for f in fields.split(",") if f)}
    out = []
    for path in paths.split(","):
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                row = json.loads(line)
                config = {**_BEFORE, **row["config"]}
                if all(int(config[k]) == v for k, v in want.items()):
                    out.append(row)
    return out


def _meets(cost, steps, engine_cost, engine_steps) -> bool:
    return cost <= engine_cost + REACHED_PT and steps * 10 <= engine_steps


def _checks(logs: List[str], engine: Dict[tuple, float]) -> None:
    stats: Dict[str, Dict[str, list]] = collections.defaultdict(lambda: collections.defaultdict(list))
    decisions: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    pending: list = []
    taken: collections.Counter = collections.Counter()
    current = 0.0
    for path in logs:
        with open(path) as f:
            for line in f:
                m = re.match(r"checked (\S+)( \(cheapest\))?: ([+-][\d.]+) pt predicted, "
                             r"([+-][\d.]+) with its real reward \(([+-][\d.]+)%\)", line)
                if m:
                    child = float(m.group(5))
                    value = float(m.group(4)) - (current - child)   # the value head's
                    pending.append(("cheapest" if m.group(2) else "whole",
                                    float(m.group(3)) - float(m.group(4)), value, child))
                    continue
                m = re.match(r"decision \d+: (\S+)( \(cheapest\))? .*-> ([+-][\d.]+)%", line)
                if m:
                    taken["cheapest" if m.group(2) else "whole"] += 1
                    current = float(m.group(3))
                    continue
                m = re.match(r"(\S+/\S+) seed (\d+): model", line)
                if m:
                    setting = m.group(1)
                    for kind, search, value, child in pending:
                        bound = max(0.0, child - engine[(setting, int(m.group(2)))])
                        stats[setting][kind].append((search, value - bound))
                    decisions[setting] += taken
                    pending, taken, current = [], collections.Counter(), 0.0
    print("| setting | kind | checked | backed-up minus checked (pt, mean) | value head minus "
          "the most the cost can fall to the engine planner's result (pt, mean) | "
          "decisions taken |")
    print("|---|---|---|---|---|---|")
    for setting, kinds in stats.items():
        for kind in ("whole", "cheapest"):
            xs = kinds[kind]
            search = f"{statistics.mean(x[0] for x in xs):+.2f}" if xs else "-"
            value = f"{statistics.mean(x[1] for x in xs):+.2f}" if xs else "-"
            print(f"| `{setting}` | {kind} | {len(xs)} | {search} | {value} | "
                  f"{decisions[setting][kind]} |")


def main(argv):
    del argv
    off, on = _rows(FLAGS.off, FLAGS.off_config), _rows(FLAGS.on, FLAGS.on_config)
    settings = list(dict.fromkeys(r["setting"] for r in on))
    print("| setting | seed | off: cost | to it | in all | model steps | on: cost | to it | "
          "in all | model steps | decisions (off / on) | stopped (on) | engine planner | "
          "its real steps to it | meets (off / on) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    engine = {}
    for setting in settings:
        for b in sorted((r for r in on if r["setting"] == setting), key=lambda r: r["seed"]):
            a = next(r for r in off if r["setting"] == setting and r["seed"] == b["seed"])
            if (a["engine_change_pct"], a["engine_real_steps_to_best"]) != (
                    b["engine_change_pct"], b["engine_real_steps_to_best"]):
                raise ValueError(f"{setting} seed {b['seed']}: the engine figures differ")
            engine[(setting, b["seed"])] = b["engine_change_pct"]
            meets = ["yes" if _meets(r["change_pct"], r["real_steps_to_best"],
                                     r["engine_change_pct"], r["engine_real_steps_to_best"])
                     else "no" for r in (a, b)]
            print(f"| `{setting}` | {b['seed']} | {a['change_pct']:.2f} | "
                  f"{a['real_steps_to_best']} | {a['real_steps']} | {a['model_steps']} | "
                  f"{b['change_pct']:.2f} | {b['real_steps_to_best']} | {b['real_steps']} | "
                  f"{b['model_steps']} | {a['decisions']} / {b['decisions']} | {b['stopped']} | "
                  f"{b['engine_change_pct']:.2f} | {b['engine_real_steps_to_best']} | "
                  f"{meets[0]} / {meets[1]} |")
    print()
    print("| setting | off: median cost | median real steps to it | on: median cost | median "
          "real steps to it | engine planner (median) | its real steps to it (median) | a tenth "
          "| off meets | on meets |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    count = collections.Counter()
    for setting in settings:
        b = [r for r in on if r["setting"] == setting]
        seeds = {r["seed"] for r in b}
        a = [r for r in off if r["setting"] == setting and r["seed"] in seeds]
        engine_cost = statistics.median(r["engine_change_pct"] for r in b)
        engine_steps = statistics.median(r["engine_real_steps_to_best"] for r in b)
        cells, met = [], []
        for rows in (a, b):
            cost = statistics.median(r["change_pct"] for r in rows)
            steps = statistics.median(r["real_steps_to_best"] for r in rows)
            met.append(_meets(cost, steps, engine_cost, engine_steps))
            cells.append(f"{cost:.2f} | {steps:g}")
        count["off"] += met[0]
        count["on"] += met[1]
        count["either"] += met[0] or met[1]
        print(f"| `{setting}` | {cells[0]} | {cells[1]} | {engine_cost:.2f} | {engine_steps:g} "
              f"| {engine_steps / 10:.1f} | {'**yes**' if met[0] else 'no'} | "
              f"{'**yes**' if met[1] else 'no'} |")
    print()
    print(f"settings meeting the target: off {count['off']}, on {count['on']}, "
          f"either {count['either']} of {len(settings)}")
    if FLAGS.logs:
        print()
        _checks(FLAGS.logs.split(","), engine)


if __name__ == "__main__":
    flags.mark_flags_as_required(["off", "on"])
    app.run(main)
