"""The Python API of the rewrite engine: graphs, cost models, xfers, search,
and ONNX import/export."""

from xflowrl.graphs.cost import (BACKENDS, CostModel, available_backends, cudnn_check, fitted_features,
                                 cudnn_plan)
from xflowrl.graphs.graph import (ACTIVATIONS, PADDINGS, Graph, GraphBuilder,
                                  MemoryEstimate, OpInfo, Tensor)
from xflowrl.graphs.onnx_common import ModelInterface, OnnxWeights
from xflowrl.graphs.onnx_export import save_onnx, to_onnx
from xflowrl.graphs.onnx_import import load_onnx
from xflowrl.graphs.xfers import (DEFAULT_MAX_LOCATIONS, Locations, SearchResult,
                                  XferSet, load_default_rules)
