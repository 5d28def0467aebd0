"""What a run leaves in its results folder, written and read in one way.

Every entry point writes its summary to result.json (and a readable
result.md); those that optimise a graph also write the graph's op list
(graph.json) and the graph as ONNX (graph.onnx): a user's model with its own
weights, interface and metadata; a zoo graph with random weights under the
original weight names (zoo graphs carry no trained weights).
"""

import json
import os
from typing import Any, Mapping, Optional, TYPE_CHECKING

from xflowrl import zoo
from xflowrl.engine import Graph
from xflowrl.executor.weights import random_weights
from xflowrl.results.tables import change_table  # noqa: F401  (re-exported for the entry points)

if TYPE_CHECKING:
    from xflowrl.optimize.model_io import UserModel

RESULT_JSON = "result.json"
RESULT_MD = "result.md"
GRAPH_JSON = "graph.json"
GRAPH_ONNX = "graph.onnx"


def results_folder(results_dir: str, graph: str, entry_point: str) -> str:
    """results_dir/<graph>/<entry_point>: where an entry point writes one graph's results."""
    return os.path.join(results_dir, graph, entry_point)


def result_path(results_dir: str, graph: str, entry_point: str) -> str:
    """The result.json an entry point writes for one graph."""
    return os.path.join(results_folder(results_dir, graph, entry_point), RESULT_JSON)


def write_json(path: str, value: Any, indent: Optional[int] = 2) -> None:
    """Writes `value` as JSON to `path`, creating its folder. Numbers JSON does
    not know (numpy scalars) are written as floats."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f, indent=indent, default=float)


def write_text(path: str, text: str) -> None:
    """Writes `text` to `path`, creating its folder."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def save_result(out_dir: str, summary: Any, markdown: Optional[str] = None,
                indent: int = 2) -> str:
    """Writes a run's summary to out_dir/result.json (and `markdown` to
    out_dir/result.md); returns the JSON file's path."""
    path = os.path.join(out_dir, RESULT_JSON)
    write_json(path, summary, indent)
    if markdown is not None:
        write_text(os.path.join(out_dir, RESULT_MD), markdown)
    return path


def load_result(path: str) -> Optional[Any]:
    """The result.json at `path`, or None if there is none."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def zoo_weights(graph_name: str, graph: Graph, seed: int) -> dict:
    """Random weights of a zoo graph (`graph`, the zoo's `graph_name`), scaled
    by the zoo's gain (`zoo.weight_gain`) so that activations stay finite."""
    return random_weights(graph, seed=seed, gain=zoo.weight_gain(graph_name))


def save_graph(out_dir: str, graph: Graph, weights: Optional[Mapping] = None,
               model: Optional["UserModel"] = None, provenance: str = "") -> None:
    """Writes `graph`'s op list to out_dir/graph.json and the graph as ONNX
    to out_dir/graph.onnx.

    Args:
      out_dir: the results folder.
      graph: the graph to write.
      weights: values of the weights of the graph `graph` was optimised from
        (folded weights are precomputed); None (and no `model`): no graph.onnx.
      model: the user's model `graph` was optimised from: graph.onnx is then
        written with its own weights, interface, metadata and external data
        (`xflowrl.optimize.model_io.to_model`; `weights` unused).
      provenance: with `model`, what was done (recorded in the file's metadata).
    """
    write_json(os.path.join(out_dir, GRAPH_JSON), [op._asdict() for op in graph.ops()],
               indent=None)
    path = os.path.join(out_dir, GRAPH_ONNX)
    if model is not None:
        # pylint: disable-next=import-outside-toplevel
        from xflowrl.optimize.model_io import to_model, write_model
        write_model(to_model(model, graph, provenance), path, model.external_data)
    elif weights is not None:
        from xflowrl.onnx_io import save_onnx  # pylint: disable=import-outside-toplevel
        save_onnx(graph, weights, path)
