"""An engine graph as a runnable ONNX model: what both runtimes' `measure_graph`
and the interleaved comparisons start from.

`export_with_values(graph, weights, feeds, seed)` exports the graph
(`xflowrl.onnx_io.to_onnx`, folded weights precomputed) with `weights` and
returns the feeds to run it on: the given ones, or `random_weights(graph,
seed)` and `random_inputs(graph, seed)`. It sits in its own module so that
`compare`, `ort_runtime` and `tf_runtime` import it without importing one
another.
"""

from __future__ import annotations

from typing import Mapping, Optional, Tuple

import numpy as np


def export_with_values(graph, weights: Optional[Mapping[str, np.ndarray]] = None,
                       feeds: Optional[Mapping[str, np.ndarray]] = None,
                       seed: int = 0) -> Tuple[object, Mapping[str, np.ndarray]]:
    """`graph` as an ONNX model with weights, and its input feeds (see module docstring)."""
    # Imported here: onnx only where a graph is exported.
    from xflowrl.executor.weights import (  # pylint: disable=import-outside-toplevel
        random_inputs,
        random_weights,
    )
    from xflowrl.onnx_io import to_onnx  # pylint: disable=import-outside-toplevel
    weights = random_weights(graph, seed) if weights is None else weights
    feeds = random_inputs(graph, seed) if feeds is None else feeds
    return to_onnx(graph, weights, check=False), feeds
