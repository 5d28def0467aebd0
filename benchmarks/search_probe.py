"""Why TASO's search finds nothing greedy misses: probes of the rewrite landscape.

Each probe runs on one graph under one rule set and cost model and prints one
JSON line (docs/benchmark.md, "Why"):

- `descent`: `--episodes` random descents (a uniformly drawn cost-lowering
  candidate each step until none is left; `landscape.py`, which
  search_bench.py runs too). If every descent ends at greedy's
  cost, the order of the improving rewrites does not matter (they commute or
  their conflicts cost nothing), so a search over orders has nothing to find.
- `escape`: from greedy's local optimum G*, every candidate G1 (uphill ones
  included), then greedy from G1 (`--escape_depth=2`: every candidate G2 of
  every G1 too, then greedy). Any end below G* is a detour that pays: the
  probe reports the best and the substitutions of each kind.
- `detour`: from G*, breadth first over every candidate, uphill ones
  included, whose cost stays within `--slack` points of the initial cost
  above G*'s, to `--escape_depth` steps (each graph once): the first graph
  below G* and the route to it, with each step's change. Where `escape`
  finds nothing because greedy from an uphill graph undoes the step that
  pays most back, this finds a detour that needs several uphill steps
  before its downhill ones, and how many graphs it takes to find.
- `trace`: TASO's best-first search re-run in Python (the same queue order,
  threshold and global hash set as `XferSet.search`) with statistics the
  native search does not report: how many popped graphs were uphill of their
  parent, and the highest popped cost above the final best.
- `step_costs`: the cost change of every step of greedy's and search's
  sequence (are there uphill steps in search's?).
- `rule_ablation`: greedy and search (alpha 1.05, --budget) with rule subsets
  (`--ablate`: the built-in compound rules dropped, the generated ones dropped).

    python benchmarks/search_probe.py --probe=escape --graph=resnet18 --rules=builtin+taso
    python benchmarks/search_probe.py --probe=detour --graph=squeezenet1_1 --rules=generated \
        --cost_model=analytic/cpu --slack=3 --escape_depth=4
"""

from __future__ import annotations

import heapq
import json
import time
from typing import Dict, List

from absl import app, flags
import numpy as np

from landscape import EPS, Landscape, probe_descent, probe_detour, probe_escape
from xflowrl import zoo
from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.engine.cost import DEFAULT_COST_SPEC
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS, TASO_ALPHA, TASO_BUDGET
from xflowrl.entry_points import cost_model_from_spec
from xflowrl.rules import sets as rule_sets
from xflowrl.rules.sets import DEFAULT_RULE_SET

FLAGS = flags.FLAGS
flags.DEFINE_enum("probe", "descent", ["descent", "escape", "detour", "trace", "step_costs",
                                       "rule_ablation"], "Which probe.")
flags.DEFINE_string("graph", "resnet18", "Zoo graph.")
flags.DEFINE_string("rules", DEFAULT_RULE_SET, "Rule set (RULE_SETS name).")
flags.DEFINE_string("subset", "", "A subset of --rules (`rule_subsets`: no_builtin, "
                    "no_enlarge_merge, builtin_only); empty: all of it.")
flags.DEFINE_string("cost_model", DEFAULT_COST_SPEC,
                    "analytic/<profile>, fitted/<profile>, onednn or cudnn.")
flags.DEFINE_string("cost_cache", "results/cost_cache.tsv", "Measured backends' cache.")
flags.DEFINE_integer("episodes", 20, "descent: random descents.")
flags.DEFINE_integer("seed", 0, "descent: seed.")
flags.DEFINE_integer("escape_depth", 1, "escape: uphill steps before greedy (1 or 2); "
                     "detour: the most steps.")
flags.DEFINE_float("slack", 3.0, "detour: how far above greedy's cost a graph on the way may "
                   "be, in points of the initial cost.")
flags.DEFINE_float("alpha", TASO_ALPHA, "trace / step_costs / rule_ablation: search alpha.")
flags.DEFINE_integer("budget", TASO_BUDGET, "trace / step_costs / rule_ablation: search budget.")
flags.DEFINE_integer("max_locations", DEFAULT_MAX_LOCATIONS,
                     "Locations per xfer (the environment's L).")
flags.DEFINE_float("time_limit", 300.0, "escape / detour / trace: stop after this many seconds.")

def probe_trace(land: Landscape, graph: Graph, alpha: float, budget: int,
                time_limit: float) -> dict:
    """TASO's search (xflowrl/taso/src/search.cc) in Python, instrumented. One
    difference: locations are capped at L per xfer (the native search has no cap)."""
    start = time.time()
    initial = graph.cost(land.cost_model)
    best_cost, best_path = initial, []
    seen = {graph.hash()}
    queue = [(initial, 0, graph, [])]
    order, expansions, enqueued, uphill_pops = 1, 0, 0, 0
    popped_costs = []
    parent_cost = {graph.hash(): initial}
    while queue and expansions < budget and time.time() - start < time_limit:
        cost, _, cur, path = heapq.heappop(queue)
        expansions += 1
        popped_costs.append(cost)
        if cost > parent_cost[cur.hash()] + EPS:
            uphill_pops += 1
        if cost < best_cost:
            best_cost, best_path = cost, path
        costs, locs = land.candidates(cur)
        for x, l in np.argwhere(~np.isnan(costs)):
            c = float(costs[x, l])
            cand = locs.apply(int(x), int(l))
            h = cand.hash()
            if h in seen:
                continue
            seen.add(h)
            if c < alpha * best_cost:
                parent_cost[h] = cost
                heapq.heappush(queue, (c, order, cand, path + [land.xfers.names[x]]))
                order += 1
                enqueued += 1
    popped = np.array(popped_costs)
    return {"initial_cost_ms": initial, "alpha": alpha, "budget": budget,
            "best_cost_ms": best_cost, "expansions": expansions, "enqueued": enqueued,
            "queue_left": len(queue), "uphill_pops": uphill_pops,
            "max_popped_above_best_pct": float(100 * (popped.max() - best_cost) / initial),
            "popped_within_0.1pct_of_best": int((popped <= best_cost + 1e-3 * initial).sum()),
            "best_path": best_path, "seconds": time.time() - start}


def replay_costs(land: Landscape, graph: Graph, names: List[str]) -> List[float]:
    """Cost after each step when the named xfers are replayed, each at its
    cheapest location (the sequences record names only)."""
    out, cur = [], graph
    index = {n: i for i, n in enumerate(land.xfers.names)}
    for name in names:
        costs, locs = land.candidates(cur)
        row = costs[index[name]]
        l = int(np.nanargmin(row))
        cur = locs.apply(index[name], l)
        out.append(float(row[l]))
    return out


def probe_step_costs(land: Landscape, graph: Graph, alpha: float, budget: int) -> dict:
    initial = graph.cost(land.cost_model)
    _, g_cost, g_applied = land.greedy(graph)
    r = land.xfers.search(graph, land.cost_model, alpha=alpha, budget=budget)
    def deltas(names):
        costs = [initial] + replay_costs(land, graph, names)
        return [round(100 * (b - a) / initial, 4) for a, b in zip(costs, costs[1:])]
    s_deltas = deltas(r.applied_names)
    return {"initial_cost_ms": initial, "greedy_cost_ms": g_cost, "search_cost_ms": r.best_cost,
            "greedy_steps": len(g_applied), "search_steps": len(r.applied),
            "search_uphill_steps": int(sum(d > 0 for d in s_deltas)),
            "search_step_pct": s_deltas, "greedy_rules": sorted(set(g_applied)),
            "search_rules": sorted(set(r.applied_names))}


def rule_subsets(rules_name: str) -> Dict[str, List]:
    """The rule set and subsets of it: without the built-in compound rules
    (conv-BN fold, enlarge-merge, merge-gconv, fusions) and, where present,
    without the generated or TASO rules."""
    rules = rule_sets.load_rule_set(rules_name)
    builtin = {r.name for r in rule_sets.load_rule_set("builtin")}
    out = {rules_name: rules,
           "no_builtin": [r for r in rules if r.name not in builtin],
           "no_enlarge_merge": [r for r in rules if not r.name.startswith("enlarge_merge")],
           "builtin_only": [r for r in rules if r.name in builtin]}
    return {k: v for k, v in out.items() if v}


def probe_rule_ablation(graph: Graph, cost_model: CostModel, rules_name: str, alpha: float,
                        budget: int, max_locations: int) -> dict:
    initial = graph.cost(cost_model)
    out = {"initial_cost_ms": initial, "subsets": {}}
    for name, rules in rule_subsets(rules_name).items():
        xfers = XferSet(rules)
        land = Landscape(graph, xfers, cost_model, max_locations)
        _, g_cost, g_applied = land.greedy(graph)
        r = xfers.search(graph, cost_model, alpha=alpha, budget=budget, time_limit_s=120)
        out["subsets"][name] = {
            "xfers": len(rules), "greedy_pct": 100 * (g_cost - initial) / initial,
            "greedy_steps": len(g_applied), "search_pct": 100 * (r.best_cost - initial) / initial,
            "expansions": r.expansions, "gap_pct": 100 * (g_cost - r.best_cost) / initial}
    return out


def main(argv):
    del argv
    graph = zoo.get_graph(FLAGS.graph)
    cost_model = cost_model_from_spec(FLAGS.cost_model, FLAGS.cost_cache)
    head = {"probe": FLAGS.probe, "graph": FLAGS.graph, "rules": FLAGS.rules,
            "subset": FLAGS.subset or FLAGS.rules,
            "cost_model": FLAGS.cost_model}
    if FLAGS.probe == "rule_ablation":
        out = probe_rule_ablation(graph, cost_model, FLAGS.rules, FLAGS.alpha, FLAGS.budget,
                                  FLAGS.max_locations)
    else:
        rules = rule_subsets(FLAGS.rules)[FLAGS.subset or FLAGS.rules]
        land = Landscape(graph, XferSet(rules), cost_model, FLAGS.max_locations)
        if FLAGS.probe == "descent":
            out = probe_descent(land, graph, FLAGS.episodes, FLAGS.seed)
        elif FLAGS.probe == "escape":
            out = probe_escape(land, graph, FLAGS.escape_depth, FLAGS.time_limit)
        elif FLAGS.probe == "detour":
            out = probe_detour(land, graph, FLAGS.escape_depth, FLAGS.slack, FLAGS.time_limit)
        elif FLAGS.probe == "trace":
            out = probe_trace(land, graph, FLAGS.alpha, FLAGS.budget, FLAGS.time_limit)
        else:
            out = probe_step_costs(land, graph, FLAGS.alpha, FLAGS.budget)
    print(json.dumps(head | out), flush=True)


if __name__ == "__main__":
    app.run(main)
