"""The thesis' evaluation (Chapter 4) reproduced: experiments/reproduce.py's
library.

A `Plan` (`plan`) names the graphs, cost settings, seeds and budgets
(`budgets`: `BUDGETS`, `scaled`); `all_jobs` lists its entry-point runs as
jobs; `reproduce` (`runner`) runs them, times every graph's variants
(`measure_step.measure`) and writes the report; `report_so_far` reports
what has finished, starting nothing. `baseline_runs` is experiments/baselines.py's:
the baselines per graph searched, timed and saved, with their table and
Figures 4.1 and 4.2. docs/reproduce.md.
"""

from xflowrl.reproduction.budgets import BUDGETS, Budget, scaled
from xflowrl.reproduction.plan import Plan, all_jobs, reportable_graphs
from xflowrl.reproduction.runner import NothingToReport, Options, report_so_far, reproduce

__all__ = ["BUDGETS", "Budget", "NothingToReport", "Options", "Plan", "all_jobs",
           "report_so_far", "reportable_graphs", "reproduce", "scaled"]
