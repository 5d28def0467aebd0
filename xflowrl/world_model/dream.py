"""The dream: the environment interface driven by the world model alone.

`BatchedDream` advances many imagined episodes per call: one traced
function (`traced.functions_of`, shared by every dream of a model) runs the
MDN-RNN step for the whole batch, samples z_{t+1} from the
temperature-scaled mixture (thesis §3.4.1) and decodes the next masks; the
reward, the terminal flag and the masks all come from the model. Episodes
start from the real initial graph's latent z_0 (with h_0 = 0), as World
Models' dreams start from a real frame (over a distribution of graphs, the
initial graph of one of them, drawn per episode, with that graph's step
limit), or from given `DreamStarts`: real
states of collected episodes (their z_t and the LSTM's state after the real
prefix), each with its own step limit, so that short imagined branches
explore where real episodes went. An episode ends on NO-OP, when the
predicted done probability passes `done_threshold`, when no known xfer is
predicted valid, on an action invalid under the predicted masks (with
`invalid_penalty`, as the real environment's default), or at the step limit
(`truncated`).

NO-OP's reward is `DreamConfig.noop_reward` where the reward function defines
it (0 for per-step rewards: the graph is unchanged), else predicted. Every
other imagined reward is lowered by `disagreement_penalty` times the
standard deviation of the world model's reward ensemble, and with
`disagreement_limit` an episode is cut (bootstrapped) where that standard
deviation is too large: the controller gains nothing from steps where the
model is guessing.

The observation state is `[z_t, h_t]` (Z + H floats); xfer ids are the
world model's compact ones (`XferVocabulary`), N = M. A model with
`WorldModelConfig.xfer_summaries` also gives each imagined state a per-xfer
summary (`decode_summaries`: log1p of the offered count, the predicted min
and mean cost change), laid out as the real environment's. With
`DreamConfig.lockstep` (the thesis code's mode, an ablation only), real
environments stepped with the same actions supply the masks and terminal
flags instead.

`DreamEnv` is the single-episode `Environment` view of a batch of one, so the
dream passes the same conformance tests as the real environment.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from xflowrl.env import Environment, GraphEnv, Observation, ObservationSpec, TimeStep
from xflowrl.world_model.config import DreamConfig
from xflowrl.world_model.data import XferVocabulary
from xflowrl.world_model.networks import MDNRNN
from xflowrl.world_model.traced import functions_of

# The purpose key of the draw of initial graphs (beside the dream's seed and step).
_INITIAL_GRAPH_STREAM = 11


def decode_masks(valid_prob: np.ndarray, log_counts: np.ndarray, max_locations: int,
                 threshold: float = 0.5, count_margin: float = 0.0):
    """Predicted masks from the mask decoder's outputs.

    Args:
      valid_prob: [B, M] probability that each known xfer is valid.
      log_counts: [B, M] predicted log1p(location count).
      max_locations: L.
      threshold: probability above which an xfer counts as valid.
      count_margin: subtracted from the log counts first: a lower confidence
        bound. An overestimated count offers locations the real graph lacks
        (invalid actions); an underestimate only hides some.
    Returns:
      xfer_mask [B, M+1] (NO-OP last, always valid) and the prefix location
      mask [B, M+1, L] (a valid xfer has at least one location).
    """
    b = valid_prob.shape[0]
    valid = valid_prob > threshold
    counts = np.clip(np.rint(np.expm1(log_counts - count_margin)), 1, max_locations)
    counts = np.where(valid, counts, 0).astype(np.int64)
    xfer_mask = np.concatenate([counts > 0, np.ones((b, 1), bool)], axis=1)
    counts = np.concatenate([counts, np.zeros((b, 1), np.int64)], axis=1)
    return xfer_mask, np.arange(max_locations) < counts[..., None]


def decode_summaries(xfer_mask: np.ndarray, location_mask: np.ndarray,
                     gains: np.ndarray) -> np.ndarray:
    """The per-xfer summary a controller reads, from decoded masks and the
    predicted gains, as the real environment lays it out: [B, M+1, 3] of
    log1p(location count), min and mean cost change, zero for xfers not
    offered and for NO-OP (the last row).

    Args:
      xfer_mask: [B, M+1] and location_mask: [B, M+1, L], from `decode_masks`.
      gains: [B, M, 2] the predicted (min, mean) cost changes.
    """
    b, width = xfer_mask.shape
    out = np.zeros((b, width, 3), np.float32)
    offered = xfer_mask[:, :-1]
    out[:, :-1, 0] = np.log1p(location_mask[:, :-1].sum(-1))
    out[:, :-1, 1:] = gains
    out[:, :-1] *= offered[..., None]
    return out


class DreamBatch(NamedTuple):
    states: np.ndarray         # [B, Z+H] float32: [z_t, h_t]
    xfer_mask: np.ndarray      # [B, M+1] bool
    location_mask: np.ndarray  # [B, M+1, L] bool
    rewards: np.ndarray        # [B] float32 (0 at reset)
    dones: np.ndarray          # [B] bool: the episode has ended (at this or an earlier step)
    truncated: np.ndarray      # [B] bool: the step limit ended it at this step
    invalid: np.ndarray        # [B] bool: the action was invalid under the masks
    # [B, M+1, 3] the per-xfer summary (`decode_summaries`); None unless the
    # model predicts summaries.
    xfer_summary: Optional[np.ndarray] = None


class DreamStarts(NamedTuple):
    """Where imagined episodes begin: a recurrent state per episode and its
    own step limit (Dreamer and MBPO imagine short branches from real
    states and let the value function bootstrap the rest)."""
    latent: np.ndarray     # [B, Z] z_t
    hidden: np.ndarray     # [B, H] h_t
    cell: np.ndarray       # [B, H] the LSTM's cell state
    max_steps: np.ndarray  # [B] int: each episode's step limit
    initial: np.ndarray    # [B] bool: the start is the real initial graph


class _Lockstep(NamedTuple):
    """What a lockstep dream steps beside the model: one real environment
    per episode, and the vocabulary that maps its compact xfers to them."""
    envs: List[GraphEnv]
    vocab: XferVocabulary


class BatchedDream:
    """Imagined episodes of a trained `MDNRNN`."""

    def __init__(self, model: MDNRNN, initial_latent: np.ndarray, config: DreamConfig,
                 max_steps: int, max_locations: int, seed: int = 0,
                 invalid_penalty: float = -10.0,
                 lockstep: Optional[Sequence[GraphEnv]] = None,
                 vocab: Optional[XferVocabulary] = None,
                 initial_max_steps: Optional[Union[Sequence[int], np.ndarray]] = None):
        """
        Args:
          model: the trained world model (M known xfers).
          initial_latent: [Z] z_0 of the real initial graph, or [G, Z]: the
            initial graphs of G graphs (an episode from an initial graph
            starts at one of them, drawn uniformly from the dream's stateless
            stream).
          config: temperature and thresholds.
          max_steps: step limit of an imagined episode.
          initial_max_steps: [G] the step limit of an episode from each
            initial graph (default: `max_steps` for all).
          max_locations: L.
          seed: seeds the stateless mixture sampling.
          invalid_penalty: reward of an action invalid under the masks.
          lockstep: with `config.lockstep`, one real environment per episode
            of the largest batch that will be used (and `vocab`).
        """
        self.model = model
        self.config = config
        self.max_steps = max_steps
        self.max_locations = max_locations
        self.num_xfers = model.num_known_xfers
        self.invalid_penalty = invalid_penalty
        z0 = np.asarray(initial_latent, np.float32)
        self._z0 = z0[None] if z0.ndim == 1 else z0
        self._z0_limits = (np.full(len(self._z0), max_steps, np.int64)
                           if initial_max_steps is None
                           else np.asarray(initial_max_steps, np.int64))
        if self._z0.ndim != 2 or len(self._z0) == 0 or self._z0_limits.shape != (len(self._z0),):
            raise ValueError(f"initial latents {z0.shape} and step limits "
                             f"{self._z0_limits.shape} do not match")
        self._seed = int(seed)
        self._calls = 0
        self.real_steps = 0  # real environment steps taken by a lockstep dream
        self.disagreement: List[float] = []  # the ensemble's std at every imagined step
        self._lockstep: Optional[_Lockstep] = None
        if config.lockstep:
            if not lockstep or vocab is None:
                raise ValueError("lockstep dreams need real environments and the vocabulary")
            if len(self._z0) > 1:
                raise ValueError("a lockstep dream starts from one initial graph")
            self._lockstep = _Lockstep(list(lockstep), vocab)
        self._functions = functions_of(model)  # shared by every dream of the model

    @property
    def state_size(self) -> int:
        return self.model.latent_size + self.model.hidden_size

    # -- masks -----------------------------------------------------------------
    def _decode_masks(self, valid_prob: np.ndarray, log_counts: np.ndarray):
        return decode_masks(valid_prob, log_counts, self.max_locations,
                            self.config.mask_threshold, self.config.count_margin or 0.0)

    @staticmethod
    def _real_masks(vocab: XferVocabulary, observations: List[Observation]):
        pairs = [vocab.compact_masks(o.xfer_mask, o.location_mask) for o in observations]
        return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])

    def _states(self) -> np.ndarray:
        return np.concatenate([self._latent, self._hidden], axis=1)

    def _decoded_summaries(self, xfer_mask, location_mask, gains) -> Optional[np.ndarray]:
        """The batch's per-xfer summaries from the decoded masks and the
        predicted `gains`; None unless the model predicts summaries."""
        if not self.model.xfer_summaries:
            return None
        return decode_summaries(xfer_mask, location_mask, gains)

    def _real_summaries(self, observations: List[Observation]) -> Optional[np.ndarray]:
        """A lockstep dream's summaries: its real environments' (as its masks)."""
        if not self.model.xfer_summaries:
            return None
        vocab = self._lockstep.vocab  # type: ignore[union-attr]
        return np.stack([vocab.compact_summary(o.location_features().xfer_summary)
                         for o in observations])

    # -- the interface, batched -----------------------------------------------
    @property
    def initial_graphs(self) -> int:
        """G, the initial graphs episodes start from."""
        return len(self._z0)

    def initial_starts(self, batch_size: int) -> DreamStarts:
        """`batch_size` starts at a real initial graph (z_0, h_0 = 0) with its
        step limit: the one initial graph, or with G of them one per start,
        drawn uniformly from [seed, steps so far] (`reseed` fixes it)."""
        h = self.model.hidden_size
        if len(self._z0) == 1:
            which = np.zeros(batch_size, np.int64)
        else:
            rng = np.random.default_rng([self._seed, self._calls, _INITIAL_GRAPH_STREAM])
            which = rng.integers(len(self._z0), size=batch_size)
        return DreamStarts(self._z0[which],
                           np.zeros((batch_size, h), np.float32),
                           np.zeros((batch_size, h), np.float32),
                           self._z0_limits[which].copy(),
                           np.ones(batch_size, bool))

    def reseed(self, seed: int) -> None:
        """Samples as a new dream of `seed` would from here on: step k
        after this call draws z_{t+1} from the stateless key [seed, k] (a
        dream otherwise counts its steps from its construction). A trainer
        reseeds before each batch from where training stands, so that its
        draws do not depend on how many steps this dream object has made."""
        self._seed, self._calls = int(seed), 0

    def reset(self, batch_size: int, starts: Optional[DreamStarts] = None) -> DreamBatch:
        """Starts `batch_size` imagined episodes from z_0, or from `starts`
        (of `batch_size` rows; not with lockstep, whose real environments
        start at the initial graph)."""
        if starts is None:
            starts = self.initial_starts(batch_size)
        elif self._lockstep is not None:
            raise ValueError("a lockstep dream starts only from the initial graph")
        if len(starts.latent) != batch_size:
            raise ValueError(f"{len(starts.latent)} starts for a batch of {batch_size}")
        self._latent = np.asarray(starts.latent, np.float32).copy()
        self._hidden = np.asarray(starts.hidden, np.float32).copy()
        self._cell = np.asarray(starts.cell, np.float32).copy()
        self._limits = np.asarray(starts.max_steps, np.int64)
        self._steps = 0
        self._finished = np.zeros(batch_size, bool)
        if self._lockstep is not None:
            envs = self._lockstep.envs
            if batch_size > len(envs):
                raise ValueError(f"lockstep dream has {len(envs)} real "
                                 f"environments for a batch of {batch_size}")
            reals = [env.reset() for env in envs[:batch_size]]
            self._xfer_mask, self._location_mask = self._real_masks(self._lockstep.vocab, reals)
            self._summary = self._real_summaries(reals)
        else:
            valid_prob, log_counts, gains = self._functions.masks(tf.constant(self._latent),
                                                                  tf.constant(self._hidden))
            self._xfer_mask, self._location_mask = self._decode_masks(valid_prob.numpy(),
                                                                      log_counts.numpy())
            self._summary = self._decoded_summaries(self._xfer_mask, self._location_mask,
                                                    gains.numpy())
        zeros = np.zeros(batch_size, bool)
        return DreamBatch(self._states(), self._xfer_mask, self._location_mask,
                          np.zeros(batch_size, np.float32), zeros, zeros, zeros, self._summary)

    def step(self, actions: np.ndarray) -> DreamBatch:
        """Advances every episode of the batch; actions [B, 2] (compact xfer,
        location). Episodes already done stay done with reward 0."""
        actions = np.asarray(actions, np.int64).reshape(-1, 2)
        b = len(self._latent)
        if len(actions) != b:
            raise ValueError(f"{len(actions)} actions for a batch of {b}")
        xfer, location = actions[:, 0], actions[:, 1]
        in_range = (xfer >= 0) & (xfer <= self.num_xfers) & (location >= 0) & (
            location < self.max_locations)
        safe_x, safe_l = np.where(in_range, xfer, 0), np.where(in_range, location, 0)
        rows = np.arange(b)
        noop = safe_x == self.num_xfers
        valid = in_range & (noop | self._location_mask[rows, safe_x, safe_l])
        self._calls += 1
        out = self._functions.dream_step(
            tf.constant(self._latent), tf.constant(self._hidden), tf.constant(self._cell),
            tf.constant(safe_x.astype(np.int32)), tf.constant(safe_l.astype(np.int32)),
            tf.constant([self._seed, self._calls], tf.int64),
            tf.constant(self.config.temperature, tf.float32))
        (latent, hidden, cell, reward, done_prob, valid_prob, log_counts,
         disagreement, gains) = [x.numpy() for x in out]
        self._steps += 1
        live = ~self._finished
        real_truncated = np.zeros(b, bool)  # a real step-limit cut is no terminal
        if self._lockstep is not None:
            vocab = self._lockstep.vocab
            real_done = np.zeros(b, bool)
            observations = []
            for i, env in enumerate(self._lockstep.envs[:b]):
                if live[i] and valid[i]:
                    obs, _, real_done[i], info = env.step(
                        (vocab.to_real(int(safe_x[i])), int(safe_l[i])))
                    real_truncated[i] = info["truncated"]
                    observations.append(obs)
                    self.real_steps += 1
                else:
                    observations.append(env._observation)  # pylint: disable=protected-access
            xfer_mask, location_mask = self._real_masks(vocab, observations)
            summary = self._real_summaries(observations)
            predicted_done = real_done & ~real_truncated
        else:
            xfer_mask, location_mask = self._decode_masks(valid_prob, log_counts)
            summary = self._decoded_summaries(xfer_mask, location_mask, gains)
            predicted_done = done_prob > self.config.done_threshold
        stuck = ~xfer_mask[:, :-1].any(axis=1)
        ended = noop | ~valid | predicted_done | stuck
        # Where the reward ensemble disagrees the model is guessing: the
        # reward is lowered by lambda * std, and past the limit the episode
        # is cut there (bootstrapped from the value, like the step limit).
        disagreement = np.where(noop, 0.0, disagreement)
        reward = reward - self.config.disagreement_penalty * disagreement
        unsure = np.zeros(b, bool)
        if self.config.disagreement_limit is not None:
            scale = float(self.model.reward_scale.numpy())
            unsure = disagreement > self.config.disagreement_limit / scale
        self.disagreement.extend(disagreement[live & valid & ~noop].tolist())
        truncated = live & ~ended & ((self._steps >= self._limits) | real_truncated | unsure)
        if self.config.noop_reward is not None:
            reward = np.where(noop, self.config.noop_reward, reward)
        rewards = np.where(valid, reward, self.invalid_penalty).astype(np.float32)
        rewards = np.where(live, rewards, 0.0).astype(np.float32)
        # Finished episodes keep their last state.
        keep = live[:, None]
        self._latent = np.where(keep, latent, self._latent)
        self._hidden = np.where(keep, hidden, self._hidden)
        self._cell = np.where(keep, cell, self._cell)
        self._xfer_mask = np.where(keep, xfer_mask, self._xfer_mask)
        self._location_mask = np.where(live[:, None, None], location_mask, self._location_mask)
        if summary is not None and self._summary is not None:
            self._summary = np.where(live[:, None, None], summary, self._summary)
        self._finished = self._finished | ended | truncated
        return DreamBatch(self._states(), self._xfer_mask, self._location_mask, rewards,
                          self._finished.copy(), truncated, live & ~valid, self._summary)


class DreamEnv(Environment):
    """One imagined episode at a time: the `Environment` view of a dream."""

    def __init__(self, dream: BatchedDream):
        lockstep = dream._lockstep  # pylint: disable=protected-access
        if dream.config.lockstep and (lockstep is None or not lockstep.envs):
            raise ValueError("lockstep dream needs a real environment")
        self.dream = dream
        self._done = True

    def observation_spec(self) -> ObservationSpec:
        return ObservationSpec(state="vector", state_size=self.dream.state_size,
                               num_xfers=self.dream.num_xfers,
                               max_locations=self.dream.max_locations,
                               location_features=False, max_pattern_ops=0)

    def _observation(self, batch: DreamBatch) -> Observation:
        return Observation(state=batch.states[0], locations=None,
                           location_mask=batch.location_mask[0], xfer_mask=batch.xfer_mask[0],
                           xfer_summary=(None if batch.xfer_summary is None
                                         else batch.xfer_summary[0]))

    def reset(self) -> Observation:
        self._done = False
        self._steps = 0
        return self._observation(self.dream.reset(1))

    def step(self, action) -> TimeStep:
        if self._done:
            raise RuntimeError("step() called on a finished episode; call reset()")
        x, l = int(action[0]), int(action[1])
        batch = self.dream.step(np.array([[x, l]]))
        self._steps += 1
        invalid = None
        if batch.invalid[0]:
            invalid = f"action ({x}, {l}) is invalid under the predicted masks"
        self._done = bool(batch.dones[0])
        return TimeStep(self._observation(batch), float(batch.rewards[0]), self._done,
                        {"invalid": invalid, "truncated": bool(batch.truncated[0]),
                         "steps": self._steps, "applied": "NO-OP" if x == self.num_xfers
                         else None})
