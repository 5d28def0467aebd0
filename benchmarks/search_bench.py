"""Where search matters: one-step greedy, TASO's search, equality saturation
and random descents, on equal terms.

For every graph x batch x cost model x rule set (a setting, one row) it runs
the methods named by --methods (default all four):

- `greedy`: one-step greedy (`xflowrl.search.greedy_search`, no step limit),
  with the candidate locations at reset (`GraphEnv.reset()`'s location mask);
- `taso`: TASO's backtracking search (`XferSet.search`) at every alpha x
  budget (--alphas, --budgets), each run stopped after --time_limit seconds;
- `eqsat`: equality saturation (`xflowrl.search.eqsat`, TENSAT's method):
  saturation up to --eqsat_time_limit seconds and --eqsat_node_limit
  e-nodes, then extraction by ILP (--eqsat_ilp_time_limit CPU seconds, greedy
  extraction as the fallback); the graph handed over is checked to compute
  the original's outputs (numpy reference executor) on graphs of at most
  --eqsat_check_max_ops ops, the reference being too slow on bigger ones;
- `random`: --descents random descents (`landscape.random_descent`: a
  uniformly drawn cost-lowering candidate each step until none is left),
  episode i seeded with --descent_seed + i; the best and the median end cost.

Each row then names the lowest cost any of them reached and who reached it:

    best_known_ms = min(greedy, best TASO run, eqsat, best descent)
    winners       = the methods whose cost is within 1e-6 x initial of it
    gap_pct       = 100 * (greedy - best_known_ms) / initial cost
    taso_gap_pct  = 100 * (greedy - best TASO run) / initial cost

over the methods that ran (positive gap: something beats greedy;
`taso_gap_pct` is what `gap_pct` meant before the other methods came in), and
each method's `<method>_change_pct` from the initial cost. It prints one JSON
line per setting, writes all of them to --out_json and the markdown tables to
--out_md (docs/benchmark.md). The matrix itself (settings, methods, rows,
tables) is `search_matrix.py`, which holds no flags:

- a matrix graph x (rule set, cost model) of gap %, bold where >= 1;
- per rule set, one row per (graph, cost model): ops, initial cost (ms), each
  method's cost change from the initial graph in % (negative: faster), with
  the best TASO run's alpha and budget, eqsat's stop reason, e-nodes,
  seconds and ILP status, and the descents' median; the best known change,
  the winner(s) and the gap; "—" where a method did not run (rows of older
  runs have no eqsat or descents);
- per rule set, TASO's runs at every alpha x budget (expansions, seconds).

    python benchmarks/search_bench.py                      # docs/benchmark.md's tables
    python benchmarks/search_bench.py --quick              # smoke test (~20 s on 2 cores)
    python benchmarks/search_bench.py --graphs=bert --cost_models=onednn \
        --cost_cache=results/cost_cache.tsv
    python benchmarks/search_bench.py --methods=eqsat,random   # add methods to old rows
    python benchmarks/search_bench.py --graphs=resnet18,vgg19 --batches=1,8
    python benchmarks/search_bench.py --workers=2          # settings as Ray tasks

--quick runs small_cnn x analytic/cpu x the --rules sets and squeezenet1_1 x
analytic/v100 x generated, the setting where looking ahead pays (greedy
-10.8%, TASO's search and eqsat -36.7%), with small limits (alpha 1.0/1.2,
budgets 50/200, eqsat 3,000 e-nodes (10 s at most) and ILP 2 s, 5
descents).

Settings already in --out_json are kept and skipped (`--resume`, default on),
so a long run can be split into several commands that fill one file; a kept
row that lacks a method of --methods gets that method run and added (the
others are not rerun). The markdown is always written from the whole file.

Cost models are named `backend/profile` for the analytic roofline
(`analytic/cpu`, `analytic/v100`) and by backend for the measured ones
(`onednn`, `cudnn`), which use --cost_cache.

TASO's runs carry a wall-clock limit (--time_limit); a run that stopped on it
before its budget is marked `time_limit_hit` (its cost is what it had found).

--batches builds each zoo graph at those batch sizes (every builder but bert's
and vit's takes `batch_size`; those two, and ONNX files, run at batch 1 only).
A setting's key gains `|batch=N` when N is not 1, so rows of earlier runs
(batch 1) stay valid.

--workers N > 1 runs the settings as Ray tasks, N at a time (a local Ray
started here, or the cluster at --ray_address); each row is saved as its task
finishes, so an interrupted run resumes as one run in-process does.

`--onnx` adds ONNX files, each one more graph named by its file name without
.onnx (with `--onnx` and no `--graphs`, only those; `--input_shape`
NAME=D1,D2,... fixes their inputs of dynamic dimensions). Their rows are
resumed by that name too: `--noresume` after changing a file. A file that
cannot be imported ends the script with one error line (exit status 2).

    python benchmarks/search_bench.py --onnx=my_model.onnx --cost_models=analytic/cpu
"""

from __future__ import annotations

import os

from absl import app, flags

from search_matrix import (
    BenchConfig,
    METHODS,
    QUICK_ALPHAS,
    QUICK_BUDGETS,
    QUICK_DESCENTS,
    QUICK_EQSAT,
    QUICK_SETTINGS,
    drop_methods,
    load_rows,
    markdown_table,
    plan_settings,
    row_key,
    run_matrix,
    save,
)
from xflowrl import zoo
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
from xflowrl.entry_points import exit_on_bad_input, model_name, model_source
from xflowrl.optimize import parse_input_shapes
from xflowrl.rules.sets import RULE_SETS
from xflowrl.search.eqsat import EqsatConfig
from xflowrl.search.eqsat.saturation import BACKOFFS, DESCENT_STARTS

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", [g for g in zoo.GRAPHS if g != "small_cnn"],
                  "Zoo graphs (default: every graph of zoo.GRAPHS but small_cnn; with --onnx "
                  "and no --graphs: none).")
flags.DEFINE_list("batches", ["1"], "Batch sizes of the zoo graphs (builders that take "
                  "batch_size; bert, vit and --onnx files: 1 only).")
flags.DEFINE_list("onnx", [], "Your own ONNX files, each one more graph named by its file name "
                  "without .onnx.")
flags.DEFINE_multi_string("input_shape", [], "NAME=D1,D2,...: the static shape of an --onnx "
                          "file's input of dynamic dimensions (repeat for several inputs).")
flags.DEFINE_list("cost_models", ["analytic/cpu", "analytic/v100"],
                  "Cost models: analytic/<profile>, fitted/<profile>, onednn or cudnn.")
flags.DEFINE_list("rules", ["default", "builtin+taso", "generated", "taso"],
                  f"Rule sets, names of xflowrl.rules.sets.RULE_SETS {list(RULE_SETS)}: "
                  "default and builtin+taso (the thesis') are the faithful ones; generated "
                  "and taso alone lack the compound built-ins (docs/benchmark.md).")
flags.DEFINE_list("methods", list(METHODS), f"Methods to run, of {list(METHODS)} "
                  "(random: the random descents).")
flags.DEFINE_list("rerun", [], "Methods whose results the resumed rows drop and run again "
                  "(after a change to a method; of --methods).")
flags.DEFINE_list("alphas", ["1.0", "1.05", "1.2"], "TASO search alphas.")
flags.DEFINE_list("budgets", ["1000", "10000"], "TASO search budgets (expansions).")
flags.DEFINE_float("time_limit", 30.0, "Seconds per TASO search run (0: none).")
flags.DEFINE_float("eqsat_time_limit", 30.0, "Equality saturation: seconds of saturation.")
flags.DEFINE_integer("eqsat_node_limit", EqsatConfig.node_limit, "Equality saturation: e-nodes at most.")
flags.DEFINE_float("eqsat_ilp_time_limit", EqsatConfig.ilp_time_limit_s,
                   "Equality saturation: CPU seconds of the ILP's acyclic programs together "
                   "(HiGHS's thread).")
flags.DEFINE_enum("eqsat_backoff", EqsatConfig.backoff, list(BACKOFFS),
                  "Equality saturation: how a rule over its match limit is scheduled "
                  "(EqsatConfig.backoff).")
flags.DEFINE_integer("eqsat_multi_pattern_iterations", None,
                     "Equality saturation: iterations that apply multi-pattern rules "
                     "(default: EqsatConfig's).")
flags.DEFINE_bool("eqsat_seed_descent", EqsatConfig.seed_descent,
                  "Equality saturation: one-step greedy's graph added to the e-graph "
                  "before saturation (EqsatConfig.seed_descent).")
flags.DEFINE_enum("eqsat_descent_start", EqsatConfig.descent_start, list(DESCENT_STARTS),
                  "Equality saturation: when saturation starts again from one-step "
                  "greedy's graph (EqsatConfig.descent_start).")
flags.DEFINE_integer("eqsat_check_max_ops", 150,
                     "Equality saturation: check the outputs of graphs up to this many ops.")
flags.DEFINE_integer("descents", 10, "Random descents per setting.")
flags.DEFINE_integer("descent_seed", 0, "Random descent i is seeded with this + i.")
flags.DEFINE_integer("max_locations", DEFAULT_MAX_LOCATIONS,
                     "L, locations per xfer of the environment (greedy, descents).")
flags.DEFINE_string("cost_cache", "results/cost_cache.tsv",
                    "Cache of measured op costs (onednn, cudnn).")
flags.DEFINE_string("out_json", "results/search_bench/search_bench.json",
                    "All settings' results (a JSON list).")
flags.DEFINE_string("out_md", "results/search_bench/search_bench.md", "The markdown tables.")
flags.DEFINE_bool("resume", True, "Keep settings already in --out_json and skip them.")
flags.DEFINE_bool("report_only", False, "Only rewrite --out_md from --out_json (no runs).")
flags.DEFINE_integer("workers", 1, "Settings run at a time; > 1: as Ray tasks (memory: a "
                     "TASO search on a large graph can hold several GB).")
flags.DEFINE_string("ray_address", "", "With --workers > 1: the Ray cluster to join "
                    "(empty: start one here, or $RAY_ADDRESS).")
flags.DEFINE_bool("quick", False, "A smoke test (~20 s): small_cnn x analytic/cpu x "
                  "the --rules sets and squeezenet1_1 x analytic/v100 x generated (where "
                  "looking ahead pays), alpha 1.0/1.2, budgets 50/200, eqsat and descents with "
                  "small limits; writes quick.json/quick.md beside --out_json/--out_md.")


def config_from_flags() -> BenchConfig:
    """The BenchConfig of the command line (--quick's limits where set)."""
    for method in FLAGS.methods:
        if method not in METHODS:
            raise app.UsageError(f"unknown method {method!r}; choose from {list(METHODS)}")
    eqsat = dict(time_limit_s=FLAGS.eqsat_time_limit, node_limit=FLAGS.eqsat_node_limit,
                 ilp_time_limit_s=FLAGS.eqsat_ilp_time_limit, backoff=FLAGS.eqsat_backoff,
                 seed_descent=FLAGS.eqsat_seed_descent,
                 descent_start=FLAGS.eqsat_descent_start)
    if FLAGS.eqsat_multi_pattern_iterations is not None:
        eqsat["multi_pattern_iterations"] = FLAGS.eqsat_multi_pattern_iterations
    alphas = [float(a) for a in FLAGS.alphas]
    budgets = [int(b) for b in FLAGS.budgets]
    descents = FLAGS.descents
    if FLAGS.quick:
        alphas, budgets, descents = list(QUICK_ALPHAS), list(QUICK_BUDGETS), QUICK_DESCENTS
        eqsat.update(QUICK_EQSAT)
    return BenchConfig(
        methods=tuple(m for m in METHODS if m in FLAGS.methods), alphas=tuple(alphas),
        budgets=tuple(budgets), time_limit=FLAGS.time_limit, max_locations=FLAGS.max_locations,
        cost_cache=FLAGS.cost_cache, eqsat=EqsatConfig(**eqsat),
        eqsat_check_max_ops=FLAGS.eqsat_check_max_ops,
        descent_seeds=tuple(FLAGS.descent_seed + i for i in range(descents)))


def main(argv):
    del argv
    out_json, out_md = FLAGS.out_json, FLAGS.out_md
    if FLAGS.quick:
        out_json = os.path.join(os.path.dirname(out_json), "quick.json")
        out_md = os.path.join(os.path.dirname(out_md), "quick.md")
    if FLAGS.report_only:
        save(load_rows(out_json), out_json, out_md)
        print(markdown_table(load_rows(out_json)))
        return
    for name in FLAGS.rules:
        if name not in RULE_SETS:
            raise app.UsageError(f"unknown rule set {name!r}; choose from {list(RULE_SETS)}")
    config = config_from_flags()
    batches = [int(b) for b in FLAGS.batches]
    if any(b < 1 for b in batches):
        raise app.UsageError(f"--batches must be >= 1, got {FLAGS.batches}")
    shapes = parse_input_shapes(FLAGS.input_shape)
    files = {model_name(path): path for path in FLAGS.onnx}  # graph name -> model file
    for path in files.values():
        model_source(path, shapes)  # read now: a bad file fails before any run
    only_files = bool(FLAGS.onnx and not FLAGS["graphs"].present)
    if FLAGS.quick:  # its zoo settings, or the model files under analytic/cpu
        settings = plan_settings([], list(files), [1], ["analytic/cpu"], FLAGS.rules)
        for graph, cost_model, rule_set in [] if only_files else QUICK_SETTINGS:
            settings += plan_settings([graph], [], batches, [cost_model],
                                      FLAGS.rules if rule_set is None else [rule_set])
    else:
        graphs = [] if only_files else FLAGS.graphs
        settings = plan_settings(graphs, list(files), batches, FLAGS.cost_models, FLAGS.rules)
    rows = load_rows(out_json) if FLAGS.resume and not FLAGS.quick else []
    for method in FLAGS.rerun:
        if method not in config.methods:
            raise app.UsageError(f"--rerun={method} is not one of --methods {list(config.methods)}")
    planned = {setting.key for setting in settings}
    rows = [drop_methods(r, FLAGS.rerun) if row_key(r) in planned else r for r in rows]
    rows = run_matrix(settings, config, rows, out_json, out_md, files, shapes,
                      FLAGS.workers, FLAGS.ray_address)
    print(markdown_table(rows))


if __name__ == "__main__":
    app.run(exit_on_bad_input(main))
