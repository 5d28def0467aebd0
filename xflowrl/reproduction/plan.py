"""The entry-point runs of the reproduction, as jobs (`xflowrl.ray_jobs.Job`).

`Plan` is one invocation of experiments/reproduce.py: its graphs, cost
settings, seeds, budget and folders. `all_jobs(plan)` lists every
entry-point run it starts, in the order they start: the shared ones
(`graph_properties.py`, Table 4.1; `temperature_sweep.py` under each sweep
setting, Table 4.3), then per setting (`setting_jobs`) `baselines.py` and,
per seed, `train_mf.py` and `train_mb.py` on each graph (longest first) and
`train_mb.py --reward_model=separate` on the separate-reward graphs, the
settings interleaved. A job's flags, not the interpreter's path, decide its
reuse. `reportable_graphs` names the graphs a report can show from the
finished jobs.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import List, Optional, Sequence

from xflowrl.ray_jobs import Job
from xflowrl.reproduction.budgets import Budget
from xflowrl.results import layout
from xflowrl.results.layout import SETTINGS, Setting

# Longest first, so that two workers finish together.
ORDER = ("inception_v3", "resnet50", "squeezenet1_1", "resnet18", "vit", "bert")


@dataclasses.dataclass(frozen=True)
class Plan:
    """One reproduction: what it runs and where.

    Attributes:
      mode: the budget's name (quick, full, thesis); budget: its budgets,
        scaled by `budget_scale` (`budgets.scaled`).
      graphs: the zoo graphs; settings: the cost settings' keys
        (`layout.SETTINGS`).
      seed: every run's seed and the agents' first; seeds: the agents' seeds.
      results_dir: where the runs are written (<results_dir>/<setting>/...).
      separate_reward_graphs: graphs where train_mb also runs with the
        separate reward network.
      sweep_graph: the temperature sweep's graph ('' for none);
        sweep_settings: the settings it runs under.
      cpus_per_job: CPUs each entry-point run reserves.
      scripts_dir: the folder of the entry points (experiments/).
      python: the interpreter that runs them.
    """
    mode: str
    budget: Budget
    budget_scale: float
    graphs: Sequence[str]
    settings: Sequence[str]
    seed: int
    seeds: Sequence[int]
    results_dir: str
    separate_reward_graphs: Sequence[str]
    sweep_graph: str
    sweep_settings: Sequence[str]
    cpus_per_job: float
    scripts_dir: str
    python: str = sys.executable


def job(plan: Plan, name: str, script: str, flags_: List[str], out_dir: str,
        result_file: str = "result.json", num_cpus: Optional[float] = None) -> Job:
    """An entry point of `plan.scripts_dir` as a job reserving `num_cpus`
    (None: `plan.cpus_per_job`); its flags, not the interpreter's path,
    decide reuse."""
    return Job(name, (plan.python, os.path.join(plan.scripts_dir, script), *flags_), out_dir,
               result_file=result_file,
               num_cpus=plan.cpus_per_job if num_cpus is None else num_cpus,
               key=tuple(flags_))


def env_flags(setting: Setting, results_dir: str, seed: int) -> List[str]:
    """The flags naming a run's cost setting, folder and seed."""
    return [f"--cost_model={setting.cost_model}", f"--profile={setting.profile}",
            f"--results_dir={results_dir}", f"--seed={seed}"]


def setting_jobs(plan: Plan, setting: Setting) -> List[Job]:
    """baselines, and per seed train_mf, train_mb (and the separate reward
    network) of one setting."""
    b, seeds = plan.budget, list(plan.seeds)
    root = os.path.join(plan.results_dir, setting.key)
    # baselines.py: its searches and traces are used; the timing is the
    # measure step's (all variants interleaved), so it times once, cheaply.
    jobs = [job(plan, f"{setting.key}/baselines", "baselines.py",
                env_flags(setting, root, plan.seed) + [
                    f"--graphs={','.join(plan.graphs)}", f"--taso_budget={b.taso_budget}",
                    f"--taso_budget_for={b.taso_budget_for}",
                    f"--eqsat_time_limit={b.eqsat_time_limit:g}", "--runtimes=ort",
                    "--rounds=1", "--warmup=0", "--repeats=1"],
                os.path.join(root, "baselines"), "baselines.json")]
    ordered = sorted(plan.graphs, key=lambda g: ORDER.index(g) if g in ORDER else -1)
    for seed in seeds:
        seed_dir = layout.seed_root(root, seeds, seed)
        suffix = "" if seed == seeds[0] else f" seed {seed}"
        # --max_steps is a floor: the agents raise it to greedy's budget themselves.
        agent = env_flags(setting, seed_dir, seed) + [
            f"--max_steps={b.max_steps}", "--taso_budget=0", "--eqsat_time_limit=0",
            f"--random_episodes={b.random_episodes}"]
        mb = agent + [f"--rounds={b.mb_rounds}",
                      f"--episodes_per_round={b.mb_episodes_per_round}",
                      f"--train_steps_per_round={b.mb_train_steps}",
                      f"--encoder_steps={b.mb_encoder_steps}",
                      f"--dream_episodes={b.mb_dream_episodes}", "--measure_rounds=0",
                      f"--eval_episodes={b.mb_eval_episodes}",
                      # Chapter 4's tables show the dream-trained controller;
                      # the world-model planner beside it is the main job's.
                      "--noplan_with_model"]
        for g in ordered:
            jobs.append(job(plan, f"{setting.key}/{g}/train_mf{suffix}", "train_mf.py",
                            agent + [f"--graph={g}", f"--episodes={b.mf_episodes}"],
                            os.path.join(seed_dir, g, "train_mf")))
            jobs.append(job(plan, f"{setting.key}/{g}/train_mb{suffix}", "train_mb.py",
                            mb + [f"--graph={g}"], os.path.join(seed_dir, g, "train_mb")))
        for g in plan.separate_reward_graphs:
            sep_root = os.path.join(seed_dir, "separate_reward")
            flags_ = [f if not f.startswith("--results_dir=") else f"--results_dir={sep_root}"
                      for f in mb]
            jobs.append(job(plan, f"{setting.key}/{g}/train_mb separate{suffix}", "train_mb.py",
                            flags_ + [f"--graph={g}", "--reward_model=separate"],
                            os.path.join(sep_root, g, "train_mb")))
    return jobs


def shared_jobs(plan: Plan) -> List[Job]:
    """Table 4.1 (graph properties) and Table 4.3 (temperature sweep)."""
    b = plan.budget
    cpu = SETTINGS["cpu"]
    props_dir = os.path.join(plan.results_dir, "graph_properties")
    jobs = [job(plan, "graph_properties", "graph_properties.py",
                [f"--graphs={','.join(plan.graphs)}", f"--cost_model={cpu.cost_model}",
                 f"--profile={cpu.profile}", f"--repeats={b.props_repeats}",
                 f"--warmup={max(1, min(3, b.props_repeats))}", f"--seed={plan.seed}",
                 f"--output_dir={props_dir}"], props_dir, "table_4_1.json")]
    for key in plan.sweep_settings if plan.sweep_graph else []:
        setting = SETTINGS[key]
        root = os.path.join(plan.results_dir, layout.sweep_folder(key))
        # The script's default profile is cpu: only other profiles are named.
        profile = [f"--profile={setting.profile}"] if setting.profile != "cpu" else []
        # The sweep runs its seeds as tasks of this cluster (it joins it
        # through $RAY_ADDRESS): it reserves no CPU itself while it waits.
        jobs.append(job(plan, f"temperature_sweep {key}", "temperature_sweep.py",
                        [f"--graph={plan.sweep_graph}", f"--cost_model={setting.cost_model}"]
                        + profile + [
                         f"--seeds={b.sweep_seeds}",
                         f"--temperatures={b.sweep_temperatures}",
                         f"--max_steps={b.max_steps}", f"--rounds={b.sweep_rounds}",
                         f"--episodes_per_round={b.sweep_episodes_per_round}",
                         f"--train_steps_per_round={b.mb_train_steps}",
                         f"--encoder_steps={b.mb_encoder_steps}",
                         f"--dream_episodes={b.sweep_dream_episodes}",
                         f"--results_dir={root}"],
                        os.path.join(root, plan.sweep_graph, "temperature_sweep"),
                        num_cpus=0))
    return jobs


def all_jobs(plan: Plan) -> List[Job]:
    """Every entry-point run of the invocation, in the order they start."""
    jobs = shared_jobs(plan)
    per_setting = [setting_jobs(plan, SETTINGS[k]) for k in plan.settings]
    # Interleave the settings, so the long graphs of both run first.
    for i in range(max(len(j) for j in per_setting)):
        jobs += [j[i] for j in per_setting if i < len(j)]
    return jobs


def reportable_graphs(plan: Plan, finished: Sequence[str]) -> List[str]:
    """The graphs of the plan whose every setting has a finished baseline
    run and, for each agent, a finished run in at least one seed (`finished`:
    the finished jobs' names)."""
    done = {name.split(" seed ")[0] for name in finished}
    return [g for g in plan.graphs
            if all(f"{k}/baselines" in done and f"{k}/{g}/train_mf" in done
                   and f"{k}/{g}/train_mb" in done for k in plan.settings)]
