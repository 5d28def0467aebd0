"""The real environment seen through the world model: how the controller is evaluated.

`LatentEnv` steps the real `GraphEnv` but shows the agent what it saw in the
dream: the state `[z_t, h_t]` (z_t from the frozen latent encoder on the real
graph, h_t from the MDN-RNN's LSTM fed the real trajectory) and compact xfer
ids. Its masks are the world model's predictions (`masks="model"`, default:
an action the real engine rejects is then a mask error of the model, counted
in `info["invalid"]`) or the real engine's (`masks="real"`, the thesis
code's lockstep help). With `ranked` the agent's location is a rank among
the xfer's candidates, cheapest first (`data.location_order`), which the
view maps to the real location. Each step also reports the world model's predicted
reward for the real transition (`info["predicted_reward"]`; NO-OP's is
`noop_reward` where set, as in the dream), so predicted and real returns can
be compared per episode.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from xflowrl.env import Environment, GraphEnv, Observation, ObservationSpec, TimeStep
from xflowrl.env.sampled import SampledGraphEnv
from xflowrl.world_model.data import XferVocabulary, from_rank
from xflowrl.world_model.dream import decode_masks, decode_summaries
from xflowrl.world_model.latent import LatentEncoder
from xflowrl.world_model.networks import MDNRNN
from xflowrl.world_model.traced import functions_of


def _observations(view, reals: Sequence[Observation], latents: np.ndarray,
                  hidden: np.ndarray) -> List[Observation]:
    """What `view` (a `LatentEnv` or `LatentEnvBatch`) shows of real
    observations: [z_t, h_t] and compact masks, the real engine's or the
    world model's (decoded for the whole batch at once, as in the dream)."""
    summaries: List[Optional[np.ndarray]] = [None] * len(reals)
    if view.masks == "real":
        masks = [view.vocab.compact_masks(r.xfer_mask, r.location_mask) for r in reals]
        if view.model.xfer_summaries:  # the real observation's, as its masks
            summaries = [view.vocab.compact_summary(r.location_features().xfer_summary)
                         for r in reals]
    else:
        valid_prob, log_counts, gains = view._functions.masks(tf.constant(latents),
                                                              tf.constant(hidden))
        xfer_masks, location_masks = decode_masks(  # the dream's decoding: both views agree
            valid_prob.numpy(), log_counts.numpy(), view.max_locations,
            view.mask_threshold, view.count_margin)
        masks = list(zip(xfer_masks, location_masks))
        if view.model.xfer_summaries:
            summaries = list(decode_summaries(xfer_masks, location_masks, gains.numpy()))
    states = np.concatenate([latents, hidden], axis=1).astype(np.float32)
    return [Observation(state=state, locations=None, location_mask=location_mask,
                        xfer_mask=xfer_mask, xfer_summary=summary)
            for state, (xfer_mask, location_mask), summary in zip(states, masks, summaries)]


class LatentEnv(Environment):
    """A real environment with the dream's observations and action ids."""

    def __init__(self, env: Union[GraphEnv, SampledGraphEnv], encoder: LatentEncoder, model: MDNRNN,
                 vocab: XferVocabulary, masks: str = "model", mask_threshold: float = 0.5,
                 noop_reward: Optional[float] = 0.0, count_margin: float = 0.0,
                 ranked: bool = False):
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
        self.ranked = ranked
        self._functions = functions_of(model)
        self._done = True

    @property
    def max_locations(self) -> int:
        return self.env.config.max_locations

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
        return _observations(self, [real], self._latent, self._hidden)[0]

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
        predicted, hidden, cell = self._functions.real_step(
            tf.constant(self._latent), tf.constant(self._hidden), tf.constant(self._cell),
            tf.constant([x if in_range else 0], tf.int32),
            tf.constant([min(max(l, 0), self.env.config.max_locations - 1)], tf.int32))
        real_l = from_rank(self._real, real_x, l) if self.ranked else l
        real_obs, reward, done, info = self.env.step((real_x, real_l))
        predicted = float(predicted.numpy()[0])
        if x == self.vocab.size and self.noop_reward is not None:
            predicted = self.noop_reward  # as in the dream
        info = dict(info, predicted_reward=predicted)
        self._done = done
        if info["invalid"] is None:
            self._hidden, self._cell = hidden.numpy(), cell.numpy()
            self._obs = self._observe(real_obs)
        return TimeStep(self._obs, float(reward), done, info)


class LatentEnvBatch:
    """Several real environments seen through the world model, stepped in
    lockstep: `LatentEnv`'s observations and action ids for a batch of
    episodes, each step one batched graph-network encoding of the live
    episodes' graphs and one batched MDN-RNN step (what a collector of many
    real episodes spends its time on).

    `reset()` starts one episode in each of `envs` (`GraphEnv`s: each plays
    its own episode; clone one environment for several episodes of one
    graph); `step(actions)` takes one action per live episode (`live`, in
    order) and returns their time steps. An episode ends when its real
    environment says so (an action the real engine rejects ends it too).
    """

    def __init__(self, envs: Sequence[GraphEnv], encoder: LatentEncoder, model: MDNRNN,
                 vocab: XferVocabulary, masks: str = "model", mask_threshold: float = 0.5,
                 noop_reward: Optional[float] = 0.0, count_margin: float = 0.0,
                 ranked: bool = False):
        if masks not in ("model", "real"):
            raise ValueError(f"masks must be 'model' or 'real', got {masks!r}")
        if not envs:
            raise ValueError("LatentEnvBatch needs at least one environment")
        limits = {env.config.max_locations for env in envs}
        if len(limits) != 1:
            raise ValueError(f"the environments differ in max_locations: {sorted(limits)}")
        self.envs = list(envs)
        self.encoder = encoder
        self.model = model
        self.vocab = vocab
        self.masks = masks
        self.max_locations = limits.pop()
        self.mask_threshold = mask_threshold
        self.noop_reward = noop_reward
        self.count_margin = count_margin
        self.ranked = ranked
        self._functions = functions_of(model)
        self.live: List[int] = []

    def __len__(self) -> int:
        return len(self.envs)

    def real_observation(self, i: int) -> Observation:
        """The real observation of environment i's current graph (graph
        state, real ids and masks): what a collector records."""
        return self._real[i]

    def _observe(self, indices: Sequence[int], reals: Sequence[Observation]
                 ) -> List[Observation]:
        latents = self.encoder.encode([r.state for r in reals], batch_size=max(len(reals), 1))
        self._latent[indices] = latents
        for i, real in zip(indices, reals):
            self._real[i] = real
        return _observations(self, reals, latents, self._hidden[indices])

    def reset(self) -> List[Observation]:
        """Starts every environment's episode; their observations."""
        n, h = len(self.envs), self.model.hidden_size
        self._hidden = np.zeros((n, h), np.float32)
        self._cell = np.zeros((n, h), np.float32)
        self._latent = np.zeros((n, self.model.latent_size), np.float32)
        self._real: List[Observation] = [None] * n  # type: ignore[list-item]
        self.live = list(range(n))
        self._obs = self._observe(self.live, [env.reset() for env in self.envs])
        return list(self._obs)

    def step(self, actions: Sequence[Tuple[int, int]]) -> List[TimeStep]:
        """One (compact xfer, location) per live episode, in `live`'s order;
        their time steps (`LatentEnv.step`'s). Finished episodes leave `live`."""
        live = np.array(self.live, np.int64)
        if len(actions) != len(live):
            raise ValueError(f"{len(actions)} actions for {len(live)} live episodes")
        if not len(live):
            raise RuntimeError("step() with no live episode; call reset()")
        m, top = self.vocab.size, self.max_locations - 1
        xfers = np.array([int(a[0]) for a in actions], np.int64)
        locations = np.array([int(a[1]) for a in actions], np.int64)
        in_range = (xfers >= 0) & (xfers <= m)
        predicted, hidden, cell = self._functions.real_step(
            tf.constant(self._latent[live]), tf.constant(self._hidden[live]),
            tf.constant(self._cell[live]), tf.constant(np.where(in_range, xfers, 0), tf.int32),
            tf.constant(np.clip(locations, 0, top), tf.int32))
        predicted, hidden, cell = predicted.numpy(), hidden.numpy(), cell.numpy()
        results = []
        moved: List[int] = []
        moved_reals: List[Observation] = []
        for j, i in enumerate(live):
            x = int(xfers[j])
            real_x = self.vocab.to_real(x) if in_range[j] else -1  # the env reports it invalid
            real_l = int(locations[j])
            if self.ranked:
                real_l = from_rank(self._real[i], real_x, real_l)
            real_obs, reward, done, info = self.envs[i].step((real_x, real_l))
            reward_pred = float(predicted[j])
            if x == m and self.noop_reward is not None:
                reward_pred = self.noop_reward  # as in the dream
            results.append((float(reward), done, dict(info, predicted_reward=reward_pred)))
            if info["invalid"] is None:
                self._hidden[i], self._cell[i] = hidden[j], cell[j]
                moved.append(j)
                moved_reals.append(real_obs)
        if moved:
            for i, obs in zip(live[moved], self._observe(live[moved].tolist(), moved_reals)):
                self._obs[i] = obs
        steps = [TimeStep(self._obs[i], reward, done, info)
                 for i, (reward, done, info) in zip(live, results)]
        self.live = [int(i) for j, i in enumerate(live) if not results[j][1]]
        return steps
