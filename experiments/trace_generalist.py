"""Plays a generalist's greedy episode on corpus graphs, step by step.

    python experiments/trace_generalist.py --graphs=inception/a1c1w16
    python experiments/trace_generalist.py --agent=mb --graphs=inception/a1c1w16,vit/l2h128p64

The agent is the one experiments/train_generalist.py trains with the same
flags (it takes them all): its finished run under --results_dir is resumed,
or it is trained first. Per graph: the zero-shot evaluation's episode (xfer,
location, the cost after it), then the rewrites one-step greedy applies
there, counted, and, for the model-based agent, those outside its
vocabulary, which it can never choose (`xflowrl.generalist.pipeline.
trace_lines`).
"""

import sys

from absl import app, flags
import common
import generalist_flags

from xflowrl.generalist import pipeline

FLAGS = flags.FLAGS
generalist_flags.define_training_flags()
flags.DEFINE_list("graphs", None, "The corpus graphs to play.", required=True)


def main(argv):
    del argv
    config = generalist_flags.config()
    command = "python experiments/trace_generalist.py " + " ".join(sys.argv[1:])
    trained = pipeline.train_generalist(
        config, command, progress=lambda line: print(line, file=sys.stderr, flush=True))
    for line in pipeline.trace_lines(trained.agent, FLAGS.graphs, trained.setting):
        print(line)


if __name__ == "__main__":
    app.run(main, argv=common.split_cost_spec(sys.argv))
