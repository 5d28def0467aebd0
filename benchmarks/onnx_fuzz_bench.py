"""Long mutation-fuzz run of the ONNX path; prints one JSON object.

    python benchmarks/onnx_fuzz_bench.py [--mutants=20000] [--seed=1] [--keras]

Mutants of the fuzz test's seed models (and, with --keras, of two tf2onnx
conversions: a Keras CNN at opset 11 and a transformer block at opset 18)
go through `load_onnx`, a short search and `to_onnx` in a child process
(`xflowrl.onnx_io.fuzz.run_fuzz`). The report: outcomes overall and per
mutation kind, every undocumented exception, wrapped importer error, child
death and hang (index, kind, detail: reproduce one with
`onnx_fuzz.mutant(models, seed, index)`), and the wall time. The fuzz test
(tests/onnx_io/fuzz_test.py) runs 1,000 of them.
"""

import json
import os
import sys

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.onnx_io.fuzz_test import seed_models  # noqa: E402
from xflowrl.onnx_io.fuzz import run_fuzz  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("mutants", 20000, "Number of mutants.")
flags.DEFINE_integer("seed", 1, "Run seed (with the index, fixes each mutant).")
flags.DEFINE_integer("start", 0, "First mutant index.")
flags.DEFINE_integer("budget", 2, "Search expansions per imported mutant.")
flags.DEFINE_bool("keras", False, "Also mutate tf2onnx conversions (imports TensorFlow).")


def main(argv):
    del argv
    models = seed_models()
    if FLAGS.keras:
        from tests.onnx_io import exporter_models as onnx_exporter_models
        from tests.onnx_io import models as onnx_models
        models += [onnx_models.keras_cnn(), onnx_exporter_models.keras_transformer_block()]
    report = run_fuzz(models, FLAGS.mutants, FLAGS.seed, budget=FLAGS.budget,
                      start=FLAGS.start)
    result = report.to_json()
    result.update(seed=FLAGS.seed, start=FLAGS.start, seed_models=len(models),
                  budget=FLAGS.budget)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    app.run(main)
