"""What the comparison of the agents (experiments/compare_agents.py) writes:
its result.json (`AgentComparison`: per graph a `ComparisonRow`, the
model-based and model-free agents' real costs beside one-step greedy's,
TASO's and the random agent's under one cost model, and their sample
efficiency) and the result.md it renders (`AgentComparison.markdown`).
A file of another version (or the plain list of rows the script wrote
before the record) is refused: run the comparison again.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, List, Tuple, Type, TypeVar

from xflowrl.results.records import Record, RecordError
from xflowrl.results.runs import ModelBasedRun, ModelFreeRun

C = TypeVar("C", bound="AgentComparison")

# The compared agents, in the order of the table and the figure.
AGENT_LABELS = ("model-based", "model-free", "greedy", "TASO", "random")


def change_pct(cost: float, initial: float) -> float:
    """`cost` against `initial`, in % (negative: cheaper)."""
    return 100.0 * (cost / initial - 1.0)


@dataclasses.dataclass(kw_only=True)
class ComparisonRow:
    """One graph: costs in ms (the model-based controller's greedy episode,
    `mb_ms`, and the best of its evaluation episodes, `mb_cheapest_ms`), the
    agents' step limit there, the verdicts against one-step greedy, the real
    environment steps each agent used (the model-based agent's rollouts; the
    model-free agent's until its greedy evaluation first reached its final
    cost, and in all), their wall seconds, and each cost's change in % of
    the initial cost (`<agent>_change`)."""
    graph: str
    initial_ms: float
    max_steps: int
    mb_ms: float
    mb_cheapest_ms: float
    mf_ms: float
    greedy_ms: float
    taso_ms: float
    random_ms: float
    mb_vs_greedy: str
    mf_vs_greedy: str
    greedy_steps: int
    mb_real_steps: int
    mf_steps_to_final: int
    mf_real_steps: int
    steps_ratio_mf_over_mb: float
    equal_final_cost: bool       # the ratio only means something at equal cost
    mb_seconds: float
    mf_seconds: float
    mb_change: float
    mf_change: float
    greedy_change: float
    taso_change: float
    random_change: float

    @classmethod
    def of(cls, graph: str, max_steps: int, mf: ModelFreeRun, mb: ModelBasedRun,
           greedy_ms: float, greedy_steps: int, taso_ms: float, random_ms: float,
           versus_greedy: Callable[[float, float], str]) -> "ComparisonRow":
        """The row of `graph` from the agents' runs there and the baselines'
        costs; `versus_greedy(cost, greedy_ms)`: the verdict's predicate
        (`xflowrl.search.versus_greedy`)."""
        initial = mb.initial_cost_ms
        mb_steps = mb.real_steps.world_model_rollouts + mb.real_steps.held_out_rollouts
        mf_steps = mf.steps_to_final_cost
        return cls(
            graph=graph, initial_ms=initial, max_steps=max_steps,
            mb_ms=mb.controller_cost_ms, mb_cheapest_ms=mb.controller_cheapest_cost_ms,
            mf_ms=mf.agent_cost_ms, greedy_ms=greedy_ms, taso_ms=taso_ms, random_ms=random_ms,
            mb_vs_greedy=versus_greedy(mb.controller_cheapest_cost_ms, greedy_ms),
            mf_vs_greedy=versus_greedy(mf.agent_cost_ms, greedy_ms),
            greedy_steps=greedy_steps, mb_real_steps=mb_steps, mf_steps_to_final=mf_steps,
            mf_real_steps=mf.interactions, steps_ratio_mf_over_mb=mf_steps / max(mb_steps, 1),
            equal_final_cost=abs(mb.controller_cheapest_cost_ms - mf.agent_cost_ms)
            <= 1e-6 * initial,
            mb_seconds=mb.seconds.total, mf_seconds=mf.train_seconds,
            mb_change=change_pct(mb.controller_cost_ms, initial),
            mf_change=change_pct(mf.agent_cost_ms, initial),
            greedy_change=change_pct(greedy_ms, initial),
            taso_change=change_pct(taso_ms, initial),
            random_change=change_pct(random_ms, initial))

    @property
    def changes(self) -> Tuple[float, ...]:
        """Each agent's change (%), in the order of `AGENT_LABELS`."""
        return (self.mb_change, self.mf_change, self.greedy_change, self.taso_change,
                self.random_change)


@dataclasses.dataclass(kw_only=True)
class AgentComparison(Record):
    """compare_agents.py's result.json: the cost model ("analytic/v100"),
    the requested step limit (--max_steps) and the factor of greedy's steps
    it is raised to where that is more, and one row per graph."""

    SCHEMA = "compare_agents"
    VERSION = 2

    cost_model: str
    max_steps: int
    equal_budget_factor: float
    rows: List[ComparisonRow]

    @classmethod
    def from_json(cls: Type[C], value: Any, where: str = "") -> C:
        """As `Record.from_json`, which refuses the plain list of rows the
        script wrote before the record (version 0) too, saying so."""
        if isinstance(value, list):
            raise RecordError(f"{where or cls.__name__}: a list of rows (version 0, written "
                              f"before versioned records); this code reads {cls.SCHEMA} "
                              f"version {cls.VERSION} only: run again to write it anew")
        return super().from_json(value, where)

    def markdown(self) -> str:
        """result.md: the costs, the verdicts and the sample efficiency."""
        cost_table = "\n".join(
            f"| {r.graph} | {r.initial_ms:.3f} | {r.max_steps} | "
            f"{r.mb_ms:.3f} ({r.mb_change:+.2f}%) | "
            f"{r.mb_cheapest_ms:.3f} | {r.mf_ms:.3f} ({r.mf_change:+.2f}%) | "
            f"{r.greedy_ms:.3f} ({r.greedy_change:+.2f}%, {r.greedy_steps} steps) | "
            f"{r.taso_ms:.3f} ({r.taso_change:+.2f}%) | "
            f"{r.random_ms:.3f} ({r.random_change:+.2f}%) |" for r in self.rows)
        steps_table = "\n".join(
            f"| {r.graph} | {r.mb_real_steps} | {r.mf_steps_to_final} "
            f"({r.mf_real_steps} in all) | {r.steps_ratio_mf_over_mb:.2f}x | "
            f"{'yes' if r.equal_final_cost else 'no'} | {r.mb_seconds:.0f} / "
            f"{r.mf_seconds:.0f} |" for r in self.rows)
        verdicts = "\n".join(f"- {r.graph}: the model-based agent {r.mb_vs_greedy}; the "
                             f"model-free agent {r.mf_vs_greedy}." for r in self.rows)
        return (
            f"# Model-based vs model-free vs baselines ({self.cost_model} "
            "estimated cost, ms)\n\n"
            "| graph | initial | agents' step limit | model-based (greedy) | model-based (best "
            "eval) | model-free | one-step greedy | TASO search | random (mean) |\n"
            "|---|---|---|---|---|---|---|---|---|\n"
            f"{cost_table}\n\nThe agents' step limit is --max_steps ({self.max_steps}) or "
            f"{self.equal_budget_factor} x one-step greedy's steps, whichever is more.\n\n"
            f"{verdicts}\n\n"
            "## Sample efficiency (real environment steps)\n\n"
            "| graph | model-based (rollouts) | model-free (to its final cost) | ratio | equal "
            "final cost | seconds MB / MF |\n|---|---|---|---|---|---|\n"
            f"{steps_table}\n")
