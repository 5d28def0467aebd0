"""Where a run's graph comes from: a zoo graph, or a user's ONNX file.

A `GraphSource` is the graph an entry point optimises, the name its results
folder takes, and the values that make the graph runnable. A zoo graph
(`zoo_source`) carries no trained weights: its weights are random
(`zoo_weights`, seeded per run) and so are its inputs. A user's model
(`model_source`) keeps its own weights, its interface (input and output
names, element types, opsets) and its metadata (`xflowrl.optimize.model_io`):
what a run writes or times of it uses those, and graph.onnx is written with
`to_model`, as the `xflowrl optimize` command writes a model.

An imported model is read once per process: `model_source` keeps the last
few by path, modification time, size and input shapes, so the settings that
name a file can be asked for its graph many times.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, Dict, Mapping, Optional, Sequence, TYPE_CHECKING, Tuple

import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, Graph
from xflowrl.entry_points.outputs import save_graph, zoo_weights
from xflowrl.executor.weights import random_inputs

if TYPE_CHECKING:
    from xflowrl.optimize.model_io import UserModel

# Static shapes for inputs with dynamic dimensions, hashable: ((name, shape), ...).
InputShapes = Tuple[Tuple[str, Tuple[int, ...]], ...]


def model_name(path: str) -> str:
    """The name an ONNX file's graph goes by (results folders): its file
    name without the extension, e.g. "resnet" for models/resnet.onnx."""
    return os.path.splitext(os.path.basename(os.fspath(path)))[0]


def input_shapes_key(shapes: Optional[Mapping[str, Sequence[int]]]) -> InputShapes:
    """`{name: shape}` as a sorted, hashable `InputShapes`."""
    return tuple(sorted((str(k), tuple(int(d) for d in v)) for k, v in (shapes or {}).items()))


@dataclasses.dataclass(frozen=True)
class GraphSource:
    """A graph to optimise and what makes it runnable.

    Attributes:
      name: a zoo graph's name, or the model file's stem.
      graph: the engine graph.
      model: the imported file (`UserModel`: its own weights, interface and
        metadata); None for a zoo graph.
    """
    name: str
    graph: Graph
    model: Optional["UserModel"] = None

    def weights(self, seed: int) -> Mapping[str, np.ndarray]:
        """Weight values by name: the model's own (`seed` unused; an
        `OnnxWeights` that carries its interface), or a zoo graph's random
        ones (`zoo_weights(name, graph, seed)`)."""
        if self.model is not None:
            return self.model.weights
        return zoo_weights(self.name, self.graph, seed)

    def inputs(self, seed: int) -> Dict[str, np.ndarray]:
        """Random input values by input name: for a model, of its inputs'
        element types and (fixed) shapes (`xflowrl.optimize.verify.random_feeds`);
        for a zoo graph, `random_inputs(graph, seed)`."""
        if self.model is not None:
            # pylint: disable-next=import-outside-toplevel
            from xflowrl.optimize.verify import random_feeds
            return random_feeds(self.model.proto, seed, self.model.fixed_inputs)
        return random_inputs(self.graph, seed)

    def save_graph(self, out_dir: str, graph: Graph, seed: int, provenance: str = "") -> None:
        """Writes `graph` (optimised from this source's graph) to
        out_dir/graph.json and out_dir/graph.onnx: with the model's own
        weights, interface and metadata (`provenance` recorded in it), or a
        zoo graph's random weights of `seed` (`outputs.save_graph`)."""
        save_graph(out_dir, graph, self.weights(seed), model=self.model, provenance=provenance)

    def time_in_tensorflow(self, graphs: Mapping[str, Graph], cost_model: CostModel,
                           rounds: int, seed: int) -> Dict[str, Any]:
        """End-to-end TensorFlow times (onnx-tf) of graphs optimised from this
        source's, the same weights and inputs for all, in `rounds`
        interleaved rounds (`xflowrl.measure.tf_runtime.interleaved_graph_times`):
        the weights of `weights(seed)` (a zoo graph's random ones, scaled so
        values stay finite), a model's `inputs(seed)` (its inputs' element
        types and names), a zoo graph's `measure_graph`'s own random inputs."""
        # pylint: disable-next=import-outside-toplevel
        from xflowrl.measure.tf_runtime import interleaved_graph_times
        weights = self.weights(seed)
        feeds = None if self.model is None else self.inputs(seed)
        return interleaved_graph_times(graphs, cost_model, weights, feeds, rounds=rounds,
                                       seed=seed)


def zoo_source(name: str, batch: int = 1) -> GraphSource:
    """The zoo graph `name` (`xflowrl.zoo.GRAPHS`), at `batch` where it is
    not 1 (ValueError: its builder takes no batch size)."""
    if batch == 1:
        return GraphSource(name, zoo.get_graph(name))
    try:
        return GraphSource(name, zoo.get_graph(name, batch_size=batch))
    except TypeError as error:
        if "batch_size" not in str(error):
            raise
        raise ValueError(f"zoo graph {name!r} has no batch size") from error


def model_source(path: str, input_shapes: Optional[Mapping[str, Sequence[int]]] = None
                 ) -> GraphSource:
    """The ONNX model at `path`, imported with its own weights.

    Args:
      path: an .onnx file (its external data, if any, beside it).
      input_shapes: static shapes for inputs declared with dynamic dimensions.

    Raises:
      BadInput (`xflowrl.optimize.model_io`): the file is missing, not an
        ONNX model, or holds what the importer refuses; the message names
        the file.
    """
    path = os.fspath(path)
    try:
        stat = os.stat(path)
        stamp = (os.path.abspath(path), stat.st_mtime_ns, stat.st_size)
    except OSError:
        stamp = (os.path.abspath(path), 0, 0)  # load_model says what is wrong with it
    return _load(path, stamp, input_shapes_key(input_shapes))


@functools.lru_cache(maxsize=4)
def _load(path: str, stamp: Tuple[str, int, int], shapes: InputShapes) -> GraphSource:
    """`model_source`, read once per (path as given, absolute path,
    modification time and size, shapes): a rewritten file is read again."""
    del stamp  # part of the cache key only
    from xflowrl.optimize.model_io import load_model  # pylint: disable=import-outside-toplevel
    model = load_model(path, dict(shapes))
    return GraphSource(model.name, model.graph, model)
