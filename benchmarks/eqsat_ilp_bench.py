"""Equality saturation's extraction programs, one by one: their size, how
far their linear relaxation is from their optimum, and what HiGHS spends on
them under each set of options; prints JSON.

    python benchmarks/eqsat_ilp_bench.py [--settings=bert/default,nasrnn/taso]
        [--cost_model=analytic/v100] [--cpu_limit=10] [--rounds=1]
        [--variant=mip_allow_restart=false] [--out_json=PATH]

Extraction is most of equality saturation's time, and most of extraction
is HiGHS on the acyclic programs (docs/benchmark.md, "What the benchmark
finds"). This benchmark asks why. Per setting (zoo graph/rule set) it
saturates as `equality_saturation` does (`EqsatConfig()`'s limits), takes
the ILP's start as it does (the cheapest of greedy extraction's, the
input's and one-step greedy's graph), and for each acyclic program
(`saturation.PROGRAMS`' "walk" and "age", each filtered from that start)
reports:

- its size: e-nodes, classes, order variables, rows;
- the start's objective, the linear relaxation's (`extract._solve(...,
  integral=False)`; HiGHS's dual simplex) and its CPU seconds; the
  relaxation's gap, (start - relaxation) / start: near 1 where the
  relaxation says almost nothing about the optimum;
- per HiGHS variant (its defaults, then each `--variant`: HiGHS options
  NAME=VALUE, comma-separated), interleaved over `--rounds`: the status,
  objective, dual bound and CPU seconds of the MIP from the start, with
  `--cpu_limit` seconds of CPU, and the median CPU over the rounds.

Each program is solved from the same start here; equality saturation starts
the second from the first's answer, so its figures there can differ where
the first improves on the start. Costs are in µs (the programs' objective).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any, Dict, List, Tuple

from absl import app, flags

from xflowrl import zoo
from xflowrl.engine import XferSet
from xflowrl.engine.cost import cost_model_from_spec
from xflowrl.search.eqsat import EqsatConfig, extract, saturation

FLAGS = flags.FLAGS
flags.DEFINE_list("settings", ["bert/default", "nasrnn/taso", "vgg19/default",
                               "inception_v3/default"], "Zoo graph/rule set pairs.")
flags.DEFINE_string("cost_model", "analytic/v100", "Cost model, BACKEND/PROFILE.")
flags.DEFINE_float("cpu_limit", 10.0, "CPU seconds per MIP solve.")
flags.DEFINE_integer("rounds", 1, "Solves per program and variant, interleaved.")
flags.DEFINE_multi_string("variant", [], "HiGHS options of one more variant, "
                          "NAME=VALUE[,NAME=VALUE...] (true/false, numbers, or strings).")
flags.DEFINE_string("out_json", "", "Write the report here as well.")


def parse_variant(text: str) -> Dict[str, Any]:
    """'a=1,b=false,c=on' -> {'a': 1, 'b': False, 'c': 'on'}.

    Raises:
      ValueError: an entry is not NAME=VALUE.
    """
    options: Dict[str, Any] = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, sep, value = entry.partition("=")
        if not sep or not name:
            raise ValueError(f"a variant's entries are NAME=VALUE, got {entry!r}")
        if value.lower() in ("true", "false"):
            options[name] = value.lower() == "true"
        else:
            try:
                options[name] = int(value)
            except ValueError:
                try:
                    options[name] = float(value)
                except ValueError:
                    options[name] = value
    return options


def programs_of(graph_name: str, rules: str, cost_model_spec: str
                ) -> Tuple[List[Tuple[str, extract._Program, extract.Choice]], dict]:
    """The setting's acyclic programs, built, each with its start; and the
    saturation's figures."""
    graph = zoo.get_graph(graph_name)
    xfers = XferSet.from_name(rules)
    cost_model = cost_model_from_spec(cost_model_spec)
    config = EqsatConfig(check_outputs=False)
    rewrites, _ = saturation.compile_rules(xfers)
    eg, roots = saturation.graph_to_egraph(graph)
    clock = time.time()
    stop, trace = saturation.saturate(eg, rewrites, config, clock)
    about = {"e_nodes": eg.num_nodes(), "stop_reason": stop, "iterations": len(trace),
             "saturation_seconds": time.time() - clock}
    costs = extract.node_costs(eg, cost_model)
    greedy, tree = extract.greedy_and_tree_costs(eg, roots, costs)
    start_name, start, _, _ = saturation._ilp_start(  # pylint: disable=protected-access
        eg, roots, costs, graph, greedy, xfers, cost_model, config)
    about["start"] = start_name
    out = []
    for name in saturation.PROGRAMS[:2]:
        saturation.filter_for_program(eg, name, roots, tree, extract.used(eg, start, roots))
        program = extract._Program(eg, roots, costs, start)  # pylint: disable=protected-access
        program.build()
        out.append((name, program, start))
    return out, about


def _say(line: str) -> None:
    """A progress line on stderr (stdout holds the JSON)."""
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def measure_program(program: extract._Program, start: extract.Choice,
                    variants: List[Tuple[str, Dict[str, Any]]], cpu_limit: float,
                    rounds: int) -> dict:
    """One program's size, relaxation and solves (see the module docstring)."""
    x0 = program.solution_of(start)
    start_objective = float(program.objective @ x0)
    relaxed = extract._solve(program, None, cpu_limit, integral=False)  # pylint: disable=W0212
    relaxation = float(program.objective @ relaxed.x) if relaxed.x is not None else None
    order_vars = program.num_vars - len(program.nodes) - len(program.classes)
    row: Dict[str, Any] = {
        "e_nodes": len(program.nodes), "classes": len(program.classes),
        "order_variables": order_vars, "rows": len(program.lower),
        "start_objective": start_objective, "relaxation": relaxation,
        "relaxation_cpu_seconds": relaxed.cpu_seconds,
        "relaxation_gap": (None if relaxation is None or start_objective <= 0
                           else (start_objective - relaxation) / start_objective),
        "solves": {name: [] for name, _ in variants}}
    for k in range(rounds):
        for name, options in variants:
            _say(f"  round {k + 1}/{rounds}, {name}: solving")
            solved = extract._solve(program, start, cpu_limit, options)  # pylint: disable=W0212
            _say(f"  round {k + 1}/{rounds}, {name}: {solved.status} in "
                 f"{solved.cpu_seconds:.2f} s of CPU")
            row["solves"][name].append({
                "status": solved.status, "cpu_seconds": solved.cpu_seconds,
                "objective": (float(program.objective @ solved.x)
                              if solved.x is not None else None),
                "bound": solved.bound * 1e3})
    row["median_cpu_seconds"] = {name: statistics.median(s["cpu_seconds"] for s in solves)
                                 for name, solves in row["solves"].items()}
    return row


def main(argv):
    del argv
    import highspy  # pylint: disable=import-outside-toplevel
    variants: List[Tuple[str, Dict[str, Any]]] = [("defaults", {})]
    for text in FLAGS.variant:
        try:
            options = parse_variant(text)
        except ValueError as e:
            raise app.UsageError(str(e))
        for name, value in options.items():
            if highspy.Highs().setOptionValue(name, value) != highspy.HighsStatus.kOk:
                raise app.UsageError(f"HiGHS rejects option {name}={value!r}")
        variants.append((text, options))
    report: Dict[str, Any] = {"cost_model": FLAGS.cost_model, "cpu_limit": FLAGS.cpu_limit,
                              "rounds": FLAGS.rounds, "variants": dict(variants),
                              "settings": {}}
    for setting in FLAGS.settings:
        graph_name, sep, rules = setting.partition("/")
        if not sep:
            raise app.UsageError(f"a setting is GRAPH/RULES, got {setting!r}")
        _say(f"{setting}: saturating")
        programs, about = programs_of(graph_name, rules, FLAGS.cost_model)
        about["programs"] = {}
        for name, program, start in programs:
            _say(f"{setting}, the {name} program: {len(program.nodes)} e-nodes, "
                 f"{len(program.lower)} rows")
            about["programs"][name] = measure_program(program, start, variants,
                                                      FLAGS.cpu_limit, FLAGS.rounds)
        report["settings"][setting] = about
    text = json.dumps(report, indent=1)
    print(text)
    if FLAGS.out_json:
        with open(FLAGS.out_json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    app.run(main)
