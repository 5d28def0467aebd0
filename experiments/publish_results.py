"""Writes a reproduction run's tables and figures as a dated report under reports/.

    python experiments/publish_results.py [--report_dir=results/reproduce/report]
        # reports/<date>_thesis_chapter4.md, its figures in reports/figures/<that name>/
    python experiments/publish_results.py --agents_report_dir=<a report>
        # reports/<date>_model_based_agents.md: both agents against the baselines
    python experiments/publish_results.py --scaled_report_dir=results/reproduce_x4/report
        # reports/<date>_agents_x4_budget.md: the scaled run's agents beside --report_dir's
    python experiments/publish_results.py --compare_report_dir=<another run's report>
        # prints, as JSON, how the measured changes moved between two runs

experiments/reproduce.py writes its report to a results folder that git
ignores. This script writes one report file per run (`xflowrl.results.publish`):
the run's date, commit, command and machine, then the report's run line and
tables between the markers

    <!-- reproduce-report:begin -->
    <!-- reproduce-report:end -->

(the agents' and the scaled run's blocks have markers of their own) and links
to the figures, copied beside it. Publishing a run again replaces only the
marked block: what was written around it stays, to be reread against the new
tables. --report names the file instead of the dated default; reports/README.md
lists the reports, one line each (add the new one there).
"""

from __future__ import annotations

import dataclasses
import json

from absl import app, flags

from xflowrl.results import ReproductionReport
from xflowrl.results.publish import (
    REPORTS_DIR,
    measured_spread,
    publish,
    publish_agents,
    publish_scaled,
)

FLAGS = flags.FLAGS
flags.DEFINE_string("report_dir", "results/reproduce/report", "reproduce.py's report folder.")
flags.DEFINE_string("report", "", "The report file to write or update ('': "
                    "<--reports_dir>/<the run's date>_<topic>.md).")
flags.DEFINE_string("reports_dir", REPORTS_DIR, "Where dated report files go.")
flags.DEFINE_string("figures_dir", "", "Where the report's figures are copied ('': "
                    "figures/<the report's name>/ beside the report file).")
flags.DEFINE_string("compare_report_dir", "", "Another run's report folder: prints how the "
                    "measured ort/cpu changes of the same graphs differ from --report_dir's "
                    "(JSON) and changes nothing.")
flags.DEFINE_string("agents_report_dir", "", "A report whose agents (against greedy, TASO "
                    "and the random agent) go into a report file of their own, alone.")
flags.DEFINE_string("scaled_report_dir", "", "A report of `reproduce.py --budget_scale=K`: "
                    "its agents beside --report_dir's go into a report file of their own.")


@dataclasses.dataclass(frozen=True)
class Settings:
    """What to publish, and where: a report, or an agents-only or a scaled
    run's block, or another report to compare with (which writes nothing)."""
    report_dir: str
    report: str
    reports_dir: str
    figures_dir: str
    compare_report_dir: str
    agents_report_dir: str
    scaled_report_dir: str


def settings_from_flags() -> Settings:
    return Settings(report_dir=FLAGS.report_dir, report=FLAGS.report,
                    reports_dir=FLAGS.reports_dir, figures_dir=FLAGS.figures_dir,
                    compare_report_dir=FLAGS.compare_report_dir,
                    agents_report_dir=FLAGS.agents_report_dir,
                    scaled_report_dir=FLAGS.scaled_report_dir)


def main(argv):
    del argv
    s = settings_from_flags()
    path = s.report or None
    if s.compare_report_dir:
        runs = [ReproductionReport.load_dir(d) for d in (s.report_dir, s.compare_report_dir)]
        print(json.dumps(measured_spread(*runs), indent=1))
        return
    if s.agents_report_dir:
        out = publish_agents(s.agents_report_dir, path, s.reports_dir)
        print(f"{out}: agents block from {s.agents_report_dir}")
    elif s.scaled_report_dir:
        out = publish_scaled(s.report_dir, s.scaled_report_dir, path, s.reports_dir)
        print(f"{out}: scaled-budget block from {s.scaled_report_dir} beside {s.report_dir}")
    else:
        out = publish(s.report_dir, path, s.reports_dir, s.figures_dir or None)
        print(f"{out}: results block from {s.report_dir}/report.md, figures beside it")
    print("add it to reports/README.md if it is new, and reread its prose against the tables")


if __name__ == "__main__":
    app.run(main)
