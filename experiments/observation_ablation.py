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
result.json and result.md to --results_dir/<graph>/observation_ablation/:
per run, the greedy agent's final cost, the best training episode's, the
steps train_mf counts until the greedy evaluation first reached its final
cost, the mean final cost of the last 50 training episodes, the training
episode (and environment steps) that first reached the run's best cost and
the first that reached one-step greedy's cost (the last three read from the
run's TensorBoard log of every episode's final cost), and the baselines
(greedy, TASO, random) under full observations.
"""

import glob
import os
import subprocess
import sys
import time
from typing import Dict, List, NamedTuple, Optional, Sequence

from absl import app, flags, logging
import common
import numpy as np

from xflowrl.results import ModelFreeRun, RecordError
from xflowrl.runs import result_path, results_folder, save_result
from xflowrl.search import Baselines

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["squeezenet1_1", "resnet18"], "Zoo graphs.")
flags.DEFINE_list("variants", ["full", "no_deltas", "none"],
                  "--cost_features values of train_mf.py (EnvConfig.cost_features).")
flags.DEFINE_list("seeds", ["0", "1"], "Agent seeds (the same for every variant).")
flags.DEFINE_integer("episodes", 200, "Training episodes per run.")
common.define_taso_flags(alpha=False, budget_help="TASO search baseline budget (train_mf.py).")
flags.DEFINE_integer("random_episodes", 20, "Random-agent baseline episodes (train_mf.py).")
flags.DEFINE_string("results_dir", "results", "Where results are written.")
flags.DEFINE_bool("rerun", False, "Train again even where a run's result.json exists.")

_TRAIN_MF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_mf.py")
_EPS = 1e-9


class EpisodeLog(NamedTuple):
    """Per training episode (1-based `episode`): its final cost and steps."""
    episode: List[int]
    final_cost: List[float]
    steps: List[int]


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
           f"--taso_budget={FLAGS.taso_budget}", f"--random_episodes={FLAGS.random_episodes}"]
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


def first_reaching(log: EpisodeLog, cost: float) -> Optional[Dict[str, int]]:
    """The first training episode whose final cost is at most `cost`, and the
    environment steps taken until it ended (None if none did)."""
    steps = 0
    for episode, final, n in zip(log.episode, log.final_cost, log.steps):
        steps += n
        if final <= cost + _EPS:
            return {"episode": episode, "interactions": steps}
    return None


def summarize_run(result: ModelFreeRun, log: EpisodeLog, last: int = 50) -> dict:
    """The figures of one run for the table; `last`: how many final training
    episodes the mean final cost is over (a less noisy view of where the
    sampling policy ended than the one greedy episode)."""
    initial = result.initial_cost_ms
    greedy = Baselines.from_json(result.baselines).greedy.cost_ms
    best = min(log.final_cost) if log.final_cost else float("nan")
    last_mean = float(np.mean(log.final_cost[-last:])) if log.final_cost else float("nan")
    return {
        "last_episodes": min(last, len(log.final_cost)), "last_mean_cost_ms": last_mean,
        "last_mean_change_pct": 100 * (last_mean / initial - 1),
        "cost_features": result.cost_features, "seed": result.seed,
        "agent_cost_ms": result.agent_cost_ms,
        "agent_change_pct": 100 * (result.agent_cost_ms / initial - 1),
        "best_training_cost_ms": result.best_training_cost_ms,
        "best_training_change_pct": 100 * (result.best_training_cost_ms / initial - 1),
        "steps_to_final_cost": result.steps_to_final_cost,
        "to_best": first_reaching(log, best),
        "to_greedy": first_reaching(log, greedy),
        "episodes": result.episodes, "interactions": result.interactions,
        "train_seconds": result.train_seconds,
        "wall_seconds": result.wall_seconds,
        "agent_applied": result.agent_applied,
    }


def _reach(r: Optional[Dict[str, int]]) -> str:
    return "never" if r is None else f"{r['episode']} ({r['interactions']})"


def command(graph: str) -> str:
    """The command that reproduces one graph's table."""
    return (f"python experiments/observation_ablation.py --graphs={graph} "
            f"--variants={','.join(FLAGS.variants)} --seeds={','.join(FLAGS.seeds)} "
            f"--episodes={FLAGS.episodes} --taso_budget={FLAGS.taso_budget} "
            f"--random_episodes={FLAGS.random_episodes}")


def markdown(graph: str, initial: float, baselines: Baselines, runs: Sequence[dict],
             episodes: int, cmd: str) -> str:
    """The per-graph table: one row per run, then the baselines."""
    lines = [f"# Observation ablation on {graph} (analytic cost, {episodes} episodes)", "",
             f"Initial cost {initial:.4f} ms. Command: `{cmd}`.", "",
             "| cost features | seed | agent (greedy) | change | best in training | "
             f"mean of last {runs[0]['last_episodes']} | steps to final cost | "
             "episode (steps) reaching best | episode (steps) reaching greedy's cost | "
             "train s | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        wall = "" if r["wall_seconds"] is None else f"{r['wall_seconds']:.0f}"
        lines.append(
            f"| {r['cost_features']} | {r['seed']} | {r['agent_cost_ms']:.4f} | "
            f"{r['agent_change_pct']:+.2f}% | {r['best_training_change_pct']:+.2f}% | "
            f"{r['last_mean_change_pct']:+.2f}% | {r['steps_to_final_cost']} | {_reach(r['to_best'])} | "
            f"{_reach(r['to_greedy'])} | {r['train_seconds']:.0f} | {wall} |")
    lines += ["", "Per variant, over seeds: the mean change of the greedy agent and of the "
              "last training episodes, and how many seeds reached one-step greedy's cost "
              "(greedy agent; any training episode).", "",
              "| cost features | seeds | agent (greedy), mean | last episodes, mean | "
              "agent at greedy's cost | training episode at greedy's cost |",
              "|---|---|---|---|---|---|"]
    greedy = baselines.greedy.cost_ms
    for variant in dict.fromkeys(r["cost_features"] for r in runs):
        rs = [r for r in runs if r["cost_features"] == variant]
        at_greedy = sum(r["agent_cost_ms"] <= greedy + _EPS for r in rs)
        lines.append(
            f"| {variant} | {len(rs)} | {np.mean([r['agent_change_pct'] for r in rs]):+.2f}% | "
            f"{np.mean([r['last_mean_change_pct'] for r in rs]):+.2f}% | "
            f"{at_greedy}/{len(rs)} | {sum(r['to_greedy'] is not None for r in rs)}/{len(rs)} |")
    lines += ["", "| baseline (full observation) | cost (ms) | change |", "|---|---|---|"]
    for name, result in (("greedy", baselines.greedy), ("taso", baselines.taso),
                         ("random", baselines.random)):
        if result:
            cost = result.cost_ms
            lines.append(f"| {name} | {cost:.4f} | {100 * (cost / initial - 1):+.2f}% |")
    return "\n".join(lines) + "\n"


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
                runs.append(summarize_run(result, read_episode_log(tb)))
        runs.sort(key=lambda r: (FLAGS.variants.index(r["cost_features"]), r["seed"]))
        # Greedy and TASO are deterministic; the random agent's mean is the
        # first run's (its seed).
        baselines = first.baselines
        out_dir = results_folder(FLAGS.results_dir, graph, "observation_ablation")
        table = markdown(graph, first.initial_cost_ms, Baselines.from_json(baselines), runs,
                         FLAGS.episodes, command(graph))
        save_result(out_dir, {"graph": graph, "episodes": FLAGS.episodes,
                              "command": command(graph),
                              "initial_cost_ms": first.initial_cost_ms,
                              "baselines": baselines, "runs": runs}, markdown=table)
        print(table)


if __name__ == "__main__":
    app.run(main)
