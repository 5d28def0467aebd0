"""The latent state z: a graph encoder trained to carry what the world model needs.

The thesis code fed the MDN-RNN the embeddings of a never-trained GNN. Here
`LatentEncoder` (the graph_nets encoder of `xflowrl.embedding`, then a
linear map and tanh to Z = 32 dims) is trained before the world model, on
the states of the first round of random rollouts, to predict from z alone:

- the graph's cost relative to the initial graph (in %, the unit of the
  reward, so reward differences are readable from z), and
- which known xfers are valid and, in log1p, how many locations each has
  (the masks the dream must produce).

That objective makes graphs that act differently map to different latents;
it has no trivial collapse, since the targets are fixed properties of the
graph. The encoder is then frozen (`LatentEncoder.encode` runs under no
gradient tape) while the MDN-RNN and the controller train.

Its weights are drawn by stateless ops from the `seed` it is given
(`xflowrl.nn.initializers`), and `train_encoder` draws its minibatches
from a numpy generator of its own `seed`: nothing reads a global seed.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Sequence

import numpy as np
import sonnet as snt
import tensorflow as tf

from xflowrl.embedding import features
from xflowrl.embedding.encoder import GraphEncoder
from xflowrl.nn import SeededInitializers, apply_adam, build_adam
from xflowrl.tracing import traced_once
from xflowrl.world_model import losses


class LatentPrediction(NamedTuple):
    cost_change: tf.Tensor    # [B], in % of the initial cost (cost / initial - 1)
    xfer_logits: tf.Tensor    # [B, M]
    log_counts: tf.Tensor     # [B, M] predicted log1p(location count)


def cost_change_percent(graph_tuple) -> float:
    """The cost target of one featurized graph: its cost's change from the
    initial graph's in % of it, 100 * (cost / initial - 1)."""
    return 100.0 * (float(graph_tuple.globals[0, 0]) - 1.0)


class LatentEncoder(snt.Module):
    """Graph -> z in (-1, 1)^Z, with auxiliary heads that train it."""

    def __init__(self, latent_size: int, num_known_xfers: int,
                 message_passing_steps: int = 3, seed: int = 0, name: str = "latent_encoder"):
        """
        Args:
          latent_size: Z.
          num_known_xfers: M, the xfers the mask head predicts.
          message_passing_steps: K of the graph encoder.
          seed: seeds every weight's initialisation (`SeededInitializers`).
        """
        super().__init__(name=name)
        self.latent_size = latent_size
        init = SeededInitializers(seed)
        self._graph_encoder = GraphEncoder(latent_size, num_layers=2,
                                           message_passing_steps=message_passing_steps,
                                           w_init_fn=init.fan_in)
        self._project = snt.Linear(latent_size, w_init=init.fan_in(), name="project")
        self._cost_head = snt.nets.MLP([64, 1], w_init=init.fan_in(), name="cost_head")
        self._mask_head = snt.nets.MLP([64, 2 * max(num_known_xfers, 1)], w_init=init.fan_in(),
                                       name="mask_head")
        self._num_known = num_known_xfers
        self._traced_encode = None  # `encode`'s traced forward pass, once built

    def __call__(self, graph) -> tf.Tensor:
        """z [B, Z] of a batched tensor GraphsTuple."""
        return tf.tanh(self._project(self._graph_encoder(graph).globals))

    def predict(self, z: tf.Tensor) -> LatentPrediction:
        m = max(self._num_known, 1)
        masks = self._mask_head(z)
        return LatentPrediction(self._cost_head(z)[:, 0], masks[:, :m], masks[:, m:])

    def encode(self, states: Sequence, batch_size: int = 64) -> np.ndarray:
        """[n, Z] latents of numpy GraphsTuples (no gradient: the frozen use)."""
        out = []
        for i in range(0, len(states), batch_size):
            graph = features.to_tensors(features.batch(list(states[i:i + batch_size])))
            out.append(self._encode_fn(graph).numpy())
        return np.concatenate(out) if out else np.zeros((0, self.latent_size), np.float32)

    def _encode_fn(self, graph):
        if self._traced_encode is None:
            # The first call runs eagerly: it creates any variables still
            # missing, which a traced call would trace twice to do.
            self._traced_encode = traced_once(self.__call__)
            return self(graph)
        return self._traced_encode(graph)


class EncoderTargets(NamedTuple):
    cost_change: np.ndarray  # [n] cost_change_percent of each state
    xfer_valid: np.ndarray   # [n, M]
    counts: np.ndarray       # [n, M]


def encoder_loss(prediction: LatentPrediction, cost_change_target: tf.Tensor,
                 xfer_valid: tf.Tensor, counts: tf.Tensor) -> Dict[str, tf.Tensor]:
    """Cost MSE + xfer-valid BCE + log-count MSE on valid xfers."""
    ones = tf.ones_like(cost_change_target)
    cost = losses.masked_mean(tf.square(prediction.cost_change - cost_change_target), ones)
    mask = losses.masked_mean(losses.sigmoid_cross_entropy(prediction.xfer_logits, xfer_valid),
                              ones)
    count = losses.masked_mean(tf.square(prediction.log_counts - tf.math.log1p(counts)),
                               xfer_valid)
    return {"cost": cost, "mask": mask, "count": count, "total": cost + mask + count}


def train_encoder(encoder: LatentEncoder, states: Sequence, targets: EncoderTargets,
                  steps: int, batch_size: int, learning_rate: float,
                  seed: int = 0) -> List[Dict[str, float]]:
    """Trains the encoder and its heads on (state, target) pairs; returns the
    loss history (one dict per step)."""
    rng = np.random.default_rng(seed)
    optimizer = snt.optimizers.Adam(learning_rate)

    def step_impl(graph, cost, valid, counts):
        with tf.GradientTape() as tape:
            m = encoder_loss(encoder.predict(encoder(graph)), cost, valid, counts)
        variables = encoder.trainable_variables
        grads = tape.gradient(m["total"], variables)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        apply_adam(optimizer, grads, variables)
        return m

    step = traced_once(step_impl)  # one trace for every batch's graph sizes
    history = []
    for _ in range(steps):
        idx = rng.choice(len(states), size=min(batch_size, len(states)), replace=False)
        graph = features.to_tensors(features.batch([states[i] for i in idx]))
        if not optimizer.m:
            # Variables made outside the trace (a first traced call that
            # creates them is traced twice): the encoder's, then Adam's.
            encoder.predict(encoder(graph))
            build_adam(optimizer, encoder.trainable_variables)
        m = step(graph, tf.constant(targets.cost_change[idx], tf.float32),
                 tf.constant(targets.xfer_valid[idx], tf.float32),
                 tf.constant(targets.counts[idx], tf.float32))
        history.append({k: float(v) for k, v in m.items()})
    return history
