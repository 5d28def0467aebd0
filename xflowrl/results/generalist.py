"""What a generalist run leaves in its result.json (`GeneralistRun`,
experiments/train_generalist.py), and what timing its held-out graphs
leaves in measured.json (`HeldOutTimings`, experiments/measure_generalist.py).

A generalist run is one agent (the model-free policy or the model-based
agent) trained over the corpus' training graphs and evaluated zero-shot on
the held-out ones: a `ZeroShotRow` per held-out graph (its cost beside the
baselines'), their `ZeroShotSummary`, and, with fine-tuning, a
`FinetuneGraph` per named graph (the per-graph agent from scratch,
`ScratchRun`, against the generalist fine-tuned, `FinetunedRun`).

Both are versioned records (`xflowrl.results.records`): a file of another
version, or one written before the records, is refused, to be written anew
by running the entry point again (a finished training resumes: only its
evaluation runs again).
"""

from __future__ import annotations

import dataclasses
import glob
import os
from typing import Any, Dict, List, Optional, Tuple

from xflowrl.results.records import OMIT_NONE, Record
from xflowrl.results.runs import WorldModelRound

# (xfer name, location) pairs: JSON lists of two.
Applied = List[Tuple[str, int]]


@dataclasses.dataclass
class ZeroShotRow:
    """One held-out graph: costs (ms) and optimisation times (s).

    `change` and the `*_change` properties are percentages of the initial
    cost (negative: cheaper). `policy_applied` builds the policy's graph;
    `steps` is its step limit.
    """
    graph: str
    ops: int
    initial_ms: float
    policy_ms: float
    greedy_ms: float
    taso_ms: Optional[float]
    random_ms: Optional[float]
    policy_seconds: float
    greedy_seconds: float
    taso_seconds: Optional[float]
    steps: int
    policy_applied: List = dataclasses.field(default_factory=list)

    def change(self, cost: Optional[float]) -> Optional[float]:
        """`cost` as a percentage change of the initial cost; None for None."""
        return None if cost is None else self._percent(cost)

    def _percent(self, cost: float) -> float:
        return 100.0 * (cost / self.initial_ms - 1.0)

    @property
    def policy_change(self) -> float:
        return self._percent(self.policy_ms)

    @property
    def greedy_change(self) -> float:
        return self._percent(self.greedy_ms)


@dataclasses.dataclass
class ZeroShotSummary:
    """How a policy compares over its held-out graphs: shares of the graphs
    (within `margin_points` of greedy's change, above the initial cost,
    cheaper than greedy's graph, equal to it) and its optimisation time
    against TASO's search."""
    graphs: int
    within_margin_of_greedy: float
    margin_points: float
    above_initial: float
    better_than_greedy: float
    matches_greedy: float
    policy_vs_taso_time: float


@dataclasses.dataclass
class RouteSummary:
    """A route to a graph under a policy's sampling
    (`xflowrl.generalist.evaluate.route_against`): its steps, the natural
    log-probability of a sampled episode taking exactly them, how many are
    not the policy's greedy action, the (xfer, log-probability) of the steps
    whose xfer the policy's own greedy episode never applies, and every step
    (xfer, location, xfer and location log-probabilities, greedy, cost ms)."""
    steps: int
    log_prob: float
    off_greedy: int
    new_xfers: List[Tuple[str, float]]
    route: List[List[Any]]


@dataclasses.dataclass
class ScratchRun:
    """The per-graph agent trained from scratch on one held-out graph.

    `change` counts final graphs (the cheaper of its greedy episode's and
    its best training episode's), `cheapest_graph_*` the cheapest graph any
    of them passed through; `steps_to_own_*` is when it first reached its
    own result (None: never); `generalist_route` how likely the
    generalist's sampling is to follow the route to it (absent where the
    generalist has no NumPy arrays)."""
    episodes: int
    interactions: int
    greedy_cost_ms: float
    best_training_cost_ms: float
    change: float
    cheapest_graph_ms: float
    cheapest_graph_change: float
    steps_to_own_result: Optional[int]
    steps_to_own_cheapest_graph: Optional[int]
    generalist_route: Optional[RouteSummary] = dataclasses.field(default=None,
                                                                 metadata=OMIT_NONE)


@dataclasses.dataclass
class FinetunedRun:
    """The generalist fine-tuned on one held-out graph, its learning rates
    `lr_scale` times its own; `steps_to_reach*`: the real steps it took to
    reach the per-graph agent's result (None: never), counted as `change`
    and `cheapest_graph_change` count (see `ScratchRun`)."""
    episodes: int
    interactions: int
    lr_scale: float
    greedy_cost_ms: float
    best_training_cost_ms: float
    change: float
    cheapest_graph_ms: float
    cheapest_graph_change: float
    steps_to_reach: Optional[int]
    steps_to_reach_cheapest_graph: Optional[int]


@dataclasses.dataclass
class FinetuneGraph:
    """Fine-tuning against training from scratch on one held-out graph."""
    graph: str
    initial_ms: float
    finetuned: List[FinetunedRun]
    scratch: ScratchRun


@dataclasses.dataclass
class GeneralistRun(Record):
    """experiments/train_generalist.py's result (one agent, one seed).

    `history` is the training's log: the model-free agent's updates
    (`xflowrl.agents.ppo.training.TrainResult.history`) or the model-based
    agent's world-model rounds as its state holds them (`rounds`)."""

    SCHEMA = "generalist_run"
    VERSION = 1

    agent: str                          # "mf" or "mb"
    cost_model: str
    rules: str
    seed: int
    episodes: int                       # model-based: the controller's imagined episodes
    interactions: int                   # real environment steps of the training
    train_seconds: float
    eval_seconds: float
    training_graphs: List[str]
    held_out: List[ZeroShotRow]
    zero_shot: ZeroShotSummary
    finetune: List[FinetuneGraph]
    policy: str                         # the trained policy's folder
    commit: str
    history: List[Dict[str, Any]]

    def rounds(self) -> List[WorldModelRound]:
        """The model-based agent's world-model rounds (none for the model-free agent)."""
        if self.agent != "mb":
            return []
        return [WorldModelRound.from_state(row) for row in self.history]


def seed_runs(folder: str) -> List[GeneralistRun]:
    """The result.json of every seed*/ folder under `folder`, by seed.

    Raises:
      RecordError: a result.json of another version (or none).
    """
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, "seed*", "result.json"))):
        run = GeneralistRun.load(path)
        if run is not None:
            runs.append(run)
    return sorted(runs, key=lambda r: r.seed)


# Under a setting's results folder (`xflowrl.generalist.pipeline.results_folder`):
# the model-based agent's seeds, beside the policy's; the held-out graphs
# timed; the seeds' report.
MODEL_BASED_FOLDER = "mb"
MEASURED_JSON = "measured.json"
REPORT_MD = "report.md"


def agent_runs(folder: str) -> Dict[str, List[GeneralistRun]]:
    """"policy" -> the model-free policy's seeds under the results folder
    `folder`, "model-based" -> the model-based agent's (under `folder`/mb)."""
    return {"policy": seed_runs(folder),
            "model-based": seed_runs(os.path.join(folder, MODEL_BASED_FOLDER))}


@dataclasses.dataclass
class TimedVariant:
    """One graph of a held-out graph's variants, estimated and timed end to
    end: the cost model's estimate, the median and range of the round
    medians, both changes against the initial graph (percent), and the
    graph's hash (equal graphs are timed once)."""
    estimated_ms: float
    estimated_change: float
    measured_ms: float
    measured_min_ms: float
    measured_max_ms: float
    measured_change: float
    graph_key: str


@dataclasses.dataclass
class TimedGraph:
    """One held-out graph timed: its variants ("initial", "greedy",
    "<agent>/<seed>": the graph each handed over) on the clock `clock`."""
    graph: str
    clock: str
    rounds: int
    variants: Dict[str, TimedVariant]


@dataclasses.dataclass
class HeldOutTimings(Record):
    """measured.json: the held-out graphs the agents handed over, timed
    (`xflowrl.generalist.measured.measure_held_out`)."""

    SCHEMA = "held_out_timings"
    VERSION = 1

    graphs: List[TimedGraph]
