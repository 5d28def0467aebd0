"""The thesis' baselines (Chapter 4, Figures 4.1 and 4.2) per graph:
searched, timed end to end, saved (experiments/baselines.py).

`run_all(config)` runs, per graph of a `BaselineRunConfig`, one-step
greedy, TASO's search and equality saturation through the baseline runner
(`xflowrl.search.run_greedy`, `run_taso`, `run_eqsat`: `search_graph`),
times the original and every result's graph interleaved in the chosen
runtimes (`time_variants`), and writes <results_dir>/<graph>/baselines/
result.json (`run_graph`), or reuses a saved one of the same settings
(`load_or_run`). `write_summary` writes the table over all graphs, its data
and Figures 4.1 and 4.2.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from xflowrl.engine import Graph
from xflowrl.entry_points import (
    RunSettings,
    load_result,
    result_path,
    results_folder,
    save_result,
    write_json,
    write_text,
)
from xflowrl.env import NO_STEP_LIMIT
from xflowrl.measure.compare import time_models
from xflowrl.onnx_io import to_onnx
from xflowrl.optimize.model_io import BadInput
from xflowrl.results.figures import figure_baseline_runtimes, figure_taso
from xflowrl.results.layout import EQSAT, baseline_costs, baseline_runtimes
from xflowrl.results.records import RecordError
from xflowrl.results.tables import baselines_markdown
from xflowrl.results.thesis import thesis_baseline_ms
from xflowrl.search import Baselines, replay_result, run_eqsat, run_greedy, run_taso

_LOG = logging.getLogger(__name__)

@dataclasses.dataclass(frozen=True)
class BaselineRunConfig:
    """What one invocation does: the graphs to run (`runs`, in order, names
    unique), where results go, whether saved ones are redone,
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


def settings(run: RunSettings, config: BaselineRunConfig) -> dict:
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
    _LOG.info("%s: %d ops, cost %.4f ms; greedy %.4f ms (%d steps); TASO %s; "
              "equality saturation %s", run.graph, original.num_ops(), env.initial_cost,
              greedy.cost_ms, greedy.steps, f"{taso.cost_ms:.4f} ms" if taso else "skipped",
              f"{eqsat.cost_ms:.4f} ms ({eqsat.stop_reason}, {eqsat.handed_over} "
              f"extraction)" if eqsat else "skipped")
    record = Baselines(greedy=greedy, taso=taso, max_locations=env.config.max_locations,
                       eqsat=eqsat)
    return variants, record, env.cost_model.name


def time_variants(run: RunSettings, variants: List[Variant], config: BaselineRunConfig
                  ) -> Dict[str, Dict[str, Any]]:
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
    _LOG.info("%s: timing %d distinct graphs in %s", name, len(models),
              ", ".join(config.runtimes))
    measured = time_models(models, feeds, list(config.runtimes), config.rounds, config.warmup,
                           config.repeats, rng)
    return {v.name: dict(measured[key_of[v.name]], graph_key=key_of[v.name])
            for v in variants}


def run_graph(run: RunSettings, config: BaselineRunConfig) -> dict:
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


def load_or_run(run: RunSettings, config: BaselineRunConfig) -> dict:
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
            _LOG.info("%s: reusing %s", name, path)
            return saved
        else:
            _LOG.info("%s: %s has other settings; running again", name, path)
    return run_graph(run, config)


def run_all(config: BaselineRunConfig) -> Dict[str, dict]:
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


