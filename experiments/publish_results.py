"""Copies a reproduction report's tables and figures into the README.

    python experiments/publish_results.py [--report_dir=results/reproduce/report]
        [--scaled_report_dir=results/reproduce_x4/report]
    python experiments/publish_results.py --agents_report_dir=<a report>
        # only the agents block: both agents against the baselines, per graph
    python experiments/publish_results.py --compare_report_dir=<another run's report>
        # prints, as JSON, how the measured changes moved between two runs

experiments/reproduce.py writes its report to a results folder that git
ignores. The README's "Results" section shows a full run: this script
replaces the part of README.md between the markers

    <!-- reproduce-report:begin -->
    <!-- reproduce-report:end -->

with the report's run line and tables (report.md from "## Summary" up to its
figure list, headings moved down to the README's level) and copies the
figures the README shows into docs/figures/. The discussion around the
markers is the README's own prose: reread it against the new tables.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Sequence

from absl import app, flags
import reproduce_report as report

FLAGS = flags.FLAGS
flags.DEFINE_string("report_dir", "results/reproduce/report", "reproduce.py's report folder.")
flags.DEFINE_string("readme", "README.md", "The README to update.")
flags.DEFINE_string("figures_dir", "docs/figures", "Where the README's figures are copied.")
flags.DEFINE_string("compare_report_dir", "", "Another run's report folder: prints how the "
                    "measured ort/cpu changes of the same graphs differ from --report_dir's "
                    "(JSON) and changes nothing.")
flags.DEFINE_string("agents_report_dir", "", "A report whose agents (against greedy, TASO "
                    "and the random agent) go into the README's agents block, alone (the "
                    "results block is left as it is).")
flags.DEFINE_string("scaled_report_dir", "", "A report of `reproduce.py --budget_scale=K`: "
                    "its agents beside --report_dir's go into the README's second block.")

BEGIN = "<!-- reproduce-report:begin -->"
END = "<!-- reproduce-report:end -->"
AGENTS_BEGIN = "<!-- reproduce-agents:begin -->"
AGENTS_END = "<!-- reproduce-agents:end -->"
SCALED_BEGIN = "<!-- reproduce-scaled:begin -->"
SCALED_END = "<!-- reproduce-scaled:end -->"
# The figures the README shows.
README_FIGURES = tuple(report.FIGURES[k] for k in ("fig4_1", "fig4_5", "fig4_6", "fig4_8"))


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


def _measured(row: dict, variant: str) -> str:
    """The measured ort/cpu change of a variant against the original."""
    m = row["measured"]
    return report._chg(m.get(variant, {}).get("ort/cpu"), m.get("original", {}).get("ort/cpu"))


def scaled_block(base: dict, scaled: dict) -> str:
    """The agents of two reports (report.json) side by side: the same graphs
    and settings at the base budgets and at `--budget_scale` times the
    agents' training. Estimated changes against the initial graph, beside
    greedy, TASO and the random agent, whether each agent beats, matches or
    trails greedy, and the scaled agents' measured ort/cpu change."""
    k = scaled["meta"].get("budget_scale", 1.0)
    budget = {name: (base["meta"]["budget"][name], scaled["meta"]["budget"][name])
              for name in ("mf_episodes", "mb_episodes_per_round", "mb_dream_episodes")}
    lines = [f"Agents' training budgets x{k:g} (model-free episodes "
             "{} -> {}, world-model episodes per round {} -> {}, imagined episodes "
             "{} -> {}); ".format(*budget["mf_episodes"], *budget["mb_episodes_per_round"],
                                  *budget["mb_dream_episodes"])
             + f"run at commit {scaled['meta'].get('commit', '?')}, "
             f"{scaled['meta'].get('date_utc', '?')} UTC, "
             f"{scaled['meta'].get('wall_seconds', 0) / 60:.0f} min. Estimated change "
             "against the initial graph (negative: faster), same seed, same cost model per "
             f"setting; measured = the x{k:g} agent's graph in onnxruntime on this CPU "
             "(ort/cpu), against the original timed in the same run.\n",
             f"| setting | graph | greedy | TASO | random | model-free | model-free x{k:g} "
             f"(measured) | model-based | model-based x{k:g} (measured) | MB real steps "
             f"(x{k:g}) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for setting, rows in scaled["rows"].items():
        for graph, r in rows.items():
            b = base["rows"].get(setting, {}).get(graph)
            if not b:
                continue
            init = r["initial_ms"]
            lines.append(
                f"| {setting} | {graph} | {report._chg(r['greedy_ms'], init)} | "
                f"{report._chg(r['taso_ms'], init)} | {report._chg(r['random_ms'], init)} | "
                f"{report._chg(b['mf_ms'], init)} ({b['mf_vs_greedy']}) | "
                f"{report._chg(r['mf_ms'], init)} ({r['mf_vs_greedy']}; "
                f"{_measured(r, 'model-free')}) | "
                f"{report._chg(b['mb_ms'], init)} ({b['mb_vs_greedy']}) | "
                f"{report._chg(r['mb_ms'], init)} ({r['mb_vs_greedy']}; "
                f"{_measured(r, 'model-based')}) | "
                f"{b['mb_real_steps']} ({r['mb_real_steps']}) |")
    return "\n".join(lines) + "\n"


def agents_block(run: dict) -> str:
    """The agents of one report (report.json) against the baselines, per
    setting and graph: estimated changes against the initial graph (greedy
    with its steps, TASO, the random agent, both agents and whether each
    beats, matches or trails greedy, and whether the model-based agent is
    within 1 point of greedy), the agents' real environment steps, and the
    measured ort/cpu change of greedy's and the model-based agent's graphs."""
    meta = run["meta"]
    seeds = meta.get("seeds", [0])
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
    for setting, rows in run["rows"].items():
        for graph, r in rows.items():
            init = r["initial_ms"]
            within = r["mb_ms"] <= r["greedy_ms"] + 0.01 * init + 1e-12
            lines.append(
                f"| {setting} | {graph} | {report._chg(r['greedy_ms'], init)} "
                f"({r['greedy_steps']}) | {report._chg(r['taso_ms'], init)} | "
                f"{report._chg(r['random_ms'], init)} | "
                f"{report._chg_seeds(r['mf_ms'], r.get('mf_range'), len(seeds), init)} "
                f"({r['mf_vs_greedy']}) | "
                f"{report._chg_seeds(r['mb_ms'], r.get('mb_range'), len(seeds), init)} "
                f"({r['mb_vs_greedy']}) | {'yes' if within else 'no'} | "
                f"{r['mf_interactions']} ({r['mf_steps_to_final']}) / {r['mb_real_steps']} | "
                f"{_measured(r, 'greedy')} / {_measured(r, 'model-based')} |")
    return "\n".join(lines) + "\n"


def publish_agents(agents_report_dir: str, readme_path: str) -> None:
    """Updates the README's agents block from a report."""
    with open(os.path.join(agents_report_dir, "report.json")) as f:
        run = json.load(f)
    with open(readme_path) as f:
        readme = f.read()
    with open(readme_path, "w") as f:
        f.write(splice(readme, agents_block(run), AGENTS_BEGIN, AGENTS_END))


def publish(report_dir: str, readme_path: str, figures_dir: str,
            figures: Sequence[str] = README_FIGURES) -> None:
    """Updates `readme_path` and `figures_dir` from the report in `report_dir`."""
    with open(os.path.join(report_dir, "report.md")) as f:
        block = report_block(f.read())
    with open(readme_path) as f:
        readme = f.read()
    with open(readme_path, "w") as f:
        f.write(splice(readme, block))
    os.makedirs(figures_dir, exist_ok=True)
    for name in figures:
        shutil.copyfile(os.path.join(report_dir, name), os.path.join(figures_dir, name))


def measured_spread(a: dict, b: dict) -> dict:
    """How the measured ort/cpu change (%, against the original timed in the
    same run) of each variant moved between two reports (report.json) of the
    same graphs: per setting/graph/variant both changes, and the largest
    absolute difference."""
    moved = {}
    for setting, rows in a["rows"].items():
        for graph, ra in rows.items():
            rb = b["rows"].get(setting, {}).get(graph)
            if not rb:
                continue
            ma, mb = ra["measured"], rb["measured"]
            for variant in ma:
                if variant == "original" or variant not in mb:
                    continue
                ca = report.pct(ma[variant]["ort/cpu"], ma["original"]["ort/cpu"])
                cb = report.pct(mb[variant]["ort/cpu"], mb["original"]["ort/cpu"])
                moved[f"{setting}/{graph}/{variant}"] = [ca, cb]
    worst = max(moved.items(), key=lambda kv: abs(kv[1][0] - kv[1][1]), default=None)
    return {"changes_pct": moved,
            "largest_difference_points": abs(worst[1][0] - worst[1][1]) if worst else None,
            "largest_at": worst[0] if worst else None}


def publish_scaled(report_dir: str, scaled_report_dir: str, readme_path: str) -> None:
    """Updates the README's second block from a base and a scaled report."""
    with open(os.path.join(report_dir, "report.json")) as f:
        base = json.load(f)
    with open(os.path.join(scaled_report_dir, "report.json")) as f:
        scaled = json.load(f)
    with open(readme_path) as f:
        readme = f.read()
    with open(readme_path, "w") as f:
        f.write(splice(readme, scaled_block(base, scaled), SCALED_BEGIN, SCALED_END))


def main(argv):
    del argv
    if FLAGS.compare_report_dir:
        runs = []
        for d in (FLAGS.report_dir, FLAGS.compare_report_dir):
            with open(os.path.join(d, "report.json")) as f:
                runs.append(json.load(f))
        print(json.dumps(measured_spread(*runs), indent=1))
        return
    if FLAGS.agents_report_dir:
        publish_agents(FLAGS.agents_report_dir, FLAGS.readme)
        print(f"{FLAGS.readme}: agents block from {FLAGS.agents_report_dir}")
        return
    publish(FLAGS.report_dir, FLAGS.readme, FLAGS.figures_dir)
    if FLAGS.scaled_report_dir:
        publish_scaled(FLAGS.report_dir, FLAGS.scaled_report_dir, FLAGS.readme)
        print(f"{FLAGS.readme}: scaled-budget block from {FLAGS.scaled_report_dir}")
    print(f"{FLAGS.readme}: results block replaced from {FLAGS.report_dir}/report.md; "
          f"{len(README_FIGURES)} figures copied to {FLAGS.figures_dir}")


if __name__ == "__main__":
    app.run(main)
