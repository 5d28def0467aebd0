"""Types of the planner's pUCT selection in C (_puct.pyx)."""

from typing import Any

def select(node: Any, c_puct: float) -> int: ...
