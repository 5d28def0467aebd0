"""Fits the learned GPU cost model (``learned/<card>``) from a card's timings.

    python experiments/fit_learned_cost.py --card=h200 [--method=auto] [--out=eval.json]
    python experiments/fit_learned_cost.py --card=h200 --merge_from=$OUT/gpu_times
    python experiments/fit_learned_cost.py --card=h200 \\
        --import_reports=docs/data/cudnn_bench_h200_graph_timing.json

Reads every record of ``xflowrl/engine/data/gpu_times/<card>.jsonl`` (or
`--data_dir`), fits one set of coefficients per precision
(`xflowrl.measure.learned_fit.fit_card`: ``per_class`` where a precision
has enough distinct graphs, else ``tied``), writes
``xflowrl/engine/data/learned_<card>.json`` (or `--output`), and prints the
held-out evaluation as JSON: leave one model family out, Spearman between
predicted and measured times, the share of optimised graphs whose
predicted change has the measured sign and is within 3 points of it, for
both parametrisations and for analytic/v100 on the same graphs.

`--merge_from` first appends a GPU run's data (``$OUT/gpu_times`` of
scripts/gpu/cost_data.sh) to the package's. `--import_reports` turns benchmarks/cudnn_bench.py reports into
records (`xflowrl.measure.gpu_import`: only graphs it can rebuild and check),
replacing the records an earlier import of the same report made. New
timings come from `scripts/gpu/cost_data.sh` (benchmarks/gpu_cost_data.py)
or `xflowrl calibrate --device=cuda`.
"""

from __future__ import annotations

import json
import os
import sys

from absl import app, flags

from xflowrl.measure import gpu_data, gpu_import, learned_fit

FLAGS = flags.FLAGS
flags.DEFINE_list("card", ["h200"], "The cards to fit (each with <data_dir>/<card>.jsonl).")
flags.DEFINE_string("data_dir", gpu_data.DATA_DIR, "The data folder.")
flags.DEFINE_string("output", "", "The profile path (one card only; default "
                    "xflowrl/engine/data/learned_<card>.json).")
flags.DEFINE_enum("method", "auto", ["auto", *learned_fit.METHODS], "The parametrisation.")
flags.DEFINE_list("import_reports", [], "cudnn_bench reports to import into the (one) card's "
                  "data before fitting.")
flags.DEFINE_string("merge_from", "", "A GPU run's data folder ($OUT/gpu_times of "
                    "scripts/gpu/cost_data.sh) to merge into --data_dir before fitting.")
flags.DEFINE_bool("taso", True, "--import_reports: rebuild TASO's graphs too (slow).")
flags.DEFINE_string("mode", learned_fit.MODE, "The timing mode fitted: graph (CUDA-graph "
                    "replay); a dry run's cpu or reference records only to try the path.")
flags.DEFINE_string("out", "", "Also write the evaluation (with per-graph rows) here.")


def main(argv):
    del argv
    if FLAGS.output and len(FLAGS.card) != 1:
        sys.exit("fit_learned_cost: --output needs exactly one --card")
    if FLAGS.import_reports:
        if len(FLAGS.card) != 1:
            sys.exit("fit_learned_cost: --import_reports needs exactly one --card")
        card = FLAGS.card[0]
        for path in FLAGS.import_reports:
            records, info = gpu_import.import_report(
                path, progress=lambda line: print(line, file=sys.stderr, flush=True),
                taso=FLAGS.taso)
            kept = [r for r in gpu_data.read_records(FLAGS.data_dir, card)
                    if r.get("imported_from") != info["report"]]
            gpu_data.write_records(FLAGS.data_dir, card, kept)
            command = ("experiments/fit_learned_cost.py --card=" + card
                       + " --import_reports=" + os.path.relpath(path))
            gpu_data.append_records(FLAGS.data_dir, card, records, command=command)
            print(json.dumps(info), file=sys.stderr, flush=True)
    if FLAGS.merge_from:
        merged = gpu_data.merge(FLAGS.merge_from, FLAGS.data_dir)
        print(json.dumps({"merged": merged}), file=sys.stderr, flush=True)
    results = {}
    full = {}
    for card in FLAGS.card:
        result = learned_fit.fit_card(
            card, data_dir=FLAGS.data_dir, output=FLAGS.output or None, method=FLAGS.method,
            mode=FLAGS.mode,
            progress=lambda line: print(line, file=sys.stderr, flush=True))
        results[card] = learned_fit.summary(result)
        full[card] = result
    print(learned_fit.dumps(results))
    if FLAGS.out:
        learned_fit.write_json(FLAGS.out, full)


if __name__ == "__main__":
    app.run(main)
