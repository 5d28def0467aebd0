"""The report of experiments/reproduce.py: Tables 4.1-4.3 and Figures 4.1-4.8
from the saved runs, with the thesis' figures beside ours.

No flags and no runs here: `write_report` reads the result files that
reproduce.py's runs left under its results folder, so a report can be
rebuilt from saved runs alone, and a test can check that every number in
report.json is the one in a run's result.json.

Layout read (per setting key, e.g. `cpu`; with several seeds the first
seed's agents are where shown, the others' below <results>/<setting>/seed_<s>/
in the same layout, `seed_root`):
  <results>/<setting>/<graph>/baselines/result.json     (baselines.py)
  <results>/<setting>/<graph>/train_mf/result.json      (train_mf.py)
  <results>/<setting>/<graph>/train_mb/result.json      (train_mb.py)
  <results>/<setting>/<graph>/train_mb/controller/history.json  (dream returns)
  <results>/<setting>/<graph>/measured/result.json      (reproduce.py's timing)
  <results>/<setting>/separate_reward/<graph>/train_mb/result.json
  <results>/graph_properties/table_4_1.json             (graph_properties.py)
  <results>/temperature/<graph>/temperature_sweep/result.json   (this CPU)
  <results>/temperature_gpu/<graph>/temperature_sweep/result.json   (GPU-like)
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np

THESIS_GRAPHS = ("squeezenet1_1", "resnet18", "resnet50", "inception_v3", "bert", "vit")


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

# The thesis' figures (thesis Chapter 4; arXiv 2205.01435).
# Mean inference ms on its GPU (RTX 2070): TF, TensorRT, TASO, model-free, model-based.
THESIS_MS = {
    "squeezenet1_1": {"tf": 4.83, "trt": 3.85, "taso": 3.68, "mf": 3.72, "mb": 3.98},
    "resnet18": {"tf": 12.55, "trt": 10.71, "taso": 11.39, "mf": 11.62, "mb": 11.90},
    "resnet50": {"tf": 26.07, "trt": 21.89, "taso": 24.61, "mf": 25.96, "mb": 26.48},
    "inception_v3": {"tf": 20.14, "trt": 15.93, "taso": 15.85, "mf": 16.50, "mb": 16.69},
    "bert": {"tf": 4.41, "trt": 3.81, "taso": 3.06, "mf": 3.01, "mb": 2.98},
    "vit": {"tf": 3.81, "trt": 3.42, "taso": 2.84, "mf": 2.83, "mb": 2.64},
}
# Table 4.2: baseline TF inference ms, memory GiB, % improvement of the model-based agent.
THESIS_TABLE_4_2 = {
    "resnet18": (12.2, 1.18, 3.0), "resnet50": (26.7, 2.34, 1.0),
    "inception_v3": (17.6, 2.11, 12.5), "squeezenet1_1": (4.6, 1.14, 18.9),
    "bert": (4.1, 0.26, 54.1),
}
# Table 4.3 (BERT, 5 runs): temperature -> (world-model score, std, real score, std), %.
THESIS_TABLE_4_3 = {
    0.1: (-6.67, 0.6, -43.92, 5.1), 0.5: (-7.75, 0.3, -55.33, 6.7),
    0.75: (-9.10, 0.4, -55.80, 5.2), 1.0: (-8.85, 1.2, -55.78, 8.0),
    1.2: (-9.91, 0.8, -57.01, 4.8), 1.5: (-8.37, 0.6, -58.23, 5.2),
    1.75: (-9.92, 1.0, -52.07, 6.8), 2.0: (-9.65, 0.8, -46.12, 5.9),
    2.5: (-10.04, 2.0, -41.14, 12.2), 3.0: (-10.38, 1.9, -51.32, 7.2),
}
THESIS_STEPS = {"model_free": 4_000_000, "model_based": 1_000_000}
# Optimisation time, s: TASO's search vs a trained policy (2019 xflowrl, GTX 780).
THESIS_OPT_SECONDS = {"bert": (29.66, 6.28), "squeezenet1_1": (29.58, 7.95),
                      "resnet18": (9.25, 3.77), "resnet50": (1008.49, 104.98)}

VARIANTS = ("original", "greedy", "taso", "model-free", "model-based",
            "model-based, separate reward")
SEPARATE = "model-based, separate reward"   # timed only on --separate_reward_graphs
CLOCKS = ("ort/cpu", "tf/cpu", "tf/wall")


def sweep_folder(setting: str) -> str:
    """The temperature sweep's results folder of a setting (below the results)."""
    return "temperature" if setting == "cpu" else f"temperature_{setting}"


def load_sweep(results: str, setting: str, graph: str) -> Optional[dict]:
    """The temperature sweep's result.json of `graph` under `setting`, if any."""
    return _load(os.path.join(results, sweep_folder(setting), graph, "temperature_sweep",
                              "result.json"))


def sweep_measured_changes(measured: Optional[dict]) -> Dict[float, List[float]]:
    """Per temperature, each seed's measured ort/cpu change (%) of its real
    episode's graph against the original, from the measure step's result of
    the sweep's graph ({} where the sweep's graphs were not timed)."""
    if not measured or "sweep" not in measured:
        return {}
    base = measured["variants"]["original"]["measured"]["ort/cpu"]["median_ms"]
    return {row["temperature"]: [pct(seed["measured"]["ort/cpu"]["median_ms"], base)
                                 for seed in row["seeds"]]
            for row in measured["sweep"]}


class Runs(NamedTuple):
    """The result files of one graph under one setting.

    `mf`, `mb` and `mb_separate` are the median seed's runs (`median_seed`):
    the ones the measure step times, whose steps, wall times and curves the
    report shows; `*_seeds` hold every seed's, by seed."""
    baselines: dict
    mf: dict
    mb: dict
    measured: Optional[dict]
    dream_history: List[dict]     # of the median model-based seed
    mb_separate: Optional[dict]   # train_mb --reward_model=separate, where it ran
    mf_seeds: Dict[int, dict] = {}
    mb_seeds: Dict[int, dict] = {}
    mb_separate_seeds: Dict[int, dict] = {}


def _load(path: str) -> Optional[dict]:
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def seed_root(root: str, seeds: Sequence[int], seed: int) -> str:
    """Where the agents of `seed` write under a setting's folder `root`: the
    first seed's runs where a one-seed run writes them (root), the others'
    under root/seed_<s>/ (the same layout below)."""
    return root if seed == seeds[0] else os.path.join(root, f"seed_{seed}")


def median_seed(by_seed: Dict[int, dict], cost_key: str) -> int:
    """The seed whose run is the median of `cost_key` (for an even count,
    the cheaper of the two middle runs; equal costs: the smaller seed)."""
    ranked = sorted(by_seed, key=lambda s: (by_seed[s][cost_key], s))
    return ranked[(len(ranked) - 1) // 2]


def load_seeds(root: str, seeds: Sequence[int], *parts: str) -> Dict[int, dict]:
    """By seed, the JSON file `parts` below each seed's folder (`seed_root`),
    where it exists."""
    out = {s: _load(os.path.join(seed_root(root, seeds, s), *parts)) for s in seeds}
    return {s: r for s, r in out.items() if r is not None}


def load_runs(root: str, graph: str, seeds: Sequence[int] = (0,)) -> Runs:
    """The saved runs of `graph` under one setting's folder `root`, the
    agents' for each of `seeds` (missing seeds are skipped)."""
    d = os.path.join(root, graph)
    mf = load_seeds(root, seeds, graph, "train_mf", "result.json")
    mb = load_seeds(root, seeds, graph, "train_mb", "result.json")
    separate = load_seeds(root, seeds, "separate_reward", graph, "train_mb", "result.json")
    mf_seed = median_seed(mf, "agent_cost_ms") if mf else None
    mb_seed = median_seed(mb, "controller_best_cost_ms") if mb else None
    separate_seed = median_seed(separate, "controller_best_cost_ms") if separate else None
    history = (_load(os.path.join(seed_root(root, seeds, mb_seed), graph, "train_mb",
                                  "controller", "history.json")) or []) if mb else []
    return Runs(_load(os.path.join(d, "baselines", "result.json")),
                mf.get(mf_seed), mb.get(mb_seed),
                _load(os.path.join(d, "measured", "result.json")), history,
                separate.get(separate_seed), mf, mb, separate)


def run_stamps(root: str, graph: str, seeds: Sequence[int] = (0,)) -> dict:
    """What the measure step's timing depends on: the graphs the runs found
    (the median seeds')."""
    r = load_runs(root, graph, seeds)
    stamps = {"greedy": r.baselines["greedy"]["applied"],
              "taso_cost_ms": (r.baselines.get("taso") or {}).get("cost_ms"),
              "mf": r.mf["agent_applied"], "mb": r.mb["controller_best_applied"]}
    if r.mb_separate:
        stamps["mb_separate"] = r.mb_separate["controller_best_applied"]
    return stamps


def pct(value: Optional[float], base: Optional[float]) -> Optional[float]:
    """Change of `value` against `base`, in % (negative: faster)."""
    if value is None or base is None:
        return None
    return 100.0 * (value / base - 1.0)


class Spread(NamedTuple):
    """A value over seeds: the median and the range."""
    median: float
    low: float
    high: float
    count: int


def over_seeds(values: Sequence[float]) -> Spread:
    """The median and [min, max] of one cell's values over seeds."""
    v = np.asarray(values, dtype=float)
    return Spread(float(np.median(v)), float(v.min()), float(v.max()), len(v))


def compare(a: Spread, b: Spread, name: str, tol: float = 1e-6) -> str:
    """`a` against `b` (costs: lower is better), called a difference only
    where their ranges over seeds do not overlap: "better than <name>" (a's
    highest below b's lowest), "worse than <name>", "only matches <name>"
    (both one and the same value), else "within the range of <name>"."""
    if a.high < b.low * (1 - tol):
        return f"better than {name}"
    if a.low > b.high * (1 + tol):
        return f"worse than {name}"
    if (abs(a.high - a.low) <= tol * abs(a.low) and abs(b.high - b.low) <= tol * abs(b.low)):
        return f"only matches {name}"
    return f"within the range of {name}"


def versus(cost: float, greedy: float, tol: float = 1e-6) -> str:
    """better / matches / worse than one-step greedy (one seed)."""
    return compare(Spread(cost, cost, cost, 1), Spread(greedy, greedy, greedy, 1), "greedy",
                   tol)


@dataclasses.dataclass
class GraphRow:
    """One graph under one setting: estimates, searches, agents, measurements."""
    graph: str
    setting: str
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
    random_ms: Optional[float]
    mf_ms: float
    mb_ms: float
    mb_greedy_ms: float
    mb_separate_ms: Optional[float]   # where the separate reward network ran
    mf_vs_greedy: str
    mb_vs_greedy: str
    mf_interactions: int
    mf_steps_to_final: int
    mf_episodes: int
    mb_real_steps: int
    mf_train_seconds: float
    mb_train_seconds: float
    mf_optimize_seconds: Optional[float]
    mb_optimize_seconds: Optional[float]
    mf_applied: List
    mb_applied: List
    taso_applied: List
    greedy_applied: List
    measured: Dict[str, Dict[str, float]]   # variant -> clock -> median ms
    measured_iqr: Dict[str, Dict[str, List[float]]]
    same_graph: Dict[str, str]               # variant -> first variant with its graph
    # Over seeds (one seed: the value itself). mf_ms, mb_ms and mb_separate_ms
    # above are the medians; the run-level fields (steps, seconds, applied,
    # measured) are the median seed's run (mf_seed, mb_seed).
    seeds: List[int]
    mf_range: List[float]                    # [min, max] over seeds
    mb_range: List[float]
    mb_separate_range: Optional[List[float]]
    mf_seed_ms: Dict[str, float]             # seed -> the agent's cost
    mb_seed_ms: Dict[str, float]
    mf_seed: int
    mb_seed: int
    mb_vs_mf: str


def _spread(by_seed: Dict[int, dict], key: str) -> Optional[Spread]:
    return over_seeds([r[key] for r in by_seed.values()]) if by_seed else None


def graph_row(setting: str, graph: str, runs: Runs) -> GraphRow:
    """The numbers of one graph, straight from its runs' result files."""
    b, mf, mb = runs.baselines, runs.mf, runs.mb
    taso = b.get("taso") or {}
    mf_seeds = runs.mf_seeds or {mf.get("seed", 0): mf}
    mb_seeds = runs.mb_seeds or {mb.get("seed", 0): mb}
    separate_seeds = runs.mb_separate_seeds or (
        {runs.mb_separate.get("seed", 0): runs.mb_separate} if runs.mb_separate else {})
    mf_s, mb_s = _spread(mf_seeds, "agent_cost_ms"), _spread(mb_seeds, "controller_best_cost_ms")
    sep_s = _spread(separate_seeds, "controller_best_cost_ms")
    greedy = over_seeds([b["greedy"]["cost_ms"]])
    rollouts = mb["real_steps"]
    measured, iqr, same = {}, {}, {}
    if runs.measured:
        variants = runs.measured["variants"]
        for name, v in variants.items():
            measured[name] = {c: m["median_ms"] for c, m in v["measured"].items()}
            iqr[name] = {c: [m["q1_ms"], m["q3_ms"]] for c, m in v["measured"].items()}
            same[name] = next(n for n in variants
                              if variants[n]["graph_key"] == v["graph_key"])
    return GraphRow(
        graph=graph, setting=setting, cost_model=b["cost_model"], ops=b["ops"],
        initial_ms=b["initial_cost_ms"], greedy_ms=b["greedy"]["cost_ms"],
        greedy_steps=b["greedy"]["steps"], greedy_seconds=b["greedy"]["seconds"],
        taso_ms=taso.get("cost_ms"), taso_budget=taso.get("budget"),
        taso_expansions=taso.get("expansions"), taso_seconds=taso.get("seconds"),
        random_ms=(mf["baselines"].get("random") or {}).get("cost_ms"),
        mf_ms=mf_s.median, mb_ms=mb_s.median,
        mb_greedy_ms=mb["controller_cost_ms"],
        mb_separate_ms=sep_s.median if sep_s else None,
        mf_vs_greedy=compare(mf_s, greedy, "greedy"),
        mb_vs_greedy=compare(mb_s, greedy, "greedy"),
        mf_interactions=mf["interactions"], mf_steps_to_final=mf["steps_to_final_cost"],
        mf_episodes=mf["episodes"],
        mb_real_steps=(rollouts["world_model_rollouts"] + rollouts["held_out_rollouts"]
                       + rollouts.get("round_evaluations", 0) + rollouts["evaluation"]
                       + rollouts["lockstep_dream"]),
        mf_train_seconds=mf["train_seconds"], mb_train_seconds=mb["seconds"]["total"],
        mf_optimize_seconds=mf.get("optimize_seconds"),
        mb_optimize_seconds=mb["seconds"].get("optimize"),
        mf_applied=mf["agent_applied"], mb_applied=mb["controller_best_applied"],
        taso_applied=taso.get("applied", []), greedy_applied=b["greedy"]["applied"],
        measured=measured, measured_iqr=iqr, same_graph=same,
        seeds=sorted(set(mf_seeds) | set(mb_seeds)),
        mf_range=[mf_s.low, mf_s.high], mb_range=[mb_s.low, mb_s.high],
        mb_separate_range=[sep_s.low, sep_s.high] if sep_s else None,
        mf_seed_ms={str(k): r["agent_cost_ms"] for k, r in sorted(mf_seeds.items())},
        mb_seed_ms={str(k): r["controller_best_cost_ms"] for k, r in sorted(mb_seeds.items())},
        mf_seed=mf.get("seed", 0), mb_seed=mb.get("seed", 0),
        mb_vs_mf=compare(mb_s, mf_s, "model-free"))


# -- tables ------------------------------------------------------------------

def _f(v: Optional[float], fmt: str = ".2f", suffix: str = "") -> str:
    return "-" if v is None else f"{v:{fmt}}{suffix}"


def _chg(v: Optional[float], base: Optional[float], digits: int = 2) -> str:
    p = pct(v, base)
    return "-" if p is None else f"{p:+.{digits}f}%"


def _chg_seeds(median: Optional[float], span: Optional[Sequence[float]], seeds: int,
               base: Optional[float], digits: int = 2) -> str:
    """A change over seeds: the median's, and [min, max] where there are
    several seeds."""
    text = _chg(median, base, digits)
    if seeds > 1 and span:
        text += f" [{_chg(span[0], base, digits)}, {_chg(span[1], base, digits)}]"
    return text


def seeds_note(rows: Dict[str, GraphRow]) -> str:
    """What the agents' cells are over several seeds ("" for one)."""
    counts = sorted({len(r.seeds) for r in rows.values()})
    if counts in ([], [1]):
        return ""
    seeds = sorted({s for r in rows.values() for s in r.seeds})
    return (f" Agents: median [min, max] over {'/'.join(map(str, counts))} seeds "
            f"({', '.join(map(str, seeds))}); an agent is called better or worse than "
            "another (or greedy) only where their ranges over seeds do not overlap, else "
            "\"within the range of\". The measured runtimes, steps, wall times, "
            "transformations and curves are the median seed's run (of an even count, the "
            "cheaper of the two middle runs).")


def table_4_1(props: Optional[dict], rows: Dict[str, Dict[str, GraphRow]]) -> str:
    """Graph properties: TF time and memory (this CPU), ops, each setting's estimate."""
    if not props:
        return "Table 4.1: not run.\n"
    keys = list(rows)
    head = ("| graph | type | ops | TF inference ms (this CPU) | memory peak GiB | weights GiB | "
            + " | ".join(f"est. ms ({rows[k][next(iter(rows[k]))].cost_model})" for k in keys
                         if rows[k]) + " |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for p in props["rows"]:
        est = [_f(rows[k][p["graph"]].initial_ms) if p["graph"] in rows[k] else "-"
               for k in keys if rows[k]]
        lines.append(f"| {p['graph']} | {p['type']} | {p['ops']} | {p['tf_inference_ms']:.1f}"
                     f" | {_f(p['memory_peak_gib'], '.3f')} | {_f(p['weights_gib'], '.3f')} | "
                     + " | ".join(est) + " |")
    return ("Thesis' Table 4.1 has its columns (type, inference time, memory) but no "
            "numbers; its Table 4.2 gives a TF time and memory per graph (below). TF = "
            f"TensorFlow through onnx-tf on this CPU, median of {props['repeats']} runs; memory "
            "= TensorFlow's CPU allocator peak.\n\n" + "\n".join(lines) + "\n")


def table_agents(rows: Dict[str, GraphRow]) -> str:
    """Figures 4.3/4.5 in numbers: estimated cost of every agent and baseline."""
    lines = ["| graph | initial ms | greedy (steps) | TASO (budget) | random | model-free | "
             "model-based | model-free vs greedy | model-based vs greedy | thesis MF vs TASO "
             "| thesis MB vs TASO |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for g, r in rows.items():
        t = THESIS_MS.get(g)
        k = len(r.seeds)
        lines.append(
            f"| {g} | {r.initial_ms:.3f} | {_chg(r.greedy_ms, r.initial_ms)} ({r.greedy_steps}) "
            f"| {_chg(r.taso_ms, r.initial_ms)} ({r.taso_budget}) | "
            f"{_chg(r.random_ms, r.initial_ms)} | "
            f"{_chg_seeds(r.mf_ms, r.mf_range, k, r.initial_ms)} | "
            f"{_chg_seeds(r.mb_ms, r.mb_range, k, r.initial_ms)} | {r.mf_vs_greedy} | "
            f"{r.mb_vs_greedy} | "
            f"{_chg(t['mf'], t['taso'], 1) if t else '-'} | "
            f"{_chg(t['mb'], t['taso'], 1) if t else '-'} |")
    return ("Estimated cost change against the initial graph (negative: faster), all under "
            "the same cost model; model-free = its greedy policy, model-based = best of its "
            "greedy and sampled evaluation episodes in the real environment; random = mean "
            "of the random agent's episodes." + seeds_note(rows) + "\n\n" + "\n".join(lines)
            + "\n")


def table_measured(rows: Dict[str, GraphRow]) -> str:
    """Measured end to end on this CPU, every variant, with its estimate."""
    clocks = [c for c in CLOCKS if any(c in m for r in rows.values()
                                       for m in r.measured.values())]
    lines = ["| graph | variant | est. change | " + " | ".join(
        f"{c} ms | {c} change" for c in clocks) + " | thesis GPU ms |",
        "|---|---|---|" + "---|---|" * len(clocks) + "---|"]
    thesis_key = {"original": "tf", "taso": "taso", "model-free": "mf", "model-based": "mb"}
    for g, r in rows.items():
        if not r.measured:
            continue
        est = {"original": r.initial_ms, "greedy": r.greedy_ms, "taso": r.taso_ms,
               "model-free": r.mf_ms, "model-based": r.mb_ms, SEPARATE: r.mb_separate_ms}
        base = r.measured["original"]
        for v in VARIANTS:
            if v not in r.measured:
                continue
            same = f" (= {r.same_graph[v]})" if r.same_graph.get(v, v) != v else ""
            cells = []
            for c in clocks:
                m = r.measured[v].get(c)
                lo, hi = r.measured_iqr[v].get(c, [None, None])
                cells.append(f"{_f(m)} ({_f(lo)}-{_f(hi)}) | {_chg(m, base.get(c))}")
            t = THESIS_MS.get(g, {}).get(thesis_key.get(v, ""))
            lines.append(f"| {g} | {v}{same} | {_chg(est[v], r.initial_ms)} | "
                         + " | ".join(cells) + f" | {_f(t)} |")
    return ("End-to-end runtime on this CPU (median of interleaved rounds, interquartile "
            "range of the round medians in brackets): `ort/cpu` = onnxruntime, one thread, "
            "its CPU time (the steady figure on this shared machine); `tf` = TensorFlow "
            "through onnx-tf (the thesis' runtime), process CPU time and wall time. Variants "
            "with the same graph are timed once. The thesis column is its GPU's mean time "
            "(TF for the original).\n\n" + "\n".join(lines) + "\n")


def table_4_2(props: Optional[dict], rows: Dict[str, GraphRow]) -> str:
    """Inference time, memory and % improvement of the model-based agent."""
    tf = {p["graph"]: p for p in (props or {}).get("rows", [])}
    lines = ["| graph | TF ms (ours, CPU) | memory GiB (ours) | MB est. improvement | MB "
             "measured ort/cpu | MB measured tf/cpu | thesis TF ms | thesis memory GiB | "
             "thesis % improvement |", "|---|---|---|---|---|---|---|---|---|"]
    for g, r in rows.items():
        p, t = tf.get(g), THESIS_TABLE_4_2.get(g)
        base = r.measured.get("original", {})
        mb = r.measured.get("model-based", {})

        def impr(v, b):
            return "-" if v is None or b is None else f"{100 * (1 - v / b):+.2f}%"
        lines.append(
            f"| {g} | {_f(p['tf_inference_ms'] if p else None, '.1f')} | "
            f"{_f(p['memory_peak_gib'] if p else None, '.3f')} | {impr(r.mb_ms, r.initial_ms)} "
            f"| {impr(mb.get('ort/cpu'), base.get('ort/cpu'))} | "
            f"{impr(mb.get('tf/cpu'), base.get('tf/cpu'))} | "
            f"{t[0] if t else '-'} | {t[1] if t else '-'} | {f'{t[2]}%' if t else '-'} |")
    return ("Improvement = 1 - optimised / original (positive: faster). Ours: estimated under "
            "this setting's cost model, and measured on this CPU; the thesis': measured on its "
            "GPU against TensorFlow (its TASO-backend time of the optimised graph, so a "
            "runtime change as well as a graph change).\n\n" + "\n".join(lines) + "\n")


def table_4_3(sweep: Optional[dict], setting: str, measured: Dict[float, List[float]]) -> str:
    """Temperature sweep: world-model and real scores per tau, the real
    episodes' graphs measured on this CPU, and the thesis' scores."""
    if not sweep:
        return "Table 4.3: not run.\n"
    lines = ["| temperature | world-model score | real score (est.) | measured ort/cpu change "
             "| thesis world-model score | thesis real score |",
             "|---|---|---|---|---|---|"]
    for r in sweep["rows"]:
        t = THESIS_TABLE_4_3.get(r["temperature"])
        m = measured.get(r["temperature"])
        lines.append(f"| {r['temperature']} | {r['world_model_mean']:+.3f}% ± "
                     f"{r['world_model_std']:.3f} | {r['real_mean']:+.3f}% ± "
                     f"{r['real_std']:.3f} | "
                     + (f"{np.mean(m):+.2f}% ± {np.std(m):.2f}" if m else "-") + " | "
                     + (f"{t[0]:+.2f}% ± {t[1]} | {t[2]:+.2f}% ± {t[3]}" if t else "- | -")
                     + " |")
    return (f"{sweep['graph']}, {sweep['seeds']} seed(s) (thesis: BERT, 5), "
            f"{sweep['dream_episodes']} imagined episodes per controller, estimated cost "
            f"under {_label(setting)}; scores are runtime changes in % (negative: faster), mean "
            "± std over seeds. The measured change is each seed's real-episode graph timed "
            "on this CPU by the measure step, interleaved with the original graph.\n\n"
            + "\n".join(lines) + "\n")


def table_steps(rows: Dict[str, GraphRow]) -> str:
    """Real environment steps and wall times: training, optimising, TASO."""
    lines = ["| graph | MF steps (to final cost) | MB real steps | MF train s | MB train s | "
             "MF optimise s | MB optimise s | greedy s | TASO s (budget) | thesis TASO s vs "
             "policy s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for g, r in rows.items():
        t = THESIS_OPT_SECONDS.get(g)
        lines.append(
            f"| {g} | {r.mf_interactions} ({r.mf_steps_to_final}) | {r.mb_real_steps} | "
            f"{r.mf_train_seconds:.0f} | {r.mb_train_seconds:.0f} | "
            f"{_f(r.mf_optimize_seconds)} | {_f(r.mb_optimize_seconds)} | "
            f"{r.greedy_seconds:.2f} | {_f(r.taso_seconds)} ({r.taso_budget}) | "
            + (f"{t[0]} vs {t[1]}" if t else "-") + " |")
    return ("Real environment steps: the model-free agent's over its training (in brackets: "
            "until its greedy evaluation first reached its final cost); the model-based "
            "agent's random rollouts for the world model, held-out rollouts and real "
            f"evaluation episodes. Thesis: about {THESIS_STEPS['model_free']:,} (model-free, "
            f"2000 episodes) vs {THESIS_STEPS['model_based']:,} (model-based). Optimise s = "
            "one greedy episode of the trained policy in the real environment (the model-based "
            "one is its second greedy episode: the first traces its functions); thesis times: "
            "2019 xflowrl, TASO budget 1000, GTX 780.\n\n" + "\n".join(lines) + "\n")


def table_separate(results: str, setting: str, graphs: Sequence[str],
                   rows: Dict[str, GraphRow], seeds: Sequence[int] = (0,)) -> str:
    """train_mb --reward_model=separate against the MDN-RNN's reward head."""
    lines = ["| graph | reward model | controller est. change (best) | greedy | measured "
             "ort/cpu change | held-out reward MSE | predicted return | real return |",
             "|---|---|---|---|---|---|---|---|"]
    root = os.path.join(results, setting)
    for g in graphs:
        for model, parts, variant in (
                ("mdn", (g, "train_mb", "result.json"), "model-based"),
                ("separate", ("separate_reward", g, "train_mb", "result.json"), SEPARATE)):
            by_seed = load_seeds(root, seeds, *parts)
            if not by_seed:
                continue
            mb = by_seed[median_seed(by_seed, "controller_best_cost_ms")]
            spread = over_seeds([r["controller_best_cost_ms"] for r in by_seed.values()])
            measured = rows[g].measured if g in rows else {}
            last = mb["world_model"]["rounds"][-1]
            ev = mb["controller"]["greedy"]
            lines.append(f"| {g} | {model} | "
                         f"{_chg_seeds(spread.median, [spread.low, spread.high], spread.count, mb['initial_cost_ms'], 3)} | "
                         f"{_chg(mb['baselines']['greedy']['cost_ms'], mb['initial_cost_ms'], 3)} | "
                         f"{_chg(measured.get(variant, {}).get('ort/cpu'), measured.get('original', {}).get('ort/cpu'))} | "
                         f"{last['held_out_reward_mse']:.3e} | {ev['predicted_return']:+.4f} | "
                         f"{ev['real_return']:+.4f} |")
    several = len(seeds) > 1
    return ("The same budgets and seed" + ("s" if several else "") + "; only the reward head "
            "differs (thesis §4.3.4 left this experiment as a TODO). Returns of the greedy "
            "evaluation episode" + (" of the median seed's run; the controller's change is "
                                    "the median [min, max] over seeds" if several else "")
            + "; the measured change is the measure step's (see the measured runtimes "
            "above).\n\n" + "\n".join(lines) + "\n")


# -- figures -----------------------------------------------------------------

def _pyplot():
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    return plt


def _label(setting: str) -> str:
    s = SETTINGS[setting]
    return f"{s.label} ({s.cost_model}/{s.profile})"


def figure_runtimes(rows: Dict[str, Dict[str, GraphRow]], variants: Sequence[str],
                    thesis_variant: str, path: str, title: str) -> None:
    """Per setting: the estimated change of each variant (and the random
    agent) and its measured change on this CPU (ort/cpu, tf/cpu), with the
    thesis' change against TensorFlow (its GPU) as black diamonds."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(rows), 2, figsize=(13, 3.6 * len(rows)), squeeze=False)
    width = 0.8 / (len(variants) + 1)
    for (setting, by_graph), (ax_est, ax_meas) in zip(rows.items(), axes):
        names = list(by_graph)
        x = np.arange(len(names))
        est_of = {"greedy": "greedy_ms", "taso": "taso_ms", "model-free": "mf_ms",
                  "model-based": "mb_ms", "random": "random_ms"}
        for i, v in enumerate(list(variants) + ["random"]):
            ax_est.bar(x + (i - len(variants) / 2) * width,
                       [pct(getattr(by_graph[n], est_of[v]), by_graph[n].initial_ms) or 0.0
                        for n in names], width, label=v)
        for i, v in enumerate(variants):
            for j, clock in enumerate(("ort/cpu", "tf/cpu")):
                vals = [pct(by_graph[n].measured.get(v, {}).get(clock),
                            by_graph[n].measured.get("original", {}).get(clock))
                        for n in names]
                if all(val is None for val in vals):
                    continue
                pos = x + (i - len(variants) / 2 + 0.5 * j) * width
                ax_meas.bar(pos, [np.nan if val is None else val for val in vals], width / 2,
                            label=f"{v} {clock}", hatch="//" if j else None,
                            color=f"C{i}", alpha=0.6 if j else 1.0)
                for p, val in zip(pos, vals):
                    if val == 0.0:  # the original graph itself: no bar to see
                        ax_meas.text(p, 0.0, "=", ha="center", va="bottom", fontsize=7,
                                     color=f"C{i}")
        thesis = [pct(THESIS_MS[n][thesis_variant], THESIS_MS[n]["tf"]) if n in THESIS_MS
                  else np.nan for n in names]
        ax_meas.scatter(x, thesis, marker="D", color="black", zorder=3,
                        label=f"thesis {thesis_variant} vs TF (GPU)")
        for ax, what in ((ax_est, "estimated"), (ax_meas, "measured, this CPU")):
            ax.axhline(0.0, color="grey", linewidth=0.8)
            ax.set_xticks(x)
            ax.set_xticklabels(names, rotation=15, fontsize=8)
            ax.set_ylabel("change vs original (%)")
            ax.set_title(f"{what}; optimised under {_label(setting)}", fontsize=9)
            ax.legend(fontsize=6, ncol=2)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure_taso(runs: Dict[str, Dict[str, Runs]], path: str) -> None:
    """Figure 4.2: TASO's best estimated cost / initial against expansions."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 3.8), squeeze=False)
    for ax, (setting, by_graph) in zip(axes[0], runs.items()):
        for g, r in by_graph.items():
            t = r.baselines.get("taso")
            if not t or not t["trace"]:
                continue
            exp = [p["expansions"] for p in t["trace"]] + [t["expansions"]]
            cost = [p["best_cost_ms"] / t["initial_cost_ms"] for p in t["trace"]]
            ax.step(exp, cost + cost[-1:], where="post", label=f"{g} ({t['seconds']:.1f} s)")
        ax.set(xlabel="graphs expanded", ylabel="best estimated cost / initial",
               title=_label(setting))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Figure 4.2: TASO's backtracking search (alpha 1.05)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _minmax(values: Sequence[float]) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    span = v.max() - v.min() if len(v) else 0.0
    return (v - v.min()) / span if span > 0 else np.zeros_like(v)


def figure_curves(runs: Dict[str, Dict[str, Runs]], series, path: str, title: str,
                  xlabel: str, ylabel: str, normalise: bool) -> None:
    """One panel per setting, one line per graph; `series(runs) -> (x, y)`."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 3.8), squeeze=False)
    for ax, (setting, by_graph) in zip(axes[0], runs.items()):
        for g, r in by_graph.items():
            x, y = series(r)
            if len(x):
                ax.plot(x, _minmax(y) if normalise else y, marker="." if len(x) < 30 else None,
                        label=g)
        ax.set(xlabel=xlabel, ylabel=ylabel, title=_label(setting))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure_heatmap(rows: Dict[str, Dict[str, GraphRow]], path: str) -> None:
    """Figure 4.8: how often each xfer was applied, per graph and agent
    (model-based, model-free, TASO, greedy); xfers applied at least once."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(rows), figsize=(8 * len(rows), 6), squeeze=False)
    for ax, (setting, by_graph) in zip(axes[0], rows.items()):
        labels, counts = [], []
        for g, r in by_graph.items():
            for agent, applied in (("MB", r.mb_applied), ("MF", r.mf_applied),
                                   ("TASO", r.taso_applied), ("greedy", r.greedy_applied)):
                c: Dict[str, int] = {}
                for a in applied:
                    name = a if isinstance(a, str) else a[0]
                    c[name] = c.get(name, 0) + 1
                labels.append(f"{g} {agent}")
                counts.append(c)
        xfers = sorted({x for c in counts for x in c})
        grid = np.array([[c.get(x, 0) for x in xfers] for c in counts]) if xfers else \
            np.zeros((len(labels), 1))
        im = ax.imshow(grid, aspect="auto", cmap="viridis")
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=6)
        ax.set_xticks(range(len(xfers)))
        ax.set_xticklabels(xfers, rotation=70, fontsize=6)
        for i in range(grid.shape[0]):
            for j in range(len(xfers)):
                if grid[i, j]:
                    ax.text(j, i, int(grid[i, j]), ha="center", va="center", fontsize=5,
                            color="white" if grid[i, j] < grid.max() / 2 else "black")
        ax.set_title(_label(setting), fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.03)
    fig.suptitle("Figure 4.8: transformations applied (count per graph and agent)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _mf_reward(r: Runs):
    h = r.mf["history"]
    return [row["episode"] for row in h], [row["mean_reward"] for row in h]


def _wm_nll(r: Runs):
    rounds = r.mb["world_model"]["rounds"]
    return [x["real_steps"] for x in rounds], [x["held_out_latent_nll"] for x in rounds]


def _dream_return(r: Runs):
    return ([x["episodes"] for x in r.dream_history],
            [x["dream_return"] for x in r.dream_history])


FIGURES = {
    "fig4_1": "fig4_1_baseline_runtimes.png", "fig4_2": "fig4_2_taso_search.png",
    "fig4_3": "fig4_3_model_free_runtimes.png", "fig4_4": "fig4_4_model_free_reward.png",
    "fig4_5": "fig4_5_model_based_runtimes.png", "fig4_6": "fig4_6_world_model_nll.png",
    "fig4_7": "fig4_7_dream_reward.png", "fig4_8": "fig4_8_transformations.png",
}


def write_figures(runs, rows, out_dir: str) -> Dict[str, str]:
    """Figures 4.1-4.8 as PNGs in `out_dir`; returns their paths by key."""
    paths = {k: os.path.join(out_dir, v) for k, v in FIGURES.items()}
    figure_runtimes(rows, ("greedy", "taso"), "taso", paths["fig4_1"],
                    "Figure 4.1: baselines (TensorRT not run: no GPU here)")
    figure_taso(runs, paths["fig4_2"])
    figure_runtimes(rows, ("greedy", "taso", "model-free"), "mf", paths["fig4_3"],
                    "Figure 4.3: model-free agent and baselines")
    figure_curves(runs, _mf_reward, paths["fig4_4"], "Figure 4.4: model-free mean episode "
                  "reward (min-max normalised per graph)", "episodes", "normalised reward",
                  True)
    figure_runtimes(rows, ("greedy", "taso", "model-based"), "mb", paths["fig4_5"],
                    "Figure 4.5: model-based agent and baselines")
    figure_curves(runs, _wm_nll, paths["fig4_6"], "Figure 4.6: world model, held-out latent "
                  "negative log-likelihood / (Z+2)", "real environment steps", "NLL", False)
    figure_curves(runs, _dream_return, paths["fig4_7"], "Figure 4.7: imagined return of the "
                  "controller in the dream (min-max normalised per graph)",
                  "imagined episodes", "normalised return", True)
    figure_heatmap(rows, paths["fig4_8"])
    return paths


# -- the report --------------------------------------------------------------

def summary_lines(rows: Dict[str, Dict[str, GraphRow]]) -> List[str]:
    """Counts the text states: where the agents beat, match or trail greedy
    and each other (over seeds: only where the ranges do not overlap), and
    the range of the measured changes."""
    out = []
    for setting, by_graph in rows.items():
        for agent, key, other in (("model-free", "mf_vs_greedy", "greedy"),
                                  ("model-based", "mb_vs_greedy", "greedy"),
                                  ("model-based against model-free", "mb_vs_mf",
                                   "model-free")):
            verdicts = {g: getattr(r, key) for g, r in by_graph.items()}
            kinds = [f"better than {other}", f"only matches {other}", f"worse than {other}"]
            # Shown where it occurs: with one seed a range is a point.
            kinds += [v for v in [f"within the range of {other}"] if v in verdicts.values()]
            groups = {v: [g for g, w in verdicts.items() if w == v] for v in kinds}
            out.append(f"- {_label(setting)}, {agent}: " + "; ".join(
                f"{v} on {len(gs)} ({', '.join(gs) or '-'})" for v, gs in groups.items()) + ".")
        taso_eq = [g for g, r in by_graph.items()
                   if r.taso_ms is not None and np.isclose(r.taso_ms, r.greedy_ms, rtol=1e-9)]
        out.append(f"- {_label(setting)}: TASO's search equals one-step greedy's cost on "
                   f"{len(taso_eq)} of {len(by_graph)} graphs ({', '.join(taso_eq) or '-'}).")
        changes = [pct(r.measured[v]["ort/cpu"], r.measured["original"]["ort/cpu"])
                   for r in by_graph.values() for v in VARIANTS[1:]
                   if v in r.measured and "ort/cpu" in r.measured[v]]
        if changes:
            out.append(f"- {_label(setting)}: measured ort/cpu change of the optimised graphs "
                       f"from {min(changes):+.1f}% to {max(changes):+.1f}% (negative: faster).")
    return out


def write_report(results: str, out_dir: str, graphs: Sequence[str], settings: Sequence[str],
                 separate_graphs: Sequence[str], sweep_graph: str,
                 sweep_settings: Sequence[str], meta: dict,
                 seeds: Sequence[int] = (0,)) -> str:
    """Reads the runs under `results` and writes report.md, report.json and
    the figures to `out_dir`; returns `out_dir`. `seeds`: the agents' seeds,
    the first's runs where a one-seed run writes them (`seed_root`)."""
    os.makedirs(out_dir, exist_ok=True)
    runs = {s: {g: load_runs(os.path.join(results, s), g, seeds) for g in graphs}
            for s in settings}
    rows = {s: {g: graph_row(s, g, r) for g, r in by_graph.items()}
            for s, by_graph in runs.items()}
    props = _load(os.path.join(results, "graph_properties", "table_4_1.json"))
    sweeps = {s: load_sweep(results, s, sweep_graph)
              for s in (sweep_settings if sweep_graph else [])}
    sweeps_measured = {s: sweep_measured_changes(
        _load(os.path.join(results, s, sweep_graph, "measured", "result.json")))
                       for s in sweeps}
    figures = write_figures(runs, rows, out_dir)
    scale = meta.get("budget_scale", 1.0)
    parts = [f"# Reproduction of the thesis' Chapter 4 ({meta.get('mode', '?')} mode"
             + (f", agents' training budgets x{scale:g}" if scale != 1.0 else "") + ")\n",
             "Settings (each agent and search optimises the setting's estimated cost; every "
             "runtime is measured on this CPU):\n",
             "\n".join(f"- **{SETTINGS[s].label}**: {SETTINGS[s].what}" for s in settings),
             "\nTensorRT: not run (it needs an NVIDIA GPU; this machine has none).\n",
             f"Measured on {meta.get('machine', '?')}, {meta.get('date_utc', '?')} UTC "
             f"(shared with other jobs); "
             + (f"{meta.get('jobs', '?')} entry-point run(s) at a time"
                if not meta.get("ray_address") else
                f"entry points on the Ray cluster at {meta['ray_address']} "
                f"({len(meta.get('ray_nodes', []))} node(s) ran them)")
             + f"; project commit {meta.get('commit', '?')}. Rule set: the entry points' default (built-ins + generated)."
             + (f" Agents over {len(seeds)} seeds ({', '.join(map(str, seeds))}): median "
                "[min, max]." if len(seeds) > 1 else "") + "\n",
             "## Summary\n", "\n".join(summary_lines(rows)) + "\n",
             "## Table 4.1: graph properties\n", table_4_1(props, rows)]
    for s in settings:
        parts += [f"## Agents and baselines, {_label(s)} (Figures 4.3, 4.5)\n",
                  table_agents(rows[s]),
                  f"## Measured runtimes, optimised under {_label(s)} (Figures 4.1, 4.3, "
                  "4.5)\n", table_measured(rows[s]),
                  f"## Table 4.2, {_label(s)}\n", table_4_2(props, rows[s]),
                  f"## Real environment steps and wall times, {_label(s)}\n",
                  table_steps(rows[s]),
                  f"## Separate reward network, {_label(s)}\n",
                  table_separate(results, s, separate_graphs, rows[s], seeds)]
    for s, sweep in sweeps.items():
        parts += [f"## Table 4.3: temperature sweep, {_label(s)}\n",
                  table_4_3(sweep, s, sweeps_measured[s])]
    parts += ["## Figures\n",
              "\n".join(f"![{k}]({os.path.basename(p)})" for k, p in figures.items()) + "\n",
              f"Mode {meta.get('mode')}; wall time {meta.get('wall_seconds', 0):.0f} s "
              "(runs reused from earlier invocations count 0).\n"]
    text = "\n".join(parts)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(text)
    separate = {s: {g: bool(load_seeds(os.path.join(results, s), seeds, "separate_reward", g,
                                       "train_mb", "result.json"))
                    for g in separate_graphs} for s in settings}
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump({"meta": meta, "settings": {s: dataclasses.asdict(SETTINGS[s])
                                              for s in settings},
                   "rows": {s: {g: dataclasses.asdict(r) for g, r in by_graph.items()}
                            for s, by_graph in rows.items()},
                   "table_4_1": props, "table_4_3": sweeps,
                   "table_4_3_measured_ort_cpu_change": {
                       s: [{"temperature": t, "per_seed": v} for t, v in m.items()]
                       for s, m in sweeps_measured.items()},
                   "separate_reward_run": separate,
                   "figures": {k: os.path.basename(p) for k, p in figures.items()},
                   "summary": summary_lines(rows)}, f, indent=1, default=float)
    return out_dir
