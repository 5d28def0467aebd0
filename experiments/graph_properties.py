"""Table 4.1 of the thesis: type, op count, estimated cost, TensorFlow
inference time and memory of the evaluation graphs.

    python experiments/graph_properties.py --graphs=resnet18,bert --repeats=10

Writes --output_dir/table_4_1.md and table_4_1.json. Times and memory are
measured in TensorFlow through onnx-tf on random weights and inputs
(xflowrl/measure/tf_runtime.py says exactly what is measured).
"""

import json
import os

from absl import app, flags, logging

from xflowrl.engine import BACKENDS, CostModel
from xflowrl.engine.cost import DEFAULT_BACKEND, DEFAULT_PROFILE
import xflowrl.measure  # first: turns on TensorFlow's CPU allocator statistics

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["inception_v3", "resnet18", "resnet50", "squeezenet1_1", "bert"],
                  "Zoo graphs, in table order.")
flags.DEFINE_enum("cost_model", DEFAULT_BACKEND, BACKENDS, "Cost backend of the estimate.")
flags.DEFINE_string("profile", DEFAULT_PROFILE, "Device profile of the analytic backend.")
flags.DEFINE_integer("warmup", 3, "Untimed TensorFlow runs before timing.")
flags.DEFINE_integer("repeats", 10, "Timed TensorFlow runs (median reported).")
flags.DEFINE_integer("seed", 0, "Seed of the random weights and inputs.")
flags.DEFINE_string("output_dir", "results/graph_properties", "Where the table goes.")


def main(argv):
    del argv
    cost_model = CostModel(FLAGS.cost_model, profile=FLAGS.profile)
    if not xflowrl.measure.memory_stats_available():
        logging.warning("TensorFlow reports no CPU allocator statistics: memory is n/a")
    rows = []
    for name in FLAGS.graphs:
        row = xflowrl.measure.graph_properties(name, cost_model, warmup=FLAGS.warmup,
                                               repeats=FLAGS.repeats, seed=FLAGS.seed)
        logging.info("%s: %s", name, {k: v for k, v in row.items() if k != "tf_times_ms"})
        rows.append(row)
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    table = xflowrl.measure.markdown_table(rows)
    with open(os.path.join(FLAGS.output_dir, "table_4_1.md"), "w") as f:
        f.write(table)
    with open(os.path.join(FLAGS.output_dir, "table_4_1.json"), "w") as f:
        json.dump({"cost_model": cost_model.name, "warmup": FLAGS.warmup,
                   "repeats": FLAGS.repeats, "rows": rows}, f, indent=2)
    print(table)


if __name__ == "__main__":
    app.run(main)
