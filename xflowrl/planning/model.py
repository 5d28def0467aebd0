"""A learned simulator for planning: MuZero's three functions over graphs.

The model planner (`xflowrl.planning.model_search`) searches in the latent
space of this model instead of calling the engine. Its actions are xfers,
each applied at all its locations (`xfer_actions`: the multi-location
action where an xfer has two or more locations, its one candidate where it
has one), so that an action means the same thing on every graph and one
embedding table covers them. With `ModelConfig.single_actions` there is a
second action per xfer, action `N + x`: xfer x at its cheapest location,
where it has two or more (`model_actions`); it too means the same on every
graph. N actions without it, 2N with it (`ModelConfig.num_actions`).

- **Representation** `h = represent(graph)`: the project's graph encoder
  (`xflowrl.embedding.encoder.GraphEncoder`) over the observation's
  `GraphsTuple`, its global embedding and the mean of its node embeddings
  projected to `latent_size` and squashed by tanh.
- **Dynamics** `h', r = dynamics(h, action)`: an MLP of `[h, embedding(action)]`
  adds to `h` (then tanh); the reward head reads the same input. Rewards
  are cost changes in points (%) of the initial graph's cost, positive
  where the graph gets cheaper.
- **Prediction** `v, p, m = predict(h)`: the value (the most the cost can
  still fall from here, in points: stopping is always allowed, so it is
  at least 0), policy logits over the actions and mask logits (which
  actions apply: the model's own masks, used below the search's root).

The model is deterministic: the engine is, and a tree search over a
deterministic model backs up maxima (`xflowrl.planning.tree`) where a
stochastic one would have to average samples.

Training runs in TensorFlow (`xflowrl.planning.model_learning`); the search
calls `numpy_heads()`, the dynamics and prediction MLPs copied into NumPy
(a model step is then a few small matrix products, no TensorFlow call),
and `represent` once per real decision.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, NamedTuple, Sequence, Tuple

import numpy as np
import sonnet as snt
import tensorflow as tf

from xflowrl.embedding import features
from xflowrl.embedding.encoder import GraphEncoder
from xflowrl.nn.initializers import SeededInitializers
from xflowrl.planning.simulator import EVERYWHERE, Expansion


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Sizes of the learned model.

    Attributes:
      num_xfers: N, the rule set's xfers (the action space).
      latent_size: D, the latent state's width.
      encoder_size: the graph encoder's embedding width.
      message_passing_steps: K of the graph encoder.
      action_size: the xfer embedding's width.
      hidden_size: width of the dynamics, reward, value and policy MLPs.
      seed: of every weight's initialisation.
      single_actions: a second action per xfer, at its cheapest location
        (`model_actions`).
    """
    num_xfers: int
    latent_size: int = 64
    encoder_size: int = 32
    message_passing_steps: int = 2
    action_size: int = 32
    hidden_size: int = 128
    seed: int = 0
    single_actions: bool = False

    @property
    def num_actions(self) -> int:
        """The action space's size: N, or 2N with `single_actions`."""
        return self.num_xfers * (2 if self.single_actions else 1)

    def __post_init__(self):
        if min(self.num_xfers, self.latent_size, self.encoder_size, self.action_size,
               self.hidden_size, self.message_passing_steps) < 1:
            raise ValueError(f"every size of {self} must be >= 1")


def xfer_actions(expansion: Expansion) -> Tuple[np.ndarray, np.ndarray]:
    """The model's actions on a graph: each active xfer once, and the row
    of `expansion.actions` that applies it at all its locations (the
    multi-location action where it has two or more locations, else its
    one candidate). `expansion` must have been made with `everywhere=True`.

    Returns:
      xfers [A] int64 and rows [A] int64, by xfer.
    """
    actions = expansion.actions
    singles = expansion.singles
    xfers = np.unique(actions[:, 0]) if len(actions) else np.zeros(0, np.int64)
    rows = np.empty(len(xfers), np.int64)
    for i, xfer in enumerate(xfers):
        macro = np.flatnonzero((actions[singles:, 0] == xfer)
                               & (actions[singles:, 1] == EVERYWHERE))
        if len(macro):
            rows[i] = singles + macro[0]
        else:
            single = np.flatnonzero(actions[:singles, 0] == xfer)
            if len(single) != 1:
                raise ValueError(f"xfer {xfer} has {len(single)} candidates and no "
                                 f"multi-location action: expand with everywhere=True")
            rows[i] = single[0]
    return xfers.astype(np.int64), rows


def cheapest_rows(expansion: Expansion) -> Dict[int, int]:
    """Each xfer with two or more locations -> the row of `expansion.actions`
    of its cheapest candidate (the first of equal costs)."""
    singles = expansion.singles
    if not singles:
        return {}
    xfers = expansion.actions[:singles, 0]
    costs = expansion.costs[:singles]
    order = np.lexsort((np.arange(singles), costs, xfers))   # by xfer, then cost, then row
    first = np.ones(singles, bool)
    first[1:] = xfers[order][1:] != xfers[order][:-1]
    counts = np.bincount(xfers)
    return {int(xfers[r]): int(r) for r in order[first] if counts[xfers[r]] >= 2}


def model_actions(expansion: Expansion, num_xfers: int,
                  single_actions: bool) -> Tuple[np.ndarray, np.ndarray]:
    """The model's actions on a graph and the rows of `expansion.actions`
    they build: `xfer_actions`, then, with `single_actions`, action
    `num_xfers + x` for every xfer x with two or more locations, at its
    cheapest candidate (`cheapest_rows`). An xfer with one location has
    one action (its candidate), not two of the same graph.

    Returns:
      actions [A] int64 and rows [A] int64.
    """
    actions, rows = xfer_actions(expansion)
    if not single_actions:
        return actions, rows
    cheapest = cheapest_rows(expansion)
    extra = np.array(sorted(cheapest), np.int64)
    return (np.concatenate([actions, num_xfers + extra]),
            np.concatenate([rows, np.array([cheapest[int(x)] for x in extra], np.int64)]))


class _Mlp(snt.Module):
    """Linear layers with ReLU between them (none after the last)."""

    def __init__(self, sizes: Sequence[int], init: SeededInitializers, name: str):
        super().__init__(name=name)
        self.layers = [snt.Linear(size, w_init=init.fan_in(), name=f"linear_{i}")
                       for i, size in enumerate(sizes)]

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = tf.nn.relu(x)
        return x

    def numpy(self) -> List[Tuple[np.ndarray, np.ndarray]]:
        return [(layer.w.numpy(), layer.b.numpy()) for layer in self.layers]


def _mlp_numpy(layers: Sequence[Tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i + 1 < len(layers):
            x = np.maximum(x, 0.0)
    return x


class Prediction(NamedTuple):
    value: tf.Tensor          # [B] points
    policy_logits: tf.Tensor  # [B, N]
    mask_logits: tf.Tensor    # [B, N]


class LatentModel(snt.Module):
    """Representation, dynamics and prediction (module docstring)."""

    def __init__(self, config: ModelConfig, name: str = "latent_model"):
        super().__init__(name=name)
        self.config = config
        init = SeededInitializers(config.seed)
        self.encoder = GraphEncoder(config.encoder_size, num_layers=2,
                                    message_passing_steps=config.message_passing_steps,
                                    w_init_fn=init.fan_in)
        self.project = snt.Linear(config.latent_size, w_init=init.fan_in(), name="project")
        self.action_embedding = tf.Variable(
            init.unit()([config.num_actions, config.action_size], tf.float32) * 0.1,
            name="action_embedding")
        hidden = config.hidden_size
        self.transition = _Mlp([hidden, config.latent_size], init, "transition")
        self.reward_head = _Mlp([hidden // 2, 1], init, "reward")
        self.value_head = _Mlp([hidden // 2, 1], init, "value")
        self.trunk = _Mlp([hidden], init, "trunk")
        self.policy_head = _Mlp([config.num_actions], init, "policy")
        self.mask_head = _Mlp([config.num_actions], init, "mask")

    def represent(self, graph) -> tf.Tensor:
        """h [B, D] of a batched tensor GraphsTuple."""
        embedding = self.encoder(graph)
        num_graphs = tf.shape(graph.n_node)[0]
        node_graph = tf.repeat(tf.range(num_graphs), graph.n_node)
        mean_nodes = tf.math.unsorted_segment_mean(embedding.nodes, node_graph, num_graphs)
        return tf.tanh(self.project(tf.concat([embedding.globals, mean_nodes], axis=-1)))

    def dynamics(self, h: tf.Tensor, xfers: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        """(h' [B, D], reward [B] in points) after xfers [B] from h [B, D]."""
        x = tf.concat([h, tf.gather(self.action_embedding, xfers)], axis=-1)
        return tf.tanh(h + self.transition(x)), self.reward_head(x)[:, 0]

    def predict(self, h: tf.Tensor) -> Prediction:
        trunk = tf.nn.relu(self.trunk(h))
        return Prediction(self.value_head(h)[:, 0], self.policy_head(trunk),
                          self.mask_head(trunk))

    def represent_states(self, states: Sequence[features.GraphsTuple]) -> np.ndarray:
        """[n, D] latents of numpy GraphsTuples, no gradient."""
        if not states:
            return np.zeros((0, self.config.latent_size), np.float32)
        return self.represent(features.to_tensors(features.batch(list(states)))).numpy()

    def numpy_heads(self) -> "NumpyHeads":
        """The dynamics and prediction functions in NumPy, with today's weights."""
        if not hasattr(self.transition.layers[0], "w"):   # Sonnet builds on first use
            self.predict(self.dynamics(tf.zeros([1, self.config.latent_size]),
                                       tf.zeros([1], tf.int32))[0])
        return NumpyHeads(self.action_embedding.numpy(), self.transition.numpy(),
                          self.reward_head.numpy(), self.value_head.numpy(),
                          self.trunk.numpy(), self.policy_head.numpy(), self.mask_head.numpy())


class NumpyHeads:
    """`LatentModel.dynamics` and `predict` in NumPy (a model step of the
    search); equal to the TensorFlow functions up to float rounding."""

    def __init__(self, action_embedding: np.ndarray, transition, reward, value, trunk,
                 policy, mask):
        self.action_embedding = action_embedding
        self._transition, self._reward, self._value = transition, reward, value
        self._trunk, self._policy, self._mask = trunk, policy, mask

    def dynamics(self, h: np.ndarray, xfers: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(h' [B, D], reward [B]) for h [B, D] and xfers [B]."""
        x = np.concatenate([h, self.action_embedding[xfers]], axis=-1)
        return np.tanh(h + _mlp_numpy(self._transition, x)), _mlp_numpy(self._reward, x)[:, 0]

    def predict(self, h: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(value [B], policy logits [B, N], mask logits [B, N]) of h [B, D]."""
        trunk = np.maximum(_mlp_numpy(self._trunk, h), 0.0)
        return (_mlp_numpy(self._value, h)[:, 0], _mlp_numpy(self._policy, trunk),
                _mlp_numpy(self._mask, trunk))
