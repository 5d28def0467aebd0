"""The report of experiments/reproduce.py, kept as the name its scripts
import: the report itself is the library's (`xflowrl.results`: the runs'
records and layout, rows, tables, Figures 4.1-4.8, report.md and
report.json); see `xflowrl.results.report.write_report`.

No flags and no runs here. `load_runs` gives the measure step of
reproduce.py the runs as their JSON objects (it reads the agents' applied
steps, rules and locations by key).
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence

from xflowrl.results.figures import FIGURES
from xflowrl.results.layout import (
    CLOCKS,
    Runs,
    SEPARATE,
    SETTINGS,
    Setting,
    VARIANTS,
    load_sweep,
    median_seed,
    pct,
    run_stamps,
    seed_root,
    sweep_folder,
)
from xflowrl.results.layout import load_runs as load_run_records
from xflowrl.results.report import write_report
from xflowrl.results.rows import Spread, compare, graph_row, over_seeds, versus
from xflowrl.results.thesis import THESIS_GRAPHS, THESIS_MS

__all__ = ["CLOCKS", "FIGURES", "SEPARATE", "SETTINGS", "THESIS_GRAPHS", "THESIS_MS",
           "VARIANTS", "JsonRuns", "Runs", "Setting", "Spread", "compare", "graph_row", "load_runs",
           "load_sweep", "median_seed", "over_seeds", "pct", "run_stamps", "seed_root",
           "sweep_folder", "versus", "write_report"]


class JsonRuns(NamedTuple):
    """`Runs` with each record as its JSON object."""
    baselines: dict
    mf: dict
    mb: dict
    measured: Optional[dict]
    dream_history: List[dict]
    mb_separate: Optional[dict]
    mf_seeds: Dict[int, dict]
    mb_seeds: Dict[int, dict]
    mb_separate_seeds: Dict[int, dict]


def load_runs(root: str, graph: str, seeds: Sequence[int] = (0,)) -> JsonRuns:
    """`xflowrl.results.layout.load_runs`, the records as their JSON objects."""
    r = load_run_records(root, graph, seeds)
    return JsonRuns(
        r.baselines, r.mf.to_json(), r.mb.to_json(),
        r.measured.to_json() if r.measured else None, r.dream_history,
        r.mb_separate.to_json() if r.mb_separate else None,
        {s: x.to_json() for s, x in r.mf_seeds.items()},
        {s: x.to_json() for s, x in r.mb_seeds.items()},
        {s: x.to_json() for s, x in r.mb_separate_seeds.items()})
