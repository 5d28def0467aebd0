"""The thesis' baselines (Chapter 4, Figures 4.1 and 4.2) on this machine.

    python experiments/baselines.py --graphs=squeezenet1_1,bert --taso_budget=1000 --rounds=3
    python experiments/baselines.py --onnx=a.onnx,b.onnx        # your own models

Per graph of `--graphs` (default: the thesis' six; with `--onnx` and no
`--graphs`, none) and per ONNX file of `--onnx` (each one more graph, named
by its file name without .onnx; `--input_shape` NAME=D1,D2,... applies to
every file, for inputs of dynamic dimensions):

- one-step greedy (no step limit: it stops when no candidate improves),
  TASO's backtracking search (`--taso_alpha`, `--taso_budget`; 0 skips it)
  and equality saturation (TENSAT's method, `xflowrl.search.eqsat`:
  `--eqsat_time_limit` seconds of saturation, then ILP extraction of up to
  15 s more; 0 skips it) under the environment's rules, cost model and
  location cap (`--rules`, `--cost_model`, `--profile`, `--max_locations`),
  run by the baseline runner (`xflowrl.search.run_greedy`, `run_taso`,
  `run_eqsat`) into its record (`xflowrl.search.Baselines`), with the
  search's trace (best cost against expansions and seconds), every step's
  location and equality saturation's graph itself (extracted from the
  e-graph, not reached by steps: `xflowrl.search.replay_result` builds it);
- the end-to-end runtime of the original, greedy's, TASO's and equality
  saturation's graphs (variant "eqsat"; each beside its estimated cost; same
  weights: a zoo graph's random `random_weights(graph, --seed,
  gain=zoo.weight_gain(graph))`, an ONNX file's own; exported by `to_onnx`;
  same inputs, random, of the model's input types) in TensorFlow through onnx-tf
  (Grappler on, default thread pools: the thesis' runtime) and in
  onnxruntime (one intra-op thread), timed interleaved
  (`xflowrl.measure.compare`): `--rounds` rounds of `--warmup` untimed and
  `--repeats` timed calls per variant; the median over rounds with its
  interquartile range and extremes. Two clocks each: wall time and CPU time
  (onnxruntime: the inference thread's, its compute time without waiting
  for a core; TensorFlow: the process's, its threads' work). On a shared
  machine the wall times include waiting for a core (docs/runtime.md);
- TensorRT: not run. These machines have no GPU and no TensorRT; the output
  says so in the table and in result.json rather than leaving a gap.

Writes --results_dir/<graph>/baselines/result.json per graph (the record's
keys, `Baselines.to_json`, beside the timings; reused when present with the
same settings; one of another record version is refused, `--rerun` redoes it) and,
over all graphs, --results_dir/baselines/: baselines.md (the table, with the thesis' GPU
figures beside ours and equality saturation's columns where it ran),
baselines.json (the table's data), fig4_1_runtimes.png (original vs greedy
vs TASO vs equality saturation, measured;
`xflowrl.results.figures.figure_baseline_runtimes`) and
fig4_2_taso_search.png (the search's best cost against expansions and
seconds, normalised to the initial cost; `xflowrl.results.figures.figure_taso`,
the report's Figure 4.2 too).

Flags -> `BaselineRunConfig` (built in `main`, the one reader of flags) ->
`run_all` (each graph searched and timed, or its saved result reused) ->
`write_summary` (the table, its data and the library's figures), all in
`xflowrl.reproduction.baseline_runs`.

A model file that cannot be read or imported ends the script with one error
line (exit status 2) before any graph runs.

Memory: TASO's search at budget 1000 on Inception-v3 grew past 20 GB on
this box (docs/runtime.md), so `--taso_budget_for` gives it 100 by default
(`--taso_budget_for=` to use `--taso_budget` everywhere); the table and
each graph's result.json record the budget used.

Where equality saturation did not run (`--eqsat_time_limit=0`), the table
leaves its columns out and the figure its bars.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Sequence

from absl import app, flags
import common

from xflowrl import zoo
from xflowrl.optimize.model_io import BadInput
from xflowrl.reproduction.baseline_runs import BaselineRunConfig, run_all, write_summary
from xflowrl.results.thesis import THESIS_GRAPHS

FLAGS = flags.FLAGS
common.define_env_flags("squeezenet1_1", several_models=True)
common.define_baseline_flags()
flags.DEFINE_list("graphs", list(THESIS_GRAPHS), f"Zoo graphs ({zoo.GRAPHS}); with --onnx and no "
                  "--graphs: none.")
flags.DEFINE_list("runtimes", ["tf", "ort"], "tf (onnx-tf, the thesis') and/or ort.")
flags.DEFINE_integer("rounds", 7, "Interleaved timing rounds.")
flags.DEFINE_integer("warmup", 2, "Untimed calls per variant and round.")
flags.DEFINE_integer("repeats", 10, "Timed calls per variant and round.")
flags.DEFINE_integer("seed", 0, "Weights, inputs and the order of the rounds.")
flags.DEFINE_bool("rerun", False, "Redo graphs whose result.json exists.")
flags.DEFINE_list("taso_budget_for", ["inception_v3=100"],
                  "Per-graph TASO budgets that replace --taso_budget (graph=budget): at "
                  "1000 the search on Inception-v3 grew past 20 GB on this machine.")

# The flags a saved result's settings record, in their order.
_SETTINGS_FLAGS = ("rules", "cost_model", "profile", "max_locations", "taso_alpha",
                   "eqsat_time_limit", "runtimes", "rounds", "warmup", "repeats", "seed")


def graph_fields(graphs_: Sequence[str], graphs_given: bool, onnx: Sequence[str],
                 input_shape: Sequence[str]) -> List[Dict[str, Any]]:
    """The graphs to run, in order, as the `RunSettings` fields that choose
    each (`common.model_fields`): the zoo graphs `graphs_` (--graphs; none
    when only --onnx is given and --graphs is not, `graphs_given`), then
    each model file of `onnx`, named by its stem (with `input_shape`, as
    --input_shape).

    Raises:
      BadInput: two graphs of one name; a malformed --input_shape; an
        --input_shape without --onnx.
    """
    names = graphs_ if graphs_given or not onnx else []
    graphs: List[Dict[str, Any]] = [{"graph": name} for name in names]
    graphs += [common.model_fields(path, input_shape) for path in onnx]
    if input_shape and not onnx:
        raise BadInput("--input_shape applies to --onnx models; no --onnx given")
    seen = set()
    for fields in graphs:
        name = fields["graph"]
        if name in seen:
            raise BadInput(f"two graphs named {name!r}: results folders are named by the zoo "
                           f"graph or the --onnx file's stem; rename a file")
        seen.add(name)
    return graphs


def main(argv):
    del argv
    graphs = graph_fields(FLAGS.graphs, FLAGS["graphs"].present, FLAGS.onnx, FLAGS.input_shape)
    config = BaselineRunConfig(
        runs=tuple(common.run_settings(FLAGS, graph=g) for g in graphs),
        results_dir=FLAGS.results_dir, rerun=FLAGS.rerun, taso_alpha=FLAGS.taso_alpha,
        taso_budget=FLAGS.taso_budget, taso_budget_for=tuple(FLAGS.taso_budget_for),
        eqsat_time_limit=FLAGS.eqsat_time_limit, runtimes=tuple(FLAGS.runtimes),
        rounds=FLAGS.rounds, warmup=FLAGS.warmup, repeats=FLAGS.repeats, seed=FLAGS.seed,
        settings=tuple((k, FLAGS[k].value) for k in _SETTINGS_FLAGS))
    results = run_all(config)
    out_dir = os.path.join(config.results_dir, "baselines")
    text = write_summary(results, out_dir)
    print(text)
    print(f"results in {out_dir}")


if __name__ == "__main__":
    app.run(common.exit_on_bad_input(main))
