"""What the two ablation drivers write, and the tables they render.

The observation ablation (experiments/observation_ablation.py): per graph,
result.json (`ObservationAblation`: one `ObservationRun` per variant and
seed of train_mf.py, summarised from its record and its log of every
training episode, `summarize_run`) and result.md
(`ObservationAblation.markdown`).

The model-based ablation (experiments/mb_ablation.py): ablation.json
(`ModelBasedAblation`: per variant of train_mb.py, an `AblationVariant`,
the median and range over its seeds, `Spread`, of what its runs' records
hold, `summarize_variant`) and ablation.md (`ModelBasedAblation.markdown`).

A file of another version (or a plain object the scripts wrote before these
records, without a schema) is refused: run the ablation again. The baselines' costs
come in as `BaselineMs` (read from a run's baselines by
`xflowrl.search.Baselines`, which this package does not import).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from xflowrl.results.records import OMIT_NONE, Record
from xflowrl.results.runs import Applied, ModelBasedRun, ModelFreeRun

_EPS = 1e-9


def _omit() -> Any:
    """A key written only where it applies (None: no key)."""
    return dataclasses.field(default=None, metadata=OMIT_NONE)


def change_pct(cost: float, initial: float) -> float:
    """`cost` against `initial`, in % (negative: cheaper)."""
    return 100.0 * (cost / initial - 1.0)


@dataclasses.dataclass(frozen=True)
class BaselineMs:
    """The baselines' costs (ms) in one agent run: one-step greedy's, TASO's
    search's and the random agent's mean (None: not run)."""
    greedy: float
    taso: Optional[float] = None
    random: Optional[float] = None

    @classmethod
    def of(cls, baselines: Any) -> "BaselineMs":
        """The costs of a `xflowrl.search.Baselines` record."""
        return cls(greedy=baselines.greedy.cost_ms,
                   taso=baselines.taso.cost_ms if baselines.taso else None,
                   random=baselines.random.cost_ms if baselines.random else None)


# -- the observation ablation ----------------------------------------------------

class EpisodeLog(NamedTuple):
    """Per training episode (1-based `episode`): its final cost and steps."""
    episode: List[int]
    final_cost: List[float]
    steps: List[int]


@dataclasses.dataclass
class Reach:
    """The first training episode that reached a cost, and the environment
    steps taken until it ended."""
    episode: int
    interactions: int


def first_reaching(log: EpisodeLog, cost: float) -> Optional[Reach]:
    """The first training episode whose final cost is at most `cost` (None
    if none did)."""
    steps = 0
    for episode, final, n in zip(log.episode, log.final_cost, log.steps):
        steps += n
        if final <= cost + _EPS:
            return Reach(episode=episode, interactions=steps)
    return None


@dataclasses.dataclass
class ObservationRun:
    """One train_mf.py run of the ablation: its greedy agent's final cost,
    the best training episode's, the mean final cost of the last
    `last_episodes` training episodes (changes in % of the initial cost),
    the steps train_mf counts until its greedy evaluation first reached its
    final cost, the training episodes that first reached the run's best
    cost and one-step greedy's (`to_best`, `to_greedy`; None: never), and
    the run's budget and seconds (`wall_seconds`: None where the driver did
    not run it)."""
    last_episodes: int
    last_mean_cost_ms: float
    last_mean_change_pct: float
    cost_features: str
    seed: int
    agent_cost_ms: float
    agent_change_pct: float
    best_training_cost_ms: float
    best_training_change_pct: float
    steps_to_final_cost: int
    to_best: Optional[Reach]
    to_greedy: Optional[Reach]
    episodes: int
    interactions: int
    train_seconds: float
    wall_seconds: Optional[float]
    agent_applied: Applied


def summarize_run(result: ModelFreeRun, log: EpisodeLog, greedy_cost_ms: float,
                  last: int = 50) -> ObservationRun:
    """One run's row from its record and its training log; `last`: how many
    final training episodes the mean final cost is over (a less noisy view
    of where the sampling policy ended than the one greedy episode)."""
    initial = result.initial_cost_ms
    best = min(log.final_cost) if log.final_cost else float("nan")
    last_mean = float(np.mean(log.final_cost[-last:])) if log.final_cost else float("nan")
    return ObservationRun(
        last_episodes=min(last, len(log.final_cost)), last_mean_cost_ms=last_mean,
        last_mean_change_pct=100 * (last_mean / initial - 1),
        cost_features=result.cost_features, seed=result.seed,
        agent_cost_ms=result.agent_cost_ms,
        agent_change_pct=100 * (result.agent_cost_ms / initial - 1),
        best_training_cost_ms=result.best_training_cost_ms,
        best_training_change_pct=100 * (result.best_training_cost_ms / initial - 1),
        steps_to_final_cost=result.steps_to_final_cost,
        to_best=first_reaching(log, best),
        to_greedy=first_reaching(log, greedy_cost_ms),
        episodes=result.episodes, interactions=result.interactions,
        train_seconds=result.train_seconds, wall_seconds=result.wall_seconds,
        agent_applied=result.agent_applied)


def _reach(r: Optional[Reach]) -> str:
    return "never" if r is None else f"{r.episode} ({r.interactions})"


@dataclasses.dataclass
class ObservationAblation(Record):
    """observation_ablation.py's result.json of one graph: the training
    episodes per run, the command that reproduces it, the initial cost, the
    first run's baselines (`xflowrl.search.Baselines.to_json()`; greedy and
    TASO are deterministic, the random agent's mean is that run's seed's)
    and the runs, by variant then seed."""

    SCHEMA = "observation_ablation"
    VERSION = 1

    graph: str
    episodes: int
    command: str
    initial_cost_ms: float
    baselines: Dict[str, Any]
    runs: List[ObservationRun]

    def markdown(self, baselines: BaselineMs) -> str:
        """result.md: one row per run, the variants over seeds, then the
        baselines (`baselines`: the costs in `self.baselines`)."""
        initial, runs = self.initial_cost_ms, self.runs
        lines = [f"# Observation ablation on {self.graph} (analytic cost, {self.episodes} "
                 "episodes)", "",
                 f"Initial cost {initial:.4f} ms. Command: `{self.command}`.", "",
                 "| cost features | seed | agent (greedy) | change | best in training | "
                 f"mean of last {runs[0].last_episodes} | steps to final cost | "
                 "episode (steps) reaching best | episode (steps) reaching greedy's cost | "
                 "train s | wall s |",
                 "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in runs:
            wall = "" if r.wall_seconds is None else f"{r.wall_seconds:.0f}"
            lines.append(
                f"| {r.cost_features} | {r.seed} | {r.agent_cost_ms:.4f} | "
                f"{r.agent_change_pct:+.2f}% | {r.best_training_change_pct:+.2f}% | "
                f"{r.last_mean_change_pct:+.2f}% | {r.steps_to_final_cost} | "
                f"{_reach(r.to_best)} | {_reach(r.to_greedy)} | {r.train_seconds:.0f} | "
                f"{wall} |")
        lines += ["", "Per variant, over seeds: the mean change of the greedy agent and of the "
                  "last training episodes, and how many seeds reached one-step greedy's cost "
                  "(greedy agent; any training episode).", "",
                  "| cost features | seeds | agent (greedy), mean | last episodes, mean | "
                  "agent at greedy's cost | training episode at greedy's cost |",
                  "|---|---|---|---|---|---|"]
        for variant in dict.fromkeys(r.cost_features for r in runs):
            rs = [r for r in runs if r.cost_features == variant]
            at_greedy = sum(r.agent_cost_ms <= baselines.greedy + _EPS for r in rs)
            lines.append(
                f"| {variant} | {len(rs)} | {np.mean([r.agent_change_pct for r in rs]):+.2f}% | "
                f"{np.mean([r.last_mean_change_pct for r in rs]):+.2f}% | "
                f"{at_greedy}/{len(rs)} | {sum(r.to_greedy is not None for r in rs)}/{len(rs)} |")
        lines += ["", "| baseline (full observation) | cost (ms) | change |", "|---|---|---|"]
        for name, cost in (("greedy", baselines.greedy), ("taso", baselines.taso),
                           ("random", baselines.random)):
            if cost is not None:
                lines.append(f"| {name} | {cost:.4f} | {100 * (cost / initial - 1):+.2f}% |")
        return "\n".join(lines) + "\n"


# -- the model-based ablation ----------------------------------------------------

@dataclasses.dataclass
class Spread:
    """Values over seeds (in seed order) with their median and range."""
    median: float
    min: float
    max: float
    values: List[float]

    @classmethod
    def of(cls, values: List[float]) -> "Spread":
        return cls(median=float(np.median(values)), min=float(np.min(values)),
                   max=float(np.max(values)), values=values)

    def cell(self, digits: int = 2) -> str:
        """"median [min, max]", signed."""
        return f"{self.median:+.{digits}f} [{self.min:+.{digits}f}, {self.max:+.{digits}f}]"


@dataclasses.dataclass(kw_only=True)
class AblationVariant:
    """One variant of train_mb.py over its finished seeds: what it is and
    the flags that make it; changes in % of the initial cost of the
    controller's greedy episode, of the best of its evaluation episodes and
    of the baselines (TASO's and the random agent's where every seed's run
    has them); the invalid actions of the evaluation episodes, the real
    steps (without --lockstep's dream steps) and the wall seconds; whether
    the median best change is within 1 point of greedy's; and, where timed,
    the measured onnxruntime change on this CPU of the graphs its runs hand
    over and of greedy's (timed together with the original)."""
    what: str
    flags: List[str]
    seeds: List[int]
    initial_cost_ms: float
    greedy_episode_change_pct: Spread
    best_change_pct: Spread
    greedy_change_pct: Spread
    invalid_actions: Spread
    real_steps: Spread
    seconds: Spread
    max_steps: int
    eval_masks: str
    taso_change_pct: Optional[Spread] = _omit()
    random_change_pct: Optional[Spread] = _omit()
    within_1_point_of_greedy: bool
    measured_ort_cpu_change_pct: Optional[Spread] = _omit()
    measured_greedy_ort_cpu_change_pct: Optional[float] = _omit()


def _spread_where_all(costs_ms: Sequence[Optional[float]],
                      results: Sequence[ModelBasedRun]) -> Optional[Spread]:
    """The spread of a baseline's change over the runs, None unless it ran
    in every one."""
    changes = [change_pct(c, r.initial_cost_ms) for c, r in zip(costs_ms, results)
               if c is not None]
    return Spread.of(changes) if len(changes) == len(results) else None


def summarize_variant(what: str, flags: List[str], results: Sequence[ModelBasedRun],
                      baselines: Sequence[BaselineMs]) -> AblationVariant:
    """A variant's entry from its runs' records (one per seed) and the
    baselines' costs in each run."""
    greedy = Spread.of([change_pct(b.greedy, r.initial_cost_ms)
                        for b, r in zip(baselines, results)])
    best = Spread.of([change_pct(r.controller_cheapest_cost_ms, r.initial_cost_ms)
                      for r in results])
    taso = _spread_where_all([b.taso for b in baselines], results)
    random = _spread_where_all([b.random for b in baselines], results)
    return AblationVariant(
        what=what, flags=list(flags), seeds=[r.seed for r in results],
        initial_cost_ms=results[0].initial_cost_ms,
        greedy_episode_change_pct=Spread.of([change_pct(r.controller_cost_ms, r.initial_cost_ms)
                                             for r in results]),
        best_change_pct=best, greedy_change_pct=greedy,
        invalid_actions=Spread.of([float(r.controller["greedy"].invalid_actions
                                         + sum(e.invalid_actions for e in r.sampled))
                                   for r in results]),
        real_steps=Spread.of([float(r.real_steps.world_model_rollouts
                                    + r.real_steps.held_out_rollouts
                                    + r.real_steps.round_evaluations
                                    + r.real_steps.evaluation) for r in results]),
        seconds=Spread.of([r.seconds.total for r in results]),
        max_steps=results[0].max_steps, eval_masks=results[0].eval_masks,
        taso_change_pct=taso, random_change_pct=random,
        within_1_point_of_greedy=best.median <= greedy.median + 1.0 + 1e-9)


@dataclasses.dataclass
class ModelBasedAblation(Record):
    """mb_ablation.py's ablation.json: the graph, its setting
    ("analytic/v100"), rule set and the flags given to every run (--extra),
    and each variant with a finished seed, in the order asked for."""

    SCHEMA = "mb_ablation"
    VERSION = 1

    graph: str
    cost_model: str
    rules: str
    extra: List[str]
    variants: Dict[str, AblationVariant]

    def table(self) -> str:
        """The table of ablation.md: a row per variant."""
        def optional(s: Optional[Spread]) -> str:
            return "-" if s is None else s.cell()

        lines = ["| variant | what | greedy episode % | best episode % | one-step greedy % | "
                 "TASO % | random % | measured best / greedy (ort/cpu) % | invalid actions | "
                 "real steps | seconds |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for name, s in self.variants.items():
            measured = "-"
            if s.measured_ort_cpu_change_pct is not None:
                measured = (f"{s.measured_ort_cpu_change_pct.cell()} / "
                            f"{s.measured_greedy_ort_cpu_change_pct:+.2f}")
            lines.append(
                f"| {name} | {s.what} | {s.greedy_episode_change_pct.cell()} | "
                f"{s.best_change_pct.cell()} | {s.greedy_change_pct.cell()} | "
                f"{optional(s.taso_change_pct)} | {optional(s.random_change_pct)} | "
                f"{measured} | {s.invalid_actions.median:.0f} | "
                f"{s.real_steps.median:.0f} | {s.seconds.median:.0f} |")
        return "\n".join(lines) + "\n"

    def markdown(self) -> str:
        """ablation.md: a title naming the setting, then the table."""
        return (f"# Model-based ablation on {self.graph} ({self.cost_model}, {self.rules} "
                "rules)\n\nMedian [min, max] over seeds of the real cost change (% of the "
                "initial cost).\n\n" + self.table())
