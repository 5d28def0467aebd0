"""Typed results: what the entry points write and the reproduction report reads.

Records (`records`: versioned JSON, written and read by the same code):
`ModelFreeRun` and `ModelBasedRun` (with its world model's rounds,
`WorldModelRound`; `runs`), `GeneralistRun` and `HeldOutTimings` (a
generalist run's result.json, and its held-out graphs timed;
`generalist`), `Measurement` (the measure step's timings;
`measurement`), `SweepSeed` and `SweepResult` (one seed of the temperature
sweep, and the sweep over its seeds, `sweep_rows`; `sweep`),
`AgentComparison` (compare_agents.py's result.json, a `ComparisonRow` per
graph; `comparison`), `ObservationAblation` and `ModelBasedAblation` (the
observation ablation's result.json, an `ObservationRun` per run, and the
model-based ablation's ablation.json, an `AblationVariant` per variant;
`ablation`), `WorldModelState` (the model-based agent's world-model
training state, state.json; `state`) and `ReproductionReport` (report.json;
`report`). The report, built from a results folder (`layout`: where each
run lies, `Runs`, `load_runs`): its rows (`rows`: `GraphRow`, `graph_row`,
the comparisons over seeds), tables (`tables`), Figures 4.1-4.8 (`figures`;
matplotlib on use), report.md and report.json (`report.write_report`),
and publishing it as a dated report under reports/ (`publish`). The
thesis' own numbers and graphs are defined once, in `thesis`. numpy only (no TensorFlow, no engine).
"""

from xflowrl.results.ablation import (
    AblationVariant,
    BaselineMs,
    EpisodeLog,
    ModelBasedAblation,
    ObservationAblation,
    ObservationRun,
    Reach,
    Spread,
    first_reaching,
    summarize_run,
    summarize_variant,
)
from xflowrl.results.comparison import AgentComparison, ComparisonRow
from xflowrl.results.generalist import GeneralistRun, HeldOutTimings
from xflowrl.results.layout import (
    BaselineCosts,
    Runs,
    SETTINGS,
    Setting,
    baseline_costs,
    load_runs,
    seed_root,
)
from xflowrl.results.measurement import Measurement
from xflowrl.results.records import Record, RecordError
from xflowrl.results.report import ReproductionReport, write_report
from xflowrl.results.rows import GraphRow, graph_row
from xflowrl.results.runs import (
    Evaluation,
    ModelBasedRun,
    ModelBasedSeconds,
    ModelFreeRun,
    RealSteps,
    RoundController,
    WorldModelRound,
    WorldModelSummary,
)
from xflowrl.results.state import BestRound, WorldModelState
from xflowrl.results.sweep import SweepCell, SweepResult, SweepRow, SweepSeed, sweep_rows
from xflowrl.results.thesis import THESIS_GRAPHS, THESIS_MS
