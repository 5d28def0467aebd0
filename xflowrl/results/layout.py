"""Where experiments/reproduce.py's runs lie in its results folder, and
reading them back as records.

Layout (per setting key, e.g. `cpu`; with several seeds the first seed's
agents are where shown, the others' below <results>/<setting>/seed_<s>/ in
the same layout, `seed_root`):

  <results>/<setting>/<graph>/baselines/result.json     (baselines.py)
  <results>/<setting>/<graph>/train_mf/result.json      (train_mf.py: ModelFreeRun)
  <results>/<setting>/<graph>/train_mb/result.json      (train_mb.py: ModelBasedRun)
  <results>/<setting>/<graph>/train_mb/controller/history.json  (dream returns)
  <results>/<setting>/<graph>/measured/result.json      (the measure step: Measurement)
  <results>/<setting>/separate_reward/<graph>/train_mb/result.json
  <results>/graph_properties/table_4_1.json             (graph_properties.py)
  <results>/temperature/<graph>/temperature_sweep/result.json   (this CPU: SweepResult)
  <results>/temperature_gpu/<graph>/temperature_sweep/result.json   (GPU-like: SweepResult)

A baseline run's result is the baseline runner's record as JSON
(`xflowrl.search.Baselines.to_json`, beside baselines.py's timings); what the report
and baselines.py's figures read of it goes through `baseline_costs` and
`baseline_runtimes` (and `random_cost_ms`, `greedy_cost_ms` for the
baselines inside an agent's run), the one place that knows its keys.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Type, TypeVar

from xflowrl.results.measurement import ClockTiming, Measurement, TimedGraph
from xflowrl.results.records import Record
from xflowrl.results.runs import ModelBasedRun, ModelFreeRun
from xflowrl.results.sweep import SweepResult

T = TypeVar("T")
R = TypeVar("R", bound=Record)


@dataclasses.dataclass(frozen=True)
class Setting:
    """A cost setting: the cost model the searches and agents optimise."""
    key: str
    label: str
    cost_model: str
    profile: str
    what: str


SETTINGS: Dict[str, Setting] = {
    "cpu": Setting("cpu", "this CPU", "fitted", "cpu",
                   "fitted/cpu: per-op costs calibrated on this machine's onnxruntime "
                   "(docs/runtime.md)"),
    "gpu": Setting("gpu", "GPU-like", "analytic", "v100",
                   "analytic/v100: an analytic stand-in for the thesis' GPU (no GPU here; "
                   "estimates only)"),
}

VARIANTS = ("original", "greedy", "taso", "model-free", "model-based",
            "model-based, separate reward")
EQSAT = "eqsat"   # equality saturation's graph: timed by baselines.py, not by the report
# What baselines.py times: original, greedy, taso, eqsat (each where it ran).
BASELINE_VARIANTS = VARIANTS[:3] + (EQSAT,)
SEPARATE = "model-based, separate reward"   # timed only on --separate_reward_graphs
CLOCKS = ("ort/cpu", "tf/cpu", "tf/wall")


def setting_label(setting: str) -> str:
    """"GPU-like (analytic/v100)": a setting's label and cost model."""
    s = SETTINGS[setting]
    return f"{s.label} ({s.cost_model}/{s.profile})"


# -- the baselines' results (the baseline runner's dicts) ---------------------

@dataclasses.dataclass
class BaselineSummary:
    """What the report shows of a baseline run, in a graph's row
    (`xflowrl.results.rows.GraphRow` builds on it): the graph's initial
    estimate, one-step greedy and TASO's search."""
    cost_model: str
    ops: int
    initial_ms: float
    greedy_ms: float
    greedy_steps: int
    greedy_seconds: float
    taso_ms: Optional[float]
    taso_budget: Optional[int]
    taso_expansions: Optional[int]
    taso_seconds: Optional[float]


@dataclasses.dataclass
class BaselineCosts(BaselineSummary):
    """What the report and baselines.py's table read of a baseline run
    (baselines.py's result.json): its summary, the searches' steps, TASO's
    trace and equality saturation's run (`xflowrl.search.EqsatResult`; its
    fields None where it did not run: time limit 0)."""
    greedy_applied: List[Any]
    taso_applied: List[Any]
    taso_initial_ms: Optional[float]
    taso_trace: List[Dict[str, float]]      # expansions, seconds, best_cost_ms
    eqsat_ms: Optional[float] = None
    eqsat_seconds: Optional[float] = None
    eqsat_time_limit_s: Optional[float] = None
    eqsat_stop_reason: Optional[str] = None  # "saturated", "time_limit", "node_limit", ...
    eqsat_e_nodes: Optional[int] = None
    eqsat_handed_over: Optional[str] = None  # whose graph: "ilp", "greedy" or "original"

    def summary(self) -> Dict[str, Any]:
        """The `BaselineSummary` fields, by name (a row's keyword arguments)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(BaselineSummary)}


def baseline_costs(result: Mapping[str, Any]) -> BaselineCosts:
    """The report's view of a baseline run's result."""
    greedy, taso = result["greedy"], result.get("taso") or {}
    eqsat = result["eqsat"] or {}
    return BaselineCosts(
        cost_model=result["cost_model"], ops=result["ops"],
        initial_ms=result["initial_cost_ms"], greedy_ms=greedy["cost_ms"],
        greedy_steps=greedy["steps"], greedy_seconds=greedy["seconds"],
        greedy_applied=greedy["applied"], taso_ms=taso.get("cost_ms"),
        taso_budget=taso.get("budget"), taso_expansions=taso.get("expansions"),
        taso_seconds=taso.get("seconds"), taso_applied=taso.get("applied", []),
        taso_initial_ms=taso.get("initial_cost_ms"), taso_trace=taso.get("trace") or [],
        eqsat_ms=eqsat.get("cost_ms"), eqsat_seconds=eqsat.get("seconds"),
        eqsat_time_limit_s=eqsat.get("time_limit_s"),
        eqsat_stop_reason=eqsat.get("stop_reason"), eqsat_e_nodes=eqsat.get("e_nodes"),
        eqsat_handed_over=eqsat.get("handed_over"))


@dataclasses.dataclass
class BaselineRuntimes:
    """What baselines.py's Figure 4.1 reads of a baseline run (its
    result.json): each variant's timing (`BASELINE_VARIANTS`, TASO's and
    equality saturation's only where they ran; variants share a `graph_key`
    where they found the same graph) and the thesis' GPU ms of the graph's baselines
    (`xflowrl.results.thesis.thesis_baseline_ms`: "tf", "trt", "taso"; None
    for a model file or a graph the thesis did not evaluate)."""
    variants: Dict[str, TimedGraph]
    thesis_gpu_ms: Optional[Dict[str, float]]


def baseline_runtimes(result: Mapping[str, Any]) -> BaselineRuntimes:
    """The timings of a baseline run's result (baselines.py's "variants":
    per variant its ops, estimated "cost_ms" and "measured", the spread per
    "<runtime>/<clock>" beside its "graph_key")."""
    variants = {}
    for name, v in result["variants"].items():
        measured = dict(v["measured"])
        key = measured.pop("graph_key")
        variants[name] = TimedGraph(graph_key=key, ops=v["ops"], estimated_ms=v["cost_ms"],
                                    measured={c: ClockTiming(**m) for c, m in measured.items()})
    return BaselineRuntimes(variants=variants, thesis_gpu_ms=result.get("thesis_gpu_ms"))


def random_cost_ms(baselines: Mapping[str, Any]) -> Optional[float]:
    """The random agent's mean cost in an agent run's baselines (None: not run)."""
    return (baselines.get("random") or {}).get("cost_ms")


def greedy_cost_ms(baselines: Mapping[str, Any]) -> float:
    """One-step greedy's cost in an agent run's baselines."""
    return baselines["greedy"]["cost_ms"]


# -- reading the folder --------------------------------------------------------

def load_json(path: str) -> Optional[Any]:
    """The JSON file at `path`, None where there is none."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def sweep_folder(setting: str) -> str:
    """The temperature sweep's results folder of a setting (below the results)."""
    return "temperature" if setting == "cpu" else f"temperature_{setting}"


def load_sweep(results: str, setting: str, graph: str) -> Optional[SweepResult]:
    """The temperature sweep's result.json of `graph` under `setting`, if any.

    Raises:
      RecordError: the file is not a sweep's result (or of a newer version).
    """
    return SweepResult.load(os.path.join(results, sweep_folder(setting), graph,
                                         "temperature_sweep", "result.json"))


def pct(value: Optional[float], base: Optional[float]) -> Optional[float]:
    """Change of `value` against `base`, in % (negative: faster)."""
    if value is None or base is None:
        return None
    return 100.0 * (value / base - 1.0)


def sweep_measured_changes(measured: Optional[Measurement]) -> Dict[float, List[float]]:
    """Per temperature, each seed's measured ort/cpu change (%) of its real
    episode's graph against the original, from the measure step's result of
    the sweep's graph ({} where the sweep's graphs were not timed)."""
    if not measured or measured.sweep is None:
        return {}
    base = measured.variants["original"].measured["ort/cpu"].median_ms
    return {row.temperature: [pct(seed.measured["ort/cpu"].median_ms, base)  # type: ignore[misc]
                              for seed in row.seeds]
            for row in measured.sweep}


def seed_root(root: str, seeds: Sequence[int], seed: int) -> str:
    """Where the agents of `seed` write under a setting's folder `root`: the
    first seed's runs where a one-seed run writes them (root), the others'
    under root/seed_<s>/ (the same layout below)."""
    return root if seed == seeds[0] else os.path.join(root, f"seed_{seed}")


def median_seed(by_seed: Mapping[int, T], cost: Callable[[T], float]) -> int:
    """The seed whose run is the median of `cost(run)` (for an even count,
    the cheaper of the two middle runs; equal costs: the smaller seed)."""
    ranked = sorted(by_seed, key=lambda s: (cost(by_seed[s]), s))
    return ranked[(len(ranked) - 1) // 2]


def load_seeds(root: str, seeds: Sequence[int], record: Type[R], *parts: str) -> Dict[int, R]:
    """By seed, the `record` in the file `parts` below each seed's folder
    (`seed_root`), where it exists."""
    out = {s: record.load(os.path.join(seed_root(root, seeds, s), *parts)) for s in seeds}
    return {s: r for s, r in out.items() if r is not None}


def mf_cost(run: ModelFreeRun) -> float:
    """A model-free run's cost: its greedy episode's."""
    return run.agent_cost_ms


def mb_cost(run: ModelBasedRun) -> float:
    """A model-based run's cost: its best evaluation episode's."""
    return run.controller_cheapest_cost_ms


class Runs(NamedTuple):
    """The result files of one graph under one setting.

    `mf`, `mb` and `mb_separate` are the median seed's runs (`median_seed`):
    the ones the measure step times, whose steps, wall times and curves the
    report shows; `*_seeds` hold every seed's, by seed."""
    baselines: dict                       # the baseline runner's result (`baseline_costs`)
    mf: ModelFreeRun
    mb: ModelBasedRun
    measured: Optional[Measurement]
    dream_history: List[dict]             # of the median model-based seed
    mb_separate: Optional[ModelBasedRun]  # train_mb --reward_model=separate, where it ran
    mf_seeds: Dict[int, ModelFreeRun] = {}
    mb_seeds: Dict[int, ModelBasedRun] = {}
    mb_separate_seeds: Dict[int, ModelBasedRun] = {}


def load_runs(root: str, graph: str, seeds: Sequence[int] = (0,)) -> Runs:
    """The saved runs of `graph` under one setting's folder `root`, the
    agents' for each of `seeds` (missing seeds are skipped)."""
    d = os.path.join(root, graph)
    mf = load_seeds(root, seeds, ModelFreeRun, graph, "train_mf", "result.json")
    mb = load_seeds(root, seeds, ModelBasedRun, graph, "train_mb", "result.json")
    separate = load_seeds(root, seeds, ModelBasedRun, "separate_reward", graph, "train_mb",
                          "result.json")
    mf_seed = median_seed(mf, mf_cost) if mf else None
    mb_seed = median_seed(mb, mb_cost) if mb else None
    separate_seed = median_seed(separate, mb_cost) if separate else None
    history = (load_json(os.path.join(seed_root(root, seeds, mb_seed), graph,  # type: ignore[arg-type]
                                      "train_mb", "controller", "history.json")) or []
               ) if mb else []
    baselines_path = os.path.join(d, "baselines", "result.json")
    baselines = load_json(baselines_path)
    if baselines is None:
        raise FileNotFoundError(f"{baselines_path}: the baseline run's result is missing")
    return Runs(baselines,
                mf.get(mf_seed), mb.get(mb_seed),  # type: ignore[arg-type]
                Measurement.load(os.path.join(d, "measured", "result.json")), history,
                separate.get(separate_seed), mf, mb, separate)  # type: ignore[arg-type]


def run_stamps(root: str, graph: str, seeds: Sequence[int] = (0,)) -> dict:
    """What the measure step's timing depends on: the graphs the runs found
    (the median seeds')."""
    r = load_runs(root, graph, seeds)
    b = baseline_costs(r.baselines)
    stamps = {"greedy": b.greedy_applied, "taso_cost_ms": b.taso_ms,
              "mf": r.mf.agent_applied, "mb": r.mb.controller_cheapest_applied}
    if r.mb_separate:
        stamps["mb_separate"] = r.mb_separate.controller_cheapest_applied
    return stamps
