"""What Adam's update costs the learners: Sonnet's `Adam.apply` against
`xflowrl.nn.apply_adam` (the same arithmetic over one concatenation);
prints JSON.

    python benchmarks/adam_bench.py [--graph=small_cnn] [--rounds=3] [--calls=20]
        [--episodes=8] [--cores=1]

On the variables of a PPO agent built for `--graph` (policy and value, as
its learner updates them), per round and per implementation, alternating:

- `adam_trace_s`: CPU seconds to trace one update of every variable (a
  fresh optimizer with its moments built, random dense gradients);
- `adam_call_ms`: the median CPU milliseconds of `--calls` calls of it;
- `train_s`: CPU seconds of a short training run from scratch (`train`,
  `--episodes` episodes of the thesis' preset, one update per 4 episodes):
  the agent's traces, acting and updates, with the learner's update
  through that implementation;
- `same_weights`: whether that run ended with the same weights, to the
  bit, under both (it must: only the number of traced ops differs).

Reports every round's figures and, per implementation, the median and
range; CPU time, not wall time, so that other work on a shared machine
counts less.
"""

import json
import os
import platform
import statistics
import tempfile
import time
from unittest import mock

from absl import app, flags
import numpy as np
import sonnet as snt
import tensorflow as tf  # no op runs before main's pin_cores

from xflowrl.agents.ppo import PPOAgent, PPOConfig, learning
from xflowrl.agents.ppo.training import TrainConfig, train
from xflowrl.entry_points import RunSettings
from xflowrl.nn import apply_adam, build_adam

from timing import pin_cores

FLAGS = flags.FLAGS
flags.DEFINE_string("graph", "small_cnn", "Zoo graph the agent is built for.")
flags.DEFINE_integer("rounds", 3, "Rounds; each runs both implementations, alternating.")
flags.DEFINE_integer("calls", 20, "Calls of the traced update timed per round.")
flags.DEFINE_integer("episodes", 8, "Episodes of the training run (0: none).")
flags.DEFINE_integer("cores", 1, "Pin to this many cores (0: leave alone).")

IMPLEMENTATIONS = ("sonnet", "apply_adam")


def _update_fn(name):
    if name == "sonnet":
        return lambda optimizer, updates, variables: optimizer.apply(updates, variables)
    return apply_adam


def _adam_alone(name, source_variables):
    """Trace seconds and median call milliseconds of one update of copies of
    `source_variables`."""
    variables = [tf.Variable(v.numpy()) for v in source_variables]
    optimizer = snt.optimizers.Adam(1e-3)
    build_adam(optimizer, variables)
    update = _update_fn(name)
    step = tf.function(lambda *grads: update(optimizer, list(grads), variables),
                       autograph=False)
    rng = np.random.default_rng(0)
    grads = [tf.constant(rng.standard_normal(v.shape).astype(np.float32)) for v in variables]
    start = time.process_time()
    step.get_concrete_function(*grads)
    trace = time.process_time() - start
    step(*grads)  # the first call
    calls = []
    for _ in range(FLAGS.calls):
        start = time.process_time()
        step(*grads)
        calls.append(time.process_time() - start)
    return trace, 1000 * statistics.median(calls)


def _train(name):
    """CPU seconds of a short training run with the learner's update through
    `name`, and the run's final weights."""
    env = RunSettings(graph=FLAGS.graph, max_steps=8).make_env()
    start = time.process_time()
    with mock.patch.object(learning, "apply_adam", _update_fn(name)):
        agent = PPOAgent(env.num_xfers, PPOConfig(episodes_per_update=4), seed=0)
        train(env, agent, TrainConfig(episodes=FLAGS.episodes, checkpoint_every=1000,
                                      eval_every=1000), tempfile.mkdtemp(prefix="adam_bench_"),
              progress=lambda line: None)
    return time.process_time() - start, [v.numpy() for v in agent.network.variables]


def _summary(values):
    return {"median": round(statistics.median(values), 4),
            "range": [round(min(values), 4), round(max(values), 4)]}


def main(argv):
    del argv
    pin_cores(FLAGS.cores)
    env = RunSettings(graph=FLAGS.graph, max_steps=8).make_env()
    agent = PPOAgent(env.num_xfers, PPOConfig(), seed=0)
    agent.build(env)
    variables = agent.network.policy_variables() + agent.network.value_variables()
    rounds = []
    weights = {}
    for r in range(FLAGS.rounds):
        for name in (IMPLEMENTATIONS if r % 2 == 0 else IMPLEMENTATIONS[::-1]):
            row = {"round": r, "implementation": name}
            row["adam_trace_s"], row["adam_call_ms"] = _adam_alone(name, variables)
            if FLAGS.episodes:
                row["train_s"], weights[name] = _train(name)
            rounds.append({k: round(v, 4) if isinstance(v, float) else v
                           for k, v in row.items()})
    report = {
        "graph": FLAGS.graph, "variables": len(variables),
        "entries": int(sum(v.shape.num_elements() for v in variables)),
        "episodes": FLAGS.episodes, "calls": FLAGS.calls, "cores": FLAGS.cores,
        "tensorflow": tf.__version__, "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(), "rounds": rounds,
        "summary": {name: {key: _summary([row[key] for row in rounds
                                          if row["implementation"] == name])
                           for key in ("adam_trace_s", "adam_call_ms", "train_s")
                           if key in rounds[0]}
                    for name in IMPLEMENTATIONS},
    }
    if FLAGS.episodes:
        report["same_weights"] = all(np.array_equal(a, b) for a, b in
                                     zip(weights["sonnet"], weights["apply_adam"], strict=True))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    app.run(main)
