"""The Python API of the native rewrite engine (`xflowrl._engine`).

`Graph` and `GraphBuilder` (graph.py) build and inspect graphs, `CostModel`
(cost.py) estimates their runtime, `XferSet` (xfers.py) finds the locations
of rewrite rules, applies them and runs TASO's search (docs/engine.md).
Nothing here needs ONNX.

The engine's operator table as Python sees it is `xflowrl.ops`, and the
named rule sets are `xflowrl.rules.sets`: this package imports both, and
neither imports it.

`data/` holds the oneDNN reference cost table (`cost.REFERENCE_PATH`).
"""

from typing import Dict, TYPE_CHECKING

from xflowrl._lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers and IDEs
    from xflowrl.engine.cost import (
        BACKENDS,
        CostModel,
        DEFAULT_BACKEND,
        DEFAULT_COST_SPEC,
        DEFAULT_PROFILE,
        GPU_COST_SPEC,
        GPU_PROFILE,
        available_backends,
        cudnn_check,
        cudnn_plan,
        fitted_features,
    )
    from xflowrl.engine.graph import (
        ACTIVATIONS,
        Graph,
        GraphBuilder,
        MemoryEstimate,
        OpInfo,
        PADDINGS,
        Tensor,
        graph_from_data,
    )
    from xflowrl.engine.xfers import (
        DEFAULT_MAX_LOCATIONS,
        Locations,
        SearchResult,
        TASO_ALPHA,
        TASO_BUDGET,
        XferSet,
    )
    from xflowrl.rules.sets import DEFAULT_RULE_SET, load_default_rules

# Names are imported on first use (PEP 562): importing this package
# loads none of its modules.
_EXPORTS: Dict[str, str] = {
    "BACKENDS": "xflowrl.engine.cost",
    "DEFAULT_BACKEND": "xflowrl.engine.cost",
    "DEFAULT_COST_SPEC": "xflowrl.engine.cost",
    "DEFAULT_PROFILE": "xflowrl.engine.cost",
    "GPU_COST_SPEC": "xflowrl.engine.cost",
    "GPU_PROFILE": "xflowrl.engine.cost",
    "CostModel": "xflowrl.engine.cost",
    "available_backends": "xflowrl.engine.cost",
    "cudnn_check": "xflowrl.engine.cost",
    "cudnn_plan": "xflowrl.engine.cost",
    "fitted_features": "xflowrl.engine.cost",
    "ACTIVATIONS": "xflowrl.engine.graph",
    "Graph": "xflowrl.engine.graph",
    "GraphBuilder": "xflowrl.engine.graph",
    "MemoryEstimate": "xflowrl.engine.graph",
    "OpInfo": "xflowrl.engine.graph",
    "PADDINGS": "xflowrl.engine.graph",
    "Tensor": "xflowrl.engine.graph",
    "graph_from_data": "xflowrl.engine.graph",
    "DEFAULT_MAX_LOCATIONS": "xflowrl.engine.xfers",
    "DEFAULT_RULE_SET": "xflowrl.rules.sets",
    "TASO_ALPHA": "xflowrl.engine.xfers",
    "TASO_BUDGET": "xflowrl.engine.xfers",
    "Locations": "xflowrl.engine.xfers",
    "SearchResult": "xflowrl.engine.xfers",
    "XferSet": "xflowrl.engine.xfers",
    "load_default_rules": "xflowrl.rules.sets",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
