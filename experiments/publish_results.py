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
figures the README shows into docs/figures/ (`xflowrl.results.publish`).
The discussion around the markers is the README's own prose: reread it
against the new tables.
"""

from __future__ import annotations

import dataclasses
import json

from absl import app, flags

from xflowrl.results import ReproductionReport
from xflowrl.results.publish import (
    README_FIGURES,
    measured_spread,
    publish,
    publish_agents,
    publish_scaled,
)

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


@dataclasses.dataclass(frozen=True)
class Settings:
    """What to publish: a report, and optionally a scaled or agents-only one,
    or another report to compare with (which publishes nothing)."""
    report_dir: str
    readme: str
    figures_dir: str
    compare_report_dir: str
    agents_report_dir: str
    scaled_report_dir: str


def settings_from_flags() -> Settings:
    return Settings(report_dir=FLAGS.report_dir, readme=FLAGS.readme,
                    figures_dir=FLAGS.figures_dir, compare_report_dir=FLAGS.compare_report_dir,
                    agents_report_dir=FLAGS.agents_report_dir,
                    scaled_report_dir=FLAGS.scaled_report_dir)


def main(argv):
    del argv
    s = settings_from_flags()
    if s.compare_report_dir:
        runs = [ReproductionReport.load_dir(d) for d in (s.report_dir, s.compare_report_dir)]
        print(json.dumps(measured_spread(*runs), indent=1))
        return
    if s.agents_report_dir:
        publish_agents(s.agents_report_dir, s.readme)
        print(f"{s.readme}: agents block from {s.agents_report_dir}")
        return
    publish(s.report_dir, s.readme, s.figures_dir)
    if s.scaled_report_dir:
        publish_scaled(s.report_dir, s.scaled_report_dir, s.readme)
        print(f"{s.readme}: scaled-budget block from {s.scaled_report_dir}")
    print(f"{s.readme}: results block replaced from {s.report_dir}/report.md; "
          f"{len(README_FIGURES)} figures copied to {s.figures_dir}")


if __name__ == "__main__":
    app.run(main)
