"""Speed and memory of the rewrite engine on the zoo; prints one JSON object.

    python benchmarks/engine_bench.py [--graphs=resnet50,bert] [--budget=1000]
        [--rules=default,builtin+taso] [--search_modes=lazy,eager]
        [--search_cost_model=fitted] [--max_queued=0]

Per graph: op count; time to enumerate every location of every xfer with
L=200 (the per-step work of the RL environment; target <= 5 ms on one core,
thesis: 850 ms per step on ResNet-50); time of one apply from enumerated
locations; graph cost under each available backend; and TASO's search at
alpha=1.05 (initial and final cost, expansions, seconds, expansions/s).
Times are medians of repeated runs (wall clock, single-threaded engine).
Each search runs in a forked child process so that its peak memory is its
own: `peak_rss_mb` is the child's ru_maxrss (the pages the child itself
touched or mapped, so it can be below the parent's `rss_at_fork_mb`; the
search's own memory dominates it on large graphs), `cpu_seconds` its
user+system time during the search, and
`expansions_per_cpu_second` the rate on a shared machine. `--search_modes`
runs the search once per mode (`--search_repeats` times, modes interleaved),
in turn: `lazy` (queued candidates rebuilt
from their parent, the default) and `eager` (every queued graph held whole,
as TASO does; gigabytes on nasnet_a).
With several `--rules` sets, each graph is measured with each set in turn in
one process, so their ratios are comparable on a noisy machine; the report
is keyed `graphs -> graph -> rule set`.
"""

import json
import os
import resource
import statistics
import time

from absl import app, flags

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet, available_backends
from xflowrl.engine.cost import DEFAULT_BACKEND
from xflowrl.engine.xfers import (
    DEFAULT_MAX_LOCATIONS,
    TASO_ALPHA,
    TASO_BUDGET,
    peak_rss_mb,
)
from xflowrl.rules.sets import DEFAULT_RULE_SET

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", list(zoo.GRAPHS), "Zoo graphs to measure (default: all).")
flags.DEFINE_list("rules", [DEFAULT_RULE_SET], "Named rule sets (XferSet.from_name) to measure.")
flags.DEFINE_integer("repeats", 20, "Timed repetitions of enumeration and apply.")
flags.DEFINE_integer("max_locations", DEFAULT_MAX_LOCATIONS, "L, locations per xfer.")
flags.DEFINE_float("alpha", TASO_ALPHA, "Search relaxation.")
flags.DEFINE_integer("budget", TASO_BUDGET, "Search budget (expansions).")
flags.DEFINE_enum("search_cost_model", DEFAULT_BACKEND,
                  ["analytic", "onednn", "cudnn", "fitted"],
                  "Cost model of the search.")
flags.DEFINE_list("search_modes", ["lazy"], "Search queue modes to run, in turn: lazy, eager.")
flags.DEFINE_integer("search_repeats", 1, "Searches per mode (interleaved); "
                     "expansions_per_cpu_second is then their median.")
flags.DEFINE_integer("max_queued", 0, "Cap on queued candidates (0: none).")
flags.DEFINE_float("search_time_limit", 0.0, "Wall-clock limit per search (0: none).")
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
    runs = {mode: [] for mode in FLAGS.search_modes}
    for _ in range(FLAGS.search_repeats):  # modes interleaved, for a fair ratio
        for mode in runs:
            runs[mode].append(_in_child(lambda: _search(graph, xfers, mode == "lazy")))
    result["search"] = {}
    for mode, done in runs.items():
        summary = dict(done[0])
        if len(done) > 1:
            rates = [r.get("expansions_per_cpu_second", 0.0) for r in done]
            summary["expansions_per_cpu_second_runs"] = rates
            summary["expansions_per_cpu_second"] = statistics.median(rates)
            summary["peak_rss_mb"] = max(r.get("peak_rss_mb", 0.0) for r in done)
        result["search"][mode] = summary
    return result


def _search(graph, xfers, lazy):
    """One search; its figures as a JSON-able dict (CPU time of this process)."""
    model = CostModel(FLAGS.search_cost_model, cache_path=FLAGS.cost_cache or None)
    before = resource.getrusage(resource.RUSAGE_SELF)
    search = xfers.search(graph, model, alpha=FLAGS.alpha, budget=FLAGS.budget,
                          max_queued=FLAGS.max_queued, lazy_candidates=lazy,
                          time_limit_s=FLAGS.search_time_limit)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "cost_model": model.name, "alpha": FLAGS.alpha, "budget": FLAGS.budget,
        "lazy_candidates": lazy, "max_queued": FLAGS.max_queued,
        "initial_cost_ms": search.initial_cost, "final_cost_ms": search.best_cost,
        "improvement": 1 - search.best_cost / search.initial_cost,
        "expansions": search.expansions, "enqueued": search.enqueued,
        "peak_queued": search.peak_queued, "peak_parents": search.peak_parents,
        "dropped": search.dropped, "seen": search.seen,
        "seconds": search.seconds, "cpu_seconds": cpu,
        "expansions_per_second": search.expansions / max(search.seconds, 1e-9),
        "expansions_per_cpu_second": search.expansions / max(cpu, 1e-9),
        "applied": search.applied,
    }


def _rss_mb():
    """Current resident set of this process, in MiB (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _in_child(fn):
    """Runs `fn` in a forked child; its dict result plus the child's peak RSS.
    A child that dies (e.g. killed for memory) is reported, not raised."""
    rss_at_fork = _rss_mb()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        try:
            out = fn()
            out["peak_rss_mb"] = peak_rss_mb()
        except Exception as e:  # reported to the parent, which goes on
            out = {"error": repr(e)}
        with os.fdopen(write_fd, "w") as f:
            json.dump(out, f)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    out = json.loads(text) if text else {"error": f"child ended with status {status}"}
    out["rss_at_fork_mb"] = rss_at_fork
    return out


def main(argv):
    del argv
    rule_sets = {name: XferSet.from_name(name) for name in FLAGS.rules}
    report = {"benchmark": "engine", "rule_sets": FLAGS.rules, "graphs": {}}
    for name in FLAGS.graphs:
        report["graphs"][name] = {r: bench_graph(name, xfers) for r, xfers in rule_sets.items()}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    app.run(main)
