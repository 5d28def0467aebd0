"""The three parts of an engine simulation step, timed apart; prints JSON.

    python benchmarks/sim_step_bench.py [--graphs=resnet50,inception_v3]
        [--rules=default] [--cost_model=analytic/v100] [--repeats=5]
    python benchmarks/sim_step_bench.py --engines=/tmp/before,. --rounds=3
    python benchmarks/sim_step_bench.py --without_rules=gen_matrix_1164,gen_matrix_1176
    valgrind --tool=callgrind --collect-atstart=no \
        --toggle-collect='taso::enumerate_locations*' \
        --toggle-collect='taso::Locations::costs*' \
        python benchmarks/sim_step_bench.py --graphs=inception_v3 --loop_steps=5

A simulation step (what the planner and every search spend their time in,
its targets: <= 1 ms on ResNet-50, <= 3 ms on Inception-v3 on one
core) is: enumerate the locations of every xfer (`XferSet.locations`, L=200,
the environment's size cap), cost every candidate (`Locations.active_costs`)
and apply one (`Locations.apply`). Per zoo graph this benchmark walks
one-step greedy (`xflowrl.search.greedy_walk`, at most `--max_steps`
substitutions) and, on every graph of the walk (the initial one, each
graph greedy reaches), runs `--repeats` steps: a fresh enumeration, its
costs, and the apply of the cheapest candidate. Each part is timed in wall
clock and in this thread's CPU time (`time.thread_time`, steadier on a
shared machine); per walk graph the median over the repeats is kept, and
the report gives, per part and for the whole step, the median, p10, p90,
min and max of those over the walk's graphs. `digest` fingerprints what
the engine returned on the walk (counts, matches, every candidate's cost
bits and hash), so that two engines can be checked to agree.

`--loop_steps=N` only enumerates and prices the first graph's initial
graph N times (no walk, no timing): a fixed amount of work for an
instruction counter such as callgrind, collected inside the two calls as
above; the count after 5 steps minus the count after 3, halved, is a
step's once the engine's caches and pools are warm.

`--engines` compares builds of the engine: each is a source tree holding
the `xflowrl` package with its `_engine*.so` built (e.g. a `git worktree` of
the commit before a change, built with `python setup.py build_ext
--inplace`, beside the current checkout). Each round runs one child process
per tree, in turn, with the tree first on PYTHONPATH (rounds interleave
the trees, so that the load of a shared machine falls on all alike). The
report holds every child's figures, per graph and part the median over
rounds of each tree's median, the ratio of each tree's to the first's per
round, whether every digest agrees, and the load average before and after.
The engine is single-threaded; children run with OMP_NUM_THREADS=1.
"""

import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

from absl import app, flags
import numpy as np

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["resnet50", "inception_v3", "nasrnn", "bert", "squeezenet1_1"],
                  "Zoo graphs to walk.")
flags.DEFINE_string("rules", "default", "Named rule set (XferSet.from_name).")
flags.DEFINE_list("without_rules", [], "Rules left out of --rules, by name (what they cost a "
                  "step: the same run with and without them).")
flags.DEFINE_string("cost_model", "analytic/v100", "Cost model, BACKEND/PROFILE.")
flags.DEFINE_integer("repeats", 5, "Steps timed per graph of the walk.")
flags.DEFINE_integer("max_steps", 40, "Most substitutions of the greedy walk per graph.")
flags.DEFINE_integer("max_locations", 200, "L, locations per xfer.")
flags.DEFINE_list("engines", [], "Source trees (each with its xflowrl/_engine*.so built) to "
                  "compare in interleaved child processes; the first is the baseline of "
                  "the ratios.")
flags.DEFINE_integer("rounds", 3, "With --engines: child processes per engine, interleaved.")
flags.DEFINE_integer("loop_steps", 0, "If > 0: only enumerate and price the first graph's "
                     "initial graph this many times (for instruction counters).")

PARTS = ("enumerate", "cost", "apply", "step")


def _summary(values):
    ms = np.asarray(values) * 1e3
    return {"median_ms": float(np.median(ms)), "p10_ms": float(np.percentile(ms, 10)),
            "p90_ms": float(np.percentile(ms, 90)), "min_ms": float(ms.min()),
            "max_ms": float(ms.max()), "n": int(len(ms))}


def _timed(fn):
    wall, cpu = time.perf_counter(), time.thread_time()
    out = fn()
    return out, time.perf_counter() - wall, time.thread_time() - cpu


def _digest_step(h, locs, costs):
    h.update(np.asarray(locs.counts, np.int64).tobytes())
    h.update(np.asarray(locs._handle.num_matches(), np.int64).tobytes())  # pylint: disable=protected-access
    h.update(np.ascontiguousarray(costs).tobytes())
    for row in locs.hashes():
        h.update(np.asarray(row, np.uint64).tobytes())
    for x in locs.active_xfers():
        for ops in locs.matched_ops(int(x)):
            h.update(np.asarray(ops, np.int64).tobytes())


def bench_graph(name, xfers, cost_model):
    # pylint: disable=import-outside-toplevel
    from xflowrl import zoo
    from xflowrl.env import GraphEnv
    from xflowrl.search import greedy_walk

    env = GraphEnv(zoo.get_graph(name), xfers, cost_model)
    walk = greedy_walk(env, max_steps=FLAGS.max_steps)
    graphs = [env.initial_graph]
    for xfer_name, location in walk.applied:
        locs = xfers.locations(graphs[-1], FLAGS.max_locations, env.max_ops)
        graphs.append(locs.apply(xfers.names.index(xfer_name), location))
    per_graph = {part: {"wall": [], "cpu": []} for part in PARTS}
    digest = hashlib.sha256()
    locations = []
    for graph in graphs:
        times = {part: {"wall": [], "cpu": []} for part in PARTS}
        for repeat in range(FLAGS.repeats + 1):  # the first warms caches, untimed
            locs, w_enum, c_enum = _timed(
                lambda g=graph: xfers.locations(g, FLAGS.max_locations, env.max_ops))
            costs, w_cost, c_cost = _timed(lambda l=locs: l.active_costs(cost_model))
            active = locs.active_xfers()
            w_apply = c_apply = 0.0
            if len(active):
                row, location = np.unravel_index(
                    int(np.nanargmin(costs)), costs.shape)
                _, w_apply, c_apply = _timed(
                    lambda l=locs, x=int(active[row]), k=int(location): l.apply(x, k))
            if repeat == 0:
                _digest_step(digest, locs, costs)
                locations.append(sum(locs.counts))
                continue
            for part, w, c in (("enumerate", w_enum, c_enum), ("cost", w_cost, c_cost),
                               ("apply", w_apply, c_apply),
                               ("step", w_enum + w_cost + w_apply, c_enum + c_cost + c_apply)):
                times[part]["wall"].append(w)
                times[part]["cpu"].append(c)
        for part in PARTS:
            for clock in ("wall", "cpu"):
                per_graph[part][clock].append(statistics.median(times[part][clock]))
    return {
        "ops": env.initial_graph.num_ops(),
        "walk_graphs": len(graphs),
        "walk_cost_ms": walk.cost,
        "initial_cost_ms": env.initial_cost,
        "locations_median": float(np.median(locations)),
        "digest": digest.hexdigest()[:16],
        **{part: {clock: _summary(per_graph[part][clock]) for clock in ("wall", "cpu")}
           for part in PARTS},
    }


def _xfers():
    """--rules without --without_rules."""
    from xflowrl.engine import XferSet  # pylint: disable=import-outside-toplevel
    xfers = XferSet.from_name(FLAGS.rules)
    unknown = sorted(set(FLAGS.without_rules) - set(xfers.names))
    if unknown:
        raise app.UsageError(f"--without_rules: {unknown} are not in --rules={FLAGS.rules}")
    if not FLAGS.without_rules:
        return xfers
    return XferSet([r for r in xfers.rules if r.name not in FLAGS.without_rules])


def run_here():
    # pylint: disable=import-outside-toplevel
    from xflowrl import _engine
    from xflowrl.engine import CostModel
    backend, _, profile = FLAGS.cost_model.partition("/")
    cost_model = CostModel(backend, **({"profile": profile} if profile else {}))
    xfers = _xfers()
    report = {"benchmark": "sim_step", "engine": _engine.__file__, "rules": FLAGS.rules,
              "without_rules": FLAGS.without_rules, "xfers": len(xfers), "cost_model": cost_model.name,
              "repeats": FLAGS.repeats, "max_steps": FLAGS.max_steps, "graphs": {}}
    for name in FLAGS.graphs:
        report["graphs"][name] = bench_graph(name, xfers, cost_model)
    return report


def run_loop() -> dict:
    """--loop_steps enumerations and pricings of the first graph's initial graph."""
    # pylint: disable=import-outside-toplevel
    from xflowrl import zoo
    from xflowrl.engine import CostModel
    from xflowrl.env import GraphEnv
    backend, _, profile = FLAGS.cost_model.partition("/")
    cost_model = CostModel(backend, **({"profile": profile} if profile else {}))
    xfers = _xfers()
    env = GraphEnv(zoo.get_graph(FLAGS.graphs[0]), xfers, cost_model)
    for _ in range(FLAGS.loop_steps):
        xfers.locations(env.initial_graph, FLAGS.max_locations, env.max_ops).active_costs(
            cost_model)
    return {"benchmark": "sim_step", "loop_steps": FLAGS.loop_steps, "graph": FLAGS.graphs[0]}


def run_engines():
    """Children per engine and round, interleaved; their reports combined."""
    args = [f"--graphs={','.join(FLAGS.graphs)}", f"--rules={FLAGS.rules}",
            f"--without_rules={','.join(FLAGS.without_rules)}",
            f"--cost_model={FLAGS.cost_model}", f"--repeats={FLAGS.repeats}",
            f"--max_steps={FLAGS.max_steps}", f"--max_locations={FLAGS.max_locations}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    engines = [os.path.abspath(p) for p in FLAGS.engines]
    load_before = os.getloadavg()
    runs = {e: [] for e in engines}
    for _ in range(FLAGS.rounds):
        for engine in engines:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), *args],
                                 env=dict(env, PYTHONPATH=engine), cwd=engine, check=True,
                                 capture_output=True, text=True).stdout
            runs[engine].append(json.loads(out))
    base = engines[0]
    combined = {}
    for name in FLAGS.graphs:
        rows = {}
        for engine in engines:
            row = {}
            for part in PARTS:
                for clock in ("wall", "cpu"):
                    medians = [r["graphs"][name][part][clock]["median_ms"] for r in runs[engine]]
                    ratios = [m / b["graphs"][name][part][clock]["median_ms"]
                              for m, b in zip(medians, runs[base])
                              if b["graphs"][name][part][clock]["median_ms"] > 0]
                    row[f"{part}_{clock}_ms"] = statistics.median(medians)
                    row[f"{part}_{clock}_ms_rounds"] = medians
                    if engine != base and ratios:
                        row[f"{part}_{clock}_ratio"] = statistics.median(ratios)
                        row[f"{part}_{clock}_ratio_rounds"] = ratios
            rows[engine] = row
        digests = {r["graphs"][name]["digest"] for e in engines for r in runs[e]}
        combined[name] = {"same_results": len(digests) == 1, "engines": rows}
    return {"benchmark": "sim_step", "engines": engines, "rounds": FLAGS.rounds,
            "rules": FLAGS.rules, "cost_model": FLAGS.cost_model, "repeats": FLAGS.repeats,
            "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
            "summary": combined, "runs": runs}


def main(argv):
    del argv
    if FLAGS.loop_steps > 0:
        report = run_loop()
    elif FLAGS.engines:
        report = run_engines()
    else:
        report = run_here()
        report["loadavg"] = os.getloadavg()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    app.run(main)
