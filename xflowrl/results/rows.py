"""One graph under one setting, in numbers: the report's row (`GraphRow`),
built from the graph's runs (`graph_row`), and the comparisons over seeds
it states (`over_seeds`, `compare`)."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from xflowrl.results.layout import (
    BaselineSummary,
    Runs,
    baseline_costs,
    mb_cost,
    mf_cost,
    random_cost_ms,
)
from xflowrl.results.runs import ModelBasedRun, ModelFreeRun


class Spread(NamedTuple):
    """A value over seeds: the median and the range."""
    median: float
    low: float
    high: float
    count: int  # type: ignore[assignment]  # the seeds (shadows tuple.count)


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
class _Where:
    """The graph and setting of a row (its first fields)."""
    graph: str
    setting: str


# Fields in the order of report.json: _Where's, BaselineSummary's, then
# GraphRow's own (a dataclass takes its bases' fields last base first).
@dataclasses.dataclass
class GraphRow(BaselineSummary, _Where):
    """One graph under one setting: estimates, searches (`BaselineSummary`),
    agents, measurements."""
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


def _spread_mf(by_seed: Mapping[int, ModelFreeRun]) -> Spread:
    return over_seeds([mf_cost(r) for r in by_seed.values()])


def _spread_mb(by_seed: Mapping[int, ModelBasedRun]) -> Optional[Spread]:
    return over_seeds([mb_cost(r) for r in by_seed.values()]) if by_seed else None


def graph_row(setting: str, graph: str, runs: Runs) -> GraphRow:
    """The numbers of one graph, straight from its runs' result files."""
    b, mf, mb = baseline_costs(runs.baselines), runs.mf, runs.mb
    mf_seeds = runs.mf_seeds or {mf.seed: mf}
    mb_seeds = runs.mb_seeds or {mb.seed: mb}
    separate_seeds = runs.mb_separate_seeds or (
        {runs.mb_separate.seed: runs.mb_separate} if runs.mb_separate else {})
    mf_s, mb_s = _spread_mf(mf_seeds), _spread_mb(mb_seeds)
    assert mb_s is not None
    sep_s = _spread_mb(separate_seeds)
    greedy = over_seeds([b.greedy_ms])
    measured: Dict[str, Dict[str, float]] = {}
    iqr: Dict[str, Dict[str, List[float]]] = {}
    same: Dict[str, str] = {}
    if runs.measured:
        variants = runs.measured.variants
        for name, v in variants.items():
            measured[name] = {c: m.median_ms for c, m in v.measured.items()}
            iqr[name] = {c: [m.q1_ms, m.q3_ms] for c, m in v.measured.items()}
            same[name] = next(n for n in variants
                              if variants[n].graph_key == v.graph_key)
    return GraphRow(
        graph=graph, setting=setting, **b.summary(),
        random_ms=random_cost_ms(mf.baselines),
        mf_ms=mf_s.median, mb_ms=mb_s.median,
        mb_greedy_ms=mb.controller_cost_ms,
        mb_separate_ms=sep_s.median if sep_s else None,
        mf_vs_greedy=compare(mf_s, greedy, "greedy"),
        mb_vs_greedy=compare(mb_s, greedy, "greedy"),
        mf_interactions=mf.interactions, mf_steps_to_final=mf.steps_to_final_cost,
        mf_episodes=mf.episodes,
        mb_real_steps=mb.real_steps.total,
        mf_train_seconds=mf.train_seconds, mb_train_seconds=mb.seconds.total,
        mf_optimize_seconds=mf.optimize_seconds,
        mb_optimize_seconds=mb.seconds.optimize,
        mf_applied=mf.agent_applied, mb_applied=mb.controller_cheapest_applied,
        taso_applied=b.taso_applied, greedy_applied=b.greedy_applied,
        measured=measured, measured_iqr=iqr, same_graph=same,
        seeds=sorted(set(mf_seeds) | set(mb_seeds)),
        mf_range=[mf_s.low, mf_s.high], mb_range=[mb_s.low, mb_s.high],
        mb_separate_range=[sep_s.low, sep_s.high] if sep_s else None,
        mf_seed_ms={str(k): mf_cost(r) for k, r in sorted(mf_seeds.items())},
        mb_seed_ms={str(k): mb_cost(r) for k, r in sorted(mb_seeds.items())},
        mf_seed=mf.seed, mb_seed=mb.seed,
        mb_vs_mf=compare(mb_s, mf_s, "model-free"))
