"""The reproduction report of experiments/reproduce.py: Tables 4.1-4.3 and
Figures 4.1-4.8 from the saved runs, with the thesis' figures beside ours.

`write_report` reads the result files that reproduce.py's runs left under
its results folder (`xflowrl.results.layout`), so a report can be rebuilt
from saved runs alone, and writes report.md, the figures and report.json:
a `ReproductionReport`, whose rows are the numbers of the runs' own result
files.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Optional, Sequence

from xflowrl.results.figures import write_figures
from xflowrl.results.layout import (
    SETTINGS,
    Setting,
    load_json,
    load_runs,
    load_seeds,
    load_sweep,
    setting_label,
    sweep_measured_changes,
)
from xflowrl.results.measurement import Measurement
from xflowrl.results.records import Record
from xflowrl.results.rows import GraphRow, graph_row
from xflowrl.results.runs import ModelBasedRun
from xflowrl.results.sweep import SweepResult
from xflowrl.results.tables import (
    summary_lines,
    table_4_1,
    table_4_2,
    table_4_3,
    table_agents,
    table_measured,
    table_separate,
    table_steps,
)

REPORT_MD = "report.md"
REPORT_JSON = "report.json"


@dataclasses.dataclass
class ReproductionReport(Record):
    """report.json: the run's description (`meta`: mode, budgets, machine,
    commit, seeds, wall time...), the settings, one row per setting and
    graph, Tables 4.1 and 4.3 as read, the sweep's measured changes, where
    the separate reward network ran, the figures' files and the summary."""

    SCHEMA = "reproduction_report"
    VERSION = 1

    meta: Dict[str, Any]
    settings: Dict[str, Setting]
    rows: Dict[str, Dict[str, GraphRow]]
    table_4_1: Optional[Dict[str, Any]]
    table_4_3: Dict[str, Optional[SweepResult]]   # as read (no schema keys of its own)
    table_4_3_measured_ort_cpu_change: Dict[str, List[Dict[str, Any]]]
    separate_reward_run: Dict[str, Dict[str, bool]]
    figures: Dict[str, str]
    summary: List[str]

    @classmethod
    def load_dir(cls, report_dir: str) -> "ReproductionReport":
        """The report.json in `report_dir`.

        Raises:
          FileNotFoundError: there is none.
        """
        path = os.path.join(report_dir, REPORT_JSON)
        report = cls.load(path)
        if report is None:
            raise FileNotFoundError(path)
        return report

    @property
    def seeds(self) -> List[int]:
        """The agents' seeds (one seed: [0])."""
        return list(self.meta.get("seeds", [0]))


def report_markdown(rows: Dict[str, Dict[str, GraphRow]], props: Optional[dict],
                    sweeps: Dict[str, Optional[SweepResult]],
                    sweeps_measured: Dict[str, Dict[float, List[float]]],
                    figures: Dict[str, str], results: str, settings: Sequence[str],
                    separate_graphs: Sequence[str], meta: dict, seeds: Sequence[int]) -> str:
    """report.md's text."""
    scale = meta.get("budget_scale", 1.0)
    parts = [f"# Reproduction of the thesis' Chapter 4 ({meta.get('mode', '?')} mode"
             + (f", agents' training budgets x{scale:g}" if scale != 1.0 else "") + ")\n",
             "Settings (each agent and search optimises the setting's estimated cost; every "
             "runtime is measured on this CPU):\n",
             "\n".join(f"- **{SETTINGS[s].label}**: {SETTINGS[s].what}" for s in settings),
             "\nTensorRT: not run (it needs an NVIDIA GPU; this machine has none).\n",
             f"Measured on {meta.get('machine', '?')}, {meta.get('date_utc', '?')} UTC "
             f"(shared with other jobs); "
             + (f"{meta.get('jobs', '?')} entry-point run(s) at a time"
                if not meta.get("ray_address") else
                f"entry points on the Ray cluster at {meta['ray_address']} "
                f"({len(meta.get('ray_nodes', []))} node(s) ran them)")
             + f"; project commit {meta.get('commit', '?')}. Rule set: the entry points' default (built-ins + generated)."
             + (f" Agents over {len(seeds)} seeds ({', '.join(map(str, seeds))}): median "
                "[min, max]." if len(seeds) > 1 else "") + "\n",
             *_partial_lines(meta.get("partial")),
             "## Summary\n", "\n".join(summary_lines(rows)) + "\n",
             "## Table 4.1: graph properties\n", table_4_1(props, rows)]
    for s in settings:
        parts += [f"## Agents and baselines, {setting_label(s)} (Figures 4.3, 4.5)\n",
                  table_agents(rows[s]),
                  f"## Measured runtimes, optimised under {setting_label(s)} (Figures 4.1, 4.3, "
                  "4.5)\n", table_measured(rows[s]),
                  f"## Table 4.2, {setting_label(s)}\n", table_4_2(props, rows[s]),
                  f"## Real environment steps and wall times, {setting_label(s)}\n",
                  table_steps(rows[s])]
        if separate_graphs:  # --separate_reward_graphs='' runs none: no empty table
            parts += [f"## Separate reward network, {setting_label(s)}\n",
                      table_separate(results, s, separate_graphs, rows[s], seeds)]
    for s, sweep in sweeps.items():
        parts += [f"## Table 4.3: temperature sweep, {setting_label(s)}\n",
                  table_4_3(sweep, s, sweeps_measured[s])]
    parts += ["## Figures\n",
              "\n".join(f"![{k}]({os.path.basename(p)})" for k, p in figures.items()) + "\n",
              f"Mode {meta.get('mode')}; " + (
                  "a partial report of a run still going or stopped: no wall time yet.\n"
                  if meta.get("partial") else
                  f"wall time {meta.get('wall_seconds', 0):.0f} s "
                  "(runs reused from earlier invocations count 0).\n")]
    return "\n".join(parts)


def _partial_lines(partial: Optional[Dict[str, Any]]) -> List[str]:
    """What a partial report (reproduce.py --report_only) lacks."""
    if not partial:
        return []
    unfinished = partial.get("unfinished", [])
    left_out = partial.get("graphs_left_out", [])
    return [f"**A partial report**: {partial.get('finished_jobs', '?')} of "
            f"{partial.get('jobs', '?')} runs had finished. Each cell holds the seeds "
            "finished so far (the note under each agents table says over how many)"
            + (f"; left out for lack of finished runs: {', '.join(left_out)}" if left_out
               else "")
            + ". Not finished: " + (", ".join(unfinished) or "none") + ".\n"]


def write_report(results: str, out_dir: str, graphs: Sequence[str], settings: Sequence[str],
                 separate_graphs: Sequence[str], sweep_graph: str,
                 sweep_settings: Sequence[str], meta: dict,
                 seeds: Sequence[int] = (0,)) -> str:
    """Reads the runs under `results` and writes report.md, report.json and
    the figures to `out_dir`; returns `out_dir`. `seeds`: the agents' seeds,
    the first's runs where a one-seed run writes them (`seed_root`)."""
    os.makedirs(out_dir, exist_ok=True)
    runs = {s: {g: load_runs(os.path.join(results, s), g, seeds) for g in graphs}
            for s in settings}
    rows = {s: {g: graph_row(s, g, r) for g, r in by_graph.items()}
            for s, by_graph in runs.items()}
    props = load_json(os.path.join(results, "graph_properties", "table_4_1.json"))
    sweeps = {s: load_sweep(results, s, sweep_graph)
              for s in (sweep_settings if sweep_graph else [])}
    sweeps_measured = {s: sweep_measured_changes(
        Measurement.load(os.path.join(results, s, sweep_graph, "measured", "result.json")))
                       for s in sweeps}
    figures = write_figures(runs, rows, out_dir)
    text = report_markdown(rows, props, sweeps, sweeps_measured, figures, results, settings,
                           separate_graphs, meta, seeds)
    with open(os.path.join(out_dir, REPORT_MD), "w") as f:
        f.write(text)
    separate = {s: {g: bool(load_seeds(os.path.join(results, s), seeds, ModelBasedRun,
                                       "separate_reward", g, "train_mb", "result.json"))
                    for g in separate_graphs} for s in settings}
    ReproductionReport(
        meta=meta, settings={s: SETTINGS[s] for s in settings}, rows=rows, table_4_1=props,
        table_4_3=sweeps,
        table_4_3_measured_ort_cpu_change={
            s: [{"temperature": t, "per_seed": v} for t, v in m.items()]
            for s, m in sweeps_measured.items()},
        separate_reward_run=separate,
        figures={k: os.path.basename(p) for k, p in figures.items()},
        summary=summary_lines(rows)).save(os.path.join(out_dir, REPORT_JSON), indent=1)
    return out_dir
