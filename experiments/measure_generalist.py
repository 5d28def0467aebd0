"""Times the held-out graphs the generalists handed over, end to end in
onnxruntime, beside the initial graphs and one-step greedy's.

    python experiments/measure_generalist.py                    # generalist/analytic_v100
    python experiments/measure_generalist.py --results_dir=DIR --measure_rounds=3

Every seed's run of both agents under --results_dir/generalist/
<backend>_<profile>[-<rules>]/ (what experiments/train_generalist.py
wrote): per held-out graph they evaluated, the graphs each handed over,
rebuilt and timed interleaved (`xflowrl.generalist.measured`). Writes
measured.json there (`xflowrl.results.generalist.HeldOutTimings`), which
experiments/generalist_report.py adds as a table of estimated and measured
changes, and prints that table.
"""

import sys

from absl import app, flags
import common
import generalist_flags

from xflowrl import corpus
from xflowrl.engine import XferSet
from xflowrl.entry_points import cost_model_from_spec
from xflowrl.generalist import measured

FLAGS = flags.FLAGS
generalist_flags.define_folder_flags()
flags.DEFINE_integer("measure_rounds", 5, "Interleaved timing rounds.")
flags.DEFINE_integer("seed", 0, "Seed of the random weights, inputs and timing order.")


def main(argv):
    del argv
    timings = measured.measure_folder(
        generalist_flags.folder(), {s.name: s.build for s in corpus.specs("all")},
        XferSet.from_name(FLAGS.rules), cost_model_from_spec(f"{FLAGS.cost_model}/{FLAGS.profile}"),
        rounds=FLAGS.measure_rounds, seed=FLAGS.seed,
        progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(measured.markdown(timings.graphs))


if __name__ == "__main__":
    app.run(main, argv=common.split_cost_spec(sys.argv))
