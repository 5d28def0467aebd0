"""Real measurements of graphs: inference time and memory in TensorFlow.

Importing it has no side effect. Memory figures need TensorFlow's allocator
statistics, which the first measurement turns on if TensorFlow is not
imported yet; a program that imports TensorFlow earlier calls
`enable_memory_stats()` before that (see `tf_runtime`).
"""

from xflowrl.measure.properties import graph_properties, markdown_table
from xflowrl.measure.tf_runtime import (
                                        BFC_ENV,
                                        Measurement,
                                        enable_memory_stats,
                                        measure_graph,
                                        measure_onnx,
                                        memory_stats_available,
)
