"""Table 4.3: the dream's temperature against world-model and real scores.

    python experiments/temperature_sweep.py --graph=bert --seeds=3
    python experiments/temperature_sweep.py --quick --onnx=my_model.onnx   # your own model

--onnx=PATH sweeps on a user's ONNX file instead of a zoo graph
(--input_shape NAME=D1,D2,... fixes inputs of dynamic dimensions); <graph>
below is then the file's name without .onnx. A file that cannot be read or
imported ends the script with one error line (exit status 2) before any seed
runs.

For each seed one world model is trained from random episodes (the thesis'
collection: it is reused for every temperature, so it cannot be collected
by one temperature's controller; the sweep costs one world model per seed,
not one per cell); for each temperature tau a fresh controller trains in
the dream at tau and is then evaluated greedily in the real environment,
acting on the real environment's masks.

Scores follow the thesis' sign: the change in runtime, in % of the initial
graph's (negative is faster).
  world-model score: -(mean imagined return of 64 greedy dream episodes at tau)
  real score:        100 * (real final cost / initial cost - 1)
Each cell is mean +- std over seeds; result.json (a `SweepResult`,
xflowrl/results/sweep.py) keeps each real episode's applied steps too, so
its graph can be rebuilt and timed. Writes result.json, result.md and
temperature_sweep.png to --results_dir/<graph>/temperature_sweep/.

The seeds run in parallel as Ray tasks (`xflowrl.ray_jobs.run_jobs`): each is
this script again with `--only_seed=<s>`, which trains that seed's world
model and controllers in seed_<s>/ (checkpointed there, so a rerun or a
retried task resumes) and writes their scores to seed_<s>/cells.json; a
finished seed is reused. The tasks run on a local Ray instance of --jobs
CPUs, on the cluster at --ray_address, or, when this script is itself a job
of reproduce.py, on that job's cluster ($RAY_ADDRESS).
"""

import dataclasses
import os
import sys
import time
from typing import List, Tuple

from absl import app, flags, logging
import common
import numpy as np

from xflowrl import zoo
from xflowrl.entry_points import RESULT_JSON, RESULT_MD, RunSettings, write_text
from xflowrl.env import DEFAULT_MAX_STEPS
from xflowrl.ray_jobs import Job, run_jobs, strip_flags
from xflowrl.results.sweep import SweepCell, SweepResult, SweepSeed, sweep_rows
from xflowrl.world_model import DreamConfig, WorldModelConfig, controller_ppo_config

FLAGS = flags.FLAGS
flags.DEFINE_string("graph", "bert", f"Graph to optimise; one of {zoo.GRAPHS}.")
common.define_model_flags()
flags.DEFINE_integer("seeds", 3, "Seeds (a world model each); the thesis ran 5.")
flags.DEFINE_list("temperatures", ["0.1", "0.5", "0.75", "1.0", "1.2", "1.5", "1.75", "2.0",
                                   "2.5", "3.0"], "The temperatures of Table 4.3.")
common.define_cost_model_flags(profile_help="Device profile of the cost backend (analytic: "
                               "cpu, v100, h100; fitted: a fitted profile's name).")
flags.DEFINE_integer("max_steps", DEFAULT_MAX_STEPS, "Step limit per episode.")
common.define_world_model_flags()
flags.DEFINE_integer("dream_episodes", 2400, "Imagined episodes per controller.")
flags.DEFINE_string("results_dir", "results", "Where results are written.")
flags.DEFINE_integer("jobs", 2, "CPUs of the local Ray instance: seeds at a time.")
flags.DEFINE_string("ray_address", "", "A Ray cluster to run the seeds on ('': $RAY_ADDRESS "
                    "if set, else a local instance of --jobs CPUs).")
flags.DEFINE_integer("only_seed", -1, "Run this one seed in this process and write its "
                     "cells.json (what each seed's task runs; -1: the whole sweep).")
# --quick's values for the flags the user does not give (and, always under
# --quick, 10 held-out episodes instead of WorldModelConfig's default).
QUICK = {"graph": "small_cnn", "seeds": 2, "temperatures": ["0.5", "1.0", "2.0"],
         "dream_episodes": 256, "max_steps": 20, "rounds": 2, "episodes_per_round": 30,
         "train_steps_per_round": 80, "encoder_steps": 100}
common.define_quick_flag("small_cnn, 2 seeds, 3 temperatures, tiny budgets.")


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sweep: the environment (default rules, no cost cache) and results
    folder, the seeds and temperatures, the world model's config and the
    imagined episodes per controller."""
    run: RunSettings
    seeds: int
    temperatures: Tuple[float, ...]
    world_model: WorldModelConfig
    dream_episodes: int


def settings_from_flags() -> Settings:
    """The sweep the flags describe (--quick's values where a flag was not given)."""
    values = common.quick_values(QUICK)
    # One world model per seed serves every temperature, so its data cannot
    # come from one temperature's controller: the thesis' random collection.
    wm = common.world_model_config(values, collection="random")
    if FLAGS.quick:
        wm = dataclasses.replace(wm, held_out_episodes=10)
    run = RunSettings(**common.graph_fields(values), cost_model=values.cost_model,
                      profile=values.profile, max_steps=values.max_steps,
                      results_dir=values.results_dir)
    return Settings(run=run,
                    seeds=values.seeds,
                    temperatures=tuple(float(t) for t in values.temperatures),
                    world_model=wm, dream_episodes=values.dream_episodes)


def _plot(path, temps, wm_mean, wm_std, real_mean, real_std, graph):
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.errorbar(temps, wm_mean, yerr=wm_std, marker="o", capsize=3, label="world-model score")
    ax.errorbar(temps, real_mean, yerr=real_std, marker="s", capsize=3, label="real score")
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xlabel("temperature tau")
    ax.set_ylabel("runtime change (%)")
    ax.set_title(f"Temperature sweep on {graph}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# The sweep's own flags, left out of a seed's command line: a seed's run does
# not depend on them, so raising --seeds reuses the seeds already run.
_SWEEP_FLAGS = ("seeds", "jobs", "ray_address", "only_seed")
_CELLS = "cells.json"


def run_seed(settings: Settings, seed: int, out_dir: str) -> None:
    """One seed: its world model, then per temperature a controller trained
    in the dream and its scores; writes <out_dir>/seed_<seed>/cells.json."""
    # Here, not at the top: the sweep's own process only hands the seeds out
    # and gathers their cells, without TensorFlow.
    from xflowrl.world_model import (  # pylint: disable=import-outside-toplevel
        ModelBasedAgent,
        imagine_batch,
    )
    env = settings.run.make_env()
    start = time.time()
    base = DreamConfig(episodes=settings.dream_episodes)
    agent = ModelBasedAgent(env, os.path.join(out_dir, f"seed_{seed}"), settings.world_model,
                            base, controller_ppo_config(base.batch_size), seed=seed)
    agent.learn_world_model()
    cells = []
    for t in settings.temperatures:
        config = dataclasses.replace(base, temperature=t)
        controller = agent.train_controller(config, subdir=f"controller_tau_{t}", seed=seed)
        dream = agent.make_dream(config, seed=seed + 7919)
        imagined = imagine_batch(dream, controller, 64, greedy=True)
        wm_score = -float(np.mean([sum(s.reward for s in e) for e in imagined]))
        real = agent.evaluate(controller, masks="real", greedy=True)
        real_score = 100.0 * (real.final_cost / env.initial_cost - 1.0)
        cells.append(SweepCell(temperature=t, world_model=wm_score, real=real_score,
                               applied=[(str(n), int(loc)) for n, loc in real.applied],
                               invalid_actions=real.invalid_actions))
        logging.info("seed %d tau %.2f: world-model score %+.3f%%, real score %+.3f%% "
                     "(%d invalid actions), %.0f s so far", seed, t, wm_score, real_score,
                     real.invalid_actions, time.time() - start)
    SweepSeed(seed=seed, initial_cost_ms=env.initial_cost, cells=cells,
              seconds=time.time() - start).save(
                  os.path.join(out_dir, f"seed_{seed}", _CELLS), indent=1)


def seed_jobs(settings: Settings, out_dir: str) -> List[Job]:
    """One job per seed: this script with this invocation's flags and
    --only_seed."""
    flags_ = strip_flags(sys.argv[1:], _SWEEP_FLAGS)
    return [Job(f"{settings.run.graph} seed {seed}",
                (sys.executable, os.path.abspath(__file__), *flags_, f"--only_seed={seed}"),
                os.path.join(out_dir, f"seed_{seed}"), result_file=_CELLS,
                key=(*flags_, f"--only_seed={seed}"))
            for seed in range(settings.seeds)]


def main(argv):
    del argv
    settings = settings_from_flags()
    graph_name, seeds, temps, wm, episodes = (settings.run.graph, settings.seeds,
                                              settings.temperatures, settings.world_model,
                                              settings.dream_episodes)
    settings.run.source()  # a model file that cannot be imported fails here, not in every seed
    out_dir = settings.run.results_folder("temperature_sweep")
    os.makedirs(out_dir, exist_ok=True)
    if FLAGS.only_seed >= 0:
        run_seed(settings, FLAGS.only_seed, out_dir)
        return
    start = time.time()
    jobs = seed_jobs(settings, out_dir)
    run_jobs(jobs, address=FLAGS.ray_address, num_cpus=FLAGS.jobs)
    env = settings.run.make_env()
    by_seed = []
    for job in jobs:
        seed = SweepSeed.load(job.result)
        if seed is None:
            raise FileNotFoundError(f"{job.name} wrote no {job.result}")
        by_seed.append(seed)
    rows = sweep_rows(temps, by_seed)
    seconds = time.time() - start
    result = SweepResult(graph=graph_name, cost_model=env.cost_model.name, seeds=seeds,
                         dream_episodes=episodes, rules=settings.run.rules,
                         max_locations=settings.run.max_locations,
                         initial_cost_ms=env.initial_cost, seconds=seconds, rows=rows,
                         world_model=dataclasses.asdict(wm))
    text = result.markdown()
    result.save(os.path.join(out_dir, RESULT_JSON))
    write_text(os.path.join(out_dir, RESULT_MD), text)
    _plot(os.path.join(out_dir, "temperature_sweep.png"), temps,
          [r.world_model_mean for r in rows], [r.world_model_std for r in rows],
          [r.real_mean for r in rows], [r.real_std for r in rows], graph_name)
    print(text)
    print(f"results in {out_dir}")


if __name__ == "__main__":
    app.run(common.exit_on_bad_input(main))
