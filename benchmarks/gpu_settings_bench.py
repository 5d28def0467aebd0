"""The settings where looking ahead pays, timed on a GPU: does each setting's
estimated gain hold? Prints JSON, then a Markdown table.

    python benchmarks/gpu_settings_bench.py --graphs_dir=benchmarks/data/lookahead_graphs \
        --out=gpu_settings.json [--dry_run] [--settings=NAME,...] [--max_seconds=400]

On the device machine, `bash scripts/gpu/settings_check.sh` builds the
engine and runs this on the committed graphs (benchmarks/data/lookahead_graphs);
the work is done by `gpu_settings.py` beside this file. The graphs are what
`experiments/lookahead_settings.py --export_graphs=DIR` writes: per setting
(xflowrl.search.settings) one file `DIR/<name with / as __>.json` (or
`.json.gz`) holding the original graph, one-step greedy's, TASO's search's
and equality saturation's, each with its estimated cost under the setting's
cost model. Every graph is rebuilt with `xflowrl.engine.graph_from_data`.

Per setting, with one set of feeds (`random_weights` / `random_inputs` of
the original, float64, seed `--seed`, the zoo's weight gain):

- **outputs**: the original's outputs by the numpy reference executor
  (float64). On CUDA every graph runs in PyTorch
  (`xflowrl.measure.torch_runtime.TorchProgram`) and `check` compares its
  float32 outputs (TF32 off) with those: the largest error relative to each
  output's largest magnitude must stay within `--tolerance` (1e-3, as
  benchmarks/cudnn_bench.py). With `--dry_run` (no CUDA, nothing timed) each
  graph runs in the reference executor instead, within
  `--reference_tolerance`. A graph that fails is reported (`check.passed`
  false, with the error) and not timed; the run goes on.
- **timing** (CUDA only): every distinct graph of the setting (graphs with
  equal `Graph.to_data` are timed once and share their numbers, `same_as`)
  as a CUDA-graph replay and eagerly, interleaved: `--rounds` rounds, each
  running original, greedy, taso, eqsat in turn, each `--repeats` timed
  runs after `--warmup` untimed ones (CUDA events; a round keeps the
  median). Per graph: the median over rounds, min, max and `spread_pct`
  (max - min of the round medians, in % of their median).
- **measured vs estimated**: each method's change against the original,
  in % (`estimated_change_pct` from the exported costs,
  `measured_change_pct_graph` / `_eager` from the medians).
- **confirmed**: the best exported method (the lowest estimate among taso
  and eqsat, where it is below greedy's) beats greedy on the GPU beyond
  the run-to-run spread: greedy's measured change minus the best's
  (`measured_gap_pts`, points of the original's time, CUDA graph) is
  larger than `noise_pts`, the larger range of the two graphs' round
  medians in points of the original's time. `rounds_best_faster` counts
  the rounds in which the best's median was below greedy's. null where no
  exported graph beats greedy's estimate, where the best graph is greedy's
  graph, or where a check failed.

`--batch` selects the settings of that batch (from the file's `batch`,
else the name's `@bN`, else 1; default 0: every batch); the graphs are
timed as exported, so a batch no file has is an error. `--max_seconds` starts no new setting (and
no new round after the second) once that much time has passed; settings
left out are listed under `skipped`. The report records the card, driver,
CUDA, cuDNN and torch versions, the date, the commit (`$XFLOWRL_COMMIT`,
else `git rev-parse`) and each graph file's sha256. `--out` is rewritten
after every setting, so that a run cut short keeps what it measured.
"""

import gc
import json
import os
import sys

from absl import app, flags

from gpu_settings import CheckConfig, check_all, load_exports, markdown

FLAGS = flags.FLAGS
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

flags.DEFINE_string("graphs_dir", os.path.join(_ROOT, "benchmarks", "data", "lookahead_graphs"),
                    "The folder experiments/lookahead_settings.py --export_graphs wrote.")
flags.DEFINE_string("out", "", "Also write the JSON report here (rewritten after each "
                    "setting).")
flags.DEFINE_list("settings", [], "Only these settings (names, e.g. "
                  "squeezenet1_1/tensat/analytic-v100); default: every file.")
flags.DEFINE_integer("batch", 0, "Check the settings of this batch (0: every batch; the "
                     "graphs are timed as exported, no rebatching).")
flags.DEFINE_bool("dry_run", False, "No CUDA: rebuild every graph and check its outputs "
                  "against the original's with the numpy reference executor; time nothing.")
flags.DEFINE_float("max_seconds", 400.0, "Start no new setting (and no round after the "
                   "second) after this many seconds.")
flags.DEFINE_integer("rounds", 7, "Interleaved rounds over a setting's graphs.")
flags.DEFINE_integer("repeats", 20, "Timed runs per graph, mode and round.")
flags.DEFINE_integer("warmup", 3, "Untimed runs before each round's timed runs.")
flags.DEFINE_list("modes", ["graph", "eager"], "Timing modes (TorchProgram.time); 'graph' "
                  "is the one the verdict reads.")
flags.DEFINE_float("tolerance", 1e-3, "Largest relative output error of a graph on the GPU "
                   "(float32, TF32 off) against the reference executor (float64).")
flags.DEFINE_float("reference_tolerance", 1e-6, "--dry_run: largest relative output error "
                   "of a graph in the reference executor (float64) against the original's.")
flags.DEFINE_integer("seed", 0, "Seed of the weights and inputs.")


def _free_gpu_memory() -> None:
    import torch  # pylint: disable=import-outside-toplevel
    gc.collect()
    torch.cuda.empty_cache()


def main(argv):
    del argv
    if not FLAGS.dry_run:
        try:
            import torch  # pylint: disable=import-outside-toplevel
        except ImportError:
            sys.exit("gpu_settings_bench: needs PyTorch with CUDA (or --dry_run)")
        if not torch.cuda.is_available():
            sys.exit("gpu_settings_bench: no CUDA device is visible (or --dry_run)")
    if "graph" not in FLAGS.modes or not set(FLAGS.modes) <= {"graph", "eager"}:
        sys.exit("gpu_settings_bench: --modes: 'graph' (the verdict reads it), and 'eager' "
                 f"if wanted; got {FLAGS.modes}")
    try:
        exports = load_exports(FLAGS.graphs_dir, FLAGS.settings, FLAGS.batch)
    except ValueError as e:
        sys.exit(f"gpu_settings_bench: --graphs_dir={FLAGS.graphs_dir}: {e}")
    config = CheckConfig(dry_run=FLAGS.dry_run, rounds=FLAGS.rounds, repeats=FLAGS.repeats,
                         warmup=FLAGS.warmup, modes=tuple(FLAGS.modes),
                         tolerance=FLAGS.tolerance,
                         reference_tolerance=FLAGS.reference_tolerance, seed=FLAGS.seed)
    report = check_all(exports, config, only=FLAGS.settings, batch=FLAGS.batch,
                       max_seconds=FLAGS.max_seconds, out=FLAGS.out, graphs_dir=FLAGS.graphs_dir,
                       after_setting=None if FLAGS.dry_run else _free_gpu_memory)
    print(json.dumps(report, indent=1))
    print(markdown(report))


if __name__ == "__main__":
    app.run(main)
