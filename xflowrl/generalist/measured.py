"""The held-out graphs as they run: the estimated changes of the zero-shot
evaluation beside measured ones.

`measure_held_out(runs, graphs, xfers)` (`measure_folder`: every run under
a generalist results folder, written to its measured.json) rebuilds, per held-out graph, the
initial graph, one-step greedy's graph and the graph every run's agent
handed over (each seed's, of every agent given: its `policy_applied`
prefix replayed from the initial graph), and times the distinct ones
(by hash) end to end in onnxruntime, interleaved in rounds
(`xflowrl.measure.compare.time_models`: one intra-op thread, the CPU
time of the inference thread, a fresh random order every round), all with
the same random weights (`random_weights`, He-style gain) and inputs.
Measured changes are percentages of the initial graph's measured time,
from round medians; the estimated ones are the cost model's.

This machine's CPU runs what a GPU-like cost model estimated: measured
and estimated changes need not agree, and a table says which is which.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Protocol, Sequence

import numpy as np

from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.env.environment import NO_STEP_LIMIT
from xflowrl.env.replay import replay
from xflowrl.results.generalist import (
    HeldOutTimings,
    MEASURED_JSON,
    TimedGraph,
    TimedVariant,
    ZeroShotRow,
    agent_runs,
)
from xflowrl.search import greedy_search

# The clock of the comparison: CPU time of onnxruntime's one inference thread.
CLOCK = "ort/cpu"


class SeedRows(Protocol):
    """One seed's zero-shot rows (a `xflowrl.results.generalist.GeneralistRun`
    is one; `HandedOver` another)."""

    @property
    def seed(self) -> int: ...

    @property
    def held_out(self) -> Sequence[ZeroShotRow]: ...


class HandedOver(NamedTuple):
    """The rows of one policy evaluated without a seed's run around them."""
    seed: int
    held_out: Sequence[ZeroShotRow]


def _graphs_of(graph: Graph, runs: Mapping[str, Sequence[SeedRows]], name: str, xfers: XferSet,
               cost_model: CostModel, max_locations: int) -> Dict[str, Graph]:
    """"initial", "greedy" and "<agent>/<seed>" -> the graph each hands over."""
    env = GraphEnv(graph, xfers, cost_model,
                   EnvConfig(max_steps=NO_STEP_LIMIT, max_locations=max_locations))
    out = {"initial": graph, "greedy": replay(env, greedy_search(env).applied)}
    for agent, results in runs.items():
        for result in results:
            row = next((r for r in result.held_out if r.graph == name), None)
            if row is not None:
                applied = [(x, int(loc)) for x, loc in row.policy_applied]
                out[f"{agent}/{result.seed}"] = replay(env, applied)
    return out


def measure_graph(name: str, graph: Graph, runs: Mapping[str, Sequence[SeedRows]],
                  xfers: XferSet, cost_model: CostModel, rounds: int = 5, warmup: int = 2,
                  repeats: int = 10, seed: int = 0,
                  max_locations: int = DEFAULT_MAX_LOCATIONS) -> TimedGraph:
    """One held-out graph: per variant ("initial", "greedy", "<agent>/<seed>")
    its estimated cost, measured median and range (ms) and both changes
    against the initial graph (see module docstring)."""
    # Imported here: onnx and onnxruntime only where something is timed.
    from xflowrl.executor.weights import (  # pylint: disable=import-outside-toplevel
        random_inputs,
        random_weights,
    )
    from xflowrl.measure.compare import time_models  # pylint: disable=import-outside-toplevel
    from xflowrl.onnx_io import to_onnx  # pylint: disable=import-outside-toplevel
    variants = _graphs_of(graph, runs, name, xfers, cost_model, max_locations)
    weights = random_weights(graph, seed=seed)
    feeds = random_inputs(graph, seed)
    key_of = {v: f"{g.hash():x}" for v, g in variants.items()}
    models = {}
    for v, g in variants.items():
        if key_of[v] not in models:
            models[key_of[v]] = to_onnx(g, weights, check=False)
    times = time_models(models, feeds, ["ort"], rounds, warmup, repeats,
                        np.random.default_rng(seed))
    initial_ms = times[key_of["initial"]][CLOCK]["median_ms"]
    initial_cost = graph.cost(cost_model)
    out = {}
    for v, g in variants.items():
        t = times[key_of[v]][CLOCK]
        cost = g.cost(cost_model)
        out[v] = TimedVariant(estimated_ms=cost,
                              estimated_change=100.0 * (cost / initial_cost - 1.0),
                              measured_ms=t["median_ms"], measured_min_ms=t["min_ms"],
                              measured_max_ms=t["max_ms"],
                              measured_change=100.0 * (t["median_ms"] / initial_ms - 1.0),
                              graph_key=key_of[v])
    return TimedGraph(graph=name, clock=CLOCK, rounds=rounds, variants=out)


def measure_held_out(runs: Mapping[str, Sequence[SeedRows]],
                     graphs: Mapping[str, Callable[[], Graph]], xfers: XferSet,
                     cost_model: CostModel, rounds: int = 5, seed: int = 0,
                     progress: Optional[Callable[[str], None]] = None,
                     max_locations: int = DEFAULT_MAX_LOCATIONS) -> List[TimedGraph]:
    """`measure_graph` on every held-out graph the runs evaluated.

    Args:
      runs: agent label ("policy", "model-based") -> its seeds' rows
        (`xflowrl.results.generalist.seed_runs`, or `HandedOver`).
      graphs: graph name -> builder (the corpus').
    """
    names: List[str] = []
    for results in runs.values():
        for result in results:
            names += [r.graph for r in result.held_out if r.graph not in names]
    out = []
    for i, name in enumerate(names, 1):
        row = measure_graph(name, graphs[name](), runs, xfers, cost_model, rounds=rounds,
                            seed=seed, max_locations=max_locations)
        out.append(row)
        if progress:
            greedy = row.variants["greedy"]
            progress(f"[{i}/{len(names)}] {name}: greedy estimated "
                     f"{greedy.estimated_change:+.2f}%, measured "
                     f"{greedy.measured_change:+.2f}%")
    return out


def measure_folder(folder: str, graphs: Mapping[str, Callable[[], Graph]], xfers: XferSet,
                   cost_model: CostModel, rounds: int = 5, seed: int = 0,
                   progress: Optional[Callable[[str], None]] = None) -> HeldOutTimings:
    """`measure_held_out` on every seed's run of both agents under the
    results folder `folder` (`xflowrl.results.generalist.agent_runs`);
    writes `folder`/measured.json."""
    timings = HeldOutTimings(measure_held_out(agent_runs(folder), graphs, xfers, cost_model,
                                              rounds=rounds, seed=seed, progress=progress))
    timings.save(os.path.join(folder, MEASURED_JSON))
    return timings


def markdown(measured: Sequence[TimedGraph],
             agents: Sequence[str] = ("policy", "model-based")) -> str:
    """Per graph, estimated and measured changes side by side: one-step
    greedy's and each agent's (median [min, max] over its seeds)."""
    agents = [a for a in agents if any(v.startswith(a + "/") for row in measured
                                       for v in row.variants)]
    head = "| graph | initial, measured ms | greedy: estimated / measured |"
    rule = "|---|---:|---|"
    for agent in agents:
        head += f" {agent}: estimated / measured |"
        rule += "---|"
    lines = [f"Measured: onnxruntime, one thread, CPU time ({CLOCK}), median of the round "
             "medians; changes against the initial graph.", "", head, rule]
    for row in measured:
        variants = row.variants
        greedy = variants["greedy"]
        line = (f"| {row.graph} | {variants['initial'].measured_ms:.3f} | "
                f"{greedy.estimated_change:+.2f}% / {greedy.measured_change:+.2f}% |")
        for agent in agents:
            seeds = [v for k, v in variants.items() if k.startswith(agent + "/")]
            if not seeds:
                line += " |"
                continue
            line += (f" {_spread([v.estimated_change for v in seeds])} / "
                     f"{_spread([v.measured_change for v in seeds])} |")
        lines.append(line)
    return "\n".join(lines)


def _spread(values: Sequence[float]) -> str:
    if len(values) == 1 or max(values) - min(values) < 5e-3:
        return f"{np.median(values):+.2f}%"
    return f"{np.median(values):+.2f}% [{min(values):+.2f}, {max(values):+.2f}]"
