"""The learned GPU cost model's data, timed on a GPU in one call: JSON, then a table.

    python benchmarks/gpu_cost_data.py --out_dir=$OUT [--budget=quick] \\
        [--batches=1,8,32] [--dtypes=float32,bfloat16] [--max_seconds=420] \\
        [--compile_seconds=60] [--dry_run]

On the device machine `bash scripts/gpu/cost_data.sh` builds the engine and
runs this. It times the data set of `xflowrl.measure.gpu_data` (zoo graphs
at every batch, graphs along greedy and random rewrite walks, corpus
graphs with `--budget=full`, per-op micro-benchmarks) in every precision
as CUDA-graph replays in PyTorch, in that order, until `--max_seconds`;
`--compile_seconds` > 0 also times the zoo graphs at the smallest batch
under `torch.compile` until that budget is spent. What it writes under
`--out_dir`:

- `gpu_times/<card>.jsonl` and `gpu_times/graphs/`: the records and their
  graphs, in the package's data format, written as they are made (a run
  cut short keeps what it timed);
- `cost_data.json`: the card, driver, CUDA, cuDNN and PyTorch versions, the
  configuration, counts, failures, the first item left untimed for lack
  of time (`stopped_at`), and the table's rows.

Merge them into the package's data and refit with
`python experiments/fit_learned_cost.py --card=<card> --merge_from=$OUT/gpu_times`.

`--dry_run` runs the whole path on the CPU with tiny graphs: PyTorch on the
CPU where it is installed, else the numpy reference executor (wall clock;
the card is then "cpu"). Nothing of a dry run belongs in the package's data.
"""

import json
import os
import sys
import time

from absl import app, flags

from xflowrl.measure import gpu_data
from xflowrl.measure.gpu_calibration import card_name

FLAGS = flags.FLAGS
flags.DEFINE_string("out_dir", "", "Where the data and cost_data.json go (default: a new "
                    "folder under /tmp).")
flags.DEFINE_enum("budget", "quick", ["quick", "full"], "quick: zoo graphs and walks and a "
                  "small micro grid; full: corpus graphs and longer walks too.")
flags.DEFINE_list("batches", ["1", "8", "32"], "Batch sizes (transformers: sequence length "
                  "64 x batch).")
flags.DEFINE_list("dtypes", ["float32", "bfloat16"], "Precisions.")
flags.DEFINE_list("zoo", list(gpu_data.ZOO), "Zoo graphs.")
flags.DEFINE_float("max_seconds", 420.0, "Start no new graph after this many seconds.")
flags.DEFINE_float("compile_seconds", 0.0, "torch.compile timings' budget (0: none).")
flags.DEFINE_integer("rounds", 3, "Timing rounds per graph and precision.")
flags.DEFINE_integer("repeats", 20, "Timed runs per round.")
flags.DEFINE_bool("eager", False, "Also time eagerly.")
flags.DEFINE_integer("seed", 0, "Walks, weights and inputs.")
flags.DEFINE_bool("dry_run", False, "No CUDA: tiny graphs on the CPU (module docstring).")


def main(argv):
    del argv
    device = "cpu" if FLAGS.dry_run else "cuda"
    if not FLAGS.dry_run:
        try:
            import torch  # pylint: disable=import-outside-toplevel
        except ImportError:
            sys.exit("gpu_cost_data: needs PyTorch with CUDA (or --dry_run)")
        if not torch.cuda.is_available():
            sys.exit("gpu_cost_data: no CUDA device is visible (or --dry_run)")
        card = card_name(torch.cuda.get_device_name(0))
    else:
        card = "cpu"
    out_dir = FLAGS.out_dir or os.path.join("/tmp", f"cost_data.{os.getpid()}")
    data_dir = os.path.join(out_dir, "gpu_times")
    overrides = dict(batches=tuple(int(b) for b in FLAGS.batches),
                     dtypes=tuple(FLAGS.dtypes), seed=FLAGS.seed, device=device,
                     zoo=tuple(FLAGS.zoo), rounds=FLAGS.rounds, repeats=FLAGS.repeats,
                     eager=FLAGS.eager, compile_seconds=FLAGS.compile_seconds,
                     max_seconds=FLAGS.max_seconds)
    if FLAGS.dry_run:
        overrides.update(tiny=True, walk_points=1, walk_steps=4, micro=2, rounds=1,
                         repeats=2, warmup=1, compile_seconds=0.0)
        if FLAGS["zoo"].using_default_value:
            overrides["zoo"] = ("small_cnn", "bert")
        if FLAGS["batches"].using_default_value:
            overrides["batches"] = (1, 2)
        try:
            import torch  # pylint: disable=import-outside-toplevel
            torch.set_num_threads(1)
        except ImportError:
            pass
    config = gpu_data.CollectConfig.for_budget(FLAGS.budget, **overrides)
    command = "benchmarks/gpu_cost_data.py " + " ".join(sys.argv[1:])
    start = time.time()

    def write(rec):
        gpu_data.append_records(data_dir, card, [rec], command=command)

    result = gpu_data.collect(
        config, progress=lambda line: print(f"[gpu_cost_data] {line}", file=sys.stderr,
                                            flush=True),
        on_record=write)
    text, rows, changes = gpu_data.summary_table(result["records"], result["failed"])
    report = {"card": card, "versions": result["versions"], "dry_run": FLAGS.dry_run,
              "config": {k: v for k, v in vars(config).items()},
              "records": len(result["records"]),
              "graphs": len({id(r["graph_obj"]) for r in result["records"]}),
              "stopped_at": result["stopped_at"], "failed": result["failed"],
              "seconds": time.time() - start, "data_dir": data_dir, "rows": rows,
              "greedy_changes": changes, "commit": os.environ.get("XFLOWRL_COMMIT", "")}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "cost_data.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: v for k, v in report.items() if k not in ("rows", "greedy_changes")},
                     indent=1))
    print(text)


if __name__ == "__main__":
    app.run(main)
