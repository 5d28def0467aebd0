"""Planning as the generalist's fine-tuning path: does the engine planner
reach a per-graph agent's result with a tenth of its real steps? Prints JSON.

    python benchmarks/plan_finetune_bench.py [--priors=xfer,policy:shipped,learned]
        [--spaces=deployed,thesis] [--pairs=benchmarks/data/finetune_pairs.json]
        [--out_json=PATH] [--measure_rounds=5] [--quick]

The pairs are the fine-tuning target's (graph, seed) pairs: three held-out
corpus graphs, each with the per-graph model-free agent trained from
scratch in three seeds (`--pairs`, a JSON file naming its source: the
agent's cheapest graph passed through and its real steps). For each pair,
prior and action space, `xflowrl.planning.plan` runs on the graph under the
pairs' cost model and rules with `max_real_steps` a tenth of the agent's
steps (the file's `fraction`) and the pair's seed. A pair counts as
reached where the planner's change is at most the agent's plus
`TOLERANCE_PT` (the file gives the agent's change to a thousandth of a
point).

Priors: `xfer` (the planner's default: the candidates' costs, factored by
xfer), `policy:shipped` (the shipped generalist, `xflowrl.policy.SHIPPED`,
as prior: zero-shot planning from it), and `learned` (learning from search
on the pair's graph from the shipped generalist,
`xflowrl.planning.search_training.finetune_by_search`: --learned_iterations
self-play runs, each followed by --learned_steps gradient steps on every
state stored so far, within --learned_share of the budget, then one planner
run with the learned policy as prior on the rest; the cheapest graph of all
of them, every real step of self-play counted into the budget). Action spaces: `deployed` (what
`xflowrl optimize --method=plan` runs: multi-location actions, identical
ops merged) and `thesis` (one substitution per action). Real steps are the
planner's expansions (one enumeration and pricing of a graph's candidates
each: an environment step's engine work); a multi-location action's
single-rule enumerations are counted apart (`rule_enumerations`). With
`--count_enumerations` (default) the budget bounds the two together, every
engine call (`PlanConfig.count_enumerations`), and the planner hands over
what it found within it; `within_budget_all_counted` says whether the
result was first seen within the budget with both counted
(`PlanResult.engine_calls_to_best`; a multi-location action runs whole, so
the last may pass the budget). Without it the budget bounds the expansions
alone and the planner runs on past its result. Every handed-over graph is
checked to compute the original's outputs
(`xflowrl.search.eqsat.same_outputs`).

Beside them, per graph: one-step greedy (`greedy_walk`) and TASO's search
(alpha 1.05, budget 1,000) under the same rules and cost model, and the
end-to-end time on this CPU (onnxruntime, one thread, its CPU clock;
`xflowrl.measure.compare.time_models`, `--measure_rounds` interleaved
rounds, 0: none) of the initial graph, greedy's, TASO's and every distinct
graph the planner handed over, each with the change against the initial
graph's median. The cost model is the GPU-like analytic profile, so a CPU
time says whether a graph is also faster here, not whether the estimate
holds on the GPU it models.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from absl import app, flags
import numpy as np

from xflowrl import corpus
from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.planning import PlanConfig, plan
from xflowrl.planning.learner import LearnConfig
from xflowrl.planning.search_training import SearchTrainingConfig, finetune_by_search
from xflowrl.planning.simulator import replay_route
from xflowrl.policy import SHIPPED
from xflowrl.search import greedy_walk, run_taso
from xflowrl.search.eqsat import same_outputs

FLAGS = flags.FLAGS
_HERE = os.path.dirname(os.path.abspath(__file__))
flags.DEFINE_string("pairs", os.path.join(_HERE, "data", "finetune_pairs.json"),
                    "The (graph, seed) pairs and the per-graph agents' results.")
flags.DEFINE_list("priors", ["xfer", "policy:shipped"],
                  "Planner priors (policy:shipped: the shipped generalist).")
flags.DEFINE_list("spaces", ["deployed", "thesis"], "Action spaces (module docstring).")
flags.DEFINE_string("out_json", "", "Also write the rows and the summary here.")
flags.DEFINE_string("markdown_from", "", "Print the tables of a written --out_json as "
                    "markdown and do nothing else.")
flags.DEFINE_integer("measure_rounds", 5, "Interleaved rounds of onnxruntime timing on this "
                     "CPU per graph (0: none).")
flags.DEFINE_integer("learned_iterations", 2, "`learned`: self-play and learning rounds.")
flags.DEFINE_float("learned_share", 2 / 3, "`learned`: the budget's share for self-play.")
flags.DEFINE_integer("learned_steps", 40, "`learned`: gradient steps per round.")
flags.DEFINE_string("learned_dir", "", "`learned`: its runs' folders (default: a temporary "
                    "folder).")
flags.DEFINE_bool("count_enumerations", True, "The budget bounds every engine call: "
                  "expansions and single-rule enumerations together (False: expansions).")
flags.DEFINE_bool("quick", False, "The first pair only, one prior (xfer), the deployed "
                  "space, a budget of 20 real steps (the tests' check that it runs).")

# Points by which the planner may trail the agent's change and still count
# as reaching it: half the pairs file's last digit.
TOLERANCE_PT = 0.0005
SPACES = {"deployed": dict(everywhere=True, merge_identical=True),
          "thesis": dict(everywhere=False, merge_identical=False)}


def _prior_spec(name: str) -> str:
    return f"policy:{SHIPPED}" if name == "policy:shipped" else name


def environment(name: str, data: Dict[str, Any]) -> GraphEnv:
    """The corpus graph `name` under the pairs' rules and cost model."""
    backend, profile = data["cost_model"].split("/")
    return GraphEnv(corpus.get(name), XferSet.from_name(data["rules"]),
                    CostModel(backend, profile=profile), EnvConfig(max_steps=NO_STEP_LIMIT))


def baselines(env: GraphEnv) -> Dict[str, Graph]:
    """One-step greedy's graph and TASO's search's (alpha 1.05, budget 1,000)."""
    return {"greedy": greedy_walk(env).graph, "taso": run_taso(env)[1]}


def measure(env: GraphEnv, graphs: Dict[str, Graph], rounds: int
            ) -> Dict[str, Tuple[float, float]]:
    """Per key of `graphs` (the initial graph's key "initial"): the median
    onnxruntime CPU time on this CPU (ms) and its change against the
    initial graph's (%), distinct graphs timed once, interleaved."""
    # Imported here: onnx and onnxruntime only where something is timed.
    from xflowrl.executor.weights import (  # pylint: disable=import-outside-toplevel
        random_inputs,
        random_weights,
    )
    from xflowrl.measure.compare import time_models  # pylint: disable=import-outside-toplevel
    from xflowrl.onnx_io import to_onnx  # pylint: disable=import-outside-toplevel
    original = env.initial_graph
    weights = random_weights(original, seed=0)
    key_of = {k: f"{g.hash():x}" for k, g in graphs.items()}
    models = {key_of[k]: to_onnx(g, weights, check=False) for k, g in graphs.items()}
    times = time_models(models, random_inputs(original, 0), ["ort"], rounds, 2, 10,
                        np.random.default_rng(0))
    initial = times[key_of["initial"]]["ort/cpu"]["median_ms"]
    return {k: (times[key_of[k]]["ort/cpu"]["median_ms"],
                100.0 * (times[key_of[k]]["ort/cpu"]["median_ms"] / initial - 1.0))
            for k in graphs}


@dataclasses.dataclass(frozen=True)
class Learned:
    """The `learned` config's settings (the --learned_* flags)."""
    iterations: int = 2
    steps: int = 40
    share: float = 2 / 3
    folder: str = ""
    compiled: bool = True   # `LearnConfig.compiled`


def run_learned(pair: Dict[str, Any], env: GraphEnv, space: str, budget: int,
                data: Dict[str, Any], learned: Learned) -> Tuple[Dict[str, Any], Graph]:
    """Learning from search on the pair's graph within `budget`; the row's
    fields and the graph it handed over."""
    config = SearchTrainingConfig(
        policy=SHIPPED, iterations=learned.iterations, rules=data["rules"],
        cost_model=data["cost_model"],
        plan=PlanConfig(time_limit_s=600, seed=pair["seed"], **SPACES[space]),
        learn=LearnConfig(steps=learned.steps, compiled=learned.compiled), seed=pair["seed"])
    root = learned.folder or tempfile.mkdtemp(prefix="plan_finetune_learned_")
    out_dir = os.path.join(root, f"{pair['graph'].replace('/', '_')}_{pair['seed']}_{space}")
    outcome = finetune_by_search(pair["graph"], budget, config, out_dir, learned.share)
    fields = {"change_pct": outcome.change_pct, "real_steps": outcome.real_steps,
              "real_steps_to_best": outcome.real_steps_to_best,
              "rule_enumerations": outcome.rule_enumerations,
              "self_play_real_steps": outcome.self_play_real_steps,
              "final_change_pct": outcome.final_change_pct, "stopped": "",
              "learning": [{"iteration": r.iteration, "real_steps": r.self_play_real_steps,
                            "self_play_change_pct": r.change_pct[pair["graph"]],
                            "states_stored": r.states_stored, "loss_before": r.loss_before,
                            "losses": r.losses} for r in outcome.run.iterations]}
    return fields, replay_route(env, outcome.applied)


def run_pair(pair: Dict[str, Any], env: GraphEnv, prior: str, space: str,
             budget: int, data: Optional[Dict[str, Any]] = None,
             learned: Learned = Learned(), count_enumerations: bool = True,
             ) -> Tuple[Dict[str, Any], Graph]:
    """One planner run on one pair (`learned`: learning from search on
    it, which needs the pairs file's `data`); its row and the graph it
    handed over. `count_enumerations`: the budget bounds every engine call
    (`PlanConfig.count_enumerations`; not the `learned` config's)."""
    start = time.thread_time()
    if prior == "learned":
        if data is None:
            raise ValueError("the learned config needs the pairs file's rules and cost model")
        fields, graph = run_learned(pair, env, space, budget, data, learned)
    else:
        config = PlanConfig(prior=_prior_spec(prior), max_real_steps=budget, time_limit_s=600,
                            count_enumerations=count_enumerations, seed=pair["seed"],
                            **SPACES[space])
        result = plan(env, config)
        fields, graph = {"change_pct": result.change_pct, "real_steps": result.real_steps,
                         "real_steps_to_best": result.real_steps_to_best,
                         "rule_enumerations": result.rule_enumerations,
                         "engine_calls_to_best": result.engine_calls_to_best,
                         "budget_counts": ("engine_calls" if count_enumerations
                                           else "expansions"),
                         "stopped": result.stopped}, result.graph
    cpu = time.thread_time() - start
    reached = (fields["change_pct"] <= pair["scratch_change_pct"] + TOLERANCE_PT
               and fields["real_steps"] <= budget)
    return {"graph": pair["graph"], "seed": pair["seed"], "prior": prior, "space": space,
            "budget": budget, "scratch_steps": pair["scratch_steps"],
            "scratch_change_pct": pair["scratch_change_pct"], "initial_ms": env.initial_cost,
            **fields, "reached": bool(reached),
            "within_budget_all_counted": fields.get(
                "engine_calls_to_best",
                fields["real_steps"] + fields["rule_enumerations"]) <= budget,
            "same_outputs": same_outputs(env.initial_graph, graph),
            "cpu_seconds": cpu}, graph


def summary(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per (prior, space): pairs reached within the budget, and within it
    with the single-rule enumerations counted too."""
    out: Dict[str, Any] = {}
    for row in rows:
        key = f"{row['prior']} / {row['space']}"
        s = out.setdefault(key, {"pairs": 0, "reached": 0, "reached_all_counted": 0,
                                 "all_compute_the_original": True})
        s["pairs"] += 1
        s["reached"] += row["reached"]
        s["reached_all_counted"] += row["reached"] and row["within_budget_all_counted"]
        s["all_compute_the_original"] &= row["same_outputs"] is True
    return out


def markdown(out: Dict[str, Any]) -> str:
    """The rows and the summary of a run as markdown tables."""
    lines = ["| (graph, seed) | prior | space | budget | agent % | planner % | reached "
             "| real steps | of them self-play | single-rule enumerations "
             "| reached, all counted |", "|" + "---|" * 11]
    for r in out["rows"]:
        lines.append(
            f"| {r['graph']} ({r['seed']}) | {r['prior']} | {r['space']} | {r['budget']} "
            f"| {r['scratch_change_pct']:.3f} | {r['change_pct']:.3f} "
            f"| {'yes' if r['reached'] else 'no'} | {r['real_steps']} "
            f"| {r.get('self_play_real_steps', '')} | {r['rule_enumerations']} "
            f"| {'yes' if r['reached'] and r['within_budget_all_counted'] else 'no'} |")
    lines += ["", "| graph | prior | space | seeds | planner % median [range] "
              "| real steps to it median [range] |", "|---|---|---|---|---|---|"]
    groups: Dict[Tuple[str, str, str], List[Dict[str, Any]]] = {}
    for r in out["rows"]:
        groups.setdefault((r["graph"], r["prior"], r["space"]), []).append(r)
    for (graph, prior, space), rows in groups.items():
        change = [r["change_pct"] for r in rows]
        steps = [r.get("real_steps_to_best", r["real_steps"]) for r in rows]
        lines.append(f"| {graph} | {prior} | {space} | {len(rows)} "
                     f"| {np.median(change):.3f} [{min(change):.3f}, {max(change):.3f}] "
                     f"| {np.median(steps):.0f} [{min(steps)}, {max(steps)}] |")
    lines += ["", "| prior / space | reached (expansions) | reached (all engine calls) |",
              "|---|---|---|"]
    for key, s in out["summary"].items():
        lines.append(f"| {key} | {s['reached']} of {s['pairs']} "
                     f"| {s['reached_all_counted']} of {s['pairs']} |")
    return "\n".join(lines)


def main(argv):
    del argv
    if FLAGS.markdown_from:
        with open(FLAGS.markdown_from) as f:
            print(markdown(json.load(f)))
        return
    with open(FLAGS.pairs) as f:
        data = json.load(f)
    pairs, priors, spaces = data["pairs"], FLAGS.priors, FLAGS.spaces
    learned = Learned(FLAGS.learned_iterations, FLAGS.learned_steps, FLAGS.learned_share,
                      FLAGS.learned_dir)
    if FLAGS.quick:
        pairs, priors, spaces = pairs[:1], ["xfer"], ["deployed"]
        FLAGS.measure_rounds = min(FLAGS.measure_rounds, 1)
    rows, per_graph = [], {}
    for name in dict.fromkeys(p["graph"] for p in pairs):
        env = environment(name, data)
        graphs = {"initial": env.initial_graph, **baselines(env)}
        for pair in (p for p in pairs if p["graph"] == name):
            budget = 20 if FLAGS.quick else int(data["fraction"] * pair["scratch_steps"])
            for space in spaces:
                for prior in priors:
                    row, graph = run_pair(pair, env, prior, space, budget, data, learned,
                                          FLAGS.count_enumerations)
                    graphs[f"{prior}/{space}/{pair['seed']}"] = graph
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    rows.append(row)
        change = {k: 100.0 * (g.cost(env.cost_model) / env.initial_cost - 1.0)
                  for k, g in graphs.items()}
        timed = measure(env, graphs, FLAGS.measure_rounds) if FLAGS.measure_rounds else {}
        per_graph[name] = {"initial_ms": env.initial_cost,
                           "greedy_change_pct": change["greedy"],
                           "taso_change_pct": change["taso"],
                           "measured_ort_cpu": {k: {"median_ms": ms, "change_pct": pct}
                                                for k, (ms, pct) in timed.items()}}
        for row in rows:
            key = f"{row['prior']}/{row['space']}/{row['seed']}"
            if row["graph"] == name and key in timed:
                row["measured_change_pct"] = timed[key][1]
    out = {"pairs_source": data["source"], "tolerance_pt": TOLERANCE_PT,
           "graphs": per_graph, "rows": rows, "summary": summary(rows)}
    if FLAGS.out_json:
        with open(FLAGS.out_json, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps(out["summary"], indent=1))


if __name__ == "__main__":
    app.run(main)
