"""Environment speed and memory: reset and step times per zoo graph (the RL
agent's per-step cost; thesis: 850 ms per step on ResNet-50; targets:
ResNet-50 <= 3 ms, Inception-v3 <= 10 ms, NasNet-A <= 30 ms).

    python benchmarks/env_bench.py [--graphs=resnet50,bert] [--steps=30]
        [--rules=default] [--cost_model=analytic]
    python benchmarks/env_bench.py --onnx=my_model.onnx    # your own model

`--onnx` names ONNX files timed like zoo graphs, each under its file name
without .onnx (with `--onnx` and no `--graphs`, only those); `--input_shape`
NAME=D1,D2,... fixes their inputs of dynamic dimensions. A file that cannot be
imported ends the benchmark with one error line (exit status 2).

Prints JSON: per graph (default: every zoo graph) and rule set, the op count,
valid locations at reset, and the median / p10 / p90 of reset and of step
(location enumeration with L=200, candidate costs, per-location features and
featurization included), over random-agent episodes, both in wall-clock time
and in this thread's CPU time (`time.thread_time`; steadier on a shared
machine). `peak_rss_mb` is the process's peak resident set after the graph
(ru_maxrss: monotone over the run, so it bounds every graph measured so far).
Single process; the engine runs on one core.
"""

import itertools
import json
import time

from absl import app, flags
import numpy as np

from xflowrl import zoo
from xflowrl.agents.random_agent import RandomAgent
from xflowrl.engine import CostModel, XferSet
from xflowrl.engine.cost import DEFAULT_BACKEND
from xflowrl.engine.xfers import peak_rss_mb
from xflowrl.entry_points import exit_on_bad_input, model_source, zoo_source
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.optimize import parse_input_shapes
from xflowrl.rules.sets import DEFAULT_RULE_SET

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", list(zoo.GRAPHS), "Zoo graphs to time (default: all; with --onnx "
                  "and no --graphs: none).")
flags.DEFINE_list("onnx", [], "Your own ONNX files, each one more graph named by its file name "
                  "without .onnx.")
flags.DEFINE_multi_string("input_shape", [], "NAME=D1,D2,...: the static shape of an --onnx "
                          "file's input of dynamic dimensions (repeat for several inputs).")
flags.DEFINE_list("rules", [DEFAULT_RULE_SET], "Named rule sets (XferSet.from_name) to time.")
flags.DEFINE_integer("steps", 30, "Steps timed per graph.")
flags.DEFINE_integer("seed", 0, "Seed of the random agent.")
flags.DEFINE_enum("cost_model", DEFAULT_BACKEND, ["analytic", "onednn", "fitted"],
                  "Cost backend.")


def _stats(seconds):
    ms = 1000 * np.asarray(seconds)
    return {"median_ms": float(np.median(ms)), "p10_ms": float(np.percentile(ms, 10)),
            "p90_ms": float(np.percentile(ms, 90)), "n": len(ms)}


def _timed(fn):
    """fn()'s result, its wall-clock seconds and this thread's CPU seconds."""
    wall, cpu = time.perf_counter(), time.thread_time()
    out = fn()
    return out, time.perf_counter() - wall, time.thread_time() - cpu


def bench_graph(graph, xfers, cost):
    """Reset and step times of random-agent episodes on one graph."""
    env = GraphEnv(graph, xfers, cost, EnvConfig(max_steps=FLAGS.steps))
    agent = RandomAgent(seed=FLAGS.seed)
    times = {"reset": [], "reset_cpu": [], "step": [], "step_cpu": []}
    obs = env.reset()  # warm the per-op cost memo
    locations = int(obs.location_mask.sum())
    while len(times["step"]) < FLAGS.steps:
        obs, wall, cpu = _timed(env.reset)
        times["reset"].append(wall)
        times["reset_cpu"].append(cpu)
        done = False
        while not done and len(times["step"]) < FLAGS.steps:
            action = agent.act(obs)
            (obs, _, done, _), wall, cpu = _timed(lambda: env.step(action))
            times["step"].append(wall)
            times["step_cpu"].append(cpu)
    out = {"ops": graph.num_ops(), "locations_at_reset": locations}
    out.update({key: _stats(value) for key, value in times.items()})
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def main(argv):
    del argv
    cost = CostModel(FLAGS.cost_model)
    rule_sets = {name: XferSet.from_name(name) for name in FLAGS.rules}
    report = {"benchmark": "env", "cost_model": cost.name, "rule_sets": FLAGS.rules,
              "num_xfers": {name: len(x) for name, x in rule_sets.items()}, "graphs": {}}
    names = FLAGS.graphs if FLAGS["graphs"].present or not FLAGS.onnx else []
    shapes = parse_input_shapes(FLAGS.input_shape)
    # Model files read first, so a bad one fails before any timing; zoo
    # graphs built one at a time (map is lazy), so peak_rss_mb follows each.
    models = [model_source(path, shapes) for path in FLAGS.onnx]
    for source in itertools.chain(map(zoo_source, names), models):
        report["graphs"][source.name] = {r: bench_graph(source.graph, x, cost)
                                         for r, x in rule_sets.items()}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    app.run(exit_on_bad_input(main))
