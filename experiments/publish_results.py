"""Copies a reproduction report's tables and figures into the README.

    python experiments/publish_results.py [--report_dir=results/reproduce/report]

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

import os
import re
import shutil
from typing import Sequence

from absl import app
from absl import flags

import reproduce_report as report

FLAGS = flags.FLAGS
flags.DEFINE_string("report_dir", "results/reproduce/report", "reproduce.py's report folder.")
flags.DEFINE_string("readme", "README.md", "The README to update.")
flags.DEFINE_string("figures_dir", "docs/figures", "Where the README's figures are copied.")

BEGIN = "<!-- reproduce-report:begin -->"
END = "<!-- reproduce-report:end -->"
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


def splice(readme: str, block: str) -> str:
    """`readme` with the text between BEGIN and END replaced by `block`."""
    head, sep, rest = readme.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise ValueError(f"the README has no {BEGIN} ... {END} block")
    return f"{head}{BEGIN}\n\n{block.strip()}\n\n{END}{tail}"


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


def main(argv):
    del argv
    publish(FLAGS.report_dir, FLAGS.readme, FLAGS.figures_dir)
    print(f"{FLAGS.readme}: results block replaced from {FLAGS.report_dir}/report.md; "
          f"{len(README_FIGURES)} figures copied to {FLAGS.figures_dir}")


if __name__ == "__main__":
    app.run(main)
