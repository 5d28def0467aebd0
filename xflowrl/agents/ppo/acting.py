"""The actor: picks (xfer, location) for one observation (thesis Algorithm 3).

The xfer is sampled from the masked xfer logits; unless it is NO-OP, the
location is then sampled from the masked location logits of that xfer.
`greedy=True` takes the argmax of each instead. Sampling uses the actor's
own numpy generator, so a seeded run reproduces.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

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
    location_value: float     # V_l(s, NO-OP) for NO-OP


def _sample(logits: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
            greedy: bool):
    logits = np.where(mask, logits.astype(np.float64), -np.inf)
    log_p = logits - np.logaddexp.reduce(logits[mask])
    choice = int(np.argmax(log_p)) if greedy else int(rng.choice(len(log_p), p=np.exp(log_p)))
    return choice, float(log_p[choice])


class Actor:
    """Selects actions with a `PolicyValueNetwork`."""

    def __init__(self, network: PolicyValueNetwork, seed: Optional[int] = None):
        self.network = network
        self.rng = np.random.default_rng(seed)
        self._xfer_step = tf.function(self._xfer_step_impl, reduce_retracing=True)
        self._location_step = tf.function(self._location_step_impl, reduce_retracing=True)

    def _xfer_step_impl(self, graph, xfer_summary, xfer_mask):
        embedding = self.network.encode(graph)
        out = self.network.xfer_head(embedding.globals, xfer_summary, xfer_mask)
        return embedding, out

    def _location_step_impl(self, embedding, xfer, location_nodes, cost_delta):
        return self.network.location_head(embedding, xfer, location_nodes, cost_delta)

    def act(self, observation: Observation, greedy: bool = False) -> Action:
        graph = features.to_tensors(observation.graph)
        embedding, xfer_out = self._xfer_step(
            graph, tf.constant(observation.locations.xfer_summary[None]),
            tf.constant(observation.xfer_mask[None]))
        xfer, xfer_lp = _sample(xfer_out.logits.numpy()[0], observation.xfer_mask,
                                self.rng, greedy)
        location_out = self._location_step(
            embedding, tf.constant([xfer]),
            tf.constant(observation.locations.nodes[xfer][None]),
            tf.constant(observation.locations.cost_delta[xfer][None]))
        location, location_lp = 0, 0.0
        mask = observation.location_mask[xfer]
        if mask.any():
            location, location_lp = _sample(location_out.logits.numpy()[0], mask,
                                            self.rng, greedy)
        return Action(xfer, location, xfer_lp, location_lp,
                      float(xfer_out.value.numpy()[0]), float(location_out.value.numpy()[0]))
