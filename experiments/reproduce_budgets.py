"""The budgets of experiments/reproduce.py, for the entry points beside it
(no flags here): `xflowrl.reproduction.budgets`."""

from xflowrl.reproduction.budgets import BUDGETS, Budget, FULL, QUICK, THESIS, scaled

__all__ = ["BUDGETS", "FULL", "QUICK", "THESIS", "Budget", "scaled"]
