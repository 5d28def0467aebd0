"""An ablation of the observation: the model-free agent with and without cost features.

The real environment's observation gives the agent every candidate's exact
cost change (`LocationFeatures.cost_delta`, the min and mean of
`xfer_summary`), so taking their argmin is all it needs to learn. This
script trains `experiments/train_mf.py` once per graph, seed and
`--cost_features` variant (`EnvConfig.cost_features`):

  full       everything (the default observation);
  no_deltas  no candidate cost changes (zeros); op and graph costs stay in
             the GraphsTuple;
  none       no cost anywhere in the observation (nor op costs, nor the
             graph's cost); only the reward carries it.

    python experiments/observation_ablation.py --graphs=squeezenet1_1,resnet18 \\
        --seeds=0,1 --episodes=200

Each run writes under --results_dir/<graph>/observation_ablation/runs/
<variant>_seed<k>/<graph>/train_mf/ (train_mf's own outputs; a run whose
result.json is already there with the same settings is reused, and an
interrupted one resumes from its checkpoint). Per graph it then writes
result.json (an `ObservationAblation` record, xflowrl/results/ablation.py,
which also renders the tables) and result.md to
--results_dir/<graph>/observation_ablation/: per run, the greedy agent's
final cost, the best training episode's, the steps train_mf counts until
the greedy evaluation first reached its final cost, the mean final cost of
the last 50 training episodes, the training episode (and environment steps)
that first reached the run's best cost and the first that reached one-step
greedy's cost (the last three read from the run's TensorBoard log of every
episode's final cost), and the baselines (greedy, TASO, random) under full
observations.
"""

import glob
import os
import subprocess
import sys
import time
from typing import Dict, Optional

from absl import app, flags, logging
import common

from xflowrl.entry_points import RESULT_JSON, RESULT_MD, result_path, results_folder, write_text
from xflowrl.results import ModelFreeRun, RecordError
from xflowrl.results.ablation import BaselineMs, EpisodeLog, ObservationAblation, summarize_run
from xflowrl.search import Baselines, EQSAT_TIME_LIMIT

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["squeezenet1_1", "resnet18"], "Zoo graphs.")
flags.DEFINE_list("variants", ["full", "no_deltas", "none"],
                  "--cost_features values of train_mf.py (EnvConfig.cost_features).")
flags.DEFINE_list("seeds", ["0", "1"], "Agent seeds (the same for every variant).")
flags.DEFINE_integer("episodes", 200, "Training episodes per run.")
common.define_taso_flags(alpha=False, budget_help="TASO search baseline budget (train_mf.py).")
flags.DEFINE_integer("random_episodes", 20, "Random-agent baseline episodes (train_mf.py).")
flags.DEFINE_float("eqsat_time_limit", EQSAT_TIME_LIMIT, "Saturation seconds of the "
                   "equality-saturation baseline (train_mf.py); 0 skips it.")
flags.DEFINE_string("results_dir", "results", "Where results are written.")
flags.DEFINE_bool("rerun", False, "Train again even where a run's result.json exists.")

_TRAIN_MF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_mf.py")


def run_dir(results_dir: str, graph: str, variant: str, seed: int) -> str:
    """Where train_mf.py writes one run (its --results_dir)."""
    return os.path.join(results_dir, graph, "observation_ablation", "runs",
                        f"{variant}_seed{seed}")


def _saved(path: str) -> Optional[ModelFreeRun]:
    """The saved run at `path`; None where there is none or it is not a
    record this code reads (it is run again)."""
    try:
        return ModelFreeRun.load(path)
    except RecordError as e:
        logging.warning("not reusing %s: %s", path, e)
        return None


def train_one(graph: str, variant: str, seed: int) -> ModelFreeRun:
    """Runs (or reuses) train_mf.py for one setting; its result.json's record."""
    base = run_dir(FLAGS.results_dir, graph, variant, seed)
    path = result_path(base, graph, "train_mf")
    result = None if FLAGS.rerun else _saved(path)
    if result is not None:
        if (result.cost_features == variant and result.seed == seed
                and result.episodes == FLAGS.episodes):
            logging.info("reusing %s", path)
            return result
    cmd = [sys.executable, _TRAIN_MF, f"--graph={graph}", f"--episodes={FLAGS.episodes}",
           f"--seed={seed}", f"--cost_features={variant}", f"--results_dir={base}",
           f"--taso_budget={FLAGS.taso_budget}", f"--random_episodes={FLAGS.random_episodes}",
           f"--eqsat_time_limit={FLAGS.eqsat_time_limit:g}"]
    logging.info("running %s", " ".join(cmd))
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"train_mf.py failed ({graph}, {variant}, seed {seed}):\n"
                           f"{proc.stderr[-3000:]}")
    run = ModelFreeRun.load(path)
    if run is None:
        raise RuntimeError(f"train_mf.py wrote no {path}")
    run.wall_seconds = time.time() - start
    run.save(path)
    return run


def read_episode_log(tensorboard_dir: str) -> EpisodeLog:
    """Every training episode's final cost and steps from train()'s
    TensorBoard log; where a resumed run replayed episodes, the later event
    file wins."""
    import tensorflow as tf  # only to read event files
    values: Dict[str, Dict[int, float]] = {"episode/final_cost": {}, "episode/steps": {}}
    for path in sorted(glob.glob(os.path.join(tensorboard_dir, "events.out.tfevents.*")),
                       key=os.path.getmtime):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag in values:
                    values[value.tag][event.step] = float(tf.make_ndarray(value.tensor))
    episodes = sorted(values["episode/final_cost"])
    return EpisodeLog(episodes, [values["episode/final_cost"][e] for e in episodes],
                      [int(values["episode/steps"][e]) for e in episodes])


def command(graph: str) -> str:
    """The command that reproduces one graph's table."""
    return (f"python experiments/observation_ablation.py --graphs={graph} "
            f"--variants={','.join(FLAGS.variants)} --seeds={','.join(FLAGS.seeds)} "
            f"--episodes={FLAGS.episodes} --taso_budget={FLAGS.taso_budget} "
            f"--random_episodes={FLAGS.random_episodes}")


def main(argv):
    del argv
    seeds = [int(s) for s in FLAGS.seeds]
    for graph in FLAGS.graphs:
        runs, first = [], None
        for seed in seeds:
            for variant in FLAGS.variants:
                result = train_one(graph, variant, seed)
                first = first or result
                train_mf = results_folder(run_dir(FLAGS.results_dir, graph, variant, seed),
                                          graph, "train_mf")
                tb = os.path.join(train_mf, "tensorboard")
                greedy = Baselines.from_json(result.baselines).greedy.cost_ms
                runs.append(summarize_run(result, read_episode_log(tb), greedy))
        runs.sort(key=lambda r: (FLAGS.variants.index(r.cost_features), r.seed))
        # Greedy and TASO are deterministic; the random agent's mean is the
        # first run's (its seed).
        ablation = ObservationAblation(graph=graph, episodes=FLAGS.episodes,
                                       command=command(graph),
                                       initial_cost_ms=first.initial_cost_ms,
                                       baselines=first.baselines, runs=runs)
        out_dir = results_folder(FLAGS.results_dir, graph, "observation_ablation")
        table = ablation.markdown(BaselineMs.of(Baselines.from_json(first.baselines)))
        ablation.save(os.path.join(out_dir, RESULT_JSON))
        write_text(os.path.join(out_dir, RESULT_MD), table)
        print(table)


if __name__ == "__main__":
    app.run(main)
