"""Training speed: real environment steps per second while the model-free
agent trains (target: >= 100 per second on one core).

    python benchmarks/train_bench.py [--graphs=resnet50,bert] [--episodes=40]
        [--ppo=xrlflow] [--cores=1] [--profile=v100]
    python benchmarks/train_bench.py --onnx=my_model.onnx    # your own model

`--onnx` names ONNX files timed like zoo graphs, each under its file name
without .onnx (with `--onnx` and no `--graphs`, only those); `--input_shape`
NAME=D1,D2,... fixes their inputs of dynamic dimensions. A file that cannot be
imported ends the benchmark with one error line (exit status 2).

Per graph it runs `xflowrl.agents.ppo.training.train` from scratch for
`--episodes` episodes (the PPO preset's episodes per update, the
environment's step limit raised to greedy's budget as `train_mf.py` does)
and reports:

- `steps_per_s`: environment steps of the whole run over its wall time,
  tracing and the first updates included (what a user of a short run sees);
- `steady_steps_per_s`: the same after the first `--warmup_updates` updates
  (what a long run converges to);
- where the time went, in ms per environment step: `env_ms` (`step` and
  `reset`: enumeration, candidate costs, featurisation), `act_ms` (the
  policy's forward passes and sampling), `update_ms` (PPO updates: batching,
  forward and backward passes) and the rest (`other_ms`: bookkeeping,
  summaries, checkpoints), over the steady part;
- `steps_per_cpu_s` and `steady_steps_per_cpu_s`: the same rates over the
  process's CPU time instead of the wall clock (every thread's; with
  `--cores=1`, what the process really ran), steadier than the wall-clock
  rates on a machine shared with other work;
- the number of traces of every `tf.function` the agent owns (one each is
  the goal: a retrace costs seconds; a function whose first call creates
  variables counts two), and of every traced function the calls that
  missed its fast path (`.slow_calls`; one each is the goal: a miss costs
  about a millisecond).

`--parallel_envs` episodes are played at once (default: the preset's
episodes per update, as `train_mf.py` does); with 1 they are
played one at a time.

`--cores=1` pins the process to one core and TensorFlow to one thread of
each kind before TensorFlow starts (the issue's "on one core"); 0 leaves
both alone. Prints one JSON object.
"""

import json
import os
import platform
import tempfile
import time

from absl import app, flags

from xflowrl.engine.cost import GPU_PROFILE  # no TensorFlow: --cores comes first

from timing import Clock, pin_cores

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["resnet50", "bert"], "Zoo graphs (with --onnx and no --graphs: "
                  "none).")
flags.DEFINE_list("onnx", [], "Your own ONNX files, each one more graph named by its file name "
                  "without .onnx.")
flags.DEFINE_multi_string("input_shape", [], "NAME=D1,D2,...: the static shape of an --onnx "
                          "file's input of dynamic dimensions (repeat for several inputs).")
flags.DEFINE_integer("episodes", 40, "Training episodes per graph.")
flags.DEFINE_integer("warmup_updates", 2, "Updates left out of the steady rate.")
flags.DEFINE_enum("ppo", "xrlflow", ["thesis", "xrlflow"], "PPO preset.")
flags.DEFINE_string("profile", GPU_PROFILE, "Analytic cost profile.")
flags.DEFINE_integer("max_steps", 50, "Step limit floor (raised to greedy's budget).")
flags.DEFINE_integer("cores", 1, "Pin to this many cores (0: leave alone).")
flags.DEFINE_integer("seed", 0, "Seed of the agent.")
flags.DEFINE_integer("parallel_envs", 0, "Episodes played at once (TrainConfig.parallel_envs; "
                     "0: the preset's episodes per update, as train_mf.py does).")


def bench_graph(run):
    """Trains on the graph of `run` (a `RunSettings`); its figures."""
    # Imported here: --cores must take effect before TensorFlow starts.
    from xflowrl.agents.ppo import PPOAgent, PPOConfig
    from xflowrl.agents.ppo.training import TrainConfig, train
    from xflowrl.search import with_equal_step_limit

    env = with_equal_step_limit(run.make_env())
    agent = PPOAgent(len(env.xfers), PPOConfig.named(FLAGS.ppo), seed=FLAGS.seed)
    clock = Clock(enabled=False)  # enabled after the warm-up updates
    state = {"steps": 0}
    # Class-level wrappers: they time the environment's copies too.
    from xflowrl.env import GraphEnv  # pylint: disable=import-outside-toplevel
    originals = {"step": GraphEnv.step, "reset": GraphEnv.reset}

    def counted_step(self, action):
        state["steps"] += 1
        return originals["step"](self, action)
    GraphEnv.step = clock.wrap("env", counted_step)
    GraphEnv.reset = clock.wrap("env", originals["reset"])
    # The acting entry point the training loop calls (act_graphs since issue
    # 25, which `act` also goes through: wrapping both would count twice).
    method = "act_graphs" if hasattr(agent.actor, "act_graphs") else "act"
    setattr(agent.actor, method, clock.wrap("act", getattr(agent.actor, method)))
    agent.learner.update = clock.wrap("update", agent.learner.update)
    state["updates"] = 0

    def progress(_line):  # called after every update
        state["updates"] += 1
        if state["updates"] == FLAGS.warmup_updates:
            clock.enabled = True
            state["steady_start"] = time.perf_counter()
            state["steady_cpu_start"] = time.process_time()
            state["steady_steps"] = state["steps"]

    with tempfile.TemporaryDirectory() as logdir:
        start, cpu_start = time.perf_counter(), time.process_time()
        config = TrainConfig(episodes=FLAGS.episodes, eval_every=10**9, **parallel(agent))
        try:
            result = train(env, agent, config, logdir, progress=progress)
        finally:
            GraphEnv.step, GraphEnv.reset = originals["step"], originals["reset"]
        total = time.perf_counter() - start
        cpu_total = time.process_time() - cpu_start
    steady_seconds = time.perf_counter() - state.get("steady_start", start)
    steady_cpu = time.process_time() - state.get("steady_cpu_start", cpu_start)
    steady_steps = state["steps"] - state.get("steady_steps", 0)
    per_step = {f"{k}_ms": 1000 * v / max(steady_steps, 1) for k, v in clock.seconds.items()}
    per_step["other_ms"] = (1000 * steady_seconds / max(steady_steps, 1)
                            - sum(per_step.values()))
    return {"ops": env.initial_graph.num_ops(), "step_limit": env.config.max_steps,
            "episodes": result.episodes, "steps": state["steps"],
            "seconds": total, "steps_per_s": state["steps"] / total,
            "steady_steps": steady_steps, "steady_seconds": steady_seconds,
            "steady_steps_per_s": steady_steps / max(steady_seconds, 1e-9),
            "cpu_seconds": cpu_total, "steps_per_cpu_s": state["steps"] / max(cpu_total, 1e-9),
            "steady_steps_per_cpu_s": steady_steps / max(steady_cpu, 1e-9),
            "per_step": per_step, "traces": trace_counts(agent)}


def parallel(agent):
    """TrainConfig's parallel_envs where this version has it (so that the
    benchmark also runs on the code before it, for the before/after)."""
    from xflowrl.agents.ppo.training import TrainConfig  # pylint: disable=import-outside-toplevel
    if "parallel_envs" not in TrainConfig.__dataclass_fields__:
        return {}
    return {"parallel_envs": FLAGS.parallel_envs or agent.config.episodes_per_update}


def trace_counts(agent):
    """How often each `tf.function` of the actor and the learner was traced."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    counts = {}
    for owner in (agent.actor, agent.learner):
        for attr, value in vars(owner).items():
            if isinstance(value, tf.types.experimental.PolymorphicFunction):
                counts[f"{type(owner).__name__}.{attr}"] = value.experimental_get_tracing_count()
            elif hasattr(value, "tracing_count"):  # xflowrl.tracing.TracedFunction
                counts[f"{type(owner).__name__}.{attr}"] = value.tracing_count
                if hasattr(value, "slow_calls"):  # calls that missed the fast path
                    counts[f"{type(owner).__name__}.{attr}.slow_calls"] = value.slow_calls
    return counts


def graph_runs():
    """The graphs to time by name, as `RunSettings`: --graphs' zoo graphs,
    then --onnx's files (each read now, so a bad one fails before any run)."""
    # pylint: disable=import-outside-toplevel
    from xflowrl.entry_points import RunSettings, input_shapes_key, model_name
    from xflowrl.optimize import parse_input_shapes
    names = FLAGS.graphs if FLAGS["graphs"].present or not FLAGS.onnx else []
    runs = {name: RunSettings(graph=name, profile=FLAGS.profile, max_steps=FLAGS.max_steps)
            for name in names}
    shapes = input_shapes_key(parse_input_shapes(FLAGS.input_shape))
    for path in FLAGS.onnx:
        run = RunSettings(graph=model_name(path), onnx=path, input_shapes=shapes,
                          profile=FLAGS.profile, max_steps=FLAGS.max_steps)
        run.source()
        runs[run.graph] = run
    return runs


def benchmark(argv):
    """Times every graph; prints the report."""
    del argv
    report = {"benchmark": "train", "ppo": FLAGS.ppo, "profile": FLAGS.profile,
              "episodes": FLAGS.episodes, "parallel_envs": FLAGS.parallel_envs,
              "cores": FLAGS.cores or os.cpu_count(), "machine": platform.processor(),
              "target_steps_per_s": 100, "graphs": {}}
    for name, run in graph_runs().items():
        report["graphs"][name] = bench_graph(run)
    print(json.dumps(report, indent=1))


def main(argv):
    pin_cores(FLAGS.cores)
    # Imported after pinning: xflowrl.entry_points starts TensorFlow.
    from xflowrl.entry_points import exit_on_bad_input  # pylint: disable=import-outside-toplevel
    exit_on_bad_input(benchmark)(argv)


if __name__ == "__main__":
    app.run(main)
