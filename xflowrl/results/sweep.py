"""What the temperature sweep (experiments/temperature_sweep.py, Table 4.3)
writes: each seed's seed_<s>/cells.json (`SweepSeed`: per temperature, the
world model's and the real environment's score of the controller trained in
the dream at it, and the real episode's steps, which replay its graph) and
the sweep's result.json (`SweepResult`: per temperature, those scores over
the seeds, `sweep_rows`) and the result.md it renders
(`SweepResult.markdown`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Sequence

import numpy as np

from xflowrl.results.records import Record
from xflowrl.results.runs import Applied


@dataclasses.dataclass
class SweepCell:
    """One temperature of one seed. Scores in % of the initial cost
    (negative: faster): `world_model`, minus the mean imagined return of
    the greedy dream episodes; `real`, the real greedy episode's change."""
    temperature: float
    world_model: float
    real: float
    applied: Applied            # the real episode's (xfer name, location) steps
    invalid_actions: int


@dataclasses.dataclass
class SweepSeed(Record):
    """One seed of the sweep: its cells, in the sweep's temperature order."""

    SCHEMA = "temperature_sweep_seed"
    VERSION = 1

    seed: int
    initial_cost_ms: float
    cells: List[SweepCell]
    seconds: float


@dataclasses.dataclass(kw_only=True)
class SweepRow:
    """One temperature over the seeds: the scores' mean and std (population)
    and the seeds' own, in seed order."""
    temperature: float
    world_model_mean: float
    world_model_std: float
    real_mean: float
    real_std: float
    world_model: List[float]
    real: List[float]
    # Per seed: the real episode's (xfer name, location) steps, which replay
    # its graph (reproduce.py's measure step times them).
    applied: List[Applied]

    @classmethod
    def over_seeds(cls, temperature: float, cells: Sequence[SweepCell]) -> "SweepRow":
        """The row of `temperature` from its cells, one per seed (in seed order)."""
        w = np.array([c.world_model for c in cells])
        r = np.array([c.real for c in cells])
        return cls(temperature=temperature, world_model_mean=float(w.mean()),
                   world_model_std=float(w.std()), real_mean=float(r.mean()),
                   real_std=float(r.std()), world_model=w.tolist(), real=r.tolist(),
                   applied=[c.applied for c in cells])


def sweep_rows(temperatures: Sequence[float], seeds: Sequence[SweepSeed]) -> List[SweepRow]:
    """Per temperature (in the sweep's order), its row over the seeds' cells.

    Raises:
      ValueError: a seed's cell at a temperature the sweep does not have.
    """
    cells: Dict[float, List[SweepCell]] = {t: [] for t in temperatures}
    for seed in seeds:
        for cell in seed.cells:
            if cell.temperature not in cells:
                raise ValueError(f"seed {seed.seed}: a cell at temperature {cell.temperature}, "
                                 f"not one of the sweep's {list(temperatures)}")
            cells[cell.temperature].append(cell)
    return [SweepRow.over_seeds(t, cells[t]) for t in temperatures]


@dataclasses.dataclass(kw_only=True)
class SweepResult(Record):
    """The sweep's result.json. Keyword-only fields, in the order of the
    files' keys; `rules` and `max_locations` are those reproduce.py replays
    the sweep's graphs under."""

    SCHEMA = "temperature_sweep"
    VERSION = 1

    graph: str
    cost_model: str
    seeds: int
    dream_episodes: int
    rules: str
    max_locations: int
    initial_cost_ms: float
    seconds: float
    rows: List[SweepRow]
    world_model: Dict[str, Any]             # the WorldModelConfig's fields

    def markdown(self) -> str:
        """result.md: Table 4.3, mean +- std over the seeds per temperature."""
        table = "\n".join(f"| {r.temperature} | {r.world_model_mean:+.3f}% ± "
                          f"{r.world_model_std:.3f}% | {r.real_mean:+.3f}% ± "
                          f"{r.real_std:.3f}% |" for r in self.rows)
        return (f"# Temperature sweep on {self.graph} (Table 4.3)\n\n{self.seeds} seeds, "
                f"{self.dream_episodes} imagined episodes per controller, {self.seconds:.0f} s."
                f"\n\n| temperature | world-model score | real score |\n|---|---|---|\n"
                f"{table}\n")
