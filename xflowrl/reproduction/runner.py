"""The reproduction from plan to report.

`reproduce(plan, options, command)` starts every entry-point run of the plan as Ray tasks
(`xflowrl.ray_jobs.run_jobs`; `Options` says where and how often to retry),
then the measure step on every graph and setting
(`measure_step.measure`), then writes the report (`xflowrl.results.
write_report`) with what it ran on: the machine, the commit (and whether
the tree had local changes), the command, the budgets, each step's seconds
and where each job started. `report_so_far(plan, options, command)` starts nothing: the
report of the jobs finished so far, the graphs without a finished cell
left out (`plan.reportable_graphs`).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import time
from typing import Dict, List, Sequence

from xflowrl.ray_jobs import job_state, run_jobs
from xflowrl.reproduction.measure_step import measure
from xflowrl.reproduction.plan import Plan, all_jobs, reportable_graphs
from xflowrl.results.layout import SETTINGS
from xflowrl.results.report import write_report


@dataclasses.dataclass(frozen=True)
class Options:
    """How the jobs run.

    Attributes:
      jobs: CPUs of the local Ray instance (without `ray_address`).
      ray_address: a Ray cluster's address ('' for a local instance).
      rerun: ignore saved runs and measurements.
      retries: reruns of an entry point that exits with an error.
      max_retries: reruns of one whose Ray worker or node was lost.
      report_dir: where the report goes ('' for <results_dir>/report, or
        <results_dir>/report_partial for `report_so_far`).
    """
    jobs: int = 2
    ray_address: str = ""
    rerun: bool = False
    retries: int = 1
    max_retries: int = 3
    report_dir: str = ""


class NothingToReport(Exception):
    """No graph has the finished runs a report needs."""


def machine() -> str:
    """The CPU model and core count (lscpu), for the report."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return (f"{fields.get('Model name', '?').strip()}, {fields.get('CPU(s)', '?').strip()} "
            f"CPU(s)")


def command_line(argv: Sequence[str]) -> str:
    """An invocation as a command, for the report (and the report file
    `experiments/publish_results.py` writes from it)."""
    return " ".join(["python", *(shlex.quote(a) for a in argv)])


def commit(path: str) -> str:
    """The git commit of the checkout at `path`, "+local changes" when its
    tree differs."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=path, capture_output=True, text=True,
                              check=False).stdout.strip()
    head = git("rev-parse", "--short=10", "HEAD") or "unknown"
    return head + (" +local changes" if git("status", "--porcelain", "--untracked-files=no")
                   else "")


def _local_jobs(plan: Plan, options: Options) -> int:
    """Entry-point runs at a time on the local Ray instance."""
    return max(1, int(options.jobs // plan.cpus_per_job))


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime())


def reproduce(plan: Plan, options: Options, command: str) -> str:
    """Every job, the measure step and the report (see the module
    docstring); returns the report's folder. `command` is recorded."""
    start = time.time()
    steps: Dict[str, float] = {}
    runs = run_jobs(all_jobs(plan), address=options.ray_address, num_cpus=options.jobs,
                    rerun=options.rerun, retries=options.retries, retry_delay=30.0,
                    max_retries=options.max_retries)
    steps.update({name: r["seconds"] for name, r in runs.items()})
    for key in plan.settings:
        for g in plan.graphs:
            t = time.time()
            measure(plan, SETTINGS[key], g, options.rerun)
            steps[f"{key}/{g}/measure"] = time.time() - t
    report_dir = options.report_dir or os.path.join(plan.results_dir, "report")
    nodes = sorted({s["node_id"] or s["host"] for r in runs.values() for s in r["starts"]})
    meta = {"mode": plan.mode, "budget_scale": plan.budget_scale, "seeds": list(plan.seeds),
            "machine": machine(),
            "jobs": _local_jobs(plan, options) if not options.ray_address else None,
            "ray_address": options.ray_address or None, "ray_nodes": nodes,
            "commit": commit(plan.scripts_dir), "command": command, "date_utc": _now(),
            "budget": dataclasses.asdict(plan.budget), "step_seconds": steps,
            # per run: how often it started, where, and whether a start
            # resumed a lost one
            "job_starts": {n: r["starts"] for n, r in runs.items() if r["starts"]},
            "wall_seconds": time.time() - start}
    return write_report(plan.results_dir, report_dir, list(plan.graphs), list(plan.settings),
                        list(plan.separate_reward_graphs), plan.sweep_graph,
                        list(plan.sweep_settings), meta=meta, seeds=list(plan.seeds))


@dataclasses.dataclass
class PartialReport:
    """What `report_so_far` wrote: the folder, the graphs it shows and
    those it left out, and the jobs finished of all."""
    folder: str
    graphs: List[str]
    left_out: List[str]
    finished: int
    jobs: int


def report_so_far(plan: Plan, options: Options, command: str) -> PartialReport:
    """The report of the finished runs, nothing started.

    Raises:
      NothingToReport: no graph has finished runs of both agents and the
        baselines in every setting yet.
    """
    jobs = all_jobs(plan)
    state = {j.name: job_state(j) for j in jobs}
    finished = [n for n, s in state.items() if s == "finished"]
    unfinished = [n for n, s in state.items() if s != "finished"]
    graphs = reportable_graphs(plan, finished)
    if not graphs:
        raise NothingToReport(
            f"no graph has finished runs of both agents and the baselines in every setting "
            f"under {plan.results_dir} yet ({len(finished)} of {len(jobs)} jobs finished; a "
            f"run counts only under the flags it was started with, --results_dir spelled "
            f"the same)")
    sweep = plan.sweep_graph if all(
        state.get(f"temperature_sweep {k}") == "finished" for k in plan.sweep_settings) else ""
    report_dir = options.report_dir or os.path.join(plan.results_dir, "report_partial")
    left_out = [g for g in plan.graphs if g not in graphs]
    meta = {"mode": plan.mode, "budget_scale": plan.budget_scale, "seeds": list(plan.seeds),
            "machine": machine(), "commit": commit(plan.scripts_dir), "command": command,
            "jobs": _local_jobs(plan, options), "date_utc": _now(),
            "budget": dataclasses.asdict(plan.budget),
            "partial": {"finished_jobs": len(finished), "jobs": len(jobs),
                        "unfinished": unfinished, "graphs_left_out": left_out}}
    out = write_report(plan.results_dir, report_dir, graphs, list(plan.settings),
                       [g for g in plan.separate_reward_graphs if g in graphs], sweep,
                       list(plan.sweep_settings), meta=meta, seeds=list(plan.seeds))
    return PartialReport(out, graphs, left_out, len(finished), len(jobs))
