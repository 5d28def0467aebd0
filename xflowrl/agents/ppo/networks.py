"""The hierarchical policy/value network (thesis §3.3, Figure 3.3).

One graph encoder (trained through every loss) feeds two heads:

- xfer head: N+1 logits (N xfers + NO-OP) = a linear map of an MLP of the
  graph embedding, plus a per-xfer term computed by a shared MLP from that
  xfer's location summary (count, best and mean cost change) and the graph
  embedding; and a value V_x(s).
- location head, given the chosen xfer x: one logit per location from a
  shared MLP over [mean embedding of the ops the location matched, graph
  embedding, embedding of x, the candidate's cost change]. Because every
  location is scored by the same function of its own features, permuting the
  candidates permutes the logits (the thesis code mean-pooled candidates and
  could not tell them apart). Value V_l(s, x) from the graph embedding and x.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import sonnet as snt
import tensorflow as tf
from graph_nets import graphs

from xflowrl.agents.ppo.config import PPOConfig
from xflowrl.embedding.encoder import Embedding, GraphEncoder


class XferOutput(NamedTuple):
    logits: tf.Tensor  # [B, N+1]
    value: tf.Tensor   # [B]


class LocationOutput(NamedTuple):
    logits: tf.Tensor  # [B, L]
    value: tf.Tensor   # [B]


def _mlp(hidden: Sequence[int], out: int, name: str) -> snt.Module:
    return snt.nets.MLP(list(hidden) + [out], activation=tf.nn.relu, name=name)


class PolicyValueNetwork(snt.Module):
    """Encoder + xfer head + location head, with their value networks."""

    def __init__(self, num_xfers: int, config: PPOConfig, name: str = "policy_value"):
        """
        Args:
          num_xfers: N; the xfer head has N+1 outputs (the last is NO-OP).
          config: sizes (latent, hidden, xfer embedding, message passing steps).
        """
        super().__init__(name=name)
        self.num_xfers = num_xfers
        hidden = config.hidden_sizes
        self.encoder = GraphEncoder(config.latent_size, num_layers=2,
                                    message_passing_steps=config.message_passing_steps)
        self._xfer_torso = snt.nets.MLP(list(hidden), activate_final=True, name="xfer_torso")
        self._xfer_logits = snt.Linear(num_xfers + 1, name="xfer_logits")
        self._xfer_scorer = _mlp(hidden, 1, "xfer_scorer")
        self._xfer_value = _mlp(hidden, 1, "xfer_value")
        self._xfer_embed = snt.Embed(num_xfers + 1, config.xfer_embedding_size,
                                     name="xfer_embed")
        self._location_scorer = _mlp(hidden, 1, "location_scorer")
        self._location_value = _mlp(hidden, 1, "location_value")

    def encode(self, graph: graphs.GraphsTuple) -> Embedding:
        return self.encoder(graph)

    def xfer_head(self, graph_embedding: tf.Tensor, xfer_summary: tf.Tensor,
                  xfer_mask: Optional[tf.Tensor] = None) -> XferOutput:
        """Args: graph_embedding [B, D]; xfer_summary [B, N+1, S]; xfer_mask
        [B, N+1] bool (None: all). The per-xfer scorer runs on the unmasked
        xfers only (a few of the N+1), so its cost does not grow with the
        rule set; masked xfers keep the base logit, which sampling and the
        losses mask out anyway."""
        torso = self._xfer_torso(graph_embedding)
        base = self._xfer_logits(torso)                                   # [B, N+1]
        if xfer_mask is None:
            xfer_mask = tf.ones(tf.shape(base), tf.bool)
        index = tf.where(xfer_mask)                                       # [M, 2]
        rows = tf.concat([tf.gather_nd(xfer_summary, index),
                          tf.gather(graph_embedding, index[:, 0])], -1)   # [M, S+D]
        scores = self._xfer_scorer(rows)[:, 0]
        per_xfer = tf.scatter_nd(index, scores, tf.shape(base, out_type=tf.int64))
        value = self._xfer_value(graph_embedding)[:, 0]
        return XferOutput(base + per_xfer, value)

    def location_head(self, embedding: Embedding, xfer: tf.Tensor, location_nodes: tf.Tensor,
                      cost_delta: tf.Tensor) -> LocationOutput:
        """Scores the locations of the chosen xfers.

        Args:
          embedding: node embeddings of the batch [total_nodes, D] and graph
            embeddings [B, D].
          xfer: [B] int, the chosen xfer of each graph.
          location_nodes: [B, L, K] int32 indices into `embedding.nodes` of the
            ops each location matched; -1 pads.
          cost_delta: [B, L] float32, each candidate's relative cost change.
        """
        valid = tf.cast(location_nodes >= 0, tf.float32)[..., None]       # [B, L, K, 1]
        matched = tf.gather(embedding.nodes, tf.maximum(location_nodes, 0)) * valid
        matched = tf.reduce_sum(matched, axis=2) / tf.maximum(tf.reduce_sum(valid, axis=2), 1.0)
        num_locations = tf.shape(location_nodes)[1]
        xfer_embedding = self._xfer_embed(tf.cast(xfer, tf.int32))         # [B, E]
        context = tf.concat([embedding.globals, xfer_embedding], -1)       # [B, D+E]
        tiled = tf.tile(context[:, None, :], [1, num_locations, 1])
        inputs = tf.concat([matched, tiled, cost_delta[..., None]], -1)    # [B, L, D+D+E+1]
        logits = self._location_scorer(inputs)[..., 0]
        value = self._location_value(context)[:, 0]
        return LocationOutput(logits, value)

    def value_variables(self):
        return list(self._xfer_value.trainable_variables) + list(self._location_value.trainable_variables)

    def policy_variables(self):
        value_ids = {id(v) for v in self.value_variables()}
        return [v for v in self.trainable_variables if id(v) not in value_ids]
