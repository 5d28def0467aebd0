"""The shipped policy's optimisation time against TASO's search; prints JSON.

    python benchmarks/policy_bench.py [--graphs=held_out|NAME,...] [--rounds=3] [--cores=1]
        [--cli_rounds=5]

Per graph (default: the corpus' held-out split), interleaved in `--rounds`
rounds, each in a fresh random order:

- `policy`: what `xflowrl optimize --method=policy` runs on a graph it
  has read, `xflowrl.optimize.methods.optimise(graph, "policy", ...)`:
  the shipped generalist (`xflowrl.policy.shipped_policy`) loaded and
  acting greedily in NumPy (`xflowrl.policy.runtime`) for its step
  limit (1.5 x one-step greedy's steps, at least 10, so greedy walks
  first, `step_limit_s`), handing over the cheapest graph the episode
  passed through (kept by the environment, `GraphEnv.cheapest_prefix`), or
  greedy's walk's graph where that is cheaper (`found_by`);
- `replayed`: the same episode played the slow way (no environment
  that keeps the cheapest graph), beside it for the speed-up: greedy's step limit
  from its episode in the environment (observations built), the policy's
  episode, then the episode replayed to find its cheapest prefix and that
  prefix replayed to build the graph;
- `taso`: TASO's search at `--taso_budget` (1,000, alpha 1.05),

all from the same initial graph under `--cost_model` (analytic/v100, what
the policy was trained under). The target: `policy` takes at
most 1/10 of TASO's time on the same graph (`ratio`). Reported per graph:
median seconds of each, the step limit's and the environment's
observations' (locations, features) and the network's encoder's
(`NumpyPolicy.encode`, one per step) shares of `policy`, and their ratios
to TASO's time (`observe_ratio` is a floor under `ratio` that no faster
network can go below: the policy needs one observation per step;
`floor_ratio`, observations and encoder together, one that neither a
faster step limit nor leaner acting code can go below), the
steps, the costs reached (`policy` hands over `replayed`'s cost, or
greedy's where `found_by` says so) and the length of the prefix handed over;
overall: medians and ranges. `step_in_expansions` is the command's time
per step of the policy's episode in TASO's time per expansion (so `ratio`
= step_in_expansions x steps / expansions): at a few expansions a step,
the tenth holds only for episodes of a few dozen steps at most
(`most_steps_at_most_tenth`, `fewest_steps_above_tenth`).
`handed_over_xfer_runs` counts the runs of one xfer applied step after
step in the substitutions handed over (`policy_best_step` of them): the
steps an episode would take if a step applied its xfer at every location
the run goes on to take, a measure of what several rewrites a step could
save (`handed_over_runs_per_step`, their ratio). `runs_projection_ratio`
is a rough bound built on it, not a result: the ratio if the route handed
over took one step per run, each at today's cost of a step (no such
policy exists; it leaves out the steps an episode takes past its
cheapest graph and supposes greedy's walk batched alike).

Then, as a user meets it (`cli`): the whole `xflowrl optimize` command in
a fresh process (imports, reading the model, the method, the output check,
writing; `--no_timing`) on a small ONNX model (the zoo's `small_cnn`), for
`--method=policy` (NumPy), the same policy through TensorFlow (a copy of
its folder without `policy.npz`), `taso` and `greedy`, interleaved in
`--cli_rounds` rounds; medians and ranges of the wall time.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

from absl import app, flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from xflowrl import (
    corpus,  # noqa: E402  pylint: disable=wrong-import-position
    search,  # noqa: E402  pylint: disable=wrong-import-position
)
from xflowrl.engine import XferSet  # noqa: E402  pylint: disable=wrong-import-position
from xflowrl.engine.cost import GPU_COST_SPEC  # noqa: E402  pylint: disable=wrong-import-position
from xflowrl.engine.xfers import (  # noqa: E402  pylint: disable=wrong-import-position
    TASO_ALPHA,
    TASO_BUDGET,
)
from xflowrl.entry_points import (
    cost_model_from_spec,  # noqa: E402  pylint: disable=wrong-import-position
)
from xflowrl.env import (  # noqa: E402  pylint: disable=wrong-import-position
    EnvConfig,
    GraphEnv,
    NO_STEP_LIMIT,
)
from xflowrl.env.replay import (  # noqa: E402  pylint: disable=wrong-import-position
    cheapest_prefix,
    replay,
)
from xflowrl.optimize import methods  # noqa: E402  pylint: disable=wrong-import-position
from xflowrl.policy import (  # noqa: E402  pylint: disable=wrong-import-position
    load_numpy_policy,
    runtime,
    shipped_policy,
)
from xflowrl.search import (  # noqa: E402  pylint: disable=wrong-import-position
    equal_step_limit,
    greedy_search,
    greedy_walk,
)

import timing  # noqa: E402  pylint: disable=wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["held_out"], "A corpus split (held_out, validation, train, "
                  "all) or corpus names.")
flags.DEFINE_string("cost_model", GPU_COST_SPEC, "Cost model (the policy's training one).")
flags.DEFINE_integer("taso_budget", TASO_BUDGET, "TASO's budget.")
flags.DEFINE_integer("rounds", 3, "Interleaved rounds.")
flags.DEFINE_integer("cores", 1, "Pin to this many cores (0: no pinning).")
flags.DEFINE_integer("seed", 0, "Order of the rounds.")
flags.DEFINE_integer("cli_rounds", 5, "Interleaved rounds of the whole command (0: skip).")


def _names():
    names = []
    for item in FLAGS.graphs:
        names += ([s.name for s in corpus.specs(item)] if item in corpus.SPLITS
                  else [item])
    return names


def main(argv):
    del argv
    timing.pin_cores(FLAGS.cores, tensorflow=False)  # optimise imports none
    xfers, cost = XferSet.default(), cost_model_from_spec(FLAGS.cost_model)
    rng = np.random.default_rng(FLAGS.seed)
    clock = timing.Clock()
    # The step limit's greedy walk and the environment's observations, timed
    # inside `optimise` wherever they are called.
    search.greedy_walk = clock.wrap("step_limit", greedy_walk)
    GraphEnv._observe = clock.wrap("observe", GraphEnv._observe)  # pylint: disable=protected-access
    runtime.NumpyPolicy.encode = clock.wrap("encode", runtime.NumpyPolicy.encode)
    methods.optimise(corpus.get(_names()[0]), "policy", xfers, cost)  # loads the libraries
    rows = []
    for name in _names():
        graph = corpus.get(name)
        times: Dict[str, List[float]] = {key: [] for key in (
            "policy", "step_limit", "observe", "encode", "replayed", "taso")}
        found: Dict[str, float] = {}
        for _ in range(FLAGS.rounds):
            for which in rng.permutation(["policy", "replayed", "taso"]):
                before = clock.seconds
                start = time.perf_counter()
                if which == "policy":
                    result = methods.optimise(graph, "policy", xfers, cost)
                    found.update(policy_ms=result.cost, policy_best_step=len(result.applied),
                                 found_by=result.found_by,
                                 handed_over_xfer_runs=xfer_runs(result.applied))
                elif which == "replayed":
                    found["replayed_ms"], steps = _replayed(graph, xfers, cost)
                    found["policy_steps"] = steps
                else:
                    searched = xfers.search(graph, cost, alpha=TASO_ALPHA, budget=FLAGS.taso_budget)
                    found.update(taso_ms=searched.best_cost, taso_expansions=searched.expansions)
                times[which].append(time.perf_counter() - start)
                if which == "policy":
                    after = clock.seconds
                    for label in ("step_limit", "observe", "encode"):
                        times[label].append(after.get(label, 0.0) - before.get(label, 0.0))
        median = {key: statistics.median(values) for key, values in times.items()}
        taso = median["taso"]
        row = {"graph": name, "ops": graph.num_ops(), "initial_ms": graph.cost(cost),
               **{f"{key}_s": round(value, 4) for key, value in median.items()},
               "ratio": round(median["policy"] / taso, 4),
               "replayed_ratio": round(median["replayed"] / taso, 4),
               "step_limit_ratio": round(median["step_limit"] / taso, 4),
               "observe_ratio": round(median["observe"] / taso, 4),
               "encode_ratio": round(median["encode"] / taso, 4),
               "floor_ratio": round((median["observe"] + median["encode"]) / taso, 4),
               "speedup": round(median["replayed"] / median["policy"], 3), **found}
        # The command's seconds per step of the policy's episode, in TASO's
        # seconds per expansion: `ratio` is this times steps / expansions.
        row["step_in_expansions"] = round(
            (median["policy"] / max(row["policy_steps"], 1))
            / (taso / max(row["taso_expansions"], 1)), 3)
        # A rough bound, not a result: the ratio if the route handed over
        # took one step per run of an xfer, each at today's cost of a step.
        row["runs_projection_ratio"] = round(
            row["step_in_expansions"] * row["handed_over_xfer_runs"]
            / max(row["taso_expansions"], 1), 4)
        print(f"{name}: policy {row['policy_s']:.3f} s ({row['step_limit_s']:.3f} s for the "
              f"step limit, {row['observe_s']:.3f} s observing, {row['policy_steps']} steps), "
              f"replayed {row['replayed_s']:.3f} s, TASO {taso:.3f} s, ratio {row['ratio']:.3f}",
              file=sys.stderr, flush=True)
        rows.append(row)
    print(json.dumps({"cost_model": FLAGS.cost_model, "taso_budget": FLAGS.taso_budget,
                      "rounds": FLAGS.rounds, "cores": FLAGS.cores, "rows": rows,
                      **_summary(rows), "cli": _cli_times(rng)}, indent=2))


def xfer_runs(applied) -> int:
    """How many runs of one xfer applied step after step `applied` has
    (("a", 0), ("a", 3), ("b", 1)) has 2): the steps it would take if a
    step applied its xfer at every location that the run goes on to take."""
    names = [name for name, _ in applied]
    return sum(1 for k, name in enumerate(names) if k == 0 or name != names[k - 1])


def _replayed(graph, xfers, cost) -> Tuple[float, int]:
    """The policy's episode played the slow way: greedy's episode in the environment for the step limit, the
    episode, a replay for its cheapest prefix and one to build that prefix's
    graph. (cost handed over, the episode's steps)."""
    probe = GraphEnv(graph, xfers, cost, EnvConfig(max_steps=NO_STEP_LIMIT))
    limit = equal_step_limit(10, len(greedy_search(probe).applied))
    env = GraphEnv(graph, xfers, cost, EnvConfig(max_steps=limit))
    episode = runtime.greedy_episode(load_numpy_policy(shipped_policy(), env), env)
    prefix = cheapest_prefix(env, episode.applied)[1]
    final = replay(GraphEnv(graph, xfers, cost, EnvConfig(max_steps=NO_STEP_LIMIT)), prefix)
    return min(final.cost(cost), graph.cost(cost)), episode.steps


def _summary(rows: List[dict]) -> dict:
    """Medians, ranges and shares over the graphs."""
    def spread(key):
        values = [r[key] for r in rows]
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}
    return {"ratio": spread("ratio"), "replayed_ratio": spread("replayed_ratio"),
            "speedup": spread("speedup"), "step_limit_ratio": spread("step_limit_ratio"),
            "observe_ratio": spread("observe_ratio"),
            "share_at_most_tenth": sum(r["ratio"] <= 0.1 for r in rows) / len(rows),
            "replayed_share_at_most_tenth": sum(
                r["replayed_ratio"] <= 0.1 for r in rows) / len(rows),
            "encode_ratio": spread("encode_ratio"), "floor_ratio": spread("floor_ratio"),
            "share_observe_above_tenth": sum(r["observe_ratio"] > 0.1 for r in rows) / len(rows),
            "share_floor_above_tenth": sum(r["floor_ratio"] > 0.1 for r in rows) / len(rows),
            "share_same_cost_as_replayed": sum(
                abs(r["policy_ms"] - r["replayed_ms"]) <= 1e-9 * r["initial_ms"]
                for r in rows) / len(rows),
            "share_found_by_greedy": sum(r["found_by"] == "greedy" for r in rows) / len(rows),
            "step_in_expansions": spread("step_in_expansions"),
            "handed_over_runs_per_step": {
                "median": statistics.median(r["handed_over_xfer_runs"] / r["policy_best_step"]
                                            for r in rows if r["policy_best_step"]),
                "min": min(r["handed_over_xfer_runs"] / r["policy_best_step"]
                           for r in rows if r["policy_best_step"]),
                "max": max(r["handed_over_xfer_runs"] / r["policy_best_step"]
                           for r in rows if r["policy_best_step"])},
            "share_runs_projection_at_most_tenth": sum(
                r["runs_projection_ratio"] <= 0.1 for r in rows) / len(rows),
            "most_steps_at_most_tenth": max(
                (r["policy_steps"] for r in rows if r["ratio"] <= 0.1), default=None),
            "fewest_steps_above_tenth": min(
                (r["policy_steps"] for r in rows if r["ratio"] > 0.1), default=None)}


def _cli_times(rng: np.random.Generator) -> dict:
    """Wall seconds of the whole `xflowrl optimize` command per method (module
    docstring); {} with --cli_rounds=0."""
    if not FLAGS.cli_rounds:
        return {}
    from xflowrl import zoo  # pylint: disable=import-outside-toplevel
    from xflowrl.entry_points import zoo_weights  # pylint: disable=import-outside-toplevel
    from xflowrl.onnx_io import save_onnx  # pylint: disable=import-outside-toplevel
    folder = tempfile.mkdtemp(prefix="policy-bench-")
    try:
        model = os.path.join(folder, "small_cnn.onnx")
        graph = zoo.get_graph("small_cnn")
        save_onnx(graph, zoo_weights("small_cnn", graph, 0), model)
        tf_folder = os.path.join(folder, "tf_policy")
        shutil.copytree(shipped_policy(), tf_folder,
                        ignore=shutil.ignore_patterns(runtime.ARRAYS_FILE))
        methods = {"policy": "policy", "policy_tf": f"policy:{tf_folder}", "taso": "taso",
                   "greedy": "greedy"}
        command = [sys.executable, "-m", "xflowrl.cli", "optimize", model,
                   "-o", os.path.join(folder, "out.onnx"), f"--cost_model={FLAGS.cost_model}",
                   "--no_timing", "--quiet"]
        seconds: Dict[str, List[float]] = {key: [] for key in methods}
        for _ in range(FLAGS.cli_rounds):
            for key in rng.permutation(list(methods)):
                start = time.perf_counter()
                subprocess.run(command + [f"--method={methods[key]}"], check=True,
                               capture_output=True)
                seconds[key].append(time.perf_counter() - start)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"model": "small_cnn", "rounds": FLAGS.cli_rounds,
            **{f"{key}_s": {"median": round(statistics.median(v), 3),
                            "min": round(min(v), 3), "max": round(max(v), 3)}
               for key, v in seconds.items()}}


if __name__ == "__main__":
    app.run(main)
