"""Publishing a reproduction report as a dated report under reports/.

experiments/reproduce.py writes its report (report.md, report.json and the
figures) into a results folder that git ignores. `publish` turns it into
one Markdown file per run, `reports/<date>_<topic>.md` by default: a header
with the run's date, commit, command and machine (from report.json's
`meta`), then the report's run line and tables (report.md from "## Summary"
up to its figure list, headings moved down one level) between the markers

    <!-- reproduce-report:begin -->
    <!-- reproduce-report:end -->

followed by links to the figures, which are copied beside the file. When the
file exists, only the marked block is replaced, so whatever was written
around it (what the run says, read against its tables) stays; reread it
against the new tables. `publish_agents` writes the agents' block (both
agents against the baselines, per graph) and `publish_scaled` the block of
a run at scaled training budgets beside the base run, each into a report
of its own; `measured_spread` says how the measured changes moved between
two runs of the same graphs. Nothing here writes the README.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Any, Dict, Mapping, Optional, Sequence

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
# Where the reports live, relative to the repository root.
REPORTS_DIR = "reports"
# The figures a published report links to (copied beside it).
REPORT_FIGURES = tuple(FIGURES[k] for k in ("fig4_1", "fig4_5", "fig4_6", "fig4_8"))
# What each kind of report is named after (`reports/<date>_<topic>.md`).
TOPIC = "thesis_chapter4"
AGENTS_TOPIC = "model_based_agents"


def report_block(report_md: str) -> str:
    """The published block from a report.md: its "Measured on ..." line, then
    every section from "## Summary" up to "## Figures", with "##" headings
    made "###" (a report file's own sections are "##")."""
    start = report_md.find("## Summary")
    stop = report_md.find("## Figures")
    if start < 0 or stop < start:
        raise ValueError("not a reproduce.py report: no '## Summary' ... '## Figures'")
    run_line = next((line for line in report_md.splitlines()
                     if line.startswith("Measured on ")), "")
    body = re.sub(r"^## ", "### ", report_md[start:stop].rstrip() + "\n", flags=re.M)
    return (run_line + "\n\n" if run_line else "") + body


def splice(text: str, block: str, begin: str = BEGIN, end: str = END) -> str:
    """`text` with what lies between `begin` and `end` replaced by `block`.

    Raises:
      ValueError: `text` lacks either marker.
    """
    head, sep, rest = text.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise ValueError(f"the file has no {begin} ... {end} block")
    return f"{head}{begin}\n\n{block.strip()}\n\n{end}{tail}"


def report_path(meta: Mapping[str, Any], topic: str, reports_dir: str = REPORTS_DIR) -> str:
    """`reports_dir/<date>_<topic>.md`, the date being the run's (UTC).

    Raises:
      ValueError: `meta` has no date.
    """
    date = str(meta.get("date_utc", ""))[:10]
    if not re.fullmatch(r"\d{4}-\d\d-\d\d", date):
        raise ValueError(f"the report records no date ({meta.get('date_utc')!r}): "
                         "give the report's path")
    return os.path.join(reports_dir, f"{date}_{topic}.md")


def run_header(title: str, meta: Mapping[str, Any]) -> str:
    """A report file's title and the run it comes from: date, commit,
    command, machine and wall time, as report.json's `meta` records them."""
    command = meta.get("command")
    lines = [f"# {title}", "",
             f"- Date: {meta.get('date_utc', 'not recorded')} UTC",
             f"- Commit: {meta.get('commit', 'not recorded')}",
             f"- Command: `{command}`" if command else "- Command: not recorded in the report",
             f"- Machine: {meta.get('machine', 'not recorded')}"]
    if meta.get("wall_seconds"):
        lines.append(f"- Wall time: {meta['wall_seconds'] / 60:.0f} min")
    return "\n".join(lines) + "\n"


def write_block(path: str, block: str, begin: str, end: str, header: str) -> None:
    """Puts `block` between `begin` and `end` in the file at `path`: replaces
    the marked block of an existing file, or writes a new file of `header`
    and the marked block."""
    if os.path.exists(path):
        with open(path) as f:
            text = splice(f.read(), block, begin, end)
    else:
        text = f"{header}\n{begin}\n\n{block.strip()}\n\n{end}\n"
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


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


def _title(meta: Mapping[str, Any]) -> str:
    scale = meta.get("budget_scale", 1.0)
    return (f"The thesis' Chapter 4 reproduced ({meta.get('mode', '?')} mode"
            + (f", agents' training budgets x{scale:g}" if scale != 1.0 else "") + ")")


def publish(report_dir: str, path: Optional[str] = None, reports_dir: str = REPORTS_DIR,
            figures_dir: Optional[str] = None,
            figures: Sequence[str] = REPORT_FIGURES) -> str:
    """Writes (or updates) the report file of the run in `report_dir`.

    Args:
      report_dir: reproduce.py's report folder (report.md, report.json, the
        figures).
      path: the report file; None: `report_path(meta, TOPIC, reports_dir)`.
      reports_dir: where the report file goes when `path` is None.
      figures_dir: where `figures` are copied; None: `figures/<file's
        stem>/` beside the report file.
      figures: the figures' file names in `report_dir`.

    Returns:
      The report file's path.
    """
    run = ReproductionReport.load_dir(report_dir)
    path = path or report_path(run.meta, TOPIC, reports_dir)
    stem = os.path.splitext(os.path.basename(path))[0]
    figures_dir = figures_dir or os.path.join(os.path.dirname(path), "figures", stem)
    os.makedirs(figures_dir, exist_ok=True)
    links = []
    for name in figures:
        shutil.copyfile(os.path.join(report_dir, name), os.path.join(figures_dir, name))
        target = os.path.relpath(os.path.join(figures_dir, name), os.path.dirname(path) or ".")
        links.append(f"![{os.path.splitext(name)[0]}]({target})")
    with open(os.path.join(report_dir, REPORT_MD)) as f:
        block = report_block(f.read())
    if links:
        block += "\n### Figures\n\n" + "\n".join(links) + "\n"
    write_block(path, block, BEGIN, END, run_header(_title(run.meta), run.meta))
    return path


def publish_agents(agents_report_dir: str, path: Optional[str] = None,
                   reports_dir: str = REPORTS_DIR) -> str:
    """Writes (or updates) the agents' block of a report into its own report
    file (default `reports_dir/<date>_model_based_agents.md`); returns its
    path."""
    run = ReproductionReport.load_dir(agents_report_dir)
    path = path or report_path(run.meta, AGENTS_TOPIC, reports_dir)
    write_block(path, agents_block(run), AGENTS_BEGIN, AGENTS_END,
                run_header("Both agents against the baselines", run.meta))
    return path


def publish_scaled(report_dir: str, scaled_report_dir: str, path: Optional[str] = None,
                   reports_dir: str = REPORTS_DIR) -> str:
    """Writes (or updates) the report file of a run at scaled training
    budgets, its agents beside the base run's (default
    `reports_dir/<date>_agents_x<k>_budget.md`, the scaled run's date);
    returns its path."""
    base = ReproductionReport.load_dir(report_dir)
    scaled = ReproductionReport.load_dir(scaled_report_dir)
    k = scaled.meta.get("budget_scale", 1.0)
    path = path or report_path(scaled.meta, f"agents_x{k:g}_budget", reports_dir)
    write_block(path, scaled_block(base, scaled), SCALED_BEGIN, SCALED_END,
                run_header(f"The agents at {k:g} times the training budget", scaled.meta))
    return path
