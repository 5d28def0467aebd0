"""The fitted cost backend from per-kernel profiles of whole graphs (the
alternative to micro-benchmarks; `experiments/fit_cost_model.py --method=profile`).

Every graph of a `ProfileFitConfig` and its greedy and TASO variants under
each cost model of `optimize_with` (`variants`) run with onnxruntime's
profiler on; their kernels, traced to engine ops (`ort_profile.profile_rows`),
are fitted per op class (`cost_fit.fit`), and the executor's overhead,
fitted over the graphs' end-to-end times (`cost_fit.overhead_scale`), is
folded in (`fitted_profile`). A profile stores its rows and graph times, so
`refit_source` redoes a fit from it without profiling; `held_out` leaves
graphs out of one.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from xflowrl.engine.xfers import TASO_ALPHA, TASO_BUDGET
from xflowrl.measure import cost_fit

DESCRIPTION = ("fitted cost backend: per op class ms = c0 + c1*GFLOP + c2*MB + "
               "c3*max(0, MB - c4) (experiments/fit_cost_model.py --method=profile); "
               "onnxruntime 1 thread, all graph optimizations")
SCRIPT = "python experiments/fit_cost_model.py"


@dataclasses.dataclass(frozen=True)
class ProfileFitConfig:
    """What to profile: zoo graphs, the cost models whose greedy (and, on
    `taso_graphs`, TASO) variants are profiled too, the profiler's runs per
    graph and interleaved passes, the seed of weights and inputs."""
    graphs: Tuple[str, ...]
    optimize_with: Tuple[str, ...]
    taso_graphs: Tuple[str, ...]
    taso_budget: int = TASO_BUDGET
    runs: int = 20
    passes: int = 2
    seed: int = 0

    def command(self) -> str:
        """The command line that profiles this (the profile's provenance)."""
        return f"{SCRIPT} --method=profile " + " ".join(
            f"--{k}={','.join(v) if isinstance(v, (list, tuple)) else v}" for k, v in (
                ("graphs", self.graphs), ("optimize_with", self.optimize_with),
                ("taso_graphs", self.taso_graphs), ("runs", self.runs),
                ("passes", self.passes), ("seed", self.seed)))


class Profiled(NamedTuple):
    """What a fit reads: timed kernel rows, per-graph times, and the command
    that produced them."""
    rows: List[cost_fit.Row]
    graphs: List[Dict[str, Any]]
    command: str


def variants(name: str, xfers: Any, config: ProfileFitConfig) -> Dict[str, tuple]:
    """The original zoo graph `name` and its greedy (and TASO) variants under
    each cost model of `config.optimize_with`, distinct graphs only, by
    "<graph>/<variant>": (graph, weights, feeds)."""
    # On use: the engine's search and the environment (docs/layout.md).
    from xflowrl import zoo  # pylint: disable=import-outside-toplevel
    from xflowrl.entry_points import cost_model_from_spec  # pylint: disable=import-outside-toplevel
    from xflowrl.env import (  # pylint: disable=import-outside-toplevel
        EnvConfig,
        GraphEnv,
        NO_STEP_LIMIT,
    )
    from xflowrl.executor.weights import (  # pylint: disable=import-outside-toplevel
        random_inputs,
        random_weights,
    )
    from xflowrl.search.greedy import greedy_search  # pylint: disable=import-outside-toplevel
    original = zoo.get_graph(name)
    weights = random_weights(original, config.seed, gain=zoo.weight_gain(name))
    feeds = random_inputs(original, config.seed)
    out = {"original": original}
    for spec in config.optimize_with:
        model = cost_model_from_spec(spec)
        env = GraphEnv(original, xfers, model, EnvConfig(max_steps=NO_STEP_LIMIT))
        greedy_search(env)
        out[f"greedy[{spec}]"] = env.graph
        if name in config.taso_graphs and config.taso_budget > 0:
            out[f"taso[{spec}]"] = xfers.search(original, model, alpha=TASO_ALPHA,
                                                budget=config.taso_budget).graph
    unique, seen = {}, set()
    for key, graph in out.items():
        if graph.hash() not in seen:
            seen.add(graph.hash())
            unique[f"{name}/{key}"] = (graph, weights, feeds)
    return unique


def profile(config: ProfileFitConfig, xfers: Any,
            progress: Optional[Callable[[str], None]] = None) -> Profiled:
    """Profiles every graph of `config` and its variants (`variants`)."""
    from xflowrl.measure import ort_profile  # pylint: disable=import-outside-toplevel
    todo: Dict[str, tuple] = {}
    for name in config.graphs:
        start = time.time()
        todo.update(variants(name, xfers, config))
        if progress:
            progress(f"{name}: variants in {time.time() - start:.0f} s")
    rows, per_graph = ort_profile.profile_rows(todo, config.runs, config.passes)
    return Profiled(rows, per_graph, config.command())


def refit_source(earlier: Mapping[str, Any], path: str) -> Profiled:
    """The rows and graph times stored in an earlier profile (`path`, a
    --method=profile output) to fit again.

    Raises:
      ValueError: the file stores no profiled rows.
    """
    if not earlier.get("rows") or "graphs" not in earlier:
        raise ValueError(f"{path} stores no profiled rows: --refit_from takes a "
                         "--method=profile output")
    return Profiled(cost_fit.read_rows(earlier, path), list(earlier["graphs"]),
                    earlier["command"] + f" (refit: --refit_from={path})")


def held_out(profiled: Profiled, graphs: Sequence[str]) -> Profiled:
    """`profiled` without the rows and graph times of `graphs` (each
    original and its variants); unchanged for none."""
    if not graphs:
        return profiled
    return Profiled([r for r in profiled.rows if r.graph.split("/")[0] not in graphs],
                    [g for g in profiled.graphs if g["graph"] not in graphs],
                    profiled.command + f" --hold_out={','.join(graphs)}")


def fitted_profile(profiled: Profiled, machine: str) -> Dict[str, Any]:
    """The profile file's content (`cost_fit.write_profile`): per-class fits
    of the rows, the executor's overhead fitted over the graphs and folded
    into every class, and what they came from."""
    coefficients, stats = cost_fit.fit(profiled.rows)
    scale, per_kernel = cost_fit.overhead_scale(profiled.graphs)
    return {
        "description": DESCRIPTION,
        "command": profiled.command,
        "machine": machine,
        "method": "profile",
        "coefficients": cost_fit.fold_overhead(coefficients, scale, per_kernel),
        "overhead_scale": scale,
        "per_kernel_overhead_ms": per_kernel,
        "fit": stats,
        "graphs": profiled.graphs,
        "rows": [r._asdict() for r in profiled.rows],
    }


# The part of a profile the script prints.
SUMMARY_KEYS = ("coefficients", "overhead_scale", "per_kernel_overhead_ms", "fit", "graphs")
