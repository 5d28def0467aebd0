"""Type stub of the native engine `xflowrl._engine` (a Cython extension built
from third_party/taso/python/_engine.pyx; docs/engine.md).

Its names are typed where Python code meets them, in the wrappers of
`xflowrl.engine` (graph.py, cost.py, xfers.py, ops.py); here every name is
`Any`, so that type checkers neither need the compiled module nor guess at it.
"""

from typing import Any

def __getattr__(name: str) -> Any: ...
