"""Speed of the rewrite engine on ResNet-50 and BERT; prints one JSON object.

    python benchmarks/engine_bench.py [--graphs=resnet50,bert] [--budget=1000]
        [--rules=default,builtin+taso]

Per graph: op count; time to enumerate every location of every xfer with
L=200 (the per-step work of the RL environment; target <= 5 ms on one core,
thesis: 850 ms per step on ResNet-50); time of one apply from enumerated
locations; graph cost under each available backend; and TASO's search at
alpha=1.05 (initial and final cost, expansions, seconds, expansions/s).
Times are medians of repeated runs (wall clock, single-threaded engine).
With several `--rules` sets, each graph is measured with each set in turn in
one process, so their ratios are comparable on a noisy machine; the report
is keyed `graphs -> graph -> rule set`.
"""

import json
import statistics
import time

from absl import app
from absl import flags

from xflowrl.graphs import CostModel, XferSet, available_backends, zoo

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["resnet50", "bert"], "Zoo graphs to measure.")
flags.DEFINE_list("rules", ["default"], "Named rule sets (XferSet.from_name) to measure.")
flags.DEFINE_integer("repeats", 20, "Timed repetitions of enumeration and apply.")
flags.DEFINE_integer("max_locations", 200, "L, locations per xfer.")
flags.DEFINE_float("alpha", 1.05, "Search relaxation.")
flags.DEFINE_integer("budget", 1000, "Search budget (expansions).")
flags.DEFINE_enum("search_cost_model", "analytic", ["analytic", "onednn", "cudnn"],
                  "Cost model of the search.")
flags.DEFINE_string("cost_cache", "", "On-disk cache for measured backends.")


def _median_ms(fn, repeats):
    fn()  # warm caches (memoized op costs, allocator)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def bench_graph(name, xfers):
    graph = zoo.get_graph(name)
    locs = xfers.locations(graph, FLAGS.max_locations)
    first = next(((x, 0) for x, n in enumerate(locs.counts) if n), None)
    result = {
        "ops": graph.num_ops(),
        "xfers": len(xfers),
        "valid_locations": sum(locs.counts),
        "xfers_with_locations": sum(1 for n in locs.counts if n),
        "enumerate_ms": _median_ms(
            lambda: xfers.locations(graph, FLAGS.max_locations), FLAGS.repeats),
        "apply_ms": (_median_ms(lambda: locs.apply(*first), FLAGS.repeats)
                     if first else None),
        "cost_ms": {},
    }
    for backend in available_backends():
        try:
            model = CostModel(backend, cache_path=FLAGS.cost_cache or None)
        except ValueError as e:  # e.g. cudnn built but no GPU visible
            result["cost_ms"][backend] = f"unavailable: {e}"
            continue
        start = time.perf_counter()
        cost = graph.cost(model)
        result["cost_ms"][backend] = cost
        result[f"cost_{backend}_first_eval_s"] = time.perf_counter() - start
    model = CostModel(FLAGS.search_cost_model, cache_path=FLAGS.cost_cache or None)
    search = xfers.search(graph, model, alpha=FLAGS.alpha, budget=FLAGS.budget)
    result["search"] = {
        "cost_model": model.name, "alpha": FLAGS.alpha, "budget": FLAGS.budget,
        "initial_cost_ms": search.initial_cost, "final_cost_ms": search.best_cost,
        "improvement": 1 - search.best_cost / search.initial_cost,
        "expansions": search.expansions, "enqueued": search.enqueued,
        "seconds": search.seconds,
        "expansions_per_second": search.expansions / max(search.seconds, 1e-9),
        "applied": search.applied,
    }
    return result


def main(argv):
    del argv
    rule_sets = {name: XferSet.from_name(name) for name in FLAGS.rules}
    report = {"benchmark": "engine", "rule_sets": FLAGS.rules, "graphs": {}}
    for name in FLAGS.graphs:
        report["graphs"][name] = {r: bench_graph(name, xfers) for r, xfers in rule_sets.items()}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    app.run(main)
