"""What every entry point repeats: settings built from flags, and results folders.

`RunSettings` is the typed form of the flags `experiments/common.py` defines
(graph, rules, cost model, episode settings, results folder): it builds the
environment, and names the folder an entry point writes to. `source`
says where the graph comes from (`GraphSource`): a zoo graph with random
weights, or a user's ONNX file (`RunSettings.onnx`) with its own weights,
interface and metadata, which what a run writes or times of it keeps.
`entry.exit_on_bad_input` ends an entry point on input its user can fix
(a model file that cannot be imported, contradicting flags) with one line.
`BaselineSettings` runs the baselines (greedy, TASO's search, a random
agent). `outputs` writes and reads what a run leaves behind: result.json,
result.md, graph.json, graph.onnx. Library code reads no flags: entry points
build these from their flag values.
"""

from xflowrl.engine.cost import cost_model_from_spec as cost_model_from_spec
from xflowrl.entry_points.entry import exit_on_bad_input
from xflowrl.entry_points.outputs import (
                                  GRAPH_JSON,
                                  GRAPH_ONNX,
                                  RESULT_JSON,
                                  RESULT_MD,
                                  change_table,
                                  load_result,
                                  result_path,
                                  results_folder,
                                  save_graph,
                                  save_result,
                                  write_json,
                                  write_text,
                                  zoo_weights,
)
from xflowrl.entry_points.settings import BaselineSettings, RunSettings
from xflowrl.entry_points.source import (
                                  GraphSource,
                                  InputShapes,
                                  input_shapes_key,
                                  model_name,
                                  model_source,
                                  zoo_source,
)
