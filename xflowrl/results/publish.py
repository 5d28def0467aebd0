"""Publishing a reproduction report into the README.

The README's "Results" section shows a full run: `publish` replaces the
part of README.md between the markers

    <!-- reproduce-report:begin -->
    <!-- reproduce-report:end -->

with the report's run line and tables (report.md from "## Summary" up to its
figure list, headings moved down to the README's level) and copies the
figures the README shows into docs/figures/. `publish_agents` fills the
agents block (both agents against the baselines, per graph) and
`publish_scaled` the block of a run at scaled training budgets beside the
base run; `measured_spread` says how the measured changes moved between two
runs of the same graphs. The discussion around the markers is the README's
own prose: reread it against the new tables.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Any, Dict, Optional, Sequence

from xflowrl.results.figures import FIGURES
from xflowrl.results.layout import pct
from xflowrl.results.report import REPORT_MD, ReproductionReport
from xflowrl.results.rows import GraphRow
from xflowrl.results.tables import change, change_over_seeds

BEGIN = "<!-- reproduce-report:begin -->"
END = "<!-- reproduce-report:end -->"
AGENTS_BEGIN = "<!-- reproduce-agents:begin -->"
AGENTS_END = "<!-- reproduce-agents:end -->"
SCALED_BEGIN = "<!-- reproduce-scaled:begin -->"
SCALED_END = "<!-- reproduce-scaled:end -->"
# The figures the README shows.
README_FIGURES = tuple(FIGURES[k] for k in ("fig4_1", "fig4_5", "fig4_6", "fig4_8"))


def report_block(report_md: str) -> str:
    """The README's block from a report.md: its "Measured on ..." line, then
    every section from "## Summary" up to "## Figures", with "##" headings
    made "####" (the README's Results section is "##", its parts "###")."""
    start = report_md.find("## Summary")
    stop = report_md.find("## Figures")
    if start < 0 or stop < start:
        raise ValueError("not a reproduce.py report: no '## Summary' ... '## Figures'")
    run_line = next((line for line in report_md.splitlines()
                     if line.startswith("Measured on ")), "")
    body = re.sub(r"^## ", "#### ", report_md[start:stop].rstrip() + "\n", flags=re.M)
    return (run_line + "\n\n" if run_line else "") + body


def splice(readme: str, block: str, begin: str = BEGIN, end: str = END) -> str:
    """`readme` with the text between `begin` and `end` replaced by `block`."""
    head, sep, rest = readme.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise ValueError(f"the README has no {begin} ... {end} block")
    return f"{head}{begin}\n\n{block.strip()}\n\n{end}{tail}"


def _ort(row: GraphRow, variant: str) -> Optional[float]:
    return row.measured.get(variant, {}).get("ort/cpu")


def _measured(row: GraphRow, variant: str) -> str:
    """The measured ort/cpu change of a variant against the original."""
    return change(_ort(row, variant), _ort(row, "original"))


def scaled_block(base: ReproductionReport, scaled: ReproductionReport) -> str:
    """The agents of two reports side by side: the same graphs and settings
    at the base budgets and at `--budget_scale` times the agents' training.
    Estimated changes against the initial graph, beside greedy, TASO and the
    random agent, whether each agent beats, matches or trails greedy, and
    the scaled agents' measured ort/cpu change."""
    k = scaled.meta.get("budget_scale", 1.0)
    budget = {name: (base.meta["budget"][name], scaled.meta["budget"][name])
              for name in ("mf_episodes", "mb_episodes_per_round", "mb_dream_episodes")}
    lines = [f"Agents' training budgets x{k:g} (model-free episodes "
             "{} -> {}, world-model episodes per round {} -> {}, imagined episodes "
             "{} -> {}); ".format(*budget["mf_episodes"], *budget["mb_episodes_per_round"],
                                  *budget["mb_dream_episodes"])
             + f"run at commit {scaled.meta.get('commit', '?')}, "
             f"{scaled.meta.get('date_utc', '?')} UTC, "
             f"{scaled.meta.get('wall_seconds', 0) / 60:.0f} min. Estimated change "
             "against the initial graph (negative: faster), same seed, same cost model per "
             f"setting; measured = the x{k:g} agent's graph in onnxruntime on this CPU "
             "(ort/cpu), against the original timed in the same run.\n",
             f"| setting | graph | greedy | TASO | random | model-free | model-free x{k:g} "
             f"(measured) | model-based | model-based x{k:g} (measured) | MB real steps "
             f"(x{k:g}) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for setting, rows in scaled.rows.items():
        for graph, r in rows.items():
            b = base.rows.get(setting, {}).get(graph)
            if not b:
                continue
            init = r.initial_ms
            lines.append(
                f"| {setting} | {graph} | {change(r.greedy_ms, init)} | "
                f"{change(r.taso_ms, init)} | {change(r.random_ms, init)} | "
                f"{change(b.mf_ms, init)} ({b.mf_vs_greedy}) | "
                f"{change(r.mf_ms, init)} ({r.mf_vs_greedy}; "
                f"{_measured(r, 'model-free')}) | "
                f"{change(b.mb_ms, init)} ({b.mb_vs_greedy}) | "
                f"{change(r.mb_ms, init)} ({r.mb_vs_greedy}; "
                f"{_measured(r, 'model-based')}) | "
                f"{b.mb_real_steps} ({r.mb_real_steps}) |")
    return "\n".join(lines) + "\n"


def agents_block(run: ReproductionReport) -> str:
    """The agents of one report against the baselines, per setting and
    graph: estimated changes against the initial graph (greedy with its
    steps, TASO, the random agent, both agents and whether each beats,
    matches or trails greedy, and whether the model-based agent is within 1
    point of greedy), the agents' real environment steps, and the measured
    ort/cpu change of greedy's and the model-based agent's graphs."""
    meta = run.meta
    seeds = run.seeds
    over = ("one seed" if len(seeds) < 2 else
            f"{len(seeds)} seeds ({', '.join(map(str, seeds))}): an agent's change is the "
            "median [min, max] over seeds, called better or worse than greedy only where "
            "greedy lies outside that range, its steps and measured graph the median seed's")
    lines = [f"Run at commit {meta.get('commit', '?')}, {meta.get('date_utc', '?')} UTC, "
             f"{meta.get('wall_seconds', 0) / 60:.0f} min, {over}. Estimated change against "
             "the initial graph (negative: faster) under the setting's cost model; measured "
             "= the graph in onnxruntime on this CPU (ort/cpu) against the original timed in "
             "the same run; MB within 1 = the model-based agent (median) is no more than 1 "
             "point of the initial cost above greedy.\n",
             "| setting | graph | greedy (steps) | TASO | random | model-free | model-based | "
             "MB within 1 | real steps MF (to final) / MB | measured greedy / MB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for setting, rows in run.rows.items():
        for graph, r in rows.items():
            init = r.initial_ms
            within = r.mb_ms <= r.greedy_ms + 0.01 * init + 1e-12
            lines.append(
                f"| {setting} | {graph} | {change(r.greedy_ms, init)} "
                f"({r.greedy_steps}) | {change(r.taso_ms, init)} | "
                f"{change(r.random_ms, init)} | "
                f"{change_over_seeds(r.mf_ms, r.mf_range, len(seeds), init)} "
                f"({r.mf_vs_greedy}) | "
                f"{change_over_seeds(r.mb_ms, r.mb_range, len(seeds), init)} "
                f"({r.mb_vs_greedy}) | {'yes' if within else 'no'} | "
                f"{r.mf_interactions} ({r.mf_steps_to_final}) / {r.mb_real_steps} | "
                f"{_measured(r, 'greedy')} / {_measured(r, 'model-based')} |")
    return "\n".join(lines) + "\n"


def measured_spread(a: ReproductionReport, b: ReproductionReport) -> Dict[str, Any]:
    """How the measured ort/cpu change (%, against the original timed in the
    same run) of each variant moved between two reports of the same graphs:
    per setting/graph/variant both changes, and the largest absolute
    difference."""
    moved = {}
    for setting, rows in a.rows.items():
        for graph, ra in rows.items():
            rb = b.rows.get(setting, {}).get(graph)
            if not rb:
                continue
            for variant in ra.measured:
                if variant == "original" or variant not in rb.measured:
                    continue
                moved[f"{setting}/{graph}/{variant}"] = [
                    pct(_ort(ra, variant), _ort(ra, "original")),
                    pct(_ort(rb, variant), _ort(rb, "original"))]
    worst = max(moved.items(), key=lambda kv: abs(kv[1][0] - kv[1][1]),  # type: ignore[operator]
                default=None)
    return {"changes_pct": moved,
            "largest_difference_points": abs(worst[1][0] - worst[1][1])  # type: ignore[operator]
            if worst else None,
            "largest_at": worst[0] if worst else None}


def _replace_block(readme_path: str, block: str, begin: str, end: str) -> None:
    with open(readme_path) as f:
        readme = f.read()
    with open(readme_path, "w") as f:
        f.write(splice(readme, block, begin, end))


def publish(report_dir: str, readme_path: str, figures_dir: str,
            figures: Sequence[str] = README_FIGURES) -> None:
    """Updates `readme_path` and `figures_dir` from the report in `report_dir`."""
    with open(os.path.join(report_dir, REPORT_MD)) as f:
        block = report_block(f.read())
    _replace_block(readme_path, block, BEGIN, END)
    os.makedirs(figures_dir, exist_ok=True)
    for name in figures:
        shutil.copyfile(os.path.join(report_dir, name), os.path.join(figures_dir, name))


def publish_agents(agents_report_dir: str, readme_path: str) -> None:
    """Updates the README's agents block from a report."""
    _replace_block(readme_path, agents_block(ReproductionReport.load_dir(agents_report_dir)),
                   AGENTS_BEGIN, AGENTS_END)


def publish_scaled(report_dir: str, scaled_report_dir: str, readme_path: str) -> None:
    """Updates the README's second block from a base and a scaled report."""
    _replace_block(readme_path, scaled_block(ReproductionReport.load_dir(report_dir),
                                             ReproductionReport.load_dir(scaled_report_dir)),
                   SCALED_BEGIN, SCALED_END)
