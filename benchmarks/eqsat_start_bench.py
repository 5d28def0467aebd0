"""Equality saturation from the input against equality saturation from
one-step greedy's graph, setting by setting; prints JSON.

    python benchmarks/eqsat_start_bench.py \
        [--settings=inception_v3/default/learned/h200,nasrnn/default/analytic/v100] \
        [--out_json=PATH]

A setting is GRAPH/RULES/BACKEND/PROFILE (a zoo graph, a rule set, a cost
model). Per setting it runs, with `EqsatConfig()`'s limits and no output
check (eqsat's own runs check outputs; this asks only what each start
finds):

- TASO's search at alpha 1.05, budget 1,000, the environment's L (200)
  and op cap (twice the input's ops), for reference;
- equality saturation as it is (`equality_saturation(input)`): the
  e-graph starts from the input;
- one-step greedy's descent (`saturation._descent`: the walk under L,
  then its tail over every location), then equality saturation from the
  descent's graph: the e-graph starts from there.

Each row gives the changes in percent of the input's cost, the e-graphs'
sizes and why saturation stopped, and the CPU seconds of each run (the
second includes the descent). Neither start contains the other's
e-graph: rules are not all reversible, so saturation from greedy's graph
cannot reach what needs a step greedy took undone, and saturation from
the input can fill its node limit before it gets to what greedy's graph
reaches in a few iterations. The summary counts where each start ends
lower.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Dict, List

from absl import app, flags

from entry_point_runs import write_report
from xflowrl import zoo
from xflowrl.engine import XferSet
from xflowrl.engine.cost import cost_model_from_spec
from xflowrl.search.eqsat import EqsatConfig, child, saturation

FLAGS = flags.FLAGS
flags.DEFINE_list("settings", ["inception_v3/default/learned/h200",
                               "nasrnn/default/analytic/v100"],
                  "GRAPH/RULES/BACKEND/PROFILE, comma-separated.")
flags.DEFINE_string("out_json", "", "Write the report here as well.")

TASO_ALPHA, TASO_BUDGET, MAX_LOCATIONS, OP_CAP = 1.05, 1_000, 200, 2.0


def _say(line: str) -> None:
    """A progress line on stderr (stdout holds the JSON)."""
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def _pct(cost: float, initial: float) -> float:
    return 100.0 * (cost / initial - 1.0)


def measure(setting: str) -> Dict[str, Any]:
    """One setting's row (see the module docstring).

    Raises:
      ValueError: the setting is not GRAPH/RULES/BACKEND/PROFILE.
    """
    parts = setting.split("/")
    if len(parts) != 4:
        raise ValueError(f"a setting is GRAPH/RULES/BACKEND/PROFILE, got {setting!r}")
    graph_name, rules, backend, profile = parts
    graph = zoo.get_graph(graph_name)
    xfers = XferSet.from_name(rules)
    cost_model = cost_model_from_spec(f"{backend}/{profile}")
    initial = graph.cost(cost_model)
    # Each run from its own start alone (no second start inside).
    config = EqsatConfig(check_outputs=False, descent_start="never")

    taso = xfers.search(graph, cost_model, alpha=TASO_ALPHA, budget=TASO_BUDGET,
                        max_ops=int(OP_CAP * graph.num_ops()), max_locations=MAX_LOCATIONS)
    clock = child.process_cpu_seconds()   # HiGHS's process counted too
    from_input = saturation.equality_saturation(graph, xfers, cost_model, config)
    input_cpu = child.process_cpu_seconds() - clock
    clock = child.process_cpu_seconds()
    descent = saturation._descent(graph, xfers, cost_model)  # pylint: disable=W0212
    from_greedy = saturation.equality_saturation(descent.graph, xfers, cost_model, config)
    greedy_cpu = child.process_cpu_seconds() - clock
    return {
        "setting": setting, "initial_ms": initial,
        "taso_pct": _pct(taso.best_cost, initial),
        "greedy_pct": _pct(descent.cost, initial),
        "from_input": {"pct": _pct(from_input.best_cost, initial),
                       "e_nodes": from_input.e_nodes, "iterations": from_input.iterations,
                       "stop_reason": from_input.stop_reason,
                       "handed_over": from_input.handed_over, "cpu_seconds": input_cpu},
        "from_greedy": {"pct": _pct(from_greedy.best_cost, initial),
                        "e_nodes": from_greedy.e_nodes, "iterations": from_greedy.iterations,
                        "stop_reason": from_greedy.stop_reason,
                        "handed_over": from_greedy.handed_over, "cpu_seconds": greedy_cpu},
    }


def summarise(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Where each start ends lower (by more than 1e-6 points)."""
    lower_from_greedy = [r["setting"] for r in rows
                         if r["from_greedy"]["pct"] < r["from_input"]["pct"] - 1e-6]
    lower_from_input = [r["setting"] for r in rows
                        if r["from_input"]["pct"] < r["from_greedy"]["pct"] - 1e-6]
    return {"settings": len(rows), "lower_from_greedy": lower_from_greedy,
            "lower_from_input": lower_from_input,
            "above_taso_from_input": [r["setting"] for r in rows
                                      if r["from_input"]["pct"] > r["taso_pct"] + 1e-6],
            "above_taso_from_greedy": [r["setting"] for r in rows
                                       if r["from_greedy"]["pct"] > r["taso_pct"] + 1e-6]}


def main(argv):
    del argv
    rows = []
    for setting in FLAGS.settings:
        _say(f"{setting}: TASO's search, eqsat from the input, eqsat from greedy's graph")
        try:
            row = measure(setting)
        except ValueError as e:
            raise app.UsageError(str(e))
        _say(f"{setting}: TASO {row['taso_pct']:.2f}%, greedy {row['greedy_pct']:.2f}%, "
             f"from the input {row['from_input']['pct']:.2f}%, "
             f"from greedy's graph {row['from_greedy']['pct']:.2f}%")
        rows.append(row)
    write_report({"rows": rows, "summary": summarise(rows)}, FLAGS.out_json)


if __name__ == "__main__":
    app.run(main)
