"""What the temperature sweep (experiments/temperature_sweep.py, Table 4.3)
writes: each seed's seed_<s>/cells.json (`SweepSeed`: per temperature, the
world model's and the real environment's score of the controller trained in
the dream at it, and the real episode's steps, which replay its graph) and
the sweep's result.json (`SweepResult`: per temperature, those scores over
the seeds)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from xflowrl.results.records import OMIT_NONE, Record
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


def _omit() -> Any:
    """A field a sweep's result.json holds only where it was written: None
    (and no key) in the files of sweeps from before it."""
    return dataclasses.field(default=None, metadata=OMIT_NONE)


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
    # its graph (reproduce.py's measure step times them). Absent in sweeps
    # from before it was kept.
    applied: Optional[List[Applied]] = _omit()


@dataclasses.dataclass(kw_only=True)
class SweepResult(Record):
    """The sweep's result.json. Keyword-only fields, in the order of the
    files' keys; those absent from older sweeps' files are None (and left
    out of the JSON), as `rules` and `max_locations` (reproduce.py replays
    the sweep's graphs under the entry points' defaults then)."""

    SCHEMA = "temperature_sweep"
    VERSION = 1

    graph: str
    cost_model: Optional[str] = _omit()
    seeds: int
    dream_episodes: int
    rules: Optional[str] = _omit()
    max_locations: Optional[int] = _omit()
    initial_cost_ms: float
    seconds: Optional[float] = _omit()
    rows: List[SweepRow]
    world_model: Optional[Dict[str, Any]] = _omit()   # the WorldModelConfig's fields

    @property
    def replayable(self) -> bool:
        """Whether every row kept its seeds' real episodes' steps."""
        return all(row.applied is not None for row in self.rows)
