"""The graph encoder: graph_nets encode-process-decode with K message-passing
steps (thesis §3.3.1; docs/agents.md).

An independent encoder maps node, edge and global features to a latent size;
then K rounds of a full `GraphNetwork` (edge, node and global updates, sum
aggregation), each reading the concatenation of the encoded input and the
previous round's output, as in graph_nets' encode-process-decode demo. K
rounds really run (the thesis code passed 5 but ran 1), and the encoder's
variables belong to the agent, which trains them through its losses.

The core's rounds are computed by `_core_rounds` rather than by graph_nets'
`GraphNetwork` (which `reference` still calls): the same modules, variables
and function up to float rounding, with less work (the learner
reruns the encoder on every state each epoch). The first layer of each
block's MLP is linear in the concatenation it reads, so it is applied to
each part separately: the encoded graph's parts once for all K rounds (the
core is shared, the encoded graph does not change), and node and global
parts on the nodes and graphs before they are gathered onto edges (one
[N, 2D] product and one gather where graph_nets gathers and concatenates
[E, 4 * 2D] inputs). Which graph each node and edge belongs to is worked
out once per call instead of in every block of every round.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from graph_nets import graphs, modules, utils_tf
import sonnet as snt
import tensorflow as tf


class Embedding(NamedTuple):
    nodes: tf.Tensor    # [total_nodes, latent_size]
    globals: tf.Tensor  # [num_graphs, latent_size]


def _mlp(sizes, name: str, w_init_fn: Optional[Callable[[], snt.initializers.Initializer]]):
    def make():
        w_init = None if w_init_fn is None else w_init_fn()
        return snt.Sequential([snt.nets.MLP(sizes, activate_final=True, w_init=w_init),
                               snt.LayerNorm(axis=-1, create_scale=True, create_offset=True)],
                              name=name)
    return make


class GraphEncoder(snt.Module):
    """Encode-process-decode over a `GraphsTuple` (xflowrl.embedding.features)."""

    def __init__(self, latent_size: int = 32, num_layers: int = 2,
                 message_passing_steps: int = 3, name: str = "graph_encoder",
                 w_init_fn: Optional[Callable[[], snt.initializers.Initializer]] = None):
        """
        Args:
          latent_size: width of node, edge and global embeddings.
          num_layers: layers of every inner MLP.
          message_passing_steps: K, rounds of the core GraphNetwork.
          w_init_fn: called once per inner MLP for its weights' initializer
            (e.g. `SeededInitializers.fan_in`); None: Sonnet's default.
        """
        super().__init__(name=name)
        if message_passing_steps < 1:
            raise ValueError(f"message_passing_steps must be >= 1, got {message_passing_steps}")
        self.latent_size = latent_size
        self.message_passing_steps = message_passing_steps
        sizes = [latent_size] * num_layers
        self._encoder = modules.GraphIndependent(
            edge_model_fn=_mlp(sizes, "edge_encoder", w_init_fn),
            node_model_fn=_mlp(sizes, "node_encoder", w_init_fn),
            global_model_fn=_mlp(sizes, "global_encoder", w_init_fn))
        self._core = modules.GraphNetwork(
            edge_model_fn=_mlp(sizes, "edge_core", w_init_fn),
            node_model_fn=_mlp(sizes, "node_core", w_init_fn),
            global_model_fn=_mlp(sizes, "global_core", w_init_fn))

    def __call__(self, graph: graphs.GraphsTuple) -> Embedding:
        if not self._built():
            # Sonnet makes variables on first use: graph_nets' encoder and one
            # round of its core make them, with the widths (and so the
            # initial values) they always had.
            encoded = self._encoder(graph)
            self._core(utils_tf.concat([encoded, encoded], axis=1))
        edge_model, node_model, global_model = self._encoder_models()
        encoded = graph.replace(edges=_apply(edge_model, graph.edges),
                                nodes=_apply(node_model, graph.nodes),
                                globals=_apply(global_model, graph.globals))
        return self._core_rounds(encoded)

    def reference(self, graph: graphs.GraphsTuple) -> Embedding:
        """`__call__` computed by graph_nets' `GraphNetwork` itself, round by
        round (the straightforward version, for tests)."""
        encoded = self._encoder(graph)
        latent = encoded
        for _ in range(self.message_passing_steps):
            latent = self._core(utils_tf.concat([encoded, latent], axis=1))
        return Embedding(nodes=latent.nodes, globals=latent.globals)

    def _models(self):
        core = self._core
        return (core._edge_block._edge_model, core._node_block._node_model,  # pylint: disable=protected-access
                core._global_block._global_model)  # pylint: disable=protected-access

    def _encoder_models(self):
        """The encoder's edge, node and global `_mlp`s (graph_nets wraps them)."""
        encoder = self._encoder
        return tuple(wrapped._model for wrapped in (  # pylint: disable=protected-access
            encoder._edge_model, encoder._node_model, encoder._global_model))  # pylint: disable=protected-access

    def _built(self) -> bool:
        return all(hasattr(_first_layer(model), "w")
                   for model in self._models() + self._encoder_models())

    def _core_rounds(self, encoded: graphs.GraphsTuple) -> Embedding:
        """K rounds of the core on [encoded, latent] (module docstring).

        graph_nets' blocks read, in this order: edge block [edges, receiver
        nodes, sender nodes, globals]; node block [sum of received edges,
        nodes, globals]; global block [sum of edges, sum of nodes, globals],
        where every nodes/edges/globals part is [encoded, latent]."""
        d = self.latent_size
        edge_model, node_model, global_model = self._models()
        senders, receivers = encoded.senders, encoded.receivers
        num_graphs = tf.shape(encoded.n_node)[0]
        num_nodes = tf.shape(encoded.nodes)[0]
        graph_ids = tf.range(num_graphs)
        edge_graph = tf.repeat(graph_ids, encoded.n_edge)             # [E]
        node_graph = tf.repeat(graph_ids, encoded.n_node)             # [N]
        # Row 2i of a [2N, D] view of an [N, 2D] node product is node i's
        # receiver part, row 2i + 1 its sender part: one gather for both.
        endpoints = tf.stack([2 * receivers, 2 * senders + 1], axis=1)  # [E, 2]

        w_edge = _first_layer(edge_model).w                           # [8D, D]
        w_node = _first_layer(node_model).w                           # [5D, D]
        # Node-side columns of the edge block: receiver then sender, each
        # [encoded; latent]; regrouped by encoded/latent as [D, 2D] each.
        def endpoint_weights(part):  # part 0: encoded rows, 1: latent rows
            return tf.concat([w_edge[(2 + part) * d:(3 + part) * d],
                              w_edge[(4 + part) * d:(5 + part) * d]], axis=1)
        w_endpoint_enc, w_endpoint_lat = endpoint_weights(0), endpoint_weights(1)

        # What the encoded graph contributes to each first layer, once.
        edge_fixed = (tf.matmul(encoded.edges, w_edge[0:d])
                      + _first_layer(edge_model).b)                  # [E, D]
        endpoint_fixed = tf.matmul(encoded.nodes, w_endpoint_enc)     # [N, 2D]
        edge_global_fixed = tf.matmul(encoded.globals, w_edge[6 * d:7 * d])  # [B, D]
        node_fixed = (tf.matmul(encoded.nodes, w_node[d:2 * d])
                      + _first_layer(node_model).b)                  # [N, D]
        node_global_fixed = tf.matmul(encoded.globals, w_node[3 * d:4 * d])  # [B, D]

        nodes, edges, globals_ = encoded.nodes, encoded.edges, encoded.globals
        for _ in range(self.message_passing_steps):
            endpoint = endpoint_fixed + tf.matmul(nodes, w_endpoint_lat)
            gathered = tf.gather(tf.reshape(endpoint, [-1, d]), endpoints)  # [E, 2, D]
            edge_global = edge_global_fixed + tf.matmul(globals_, w_edge[7 * d:8 * d])
            edges = _rest_of_model(
                edge_model,
                edge_fixed + tf.matmul(edges, w_edge[d:2 * d]) + tf.reduce_sum(gathered, axis=1)
                + tf.gather(edge_global, edge_graph))
            received = _segment_sum(edges, receivers, num_nodes)
            node_global = node_global_fixed + tf.matmul(globals_, w_node[4 * d:5 * d])
            nodes = _rest_of_model(
                node_model,
                node_fixed + tf.matmul(received, w_node[0:d]) + tf.matmul(nodes, w_node[2 * d:3 * d])
                + tf.gather(node_global, node_graph))
            globals_ = _apply(global_model, tf.concat([
                _segment_sum(edges, edge_graph, num_graphs),
                _segment_sum(nodes, node_graph, num_graphs),
                encoded.globals, globals_], axis=-1))
        return Embedding(nodes=nodes, globals=globals_)


def _segment_sum(data: tf.Tensor, segment_ids: tf.Tensor, num_segments) -> tf.Tensor:
    """`tf.math.unsorted_segment_sum` for ids known to be valid (in [0,
    num_segments)): its gradient is the plain gather, without the masking of
    negative ids that TensorFlow's gradient adds."""

    @tf.custom_gradient
    def segment_sum(data):
        def grad(dy):
            return tf.gather(dy, segment_ids)
        return tf.math.unsorted_segment_sum(data, segment_ids, num_segments), grad

    return segment_sum(data)


def _first_layer(model: snt.Sequential) -> snt.Linear:
    return model._layers[0]._layers[0]  # pylint: disable=protected-access


def _apply(model: snt.Sequential, inputs: tf.Tensor) -> tf.Tensor:
    """An `_mlp` model on `inputs` (its layer norm as `_layer_norm`)."""
    return _rest_of_model(model, _first_layer(model)(inputs))


def _rest_of_model(model: snt.Sequential, first_layer_output: tf.Tensor) -> tf.Tensor:
    """An `_mlp` model applied to an input whose first linear layer's output
    (bias included) is `first_layer_output`."""
    mlp, layer_norm = model._layers  # pylint: disable=protected-access
    h = mlp._activation(first_layer_output)  # pylint: disable=protected-access
    for layer in mlp._layers[1:]:  # pylint: disable=protected-access
        h = mlp._activation(layer(h))  # pylint: disable=protected-access
    return _layer_norm(h, layer_norm.scale, layer_norm.offset,
                       layer_norm._eps)  # pylint: disable=protected-access


def _layer_norm(x: tf.Tensor, scale: tf.Tensor, offset: tf.Tensor, eps: float) -> tf.Tensor:
    """`snt.LayerNorm` over the last axis of [rows, D] inputs, with its
    gradient written out (a few fused ops where automatic differentiation
    of moments and batch_normalization makes a dozen broadcasts and sums)."""

    @tf.custom_gradient
    def norm(x, scale, offset):
        mean = tf.reduce_mean(x, axis=-1, keepdims=True)
        centered = x - mean
        inv = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True) + eps)
        normalized = centered * inv

        def grad(dy):
            dnormalized = dy * scale
            dx = inv * (dnormalized - tf.reduce_mean(dnormalized, axis=-1, keepdims=True)
                        - normalized * tf.reduce_mean(dnormalized * normalized, axis=-1,
                                                      keepdims=True))
            return dx, tf.reduce_sum(dy * normalized, axis=0), tf.reduce_sum(dy, axis=0)

        return normalized * scale + offset, grad

    return norm(x, scale, offset)
