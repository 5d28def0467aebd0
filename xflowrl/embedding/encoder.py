"""The graph encoder: graph_nets encode-process-decode with K message-passing
steps (thesis §3.3.1; docs/agents.md).

An independent encoder maps node, edge and global features to a latent size;
then K rounds of a full `GraphNetwork` (edge, node and global updates, sum
aggregation), each reading the concatenation of the encoded input and the
previous round's output, as in graph_nets' encode-process-decode demo. K
rounds really run (the thesis code passed 5 but ran 1), and the encoder's
variables belong to the agent, which trains them through its losses.
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
        encoded = self._encoder(graph)
        latent = encoded
        for _ in range(self.message_passing_steps):
            latent = self._core(utils_tf.concat([encoded, latent], axis=1))
        return Embedding(nodes=latent.nodes, globals=latent.globals)
