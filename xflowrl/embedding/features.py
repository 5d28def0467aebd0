"""Featurization: an engine graph as a `GraphsTuple` (the one data contract
of observations, docs/agents.md).

`featurize(graph, op_costs, graph_cost, initial_cost)` returns a single-graph
`GraphsTuple` of numpy arrays; `batch` concatenates several into one and
`to_tensors` makes it graph_nets' tensor `GraphsTuple` for the encoder. The
numpy tuple is this module's own, with graph_nets' fields in graph_nets'
order, so that observing a graph imports neither graph_nets nor TensorFlow
(the environment, the searches and `xflowrl optimize --method=greedy|taso`
start in a fraction of a second; only `to_tensors` loads them). Every node of
the engine graph is a node here, graph inputs and weights included, in the
engine's topological order, so node `i` is `graph.structure()["guids"][i]`.

Fields:
  nodes:     [n, NODE_SIZE] float32, per op, concatenated:
             - one-hot op type over `OP_TYPES` ([len(OP_TYPES)]: the engine's
               op table in its order, `xflowrl.ops.OP_TYPES`, then an
               "unknown" slot);
             - log1p(op cost in microseconds) under the environment's cost
               model (0 for inputs, weights and free ops);
             - kernel_h/7, kernel_w/7, stride_h/2, stride_w/2, padding (SAME 0,
               VALID 1), log2(1 + groups)/4, the fused activation one-hot over
               NONE/SIGMOID/RELU/TANH ([4]), and "is weight-side" (1 for ops
               that only transform weights, which TASO precomputes);
             - the first output's first four dims as log2(1 + d)/12 ([4]).
  edges:     [e, EDGE_SIZE] float32, one edge per op input (tensor producer ->
             consumer): the tensor's first four dims as log2(1 + d)/12, zero
             padded, and its rank/4.
  senders, receivers: [e] int32 node indices (producer, consumer).
  globals:   [1, GLOBAL_SIZE] float32: graph cost / initial cost, log1p(graph
             cost in ms), log1p(number of ops)/8.
  n_node, n_edge: [1] int32.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Sequence, Union

import numpy as np

from xflowrl import ops

# The one-hot slots: every engine op type in the table's order, then "unknown".
OP_TYPES = ops.OP_TYPES + ("unknown",)
_NUM_TYPES = len(OP_TYPES)
_TYPE_INDEX = np.full(128, _NUM_TYPES - 1, dtype=np.int64)
for _i, _spec in enumerate(ops.SPECS):
    _TYPE_INDEX[_spec.type_id] = _i

NODE_SIZE = _NUM_TYPES + 1 + 6 + 4 + 1 + 4
EDGE_SIZE = 5
GLOBAL_SIZE = 3


class GraphsTuple(NamedTuple):
    """A graph (or a batch of graphs) as numpy arrays: graph_nets'
    `GraphsTuple` fields, in its order (module docstring)."""
    nodes: np.ndarray
    edges: np.ndarray
    receivers: np.ndarray
    senders: np.ndarray
    globals: np.ndarray
    n_node: np.ndarray
    n_edge: np.ndarray

    def replace(self, **fields: np.ndarray) -> "GraphsTuple":
        """A copy with `fields` replaced (graph_nets' name for `_replace`)."""
        return self._replace(**fields)


def _dims(shapes: np.ndarray) -> np.ndarray:
    return np.log2(1.0 + shapes.astype(np.float32)) / 12.0


def featurize(graph, op_costs: Union[Sequence[float], np.ndarray], graph_cost: float,
              initial_cost: float,
              structure: Optional[Dict[str, np.ndarray]] = None) -> GraphsTuple:
    """One graph as a numpy `GraphsTuple` (fields in the module docstring).

    Args:
      graph: an `xflowrl.engine.Graph`.
      op_costs: per node, its cost in ms (`graph.op_costs(cost_model)`).
      graph_cost: the graph's cost in ms.
      initial_cost: the episode's initial cost, for the relative-cost global.
      structure: `graph.structure()` if the caller already has it (the
        environment shares it with its location features); read if None.
    """
    s = graph.structure() if structure is None else structure
    n = len(s["types"])
    types = _TYPE_INDEX[np.minimum(s["types"], 127)]
    params = s["params"]
    nodes = np.zeros((n, NODE_SIZE), np.float32)
    nodes[np.arange(n), types] = 1.0
    col = _NUM_TYPES
    nodes[:, col] = np.log1p(1000.0 * np.asarray(op_costs, np.float32))
    col += 1
    nodes[:, col:col + 4] = params[:, 0:4] / np.array([7, 7, 2, 2], np.float32)
    nodes[:, col + 4] = params[:, 4]
    nodes[:, col + 5] = np.log2(1.0 + params[:, 6]) / 4.0
    col += 6
    activation = params[:, 5].astype(np.int64)
    nodes[np.arange(n), col + np.clip(activation, 0, 3)] = 1.0
    col += 4
    nodes[:, col] = np.asarray(graph.weight_side(), np.float32)
    col += 1
    nodes[:, col:col + 4] = _dims(s["out_shapes"])

    edge_shapes = s["edge_shapes"]
    edges = np.zeros((len(edge_shapes), EDGE_SIZE), np.float32)
    edges[:, :4] = _dims(edge_shapes)
    edges[:, 4] = (edge_shapes > 0).sum(axis=1) / 4.0
    global_features = np.array(
        [[graph_cost / initial_cost, np.log1p(graph_cost), np.log1p(graph.num_ops()) / 8.0]],
        np.float32)
    return GraphsTuple(
        nodes=nodes, edges=edges, globals=global_features,
        senders=s["senders"], receivers=s["receivers"],
        n_node=np.array([n], np.int32), n_edge=np.array([len(edges)], np.int32))


def batch(tuples: Sequence[GraphsTuple]) -> GraphsTuple:
    """Concatenates numpy GraphsTuples into one batch (node indices offset)."""
    offsets = np.cumsum([0] + [int(t.n_node.sum()) for t in tuples[:-1]])
    return GraphsTuple(
        nodes=np.concatenate([t.nodes for t in tuples]),
        edges=np.concatenate([t.edges for t in tuples]),
        globals=np.concatenate([t.globals for t in tuples]),
        senders=np.concatenate([t.senders + o for t, o in zip(tuples, offsets)]).astype(np.int32),
        receivers=np.concatenate([t.receivers + o for t, o in zip(tuples, offsets)]).astype(np.int32),
        n_node=np.concatenate([t.n_node for t in tuples]),
        n_edge=np.concatenate([t.n_edge for t in tuples]))


def node_offsets(tuples: Sequence[GraphsTuple]) -> np.ndarray:
    """[B] int32: the index of each graph's first node in `batch(tuples)`."""
    return np.cumsum([0] + [int(t.n_node.sum()) for t in tuples[:-1]]).astype(np.int32)


def to_tensors(graph_tuple: GraphsTuple) -> Any:
    """A numpy GraphsTuple as graph_nets' `GraphsTuple` of tensors of the
    encoder's dtypes."""
    # Featurization itself needs neither graph_nets nor TensorFlow.
    from graph_nets import graphs  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    return graphs.GraphsTuple(
        nodes=tf.convert_to_tensor(graph_tuple.nodes, tf.float32),
        edges=tf.convert_to_tensor(graph_tuple.edges, tf.float32),
        globals=tf.convert_to_tensor(graph_tuple.globals, tf.float32),
        senders=tf.convert_to_tensor(graph_tuple.senders, tf.int32),
        receivers=tf.convert_to_tensor(graph_tuple.receivers, tf.int32),
        n_node=tf.convert_to_tensor(graph_tuple.n_node, tf.int32),
        n_edge=tf.convert_to_tensor(graph_tuple.n_edge, tf.int32))
