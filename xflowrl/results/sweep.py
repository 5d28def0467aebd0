"""What one seed of the temperature sweep (experiments/temperature_sweep.py,
Table 4.3) leaves in its seed_<s>/cells.json: per temperature, the world
model's and the real environment's score of the controller trained in the
dream at it, and the real episode's steps (which replay its graph)."""

from __future__ import annotations

import dataclasses
from typing import List

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
