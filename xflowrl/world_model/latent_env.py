"""The real environment seen through the world model: how the controller is evaluated.

`LatentEnv` steps the real `GraphEnv` but shows the agent what it saw in the
dream: the state `[z_t, h_t]` (z_t from the frozen latent encoder on the real
graph, h_t from the MDN-RNN's LSTM fed the real trajectory) and compact xfer
ids. Its masks are the world model's predictions (`masks="model"`, default:
an action the real engine rejects is then a mask error of the model, counted
in `info["invalid"]`) or the real engine's (`masks="real"`, the thesis
code's lockstep help). Each step also reports the world model's predicted
reward for the real transition (`info["predicted_reward"]`; NO-OP's is
`noop_reward` where set, as in the dream), so predicted and real returns can
be compared per episode.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple, Union
import weakref

import numpy as np
import sonnet as snt
import tensorflow as tf

from xflowrl.env import Environment, GraphEnv, Observation, ObservationSpec, TimeStep
from xflowrl.env.sampled import SampledGraphEnv
from xflowrl.world_model.data import XferVocabulary
from xflowrl.world_model.dream import decode_masks
from xflowrl.world_model.latent import LatentEncoder
from xflowrl.world_model.networks import MDNRNN

# A world model's traced step and mask functions, shared by every view of it
# (an agent makes a view per graph it evaluates on: without sharing, each
# would trace its own).
_FUNCTIONS: "weakref.WeakKeyDictionary[MDNRNN, Tuple[Callable, Callable]]" = (
    weakref.WeakKeyDictionary())


def _functions_of(model: MDNRNN) -> Tuple[Callable, Callable]:
    """(step, masks) of `model`, traced once per model and input signature."""
    if model not in _FUNCTIONS:
        ref = weakref.ref(model)  # the functions must not keep their key alive

        def masks_impl(latent, hidden):
            masks = ref().masks(latent, hidden)
            return tf.sigmoid(masks.xfer_logits), masks.log_counts

        def step_impl(latent, hidden, cell, xfer, location):
            prediction, state = ref().step(latent, xfer, location,
                                           snt.LSTMState(hidden=hidden, cell=cell))
            return prediction.reward, state.hidden, state.cell

        _FUNCTIONS[model] = (tf.function(step_impl, reduce_retracing=True),
                             tf.function(masks_impl, reduce_retracing=True))
    return _FUNCTIONS[model]


class LatentEnv(Environment):
    """A real environment with the dream's observations and action ids."""

    def __init__(self, env: Union[GraphEnv, SampledGraphEnv], encoder: LatentEncoder, model: MDNRNN,
                 vocab: XferVocabulary, masks: str = "model", mask_threshold: float = 0.5,
                 noop_reward: Optional[float] = 0.0, count_margin: float = 0.0):
        if masks not in ("model", "real"):
            raise ValueError(f"masks must be 'model' or 'real', got {masks!r}")
        self.env = env
        self.encoder = encoder
        self.model = model
        self.vocab = vocab
        self.masks = masks
        self.mask_threshold = mask_threshold
        self.noop_reward = noop_reward
        self.count_margin = count_margin
        self._step_fn, self._masks_fn = _functions_of(model)
        self._done = True

    @property
    def initial_cost(self) -> float:
        return self.env.initial_cost

    def observation_spec(self) -> ObservationSpec:
        return ObservationSpec(state="vector",
                               state_size=self.model.latent_size + self.model.hidden_size,
                               num_xfers=self.vocab.size,
                               max_locations=self.env.config.max_locations,
                               location_features=False, max_pattern_ops=0)

    @property
    def real_observation(self) -> Observation:
        """The real environment's observation of the current graph (graph
        state, real ids and masks): what a collector records."""
        return self._real

    def _observe(self, real: Observation) -> Observation:
        self._real = real
        self._latent = self.encoder.encode([real.state])
        if self.masks == "real":
            xfer_mask, location_mask = self.vocab.compact_masks(real.xfer_mask,
                                                                real.location_mask)
        else:
            valid_prob, log_counts = self._masks_fn(tf.constant(self._latent),
                                                    tf.constant(self._hidden))
            xfer_mask, location_mask = decode_masks(  # the dream's decoding: both views agree
                valid_prob.numpy(), log_counts.numpy(), self.env.config.max_locations,
                self.mask_threshold, self.count_margin)
            xfer_mask, location_mask = xfer_mask[0], location_mask[0]
        state = np.concatenate([self._latent[0], self._hidden[0]]).astype(np.float32)
        return Observation(state=state, locations=None, location_mask=location_mask,
                           xfer_mask=xfer_mask)

    def reset(self) -> Observation:
        h = self.model.hidden_size
        self._hidden = np.zeros((1, h), np.float32)
        self._cell = np.zeros((1, h), np.float32)
        self._done = False
        self._obs = self._observe(self.env.reset())
        return self._obs

    def step(self, action) -> TimeStep:
        if self._done:
            raise RuntimeError("step() called on a finished episode; call reset()")
        x, l = int(action[0]), int(action[1])
        in_range = 0 <= x <= self.vocab.size
        real_x = self.vocab.to_real(x) if in_range else -1  # the real env reports it invalid
        predicted, hidden, cell = self._step_fn(
            tf.constant(self._latent), tf.constant(self._hidden), tf.constant(self._cell),
            tf.constant([x if in_range else 0], tf.int32),
            tf.constant([min(max(l, 0), self.env.config.max_locations - 1)], tf.int32))
        real_obs, reward, done, info = self.env.step((real_x, l))
        predicted = float(predicted.numpy()[0])
        if x == self.vocab.size and self.noop_reward is not None:
            predicted = self.noop_reward  # as in the dream
        info = dict(info, predicted_reward=predicted)
        self._done = done
        if info["invalid"] is None:
            self._hidden, self._cell = hidden.numpy(), cell.numpy()
            self._obs = self._observe(real_obs)
        return TimeStep(self._obs, float(reward), done, info)
