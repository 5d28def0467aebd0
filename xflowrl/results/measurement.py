"""The measure step's result (experiments/reproduce.py, <setting>/<graph>/
measured/result.json): every variant of one graph (original, greedy, TASO,
the agents' graphs) timed end to end, interleaved, one timing per distinct
graph; and, where the temperature sweep ran on the graph, each seed's
real-episode graph per temperature, timed in the same rounds."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from xflowrl.results.records import OMIT_NONE, Record


@dataclasses.dataclass
class ClockTiming:
    """One clock's spread of the round medians (`xflowrl.measure.compare.spread`)."""
    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    rounds_ms: List[float]


@dataclasses.dataclass
class TimedGraph:
    """A graph's timing: its key (equal graphs share one), op count,
    estimated cost and, per "<runtime>/<clock>", the measured spread."""
    graph_key: str
    ops: int
    estimated_ms: float
    measured: Dict[str, ClockTiming]


@dataclasses.dataclass
class SweepTiming:
    """The temperature sweep's real-episode graphs at one temperature, by seed."""
    temperature: float
    seeds: List[TimedGraph]


@dataclasses.dataclass
class Measurement(Record):
    """Every variant of one graph under one setting, timed."""

    SCHEMA = "measurement"
    VERSION = 1

    graph: str
    setting: str
    cost_model: str
    settings: Dict[str, Any]             # what a saved measurement must match to be reused
    seconds: float
    variants: Dict[str, TimedGraph]      # variant name -> its graph's timing
    sweep: Optional[List[SweepTiming]] = dataclasses.field(default=None, metadata=OMIT_NONE)

    def median_ms(self, variant: str, clock: str) -> Optional[float]:
        """The median ms of `variant` on `clock`, None where not timed."""
        timed = self.variants.get(variant)
        m = timed.measured.get(clock) if timed else None
        return m.median_ms if m else None
