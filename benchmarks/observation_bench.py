"""Observation assembly, vectorised vs the per-location loops it replaced.

    python benchmarks/observation_bench.py [--graphs=resnet50,inception_v3,nasnet_a]
        [--states=20] [--repeats=5] [--rules=default]

On states a seeded random agent visits, times (this thread's CPU time) how
`GraphEnv` turns enumerated locations into an `Observation`: `GraphEnv._assemble`
(one native call for every location's node indices, numpy over the xfers
with locations) against the loop code kept as the test oracle
(`tests/env/observation_test.py::reference_observation`), alternately on the
same `Locations`, so machine load affects both alike. Both sides price the
candidates natively (`LocationsHandle.costs`); `costs_warm_ms`, timed in the
same rotation, is that native part alone, so `loops_ms - costs_warm_ms` and
`vectorised_ms - costs_warm_ms` are the Python-side assembly. `costs_ms` is
the first pricing of each state's candidates, `enumerate_ms` the native
enumeration. Prints JSON: per graph, medians and p10-p90 in ms.
"""

import json
import os
import sys
import time

from absl import app, flags
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.env.observation_test import (  # pylint: disable=wrong-import-position
    reference_observation,
)
from xflowrl import zoo  # pylint: disable=wrong-import-position
from xflowrl.agents.random_agent import RandomAgent  # pylint: disable=wrong-import-position
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv  # pylint: disable=wrong-import-position
from xflowrl.rules.sets import DEFAULT_RULE_SET

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["resnet50", "inception_v3", "nasnet_a"], "Zoo graphs.")
flags.DEFINE_string("rules", DEFAULT_RULE_SET, "Named rule set (XferSet.from_name).")
flags.DEFINE_integer("states", 20, "States visited per graph (random agent, seeded).")
flags.DEFINE_integer("repeats", 5, "Timed repeats of each side per state.")
flags.DEFINE_integer("seed", 0, "Seed of the random agent.")


def _cpu_ms(fn):
    start = time.thread_time()
    fn()
    return 1000 * (time.thread_time() - start)


def _stats(ms):
    return {"median_ms": float(np.median(ms)), "p10_ms": float(np.percentile(ms, 10)),
            "p90_ms": float(np.percentile(ms, 90)), "n": len(ms)}


def _states(env, agent):
    """Yields after reset and after each step, `FLAGS.states` times; a new
    episode starts when one ends."""
    obs, done = env.reset(), False
    for _ in range(FLAGS.states):
        yield
        if done:
            obs, done = env.reset(), False
        else:
            obs, _, done, _ = env.step(agent.act(obs))


def bench_graph(name, xfers, cost):
    env = GraphEnv(zoo.get_graph(name), xfers, cost, EnvConfig())
    agent = RandomAgent(seed=FLAGS.seed)
    times = {"enumerate_ms": [], "costs_ms": [], "costs_warm_ms": [], "loops_ms": [],
             "vectorised_ms": []}
    for _ in _states(env, agent):
        holder = []
        times["enumerate_ms"].append(_cpu_ms(lambda: holder.append(env.xfers.locations(
            env.graph, env.config.max_locations, env.max_ops))))  # pylint: disable=cell-var-from-loop
        locs = holder[0]
        times["costs_ms"].append(_cpu_ms(lambda: locs.costs(cost)))  # pylint: disable=cell-var-from-loop
        for _ in range(FLAGS.repeats):
            times["costs_warm_ms"].append(_cpu_ms(lambda: locs._handle.costs(cost.handle)))  # pylint: disable=protected-access,cell-var-from-loop
            times["loops_ms"].append(_cpu_ms(lambda: reference_observation(env, locs)))  # pylint: disable=cell-var-from-loop
            times["vectorised_ms"].append(_cpu_ms(lambda: env._assemble(locs)))  # pylint: disable=protected-access,cell-var-from-loop
    return {key: _stats(value) for key, value in times.items()}


def main(argv):
    del argv
    cost = CostModel("analytic")
    xfers = XferSet.from_name(FLAGS.rules)
    report = {"benchmark": "observation", "cost_model": cost.name, "rules": FLAGS.rules,
              "num_xfers": len(xfers), "states": FLAGS.states, "repeats": FLAGS.repeats,
              "graphs": {name: bench_graph(name, xfers, cost) for name in FLAGS.graphs}}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    app.run(main)
