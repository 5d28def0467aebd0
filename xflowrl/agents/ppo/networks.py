"""The hierarchical policy/value network (thesis §3.3, Figure 3.3).

A state encoder feeds two heads. The state is what the environment's
`ObservationSpec.state` says: a graph (the real environment; a graph_nets
encoder, trained through every loss, gives node and graph embeddings) or a
vector (the dream's `[z_t, h_t]`; an MLP torso gives the state embedding and
there are no node embeddings). The heads are the same for both:

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
  Where the environment has no per-location features (the dream), a
  location's features are a learned embedding of its index instead: the
  world model names a location by its index in the xfer's candidate list.
  The per-xfer summary term is likewise used only where summaries exist.

Weights are initialised from the explicit `seed` (`initializers`), never
from TensorFlow's global seed.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import sonnet as snt
import tensorflow as tf

from xflowrl.agents.ppo.config import PPOConfig
from xflowrl.embedding.encoder import Embedding, GraphEncoder
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
from xflowrl.nn import SeededInitializers


class XferOutput(NamedTuple):
    logits: tf.Tensor  # [B, N+1]
    value: tf.Tensor   # [B]


class LocationOutput(NamedTuple):
    logits: tf.Tensor  # [B, L]
    value: tf.Tensor   # [B]


def _mlp(hidden: Sequence[int], out: int, name: str,
         w_init: snt.initializers.Initializer) -> snt.Module:
    return snt.nets.MLP(list(hidden) + [out], activation=tf.nn.relu, w_init=w_init, name=name)


class PolicyValueNetwork(snt.Module):
    """Encoder + xfer head + location head, with their value networks."""

    def __init__(self, num_xfers: int, config: PPOConfig, state: str = "graph",
                 max_locations: int = DEFAULT_MAX_LOCATIONS, seed: int = 0,
                 name: str = "policy_value"):
        """
        Args:
          num_xfers: N; the xfer head has N+1 outputs (the last is NO-OP).
          config: sizes (latent, hidden, xfer embedding, message passing steps).
          state: "graph" (GraphsTuple states, per-location features) or
            "vector" (state vectors, locations named by index).
          max_locations: L; sizes the location-index embedding of "vector".
          seed: seeds every weight's initialisation (`initializers`).
        """
        super().__init__(name=name)
        if state not in ("graph", "vector"):
            raise ValueError(f"state must be 'graph' or 'vector', got {state!r}")
        self.num_xfers = num_xfers
        self.state_kind = state
        self.relative_location_cost = config.relative_location_cost
        self.max_locations = max_locations
        hidden = config.hidden_sizes
        init = SeededInitializers(seed)
        if state == "graph":
            self.encoder = GraphEncoder(config.latent_size, num_layers=2,
                                        message_passing_steps=config.message_passing_steps,
                                        w_init_fn=init.fan_in)
        else:
            self.encoder = snt.nets.MLP([config.latent_size] * 2, activate_final=True,
                                        w_init=init.fan_in(), name="state_torso")
            self._location_embed = snt.Embed(max_locations, config.latent_size,
                                             initializer=init.unit(), name="location_embed")
        self._xfer_torso = snt.nets.MLP(list(hidden), activate_final=True, w_init=init.fan_in(),
                                        name="xfer_torso")
        self._xfer_logits = snt.Linear(num_xfers + 1, w_init=init.fan_in(), name="xfer_logits")
        self._xfer_scorer = _mlp(hidden, 1, "xfer_scorer", init.fan_in())
        self._xfer_value = _mlp(hidden, 1, "xfer_value", init.fan_in())
        self._xfer_embed = snt.Embed(num_xfers + 1, config.xfer_embedding_size,
                                     initializer=init.unit(), name="xfer_embed")
        self._location_scorer = _mlp(hidden, 1, "location_scorer", init.fan_in())
        self._location_value = _mlp(hidden, 1, "location_value", init.fan_in())

    def encode(self, state) -> Embedding:
        """A batch of states: a GraphsTuple ("graph") or a [B, D] tensor ("vector")."""
        if self.state_kind == "graph":
            return self.encoder(state)
        return Embedding(nodes=None, globals=self.encoder(state))

    def xfer_head(self, graph_embedding: tf.Tensor, xfer_summary: Optional[tf.Tensor],
                  xfer_mask: Optional[tf.Tensor] = None) -> XferOutput:
        """Args: graph_embedding [B, D]; xfer_summary [B, N+1, S] or None;
        xfer_mask [B, N+1] bool (None: all). The per-xfer scorer runs on the
        unmasked xfers only (a few of the N+1), so its cost does not grow
        with the rule set; masked xfers keep the base logit, which sampling
        and the losses mask out anyway."""
        torso = self._xfer_torso(graph_embedding)
        base = self._xfer_logits(torso)                                   # [B, N+1]
        value = self._xfer_value(graph_embedding)[:, 0]
        if xfer_summary is None:
            return XferOutput(base, value)
        if xfer_mask is None:
            xfer_mask = tf.ones(tf.shape(base), tf.bool)
        index = tf.where(xfer_mask)                                       # [M, 2]
        rows = tf.concat([tf.gather_nd(xfer_summary, index),
                          tf.gather(graph_embedding, index[:, 0])], -1)   # [M, S+D]
        scores = self._xfer_scorer(rows)[:, 0]
        per_xfer = tf.scatter_nd(index, scores, tf.shape(base, out_type=tf.int64))
        return XferOutput(base + per_xfer, value)

    def location_head(self, embedding: Embedding, xfer: tf.Tensor,
                      location_nodes: Optional[tf.Tensor] = None,
                      cost_delta: Optional[tf.Tensor] = None,
                      num_locations: Optional[int] = None,
                      location_mask: Optional[tf.Tensor] = None) -> LocationOutput:
        """Scores the locations of the chosen xfers.

        Args:
          embedding: node embeddings of the batch [total_nodes, D] (None for
            vector states) and state embeddings [B, D].
          xfer: [B] int, the chosen xfer of each state.
          location_nodes: [B, L, K] int32 indices into `embedding.nodes` of the
            ops each location matched; -1 pads. None for vector states.
          cost_delta: [B, L] float32, each candidate's relative cost change
            (with `location_nodes`).
          num_locations: L, for vector states.
          location_mask: [B, L] bool, the valid locations (graph states):
            only those are scored (a handful of the L), the others' logits
            are 0, which sampling and the losses mask out anyway. None:
            every location is scored.
        """
        xfer_embedding = self._xfer_embed(tf.cast(xfer, tf.int32))         # [B, E]
        context = tf.concat([embedding.globals, xfer_embedding], -1)       # [B, D+E]
        if location_nodes is not None and cost_delta is None:
            raise ValueError("location_head needs cost_delta with location_nodes")
        if location_nodes is not None and location_mask is not None:
            index = tf.where(location_mask)                               # [M, 2]
            nodes = tf.gather_nd(location_nodes, index)                   # [M, K]
            valid = tf.cast(nodes >= 0, tf.float32)[..., None]            # [M, K, 1]
            matched = tf.gather(embedding.nodes, tf.maximum(nodes, 0)) * valid
            matched = (tf.reduce_sum(matched, axis=1)
                       / tf.maximum(tf.reduce_sum(valid, axis=1), 1.0))    # [M, D]
            costs = [tf.gather_nd(cost_delta, index)[:, None]]
            if self.relative_location_cost:
                costs.append(tf.gather_nd(relative_location_cost(cost_delta, location_mask),
                                          index)[:, None])
            rows = tf.concat([matched] + costs + [tf.gather(context, index[:, 0])],
                             -1)                                          # [M, D+C+D+E]
            scores = self._location_scorer(rows)[:, 0]
            logits = tf.scatter_nd(index, scores, tf.shape(location_mask, out_type=tf.int64))
            return LocationOutput(logits, self._location_value(context)[:, 0])
        if location_nodes is not None and cost_delta is not None:  # (both, by the check above)
            valid = tf.cast(location_nodes >= 0, tf.float32)[..., None]   # [B, L, K, 1]
            matched = tf.gather(embedding.nodes, tf.maximum(location_nodes, 0)) * valid
            matched = (tf.reduce_sum(matched, axis=2)
                       / tf.maximum(tf.reduce_sum(valid, axis=2), 1.0))    # [B, L, D]
            costs = [cost_delta[..., None]]
            if self.relative_location_cost:
                everywhere = tf.ones_like(cost_delta, tf.bool)
                costs.append(relative_location_cost(cost_delta, everywhere)[..., None])
            features = tf.concat([matched] + costs, -1)                    # [B, L, D+C]
        else:
            if self.state_kind != "vector" or num_locations is None:
                raise ValueError("location_head needs location_nodes and cost_delta for "
                                 "graph states, num_locations for vector states")
            index = self._location_embed(tf.range(num_locations))          # [L, D]
            features = tf.tile(index[None], [tf.shape(context)[0], 1, 1])  # [B, L, D]
        tiled = tf.tile(context[:, None, :], [1, tf.shape(features)[1], 1])
        inputs = tf.concat([features, tiled], -1)                          # [B, L, F+D+E]
        logits = self._location_scorer(inputs)[..., 0]
        value = self._location_value(context)[:, 0]
        return LocationOutput(logits, value)

    def value_variables(self):
        return list(self._xfer_value.trainable_variables) + list(self._location_value.trainable_variables)

    def policy_variables(self):
        value_ids = {id(v) for v in self.value_variables()}
        return [v for v in self.trainable_variables if id(v) not in value_ids]


def relative_location_cost(cost_delta: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """[B, L]: where each valid candidate's cost change lies between its
    row's cheapest and costliest valid ones, (delta - min) / (max - min),
    0 where they are all equal and at invalid locations
    (`PPOConfig.relative_location_cost`; `xflowrl.policy.runtime`
    computes the same in NumPy)."""
    low = tf.reduce_min(tf.where(mask, cost_delta, float("inf")), axis=-1, keepdims=True)
    high = tf.reduce_max(tf.where(mask, cost_delta, float("-inf")), axis=-1, keepdims=True)
    spread = high - low
    wide = mask & (spread > 0)
    return tf.where(wide, (cost_delta - low) / tf.where(wide, spread, 1.0), 0.0)
