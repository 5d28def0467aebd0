"""The generalist's seeds in one table: every seed's results under a
setting's results folder, medians and ranges.

    python experiments/generalist_report.py                     # generalist/analytic_v100
    python experiments/generalist_report.py --results_dir=DIR --profile=cpu

Reads every seed's result.json that experiments/train_generalist.py wrote
under --results_dir/generalist/<backend>_<profile>[-<rules>]/ (the
model-based agent's seeds under mb/ add a column), and measured.json where
experiments/measure_generalist.py timed their graphs
(`xflowrl.generalist.report.write_report`); prints the report and writes it
there as report.md.
"""

import sys

from absl import app
import common
import generalist_flags

from xflowrl.generalist import report

generalist_flags.define_folder_flags()


def main(argv):
    del argv
    print(report.write_report(generalist_flags.folder()))


if __name__ == "__main__":
    app.run(main, argv=common.split_cost_spec(sys.argv))
