"""Rollout collection in Ray actors against the learner's own process;
prints JSON: whether collecting rollouts in Ray actors pays.

    python benchmarks/rollout_bench.py [--graphs=resnet50,bert] [--ppo=thesis]
        [--updates=6] [--actors=2] [--rounds=2]

Per graph, the model-free agent's loop (collect the PPO preset's episodes
per update, then one update) runs two ways, alternated in `--rounds`
rounds, each from a fresh agent of the same seed:

- `local`: the learner's process plays the episodes itself, all at once
  (`run_episodes` over environment copies, as `train_mf.py` does with
  `TrainConfig.parallel_envs`); TensorFlow may use every CPU.
- `ray`: `--actors` Ray actors (`xflowrl.agents.ppo.rollouts.RolloutActors`,
  what `train_mf.py --rollout_actors` uses: one CPU and one TensorFlow
  thread each, on a local Ray instance of `--actors` CPUs) each hold an
  environment and a copy of the policy. Before each collection the learner's weights go to
  them (one `ray.put`); each plays its share of the episodes at once and
  sends their transitions back; the learner updates on them. Collection
  is synchronous, so each update sees only episodes of the current policy,
  as in `local`.

Each way runs one untimed update first (TensorFlow's traces, the actors'
start), then `--updates` timed ones. Reported per graph and way: real
environment steps per second (medians over rounds, with every round's
figure), the seconds spent collecting and updating per environment step,
and the ratio ray / local of the rates. Both ways sample other episodes
(other generators), so steps per second, not seconds, is compared.
"""

import functools
import json
import os
import platform
import statistics
import sys
import time

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from xflowrl.engine.cost import GPU_PROFILE  # noqa: E402  pylint: disable=wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["resnet50", "bert"], "Zoo graphs.")
flags.DEFINE_enum("ppo", "thesis", ["thesis", "xrlflow"], "PPO preset.")
flags.DEFINE_string("profile", GPU_PROFILE, "Analytic cost profile.")
flags.DEFINE_integer("max_steps", 50, "Step limit floor (raised to greedy's budget).")
flags.DEFINE_integer("updates", 6, "Timed updates per way and round.")
flags.DEFINE_integer("actors", 2, "Ray actors collecting.")
flags.DEFINE_integer("rounds", 2, "Alternated rounds.")
flags.DEFINE_integer("seed", 0, "Seed of the learner's agent.")


def make_env(graph: str, profile: str, max_steps: int):
    """The training environment `train_bench.py` uses: the graph under the
    analytic profile, its step limit raised to greedy's budget."""
    # pylint: disable=import-outside-toplevel
    from xflowrl.entry_points import RunSettings
    from xflowrl.search import with_equal_step_limit
    return with_equal_step_limit(
        RunSettings(graph=graph, profile=profile, max_steps=max_steps).make_env())


def make_agent(env, ppo: str, seed: int):
    """A built PPO agent of the preset (variables and slots created)."""
    from xflowrl.agents.ppo import PPOAgent, PPOConfig  # pylint: disable=import-outside-toplevel
    agent = PPOAgent(len(env.xfers), PPOConfig.named(ppo), seed=seed)
    agent.build(env)
    return agent


def clones(env, n: int):
    """`env` and n - 1 copies of it."""
    return [env] + [env.clone() for _ in range(n - 1)]


def run_local(graph: str):
    """The loop in one process; its figures."""
    env = make_env(graph, FLAGS.profile, FLAGS.max_steps)
    agent = make_agent(env, FLAGS.ppo, FLAGS.seed)
    envs = clones(env, agent.config.episodes_per_update)
    times = {"collect": 0.0, "update": 0.0}
    steps = 0
    for i in range(FLAGS.updates + 1):
        start = time.perf_counter()
        episodes = agent.run_episodes(envs, learn=True)
        collected = time.perf_counter()
        agent.update()
        done = time.perf_counter()
        if i:  # the first update traces: untimed
            times["collect"] += collected - start
            times["update"] += done - collected
            steps += sum(e.steps for e in episodes)
    return steps, times


def run_ray(graph: str):
    """The loop with `--actors` Ray actors collecting
    (`xflowrl.agents.ppo.rollouts.RolloutActors`, as `train_mf.py
    --rollout_actors` uses them); its figures."""
    from xflowrl.agents.ppo.rollouts import (  # pylint: disable=import-outside-toplevel
        RolloutActors,
    )
    env = make_env(graph, FLAGS.profile, FLAGS.max_steps)
    agent = make_agent(env, FLAGS.ppo, FLAGS.seed)
    actors = RolloutActors(functools.partial(make_env, graph, FLAGS.profile, FLAGS.max_steps),
                           agent, FLAGS.actors, seed=FLAGS.seed)
    times = {"collect": 0.0, "update": 0.0}
    steps = 0
    try:
        for i in range(FLAGS.updates + 1):
            start = time.perf_counter()
            episodes = actors.run_episodes(agent, agent.config.episodes_per_update)
            collected = time.perf_counter()
            agent.update()
            done = time.perf_counter()
            if i:  # the first update traces and starts the actors: untimed
                times["collect"] += collected - start
                times["update"] += done - collected
                steps += sum(e.steps for e in episodes)
    finally:
        actors.close()
    return steps, times


def figures(steps: int, times: dict) -> dict:
    seconds = times["collect"] + times["update"]
    out = {"steps": steps, "seconds": round(seconds, 3),
           "steps_per_s": round(steps / seconds, 2),
           "collect_ms_per_step": round(1000 * times["collect"] / steps, 3),
           "update_ms_per_step": round(1000 * times["update"] / steps, 3)}
    return out


def main(argv):
    del argv
    import numpy as np  # pylint: disable=import-outside-toplevel
    import ray  # pylint: disable=import-outside-toplevel
    ray.init(num_cpus=FLAGS.actors, include_dashboard=False, log_to_driver=False,
             object_store_memory=500 * 2**20)
    rng = np.random.default_rng(FLAGS.seed)
    report = {"benchmark": "rollout", "ppo": FLAGS.ppo, "profile": FLAGS.profile,
              "actors": FLAGS.actors, "updates": FLAGS.updates, "rounds": FLAGS.rounds,
              "cpus": os.cpu_count(), "machine": platform.processor(), "graphs": {}}
    for graph in FLAGS.graphs:
        runs = {"local": [], "ray": []}
        for _ in range(FLAGS.rounds):
            for way in rng.permutation(["local", "ray"]):
                steps, times = run_local(graph) if way == "local" else run_ray(graph)
                runs[way].append(figures(steps, times))
                print(f"{graph} {way}: {runs[way][-1]}", file=sys.stderr, flush=True)
        rates = {way: statistics.median(r["steps_per_s"] for r in rs) for way, rs in runs.items()}
        report["graphs"][graph] = {"runs": runs, "steps_per_s": rates,
                                   "ray_over_local": round(rates["ray"] / rates["local"], 3)}
    ray.shutdown()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    app.run(main)
