"""The Python API of the rewrite engine: graphs, cost models, xfers, search."""

from xflowrl.graphs.cost import (BACKENDS, CostModel, available_backends, cudnn_check,
                                 cudnn_plan)
from xflowrl.graphs.graph import (ACTIVATIONS, PADDINGS, Graph, GraphBuilder,
                                  MemoryEstimate, OpInfo, Tensor)
from xflowrl.graphs.xfers import (DEFAULT_MAX_LOCATIONS, Locations, SearchResult,
                                  XferSet, load_default_rules)
