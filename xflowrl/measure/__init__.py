"""Real measurements of graphs: inference time and memory in TensorFlow.

Import this package before TensorFlow so that allocator statistics are on
(see `tf_runtime`).
"""

from xflowrl.measure.tf_runtime import (BFC_ENV, Measurement, measure_graph, measure_onnx,
                                        memory_stats_available)
from xflowrl.measure.properties import graph_properties, markdown_table
