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

Flags -> `Config` (built in `main`, the one reader of flags) -> `run_all`
(each graph searched and timed, or its saved result reused) ->
`write_summary` (the table, its data and the library's figures).

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

import dataclasses
import os
import time
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from absl import app, flags, logging
import common
import numpy as np

from xflowrl import zoo
from xflowrl.engine import Graph
from xflowrl.env import NO_STEP_LIMIT
from xflowrl.measure.compare import time_models
from xflowrl.onnx_io import to_onnx
from xflowrl.optimize.model_io import BadInput
from xflowrl.results.figures import figure_baseline_runtimes, figure_taso
from xflowrl.results.layout import (
    EQSAT,
    baseline_costs,
    baseline_runtimes,
)
from xflowrl.results.records import RecordError
from xflowrl.results.tables import baselines_markdown
from xflowrl.results.thesis import THESIS_GRAPHS, thesis_baseline_ms
from xflowrl.runs import (
    RunSettings,
    load_result,
    result_path,
    results_folder,
    save_result,
    write_json,
    write_text,
)
from xflowrl.search import Baselines, replay_result, run_eqsat, run_greedy, run_taso

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


@dataclasses.dataclass(frozen=True)
class Config:
    """What one invocation does, from its flags (built by `main`): the
    graphs to run (`runs`, in order, names unique: `graph_fields`, with the
    environment's flags), where results go, whether saved ones are redone,
    the searches' and the timing's settings (`settings`: the flags a saved
    result must match, by name, as the flags hold them; equality
    saturation's time limit among them, 0: skipped)."""
    runs: Tuple[RunSettings, ...]
    results_dir: str
    rerun: bool
    taso_alpha: float
    taso_budget: int
    taso_budget_for: Tuple[str, ...]
    eqsat_time_limit: float
    runtimes: Tuple[str, ...]
    rounds: int
    warmup: int
    repeats: int
    seed: int
    settings: Tuple[Tuple[str, object], ...]


TENSORRT = ("not run: TensorRT needs an NVIDIA GPU; this machine has neither a GPU nor "
            "TensorRT")


class Variant(NamedTuple):
    """One graph to time: the original or a baseline's result."""
    name: str
    graph: Graph
    cost_ms: float           # estimated, under the environment's cost model
    steps: Optional[int]     # substitutions applied (None: the original, equality saturation)
    seconds: Optional[float]  # search time


def taso_budget(name: str, default: int, overrides: Sequence[str]) -> int:
    """The TASO budget of graph `name`: its entry in `overrides`
    (--taso_budget_for's "graph=budget"), else `default` (--taso_budget)."""
    for entry in overrides:
        graph, _, budget = entry.partition("=")
        if graph == name:
            return int(budget)
    return default


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


def settings(run: RunSettings, config: Config) -> dict:
    """What a saved result of the graph `run` names must match to be reused
    (for a model file: also its path, modification time and size)."""
    out = dict(config.settings)
    out["taso_budget"] = taso_budget(run.graph, config.taso_budget, config.taso_budget_for)
    if run.onnx:
        stat = os.stat(run.onnx)
        out.update(onnx=os.path.abspath(run.onnx), onnx_mtime_ns=stat.st_mtime_ns,
                   onnx_bytes=stat.st_size, input_shapes=[[n, list(s)]
                                                          for n, s in run.input_shapes])
    return out


def search_graph(run: RunSettings, alpha: float, budget: int, eqsat_time_limit: float
                 ) -> Tuple[List[Variant], Baselines, str]:
    """Greedy's, TASO's and equality saturation's results on the graph `run`
    names (the baseline runner's; TASO skipped at budget 0, equality
    saturation at time limit 0): (variants to time, their record, the cost
    model's name)."""
    env = dataclasses.replace(run, max_steps=NO_STEP_LIMIT).make_env()
    original = env.initial_graph
    variants = [Variant("original", original, env.initial_cost, None, None)]
    greedy, greedy_graph = run_greedy(env)
    variants.append(Variant("greedy", greedy_graph, greedy.cost_ms, greedy.steps,
                            greedy.seconds))
    taso = None
    if budget > 0:
        taso, taso_graph = run_taso(env, alpha, budget)
        variants.append(Variant("taso", taso_graph, taso.cost_ms, taso.steps, taso.seconds))
    eqsat = None
    if eqsat_time_limit > 0:
        eqsat = run_eqsat(env, eqsat_time_limit)
        variants.append(Variant(EQSAT, replay_result(env, eqsat), eqsat.cost_ms, None,
                                eqsat.seconds))
    logging.info("%s: %d ops, cost %.4f ms; greedy %.4f ms (%d steps); TASO %s; "
                 "equality saturation %s", run.graph, original.num_ops(), env.initial_cost,
                 greedy.cost_ms, greedy.steps, f"{taso.cost_ms:.4f} ms" if taso else "skipped",
                 f"{eqsat.cost_ms:.4f} ms ({eqsat.stop_reason}, {eqsat.handed_over} "
                 f"extraction)" if eqsat else "skipped")
    record = Baselines(greedy=greedy, taso=taso, max_locations=env.config.max_locations,
                       eqsat=eqsat)
    return variants, record, env.cost_model.name


def time_variants(run: RunSettings, variants: List[Variant], config: Config
                  ) -> Dict[str, Dict[str, dict]]:
    """Per variant, per "<runtime>/<clock>", the spread of the round medians.
    Variants with equal graphs (hash) are timed once and share the figures."""
    name, source = run.graph, run.source()
    weights = source.weights(config.seed)
    feeds = source.inputs(config.seed)
    key_of = {v.name: f"{v.graph.hash():x}" for v in variants}
    models = {}
    for v in variants:
        if key_of[v.name] not in models:
            models[key_of[v.name]] = to_onnx(v.graph, weights, check=False)
    rng = np.random.default_rng(config.seed)
    logging.info("%s: timing %d distinct graphs in %s", name, len(models),
                 ", ".join(config.runtimes))
    measured = time_models(models, feeds, list(config.runtimes), config.rounds, config.warmup,
                           config.repeats, rng)
    return {v.name: dict(measured[key_of[v.name]], graph_key=key_of[v.name])
            for v in variants}


def run_graph(run: RunSettings, config: Config) -> dict:
    """Searches and times one graph; writes and returns its result.json."""
    start = time.time()
    name = run.graph
    variants, record, cost_model = search_graph(
        run, config.taso_alpha, taso_budget(name, config.taso_budget, config.taso_budget_for),
        config.eqsat_time_limit)
    measured = time_variants(run, variants, config)
    # The record's keys ("greedy", "taso", "eqsat", ...) at the top level, beside the
    # timings: `Baselines.from_json` reads them back.
    result = {
        "graph": name, "settings": settings(run, config), "cost_model": cost_model,
        "ops": variants[0].graph.num_ops(),
        "initial_cost_ms": variants[0].cost_ms, **record.to_json(),
        "variants": {v.name: {"ops": v.graph.num_ops(), "cost_ms": v.cost_ms,
                              "steps": v.steps, "search_seconds": v.seconds,
                              "measured": measured[v.name]} for v in variants},
        "tensorrt": {"run": False, "reason": TENSORRT},
        "thesis_gpu_ms": None if run.onnx else thesis_baseline_ms(name),
        "seconds": time.time() - start,
    }
    save_result(results_folder(config.results_dir, name, "baselines"), result, indent=1)
    return result


def load_or_run(run: RunSettings, config: Config) -> dict:
    """The saved result.json of the graph `run` names if its settings match
    (and not --rerun), else a fresh run.

    Raises:
      BadInput: a saved result whose record is of another version.
    """
    name = run.graph
    path = result_path(config.results_dir, name, "baselines")
    saved = None if config.rerun else load_result(path)
    if saved is not None:
        try:
            Baselines.from_json(saved, where=path)
        except RecordError as e:
            raise BadInput(f"{e} (--rerun)") from e
        if saved.get("settings") == settings(run, config):
            logging.info("%s: reusing %s", name, path)
            return saved
        else:
            logging.info("%s: %s has other settings; running again", name, path)
    return run_graph(run, config)


def run_all(config: Config) -> Dict[str, dict]:
    """Each graph's result.json, by name (`load_or_run`); a model file that
    cannot be imported fails (BadInput) before any graph runs."""
    for run in config.runs:
        run.source()
    return {run.graph: load_or_run(run, config) for run in config.runs}


def write_summary(results: Dict[str, dict], out_dir: str) -> str:
    """Writes the summary of `results` (graph -> its result.json) into
    `out_dir`: baselines.md (returned), baselines.json and Figures 4.1
    and 4.2: the library's table and figures, from the results as records
    (`baseline_costs`, `baseline_runtimes`)."""
    costs = {n: baseline_costs(r) for n, r in results.items()}
    runtimes = {n: baseline_runtimes(r) for n, r in results.items()}
    text = baselines_markdown(costs, runtimes, TENSORRT)
    write_text(os.path.join(out_dir, "baselines.md"), text)
    write_json(os.path.join(out_dir, "baselines.json"),
               {"graphs": list(results), "tensorrt": TENSORRT, "results": results}, indent=1)
    figure_baseline_runtimes(runtimes, os.path.join(out_dir, "fig4_1_runtimes.png"))
    cost_models = ", ".join(dict.fromkeys(c.cost_model for c in costs.values()))
    figure_taso({f"estimated by {cost_models}": costs},
                os.path.join(out_dir, "fig4_2_taso_search.png"),
                "Figure 4.2: TASO's backtracking search (estimated cost)",
                by=("expansions", "seconds"))
    return text


def main(argv):
    del argv
    graphs = graph_fields(FLAGS.graphs, FLAGS["graphs"].present, FLAGS.onnx, FLAGS.input_shape)
    config = Config(runs=tuple(common.run_settings(FLAGS, graph=g) for g in graphs),
                    results_dir=FLAGS.results_dir, rerun=FLAGS.rerun,
                    taso_alpha=FLAGS.taso_alpha, taso_budget=FLAGS.taso_budget,
                    taso_budget_for=tuple(FLAGS.taso_budget_for),
                    eqsat_time_limit=FLAGS.eqsat_time_limit, runtimes=tuple(FLAGS.runtimes), rounds=FLAGS.rounds, warmup=FLAGS.warmup,
                    repeats=FLAGS.repeats, seed=FLAGS.seed,
                    settings=tuple((k, FLAGS[k].value) for k in _SETTINGS_FLAGS))
    results = run_all(config)
    out_dir = os.path.join(config.results_dir, "baselines")
    text = write_summary(results, out_dir)
    print(text)
    print(f"results in {out_dir}")


if __name__ == "__main__":
    app.run(common.exit_on_bad_input(main))
