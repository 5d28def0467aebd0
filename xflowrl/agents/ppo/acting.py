"""The actor: picks (xfer, location) for observations (thesis Algorithm 3).

The xfer is sampled from the masked xfer logits; unless it is NO-OP, the
location is then sampled from the masked location logits of that xfer.
`greedy=True` takes the argmax of each instead. Sampling uses the actor's
own numpy generator, so a seeded run reproduces.

`act(observation)` serves one observation of any environment (graph or
vector state); `act_batch(states, xfer_masks, location_masks)` serves a batch
of vector states at once (the batched dream, DESIGN.md §8).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from xflowrl.agents.ppo.networks import PolicyValueNetwork
from xflowrl.embedding import features
from xflowrl.env import Observation


class Action(NamedTuple):
    xfer: int
    location: int
    xfer_log_prob: float
    location_log_prob: float  # 0 for NO-OP
    xfer_value: float
    location_value: float     # 0 for NO-OP: the episode ends there, nothing follows


def _log_softmax(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Row-wise masked log-probabilities (-inf where masked); logits [B, A]."""
    logits = np.where(mask, logits.astype(np.float64), -np.inf)
    top = logits.max(axis=-1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))


def _sample(log_p: np.ndarray, rng: np.random.Generator, greedy: bool) -> np.ndarray:
    """[B] choices from row-wise log-probabilities [B, A] (Gumbel-max when sampling)."""
    if greedy:
        return np.argmax(log_p, axis=-1)
    return np.argmax(log_p + rng.gumbel(size=log_p.shape), axis=-1)


class Actor:
    """Selects actions with a `PolicyValueNetwork`."""

    def __init__(self, network: PolicyValueNetwork, seed: Optional[int] = None):
        self.network = network
        self.rng = np.random.default_rng(seed)
        self._xfer_step = tf.function(self._xfer_step_impl, reduce_retracing=True)
        self._location_step = tf.function(self._location_step_impl, reduce_retracing=True)

    def _xfer_step_impl(self, state, xfer_summary, xfer_mask):
        embedding = self.network.encode(state)
        out = self.network.xfer_head(embedding.globals, xfer_summary, xfer_mask)
        return embedding, out

    def _location_step_impl(self, embedding, xfer, location_nodes, cost_delta, num_locations):
        return self.network.location_head(embedding, xfer, location_nodes, cost_delta,
                                          num_locations)

    def _state_tensor(self, state):
        if self.network.state_kind == "graph":
            return features.to_tensors(state)
        return tf.constant(np.asarray(state, np.float32)[None])

    def _xfer_forward(self, observation: Observation):
        """Embedding and xfer-head output of one observation."""
        locations = observation.locations
        return self._xfer_step(
            self._state_tensor(observation.state),
            None if locations is None else tf.constant(locations.xfer_summary[None]),
            tf.constant(observation.xfer_mask[None]))

    def value(self, observation: Observation) -> float:
        """V_x(s): the bootstrap value of a state where an episode was cut."""
        return float(self._xfer_forward(observation)[1].value.numpy()[0])

    def build(self, observation: Observation) -> None:
        """Creates the network's variables: both heads, whatever the policy picks."""
        locations = observation.locations
        embedding, _ = self._xfer_forward(observation)
        self._location_step(
            embedding, tf.constant([0]),
            None if locations is None else tf.constant(locations.nodes[0][None]),
            None if locations is None else tf.constant(locations.cost_delta[0][None]),
            None if locations is not None else observation.location_mask.shape[1])

    def act(self, observation: Observation, greedy: bool = False) -> Action:
        locations = observation.locations
        embedding, xfer_out = self._xfer_forward(observation)
        xfer_log_p = _log_softmax(xfer_out.logits.numpy(), observation.xfer_mask[None])[0]
        xfer = int(_sample(xfer_log_p[None], self.rng, greedy)[0])
        xfer_value = float(xfer_out.value.numpy()[0])
        if xfer == self.network.num_xfers or not observation.location_mask[xfer].any():
            return Action(xfer, 0, float(xfer_log_p[xfer]), 0.0, xfer_value, 0.0)
        num_locations = observation.location_mask.shape[1]
        location_out = self._location_step(
            embedding, tf.constant([xfer]),
            None if locations is None else tf.constant(locations.nodes[xfer][None]),
            None if locations is None else tf.constant(locations.cost_delta[xfer][None]),
            None if locations is not None else num_locations)
        location_log_p = _log_softmax(location_out.logits.numpy(),
                                      observation.location_mask[xfer][None])[0]
        location = int(_sample(location_log_p[None], self.rng, greedy)[0])
        return Action(xfer, location, float(xfer_log_p[xfer]), float(location_log_p[location]),
                      xfer_value, float(location_out.value.numpy()[0]))

    def act_batch(self, states: np.ndarray, xfer_masks: np.ndarray,
                  location_masks: np.ndarray, greedy: bool = False) -> List[Action]:
        """Actions for a batch of vector states.

        Args:
          states: [B, D] float32.
          xfer_masks: [B, N+1] bool.
          location_masks: [B, N+1, L] bool.
        """
        if self.network.state_kind != "vector":
            raise ValueError("act_batch serves vector states; use act() for graphs")
        batch = len(states)
        embedding, xfer_out = self._xfer_step(tf.constant(np.asarray(states, np.float32)),
                                              None, tf.constant(xfer_masks))
        xfer_log_p = _log_softmax(xfer_out.logits.numpy(), xfer_masks)
        xfers = _sample(xfer_log_p, self.rng, greedy)
        rows = np.arange(batch)
        num_locations = location_masks.shape[2]
        location_out = self._location_step(embedding, tf.constant(xfers.astype(np.int32)),
                                           None, None, num_locations)
        masks = location_masks[rows, xfers]                                 # [B, L]
        has_location = (xfers != self.network.num_xfers) & masks.any(axis=1)
        # Rows without a location (NO-OP) get a dummy uniform mask; their
        # location is 0 with log-probability 0 and value 0.
        masks = np.where(has_location[:, None], masks, np.arange(num_locations) == 0)
        location_log_p = _log_softmax(location_out.logits.numpy(), masks)
        locations = np.where(has_location, _sample(location_log_p, self.rng, greedy), 0)
        location_lp = np.where(has_location, location_log_p[rows, locations], 0.0)
        location_value = np.where(has_location, location_out.value.numpy(), 0.0)
        xfer_value = xfer_out.value.numpy()
        return [Action(int(xfers[i]), int(locations[i]), float(xfer_log_p[i, xfers[i]]),
                       float(location_lp[i]), float(xfer_value[i]), float(location_value[i]))
                for i in range(batch)]
