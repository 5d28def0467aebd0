"""Environment speed: reset and step times per graph (the RL agent's per-step
cost; thesis: 850 ms per step on ResNet-50; target here 5 ms).

    python benchmarks/env_bench.py [--graphs=resnet50,bert] [--steps=30]

Prints JSON: per graph, the op count, valid locations at reset, and the
median / p90 of reset and of step (location enumeration with L=200,
candidate costs, per-location features and featurization included), over
random-agent episodes. Single process; the engine runs on one core.
"""

import json
import time

from absl import app
from absl import flags
import numpy as np

from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.graphs import CostModel, XferSet, zoo
from xflowrl.search import RandomAgent

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["resnet50", "bert", "squeezenet1_1", "resnet18", "inception_v3"],
                  "Zoo graphs to time.")
flags.DEFINE_integer("steps", 30, "Steps timed per graph.")
flags.DEFINE_enum("cost_model", "analytic", ["analytic", "onednn"], "Cost backend.")


def _stats(seconds):
    ms = 1000 * np.asarray(seconds)
    return {"median_ms": float(np.median(ms)), "p90_ms": float(np.percentile(ms, 90)),
            "n": len(ms)}


def main(argv):
    del argv
    xfers = XferSet.default()
    cost = CostModel(FLAGS.cost_model)
    report = {"cost_model": cost.name, "num_xfers": len(xfers), "graphs": {}}
    for name in FLAGS.graphs:
        graph = zoo.get_graph(name)
        env = GraphEnv(graph, xfers, cost, EnvConfig(max_steps=FLAGS.steps))
        agent = RandomAgent(seed=0)
        resets, steps = [], []
        obs = env.reset()  # warm the per-op cost memo
        locations = int(obs.location_mask.sum())
        while len(steps) < FLAGS.steps:
            start = time.perf_counter()
            obs = env.reset()
            resets.append(time.perf_counter() - start)
            done = False
            while not done and len(steps) < FLAGS.steps:
                action = agent.act(obs)
                start = time.perf_counter()
                obs, _, done, _ = env.step(action)
                steps.append(time.perf_counter() - start)
        report["graphs"][name] = {"ops": graph.num_ops(), "locations_at_reset": locations,
                                  "reset": _stats(resets), "step": _stats(steps)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    app.run(main)
