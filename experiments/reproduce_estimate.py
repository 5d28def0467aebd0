"""Estimates reproduce.py's wall time at a budget from a quick and a full run.

    python experiments/reproduce_estimate.py --quick_dir=results/reproduce_quick \
        --full_dir=results/reproduce --budget=thesis --nodes=1,2,4,8

Nothing runs: this reads two finished reproduce.py results folders of the
same graphs and settings (one at --budget=quick, one at --budget=full,
`--budget_scale=1`) and extrapolates each entry point's wall time linearly
in its training budget:

- model-free: seconds per training episode = the *marginal* rate between
  the two runs, (train seconds full - quick) / (episodes full - quick),
  which cancels the fixed costs (TensorFlow import and tracing, the
  environment, the baselines inside the run); the run's fixed part = its
  full-mode job time - rate x its episodes;
- model-based: the same for the world model's phase (its rounds: collection
  and training, `world_model/state.json` seconds) per collected episode,
  and for the controller's dream (the rest of the training) per imagined
  episode; the full mode trains 5 world-model steps per collected episode,
  as the thesis budget does (the quick mode 2.5, so the marginal rate is
  one of about 5.4 steps per episode);
- the temperature sweep's seeds: one world model and one controller per
  temperature each, at the model-based agent's rates on the sweep's graph
  and setting (its world model is collected at random, the agent's mostly
  by its controller: a rough stand-in); the separate reward network: the
  model-based agent's rates;
- baselines, graph properties and the measure step: as in the full run
  (the thesis budget keeps their budgets).

The wall time on N nodes of --cpus_per_node CPUs (one entry point per CPU,
as reproduce.py runs them) is the longest-job-first schedule of those job
times over N x CPUs slots, plus the measure step, which runs in the driver
after the jobs. It is an estimate: the rates are of one run on a machine
shared with other jobs, the quick mode's shorter step limits (10
against 50 as a floor) make the marginal rates of some graphs high, and
replay makes late world-model rounds dearer than early ones.
"""

from __future__ import annotations

import heapq
import os
from typing import Dict, NamedTuple, Sequence, Tuple

from absl import app, flags

from xflowrl.reproduction.budgets import BUDGETS, Budget, scaled
from xflowrl.results import ModelBasedRun, ModelFreeRun, ReproductionReport, WorldModelState
from xflowrl.results.thesis import THESIS_GRAPHS

FLAGS = flags.FLAGS
flags.DEFINE_string("quick_dir", None, "A results folder of reproduce.py --budget=quick.")
flags.DEFINE_string("full_dir", None, "A results folder of reproduce.py --budget=full, of the "
                    "same graphs and settings.")
flags.DEFINE_enum("budget", "thesis", list(BUDGETS), "The budget to estimate.")
flags.DEFINE_float("budget_scale", 1.0, "As reproduce.py's (to check an estimate against a "
                   "scaled run).")
flags.DEFINE_bool("list_jobs", False, "Also list every job's estimated seconds.")
flags.DEFINE_list("graphs", list(THESIS_GRAPHS), "Graphs of both runs.")
flags.DEFINE_list("separate_reward_graphs", ["bert"], "As reproduce.py's.")
flags.DEFINE_string("sweep_graph", "bert", "As reproduce.py's ('' for none).")
flags.DEFINE_list("sweep_settings", ["cpu", "gpu"], "As reproduce.py's.")
flags.DEFINE_list("nodes", ["1", "2", "4", "8"], "Node counts to estimate.")
flags.DEFINE_integer("cpus_per_node", 2, "Entry points at a time per node.")


class Times(NamedTuple):
    """What one results folder says about one graph under one setting."""
    mf_job: float          # the train_mf job's wall seconds
    mf_train: float        # its training seconds
    mf_episodes: int
    mb_job: float
    mb_world_model: float  # the world model's rounds: collection and training
    mb_dream: float        # the controller's training in the dream (and its evaluations)
    mb_episodes: int       # collected episodes (rounds x episodes per round)
    mb_dream_episodes: int


class Rates(NamedTuple):
    """Seconds per unit of budget, and the fixed seconds of a job."""
    mf_per_episode: float
    mf_fixed: float
    wm_per_episode: float
    dream_per_episode: float
    mb_fixed: float


def load_times(results: str, setting: str, graph: str) -> Times:
    """The seconds of `graph`'s agents under `setting` in a results folder."""
    steps = ReproductionReport.load_dir(os.path.join(results, "report")).meta["step_seconds"]
    mf = ModelFreeRun.load(os.path.join(results, setting, graph, "train_mf", "result.json"))
    mb_dir = os.path.join(results, setting, graph, "train_mb")
    mb = ModelBasedRun.load(os.path.join(mb_dir, "result.json"))
    # The world model's training state (xflowrl.world_model.ModelBasedAgent).
    state = WorldModelState.load(os.path.join(mb_dir, "world_model", "state.json"))
    if mf is None or mb is None or state is None:
        raise FileNotFoundError(f"{results}: no agents' runs of {graph} under {setting}")
    world_model = state.seconds
    config = mb.world_model.config
    return Times(steps[f"{setting}/{graph}/train_mf"], mf.train_seconds, mf.episodes,
                 steps[f"{setting}/{graph}/train_mb"], world_model,
                 mb.seconds.world_model - world_model + mb.seconds.controller,
                 config["rounds"] * config["episodes_per_round"], mb.dream_episodes)


def _marginal(full: float, quick: float, n_full: int, n_quick: int) -> float:
    """(full - quick) / (n_full - n_quick); the full run's mean where noise
    makes that negative."""
    rate = (full - quick) / max(n_full - n_quick, 1)
    return rate if rate > 0 else full / max(n_full, 1)


def rates(quick: Times, full: Times) -> Rates:
    """The marginal rates between a quick and a full run (module docstring)."""
    mf = _marginal(full.mf_train, quick.mf_train, full.mf_episodes, quick.mf_episodes)
    wm = _marginal(full.mb_world_model, quick.mb_world_model, full.mb_episodes,
                   quick.mb_episodes)
    dream = _marginal(full.mb_dream, quick.mb_dream, full.mb_dream_episodes,
                      quick.mb_dream_episodes)
    return Rates(mf, max(0.0, full.mf_job - mf * full.mf_episodes), wm, dream,
                 max(0.0, full.mb_job - wm * full.mb_episodes - dream * full.mb_dream_episodes))


def mb_seconds(r: Rates, episodes: int, dream_episodes: int) -> float:
    return r.mb_fixed + r.wm_per_episode * episodes + r.dream_per_episode * dream_episodes


def budget_jobs(cells: Dict[Tuple[str, str], Rates], full_steps: Dict[str, float], b: Budget,
                separate_graphs: Sequence[str], sweep_graph: str,
                sweep_settings: Sequence[str]) -> Dict[str, float]:
    """Estimated seconds of every job of reproduce.py at budget `b`, by the
    job's name (a temperature sweep by seed); `cells` by (setting, graph)."""
    jobs = {name: s for name, s in full_steps.items()
            if name == "graph_properties" or name.endswith("/baselines")}
    for (setting, graph), r in cells.items():
        jobs[f"{setting}/{graph}/train_mf"] = r.mf_fixed + r.mf_per_episode * b.mf_episodes
        mb = mb_seconds(r, b.mb_rounds * b.mb_episodes_per_round, b.mb_dream_episodes)
        jobs[f"{setting}/{graph}/train_mb"] = mb
        if graph in separate_graphs:
            jobs[f"{setting}/{graph}/train_mb separate"] = mb
    temperatures = len(b.sweep_temperatures.split(","))
    for setting in sweep_settings if sweep_graph else []:
        r = cells[(setting, sweep_graph)]
        for seed in range(b.sweep_seeds):
            jobs[f"temperature_sweep {setting} seed {seed}"] = mb_seconds(
                r, b.sweep_rounds * b.sweep_episodes_per_round,
                temperatures * b.sweep_dream_episodes)
    return jobs


def makespan(seconds: Sequence[float], slots: int) -> float:
    """The longest-job-first schedule's length of `seconds` on `slots`."""
    finish = [0.0] * max(1, slots)
    for s in sorted(seconds, reverse=True):
        heapq.heapreplace(finish, finish[0] + s)
    return max(finish)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def main(argv):
    del argv
    if not FLAGS.quick_dir or not FLAGS.full_dir:
        raise app.UsageError("--quick_dir and --full_dir name the two runs")
    b = scaled(BUDGETS[FLAGS.budget], FLAGS.budget_scale)
    full = ReproductionReport.load_dir(os.path.join(FLAGS.full_dir, "report"))
    full_meta, settings = full.meta, list(full.rows)
    cells, lines = {}, ["| setting | graph | MF s/episode | MF fixed s | WM s/episode | "
                        "dream s/episode | MB fixed s | MF job | MB job |",
                        "|---|---|---|---|---|---|---|---|---|"]
    for setting in settings:
        for graph in FLAGS.graphs:
            r = rates(load_times(FLAGS.quick_dir, setting, graph),
                      load_times(FLAGS.full_dir, setting, graph))
            cells[(setting, graph)] = r
    jobs = budget_jobs(cells, full_meta["step_seconds"], b, FLAGS.separate_reward_graphs,
                       FLAGS.sweep_graph, [s for s in FLAGS.sweep_settings if s in settings])
    for (setting, graph), r in cells.items():
        lines.append(f"| {setting} | {graph} | {r.mf_per_episode:.2f} | {r.mf_fixed:.0f} | "
                     f"{r.wm_per_episode:.2f} | {r.dream_per_episode:.3f} | {r.mb_fixed:.0f} | "
                     f"{_hours(jobs[f'{setting}/{graph}/train_mf'])} | "
                     f"{_hours(jobs[f'{setting}/{graph}/train_mb'])} |")
    measure = sum(s for name, s in full_meta["step_seconds"].items()
                  if name.endswith("/measure"))
    total = sum(jobs.values())
    longest = max(jobs, key=jobs.get)
    out = ["\n".join(lines), "",
           f"{len(jobs)} jobs at --budget={FLAGS.budget}: {total / 3600:.1f} CPU-hours of "
           f"entry points (one CPU each); the longest, {longest}, "
           f"{_hours(jobs[longest])}; the measure step {_hours(measure)} after them.", "",
           "| nodes | CPUs | estimated wall time |", "|---|---|---|"]
    for n in (int(n) for n in FLAGS.nodes):
        slots = n * FLAGS.cpus_per_node
        out.append(f"| {n} | {slots} | {_hours(makespan(list(jobs.values()), slots) + measure)}"
                   " |")
    if FLAGS.list_jobs:
        out += ["", "| job | estimated s |", "|---|---|"] + [
            f"| {name} | {s:.0f} |" for name, s in sorted(jobs.items())]
    print("\n".join(out))


if __name__ == "__main__":
    app.run(main)
