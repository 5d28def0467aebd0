"""The reproduction's measure step: every variant of a graph timed end to end.

`measure(plan, setting, graph)` rebuilds the graph's variants (original,
greedy, TASO, model-free, model-based and, where it ran, the separate
reward network's; of the agents, the median seed's graph:
`variant_graphs`), and the temperature sweep's graphs where the sweep ran
on it (`sweep_graphs`), and times the distinct ones on this CPU,
interleaved (`xflowrl.measure.compare.time_models`), all with the same
random weights and inputs: a `xflowrl.results.Measurement` in
<results_dir>/<setting>/<graph>/measured/result.json, reused while its
settings (budgets, seed, the runs it timed) match.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Dict, List, Optional, Sequence, TYPE_CHECKING, Tuple

import numpy as np

from xflowrl.reproduction.plan import Plan
from xflowrl.results import layout
from xflowrl.results.layout import SEPARATE, Setting
from xflowrl.results.measurement import ClockTiming, Measurement, SweepTiming, TimedGraph
from xflowrl.results.sweep import SweepResult

if TYPE_CHECKING:
    from xflowrl.engine import CostModel, Graph

# The cost cache the entry points' default flags name.
COST_CACHE = "results/cost_cache.tsv"


def variant_graphs(setting: Setting, graph_name: str, root: str,
                   seeds: Sequence[int]) -> Tuple[Dict[str, "Graph"], "CostModel"]:
    """The engine graphs to time, by variant name: original, greedy, TASO
    (replayed from baselines.py's record, `xflowrl.search.Baselines`, whose
    steps keep their locations; the cost must equal the record's, checked),
    model-free, model-based and, where it ran, the model-based agent with
    the separate reward network (replayed; of each agent, the median seed's
    run, `layout.median_seed`); and the cost model of `setting`.

    Raises:
      RuntimeError: TASO's replayed steps cost other than its record says.
    """
    # pylint: disable=import-outside-toplevel
    from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
    from xflowrl.env import EnvConfig, NO_STEP_LIMIT, make_env
    from xflowrl.env.replay import replay
    from xflowrl.rules.sets import DEFAULT_RULE_SET
    from xflowrl.search import Baselines, replay_result
    runs = layout.load_runs(root, graph_name, seeds)
    baselines = Baselines.from_json(runs.baselines)
    env = make_env(graph_name, DEFAULT_RULE_SET, setting.cost_model, setting.profile,
                   COST_CACHE,
                   EnvConfig(max_steps=NO_STEP_LIMIT,
                             max_locations=baselines.max_locations or DEFAULT_MAX_LOCATIONS))
    graphs = {"original": env.initial_graph, "greedy": replay(env, baselines.greedy.applied)}
    if baselines.taso:
        graphs["taso"] = replay_result(env, baselines.taso)
        cost = graphs["taso"].cost(env.cost_model)
        if not np.isclose(cost, baselines.taso.cost_ms, rtol=1e-9):
            raise RuntimeError(f"{graph_name}: TASO's steps replayed cost {cost} ms, "
                               f"baselines.py recorded {baselines.taso.cost_ms} ms")
    agents: List[Tuple[str, Any, Any]] = [
        ("model-free", runs.mf, runs.mf.agent_applied),
        ("model-based", runs.mb, runs.mb.controller_cheapest_applied)]
    if runs.mb_separate:
        agents.append((SEPARATE, runs.mb_separate, runs.mb_separate.controller_cheapest_applied))
    for name, run, applied in agents:
        run_config = EnvConfig(max_steps=NO_STEP_LIMIT, max_locations=run.max_locations)
        run_env = make_env(graph_name, run.rules, setting.cost_model, setting.profile,
                           COST_CACHE, run_config)
        graphs[name] = replay(run_env, [(x, int(loc)) for x, loc in applied])
    return graphs, env.cost_model


def sweep_result(plan: Plan, setting: Setting, graph_name: str) -> Optional[SweepResult]:
    """The temperature sweep's result under `setting`, if the sweep ran on
    `graph_name` there."""
    if graph_name != plan.sweep_graph or setting.key not in plan.sweep_settings:
        return None
    return layout.load_sweep(plan.results_dir, setting.key, graph_name)


def sweep_graphs(setting: Setting, sweep: SweepResult) -> List[List["Graph"]]:
    """Per row of the sweep (a temperature), the graph of each seed's real
    episode, replayed from its applied steps."""
    # pylint: disable=import-outside-toplevel
    from xflowrl.env import EnvConfig, NO_STEP_LIMIT, make_env
    from xflowrl.env.replay import replay
    env = make_env(sweep.graph, sweep.rules, setting.cost_model,
                   setting.profile, COST_CACHE,
                   EnvConfig(max_steps=NO_STEP_LIMIT, max_locations=sweep.max_locations))
    return [[replay(env, [(x, int(loc)) for x, loc in applied]) for applied in row.applied]
            for row in sweep.rows]


def measure(plan: Plan, setting: Setting, graph_name: str, rerun: bool = False) -> Measurement:
    """Times every variant of one graph (one timing per distinct graph; of
    the agents, the median seed's graph); writes and returns
    <root>/<graph>/measured/result.json, a `Measurement` (reused when its
    settings match, unless `rerun`)."""
    # pylint: disable=import-outside-toplevel
    from xflowrl import zoo
    from xflowrl.executor.weights import random_inputs, random_weights
    from xflowrl.measure.compare import time_models
    from xflowrl.onnx_io import to_onnx
    b, seeds = plan.budget, list(plan.seeds)
    root = os.path.join(plan.results_dir, setting.key)
    path = os.path.join(root, graph_name, "measured", "result.json")
    sweep = sweep_result(plan, setting, graph_name)
    settings: Dict[str, Any] = {"runtimes": b.measure_runtimes, "rounds": b.measure_rounds,
                "warmup": b.measure_warmup, "repeats": b.measure_repeats, "seed": plan.seed,
                "inputs": layout.run_stamps(root, graph_name, seeds)}
    if sweep:
        settings["inputs"]["sweep"] = [row.applied for row in sweep.rows]
    if not rerun:
        saved = Measurement.load(path)
        if saved is not None and saved.settings == settings:
            return saved
    graphs, cost_model = variant_graphs(setting, graph_name, root, seeds)
    original = graphs["original"]
    weights = random_weights(original, plan.seed, gain=zoo.weight_gain(graph_name))

    def key(g) -> str:  # equal graphs are timed once
        return f"{g.hash():x}"
    # The sweep's graphs (Table 4.3) are timed in the same rounds as the
    # original, so that their changes share its baseline.
    swept = sweep_graphs(setting, sweep) if sweep else []
    models = {}
    for g in list(graphs.values()) + [g for row in swept for g in row]:
        if key(g) not in models:
            models[key(g)] = to_onnx(g, weights, check=False)
    logging.getLogger(__name__).info("%s/%s: timing %d distinct graphs", setting.key,
                                     graph_name, len(models))
    start = time.time()
    times = time_models(models, random_inputs(original, plan.seed),
                        b.measure_runtimes.split(","), b.measure_rounds, b.measure_warmup,
                        b.measure_repeats, np.random.default_rng(plan.seed))

    def timed(g) -> TimedGraph:
        return TimedGraph(graph_key=key(g), ops=g.num_ops(), estimated_ms=g.cost(cost_model),
                          measured={clock: ClockTiming(**t) for clock, t in times[key(g)].items()})
    result = Measurement(
        graph=graph_name, setting=setting.key, cost_model=cost_model.name, settings=settings,
        seconds=time.time() - start, variants={name: timed(g) for name, g in graphs.items()},
        sweep=[SweepTiming(temperature=row.temperature, seeds=[timed(g) for g in by_seed])
               for row, by_seed in zip(sweep.rows, swept)] if sweep else None)
    result.save(path, indent=1)
    return result
