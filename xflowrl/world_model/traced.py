"""A world model's traced functions, one set per model, shared by everything
that steps it.

An agent makes a dream per controller stretch, per evaluation and per probe
of its masks, and a latent view per graph it evaluates on. Each used to
trace its own `tf.function`s, a second or more of tracing every time (and
TensorFlow's retracing warning in the log). `functions_of(model)` traces
each function once per model for every batch size (`xflowrl.tracing`) and
hands the same ones to every dream and view of it. The functions hold the
model by a weak reference, so that a model no longer used is freed with its
traces.
"""

from __future__ import annotations

from typing import NamedTuple
import weakref

import sonnet as snt
import tensorflow as tf

from xflowrl.tracing import TracedFunction, traced_once
from xflowrl.world_model import losses
from xflowrl.world_model.networks import MDNRNN


class ModelFunctions(NamedTuple):
    masks: TracedFunction        # (z, h) -> (valid probability [B, M], log counts [B, M],
    #                                        gains [B, M, 2])
    real_step: TracedFunction    # (z, h, c, xfer, location) -> (reward, h', c')
    dream_step: TracedFunction   # (z, h, c, xfer, location, seed, temperature) -> see below


_FUNCTIONS: "weakref.WeakKeyDictionary[MDNRNN, ModelFunctions]" = weakref.WeakKeyDictionary()


def functions_of(model: MDNRNN) -> ModelFunctions:
    """`model`'s traced functions, made on the first call for this model:

    - `masks(z, h)`: the mask decoder's valid probabilities, log counts and
      (min, mean) cost changes (zeros unless the model predicts summaries);
    - `real_step(z, h, c, xfer, location)`: the predicted reward and the
      LSTM's next state, for views that take z_{t+1} from the real graph;
    - `dream_step(z, h, c, xfer, location, seed, temperature)`: z_{t+1}
      sampled from the temperature-scaled mixture with the stateless `seed`
      ([2] int64), then (z', h', c', reward, done probability, valid
      probability, log counts, the reward ensemble's standard deviation,
      gains).
    """
    functions = _FUNCTIONS.get(model)
    if functions is None:
        functions = _trace(weakref.ref(model))
        _FUNCTIONS[model] = functions
    return functions


def _trace(ref: "weakref.ref[MDNRNN]") -> ModelFunctions:
    # The functions must not keep their key alive: they reach the model
    # through `ref` only.

    def masks(latent, hidden):
        m = ref().masks(latent, hidden)
        return tf.sigmoid(m.xfer_logits), m.log_counts, m.gains

    def real_step(latent, hidden, cell, xfer, location):
        prediction, state = ref().step(latent, xfer, location,
                                       snt.LSTMState(hidden=hidden, cell=cell))
        return prediction.reward, state.hidden, state.cell

    def dream_step(latent, hidden, cell, xfer, location, seed, temperature):
        prediction, state = ref().step(latent, xfer, location,
                                       snt.LSTMState(hidden=hidden, cell=cell))
        next_latent = losses.sample_mixture(prediction.logits, prediction.mu,
                                            prediction.log_sigma, temperature, seed)
        valid_prob, log_counts, gains = masks(next_latent, state.hidden)
        members = prediction.reward_members
        disagreement = (tf.math.reduce_std(members, -1) if members.shape[-1] > 1
                        else tf.zeros_like(prediction.reward))
        return (next_latent, state.hidden, state.cell, prediction.reward,
                tf.sigmoid(prediction.done_logit), valid_prob, log_counts, disagreement, gains)

    return ModelFunctions(traced_once(masks), traced_once(real_step), traced_once(dream_step))
