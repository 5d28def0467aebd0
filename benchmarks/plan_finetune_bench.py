"""Planning as the generalist's fine-tuning path: does the engine planner
reach a per-graph agent's result with a tenth of its real steps? Prints JSON.

    python benchmarks/plan_finetune_bench.py [--priors=xfer,policy:shipped]
        [--spaces=deployed,thesis] [--pairs=benchmarks/data/finetune_pairs.json]
        [--out_json=PATH] [--quick]

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
as prior: zero-shot planning from it). Action spaces: `deployed` (what
`xflowrl optimize --method=plan` runs: multi-location actions, identical
ops merged) and `thesis` (one substitution per action). Real steps are the
planner's expansions (one enumeration and pricing of a graph's candidates
each: an environment step's engine work); a multi-location action's
single-rule enumerations are counted apart (`rule_enumerations`), and
`within_budget_all_counted` says whether the two together stay within the
budget too. Every handed-over graph is checked to compute the original's
outputs (`xflowrl.search.eqsat.same_outputs`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, List

from absl import app, flags

from xflowrl import corpus
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.planning import PlanConfig, plan
from xflowrl.policy import SHIPPED
from xflowrl.search.eqsat import same_outputs

FLAGS = flags.FLAGS
_HERE = os.path.dirname(os.path.abspath(__file__))
flags.DEFINE_string("pairs", os.path.join(_HERE, "data", "finetune_pairs.json"),
                    "The (graph, seed) pairs and the per-graph agents' results.")
flags.DEFINE_list("priors", ["xfer", "policy:shipped"],
                  "Planner priors (policy:shipped: the shipped generalist).")
flags.DEFINE_list("spaces", ["deployed", "thesis"], "Action spaces (module docstring).")
flags.DEFINE_string("out_json", "", "Also write the rows and the summary here.")
flags.DEFINE_bool("quick", False, "The first pair only, one prior (xfer), the deployed "
                  "space, a budget of 20 real steps (the tests' check that it runs).")

# Points by which the planner may trail the agent's change and still count
# as reaching it: half the pairs file's last digit.
TOLERANCE_PT = 0.0005
SPACES = {"deployed": dict(everywhere=True, merge_identical=True),
          "thesis": dict(everywhere=False, merge_identical=False)}


def _prior_spec(name: str) -> str:
    return f"policy:{SHIPPED}" if name == "policy:shipped" else name


def run_pair(pair: Dict[str, Any], data: Dict[str, Any], prior: str, space: str,
             budget: int) -> Dict[str, Any]:
    """One planner run on one pair; its row."""
    backend, profile = data["cost_model"].split("/")
    graph = corpus.get(pair["graph"])
    env = GraphEnv(graph, XferSet.from_name(data["rules"]), CostModel(backend, profile=profile),
                   EnvConfig(max_steps=NO_STEP_LIMIT))
    config = PlanConfig(prior=_prior_spec(prior), max_real_steps=budget, time_limit_s=600,
                        seed=pair["seed"], **SPACES[space])
    start = time.thread_time()
    result = plan(env, config)
    cpu = time.thread_time() - start
    reached = (result.change_pct <= pair["scratch_change_pct"] + TOLERANCE_PT
               and result.real_steps <= budget)
    return {"graph": pair["graph"], "seed": pair["seed"], "prior": prior, "space": space,
            "budget": budget, "scratch_steps": pair["scratch_steps"],
            "scratch_change_pct": pair["scratch_change_pct"], "initial_ms": result.initial_cost,
            "change_pct": result.change_pct, "reached": bool(reached),
            "real_steps": result.real_steps, "rule_enumerations": result.rule_enumerations,
            "within_budget_all_counted": result.real_steps + result.rule_enumerations <= budget,
            "same_outputs": same_outputs(env.initial_graph, result.graph),
            "stopped": result.stopped, "cpu_seconds": cpu}


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


def main(argv):
    del argv
    with open(FLAGS.pairs) as f:
        data = json.load(f)
    pairs, priors, spaces = data["pairs"], FLAGS.priors, FLAGS.spaces
    if FLAGS.quick:
        pairs, priors, spaces = pairs[:1], ["xfer"], ["deployed"]
    rows = []
    for pair in pairs:
        budget = 20 if FLAGS.quick else int(data["fraction"] * pair["scratch_steps"])
        for space in spaces:
            for prior in priors:
                row = run_pair(pair, data, prior, space, budget)
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(row)
    out = {"pairs_source": data["source"], "tolerance_pt": TOLERANCE_PT, "rows": rows,
           "summary": summary(rows)}
    if FLAGS.out_json:
        with open(FLAGS.out_json, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps(out["summary"], indent=1))


if __name__ == "__main__":
    app.run(main)
