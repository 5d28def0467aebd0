"""The deployed planner's CPU against TASO's search, and source trees
against each other, measured interleaved; prints JSON.

    python benchmarks/plan_time_bench.py [--settings=all] [--seeds=0,1,2]
        [--trees=/tmp/before,.] [--config='{"neutral_everywhere": "search"}']
        [--rounds=1] [--out_json=PATH]
    python benchmarks/plan_time_bench.py --from_json=REPORT.json   # its summary again
    python benchmarks/plan_time_bench.py --from_json=A.json --against_json=B.json

The planning issue's time target is the deployed planner (`xflowrl optimize
--method=plan`, `xflowrl.planning.deployed_config()`) within the CPU time
of TASO's search at budget 1,000 (alpha 1.05) on the settings list. On a
shared machine two timings compare only when they run under the same
load, so this benchmark runs, per setting, seed and round, TASO's search
and then the planner of each source tree of `--trees`, one after the
other (the order reversed every other time), each in a long-lived worker
process of its tree (`tree_workers`: imports and the settings' graphs
loaded once; TASO's search runs in the first tree's worker). Each call's
figure is its thread's CPU time. The planner runs `deployed_config(seed=
SEED, time_limit_s=600)` with `--config`'s fields replaced (JSON), so that
two trees run the same configuration; `benchmarks/plan_bench.py` measures
the planner's results on the list.

`--against_json` (with `--from_json`) also lists the runs whose
handed-over graph or route differs from the other report's run of the
same setting and seed: two configurations (`--config`), each run in its
own report.

The report: every call (setting, seed, round, method, tree, CPU and wall
seconds; the planner's cost, route digest, real steps, applies,
enumerations, decisions, nodes and stop, and its CPU and real steps when
the graph it hands over was first seen, and the real steps of its detour
searches and how many found a cheaper graph; TASO's change and
expansions),
and its summary (`plan_time.summarise`): per tree the spread over settings
of the planner's median CPU, of its ratio to TASO's, and the settings
within TASO's time; per later tree its median CPU over the first tree's
per setting, how often it is faster, and the runs whose results differ
from the first tree's (a speed-up that changes nothing lists none).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any, Dict, List

from absl import app, flags

from plan_time import handed_over_differs, summarise, summary_of_report
from tree_workers import define_flags, dispatch, report_out, run_calls

FLAGS = flags.FLAGS
flags.DEFINE_string("settings", "all", "'all' or comma-separated names of the settings list")
flags.DEFINE_list("seeds", ["0", "1", "2"], "Planner seeds.")
flags.DEFINE_string("config", "{}", "JSON: fields of deployed_config() to replace in every "
                    "tree (e.g. {\"neutral_everywhere\": \"search\"}).")
define_flags("planner")
flags.DEFINE_string("against_json", "", "With --from_json: also list the runs whose handed-over "
                    "graph or route differs from this report's runs.")


class _Worker:
    """Runs calls in this process; each setting's environment made once."""

    def __init__(self):
        from xflowrl.search.settings import load_settings  # pylint: disable=C0415
        self._settings = {s.name: s for s in load_settings()}
        self._envs: Dict[str, Any] = {}

    def run(self, call: dict) -> dict:
        from xflowrl.engine.xfers import TASO_ALPHA, TASO_BUDGET  # pylint: disable=C0415
        from xflowrl.planning import deployed_config, plan  # pylint: disable=C0415
        name = call["setting"]
        if name not in self._envs:
            self._envs[name] = self._settings[name].environment()
        env = self._envs[name]
        cpu, wall = time.thread_time(), time.perf_counter()
        if call["method"] == "taso":
            r = env.xfers.search(env.initial_graph, env.cost_model, alpha=TASO_ALPHA,
                                 budget=TASO_BUDGET, max_ops=env.max_ops,
                                 max_locations=env.config.max_locations)
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            return {"cpu_seconds": cpu, "seconds": wall, "expansions": r.expansions,
                    "change_pct": 100.0 * (r.best_cost / env.initial_cost - 1.0)}
        config = deployed_config(**{"time_limit_s": 600.0, **call["config"],
                                    "seed": call["seed"]})
        result = plan(env, config)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        route = hashlib.sha256(json.dumps(result.applied).encode()).hexdigest()[:16]
        return {"cpu_seconds": cpu, "seconds": wall, "cost_ms": result.cost,
                "change_pct": result.change_pct, "route": route,
                "real_steps": result.real_steps, "applies": result.applies,
                "rule_enumerations": result.rule_enumerations,
                "decisions": result.decisions, "nodes": result.nodes,
                "stopped": result.stopped, "cpu_to_best": result.cpu_seconds_to_best,
                "real_steps_to_best": result.real_steps_to_best,
                "detour_real_steps": result.detour_real_steps,
                "detours_found": result.detours_found}


def _setting_names() -> List[str]:
    from xflowrl.search.settings import load_settings  # pylint: disable=C0415
    names = [s.name for s in load_settings()]
    if FLAGS.settings == "all":
        return names
    wanted = FLAGS.settings.split(",")
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        raise app.UsageError(f"unknown settings {unknown}; the list has {names}")
    return wanted


def _schedule(names: List[str], seeds: List[int], trees: List[str], config: dict):
    """Per round, seed and setting: TASO's search, then each tree's planner
    (reversed every other time)."""
    turn = 0
    for round_ in range(FLAGS.rounds):
        for seed in seeds:
            for name in names:
                jobs = ([("taso", 0)] if FLAGS.taso else []) + \
                    [("plan", k) for k in range(len(trees))]
                if turn % 2:  # alternate who goes first
                    jobs.reverse()
                turn += 1
                yield [(k, {"method": method, "setting": name, "seed": seed, "config": config},
                        {"setting": name, "seed": seed, "round": round_, "method": method})
                       for method, k in jobs]


def _summary_of_report(path: str) -> dict:
    summary = summary_of_report(path)
    if FLAGS.against_json:
        summary["handed_over_differs"] = handed_over_differs(path, FLAGS.against_json)
    return summary


def main(argv):
    del argv
    if dispatch(lambda: _Worker().run, _summary_of_report):
        return
    try:
        config = json.loads(FLAGS.config)
    except json.JSONDecodeError as e:
        raise app.UsageError(f"--config is not JSON: {e}")
    if not isinstance(config, dict) or "seed" in config:
        raise app.UsageError("--config is a JSON object of deployed_config() fields "
                             "other than the seed")
    names = _setting_names()
    seeds = [int(s) for s in FLAGS.seeds]
    trees = [os.path.abspath(t) for t in FLAGS.trees]
    load_before = os.getloadavg()
    calls = run_calls(__file__, trees, _schedule(names, seeds, trees, config))
    report_out({"config": config, "seeds": seeds, "rounds": FLAGS.rounds, "trees": trees,
                "load_before": load_before, "load_after": os.getloadavg(),
                "summary": summarise(calls, trees), "calls": calls})


if __name__ == "__main__":
    app.run(main)
