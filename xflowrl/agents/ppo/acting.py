"""The actor: picks (xfer, location) for observations (thesis Algorithm 3).

The xfer is sampled from the masked xfer logits; unless it is NO-OP, the
location is then sampled from the masked location logits of that xfer.
`greedy=True` takes the argmax of each instead.

Both choices are made in one traced call per step (`policy_step`), for a
batch of observations at once: sampling is Gumbel-max with noise drawn from
the actor's own numpy generator (or one the caller passes) and passed in
(zeros for greedy), so a seeded run reproduces and nothing returns to
Python between the two heads.
The location head sees only the candidate rows of the xfers that have
locations (`LocationFeatures.active`, a handful of ~1,700), gathered for the
sampled xfer inside the call. `xflowrl.tracing` keeps it to one trace per
kind of state, whatever the batch, graph or candidate sizes.

`act(observation)` serves one observation of any environment (graph or
vector state); `act_graphs(observations)` a batch of graph observations
(several environments stepped together); `act_batch(states, xfer_masks,
location_masks)` a batch of vector states (the batched dream,
`xflowrl.world_model.dream`).
"""

from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Sequence, Set, Tuple

import numpy as np
import tensorflow as tf

from xflowrl.agents.ppo.networks import PolicyValueNetwork
from xflowrl.embedding import features
from xflowrl.env import Observation
from xflowrl.tracing import traced_once


class Action(NamedTuple):
    xfer: int
    location: int
    xfer_log_prob: float
    location_log_prob: float  # 0 for NO-OP
    xfer_value: float
    location_value: float     # 0 for NO-OP: the episode ends there, nothing follows


class Candidates(NamedTuple):
    """The location rows a batch of states can choose from, padded to the
    batch's widest: row j of state b is xfer `xfers[b, j]` (-1: padding)."""
    xfers: np.ndarray                  # [B, R] int32
    masks: np.ndarray                  # [B, R, L] bool, the rows' location masks
    nodes: Optional[np.ndarray]        # [B, R, L, K] int32 batch node indices, -1 pads
    cost_delta: Optional[np.ndarray]   # [B, R, L] float32


def _masked_log_softmax(logits: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Row-wise log-probabilities over the unmasked entries (-inf elsewhere)."""
    masked = tf.where(mask, logits, tf.fill(tf.shape(logits), -np.inf))
    return masked - tf.reduce_logsumexp(masked, axis=-1, keepdims=True)


class Actor:
    """Selects actions with a `PolicyValueNetwork`."""

    def __init__(self, network: PolicyValueNetwork, seed: Optional[int] = None):
        self.network = network
        self.rng = np.random.default_rng(seed)
        self._policy_step = traced_once(self._policy_step_impl)
        self._value_step = traced_once(self._value_step_impl)
        self._called: Set[str] = set()  # the traced functions called before

    # -- traced ------------------------------------------------------------

    def _policy_step_impl(self, state, xfer_summary, xfer_mask, candidates: Candidates,
                          xfer_noise, location_noise):
        """Samples (xfer, location) for a batch; see the module docstring."""
        net = self.network
        embedding = net.encode(state)
        xfer_out = net.xfer_head(embedding.globals, xfer_summary, xfer_mask)
        xfer_log_p = _masked_log_softmax(xfer_out.logits, xfer_mask)
        xfer = tf.argmax(xfer_log_p + xfer_noise, axis=-1, output_type=tf.int32)
        hit = tf.equal(candidates.xfers, xfer[:, None])                   # [B, R]
        has_location = tf.reduce_any(hit, axis=1)
        row = tf.argmax(tf.cast(hit, tf.int32), axis=1, output_type=tf.int32)
        mask = tf.gather(candidates.masks, row, batch_dims=1)             # [B, L]
        has_location &= tf.reduce_any(mask, axis=1)
        num_locations = tf.shape(mask)[1]
        # Rows without a location (NO-OP) get a dummy mask; their location is
        # 0 with log-probability 0 and value 0.
        mask = tf.where(has_location[:, None], mask, tf.range(num_locations)[None] == 0)
        nodes = cost_delta = None
        if candidates.nodes is not None:
            nodes = tf.gather(candidates.nodes, row, batch_dims=1)         # [B, L, K]
            cost_delta = tf.gather(candidates.cost_delta, row, batch_dims=1)
        location_out = net.location_head(embedding, xfer, nodes, cost_delta,
                                         None if nodes is not None else num_locations, mask)
        location_log_p = _masked_log_softmax(location_out.logits, mask)
        location = tf.argmax(location_log_p + location_noise, axis=-1, output_type=tf.int32)
        zero = tf.zeros_like(location_out.value)
        return (xfer, tf.where(has_location, location, 0),
                tf.gather(xfer_log_p, xfer, batch_dims=1),
                tf.where(has_location, tf.gather(location_log_p, location, batch_dims=1), zero),
                xfer_out.value, tf.where(has_location, location_out.value, zero))

    def _value_step_impl(self, state, xfer_summary, xfer_mask):
        embedding = self.network.encode(state)
        return self.network.xfer_head(embedding.globals, xfer_summary, xfer_mask).value

    # -- inputs ------------------------------------------------------------

    def _noise(self, shape, greedy: bool, rng: Optional[np.random.Generator]) -> np.ndarray:
        if greedy:
            return np.zeros(shape, np.float32)
        return (self.rng if rng is None else rng).gumbel(size=shape).astype(np.float32)

    def _run(self, state, xfer_summary, xfer_masks: np.ndarray, candidates: Candidates,
             greedy: bool, rng: Optional[np.random.Generator] = None) -> List[Action]:
        batch, num_locations = xfer_masks.shape[0], candidates.masks.shape[2]
        args = (state, xfer_summary, xfer_masks, candidates,
                self._noise(xfer_masks.shape, greedy, rng),
                self._noise((batch, num_locations), greedy, rng))
        out = self._traced_or_eager(self._policy_step, self._policy_step_impl)(*args)
        xfer, location, xfer_lp, location_lp, xfer_value, location_value = (
            o.numpy() for o in out)
        return [Action(int(xfer[i]), int(location[i]), float(xfer_lp[i]),
                       float(location_lp[i]), float(xfer_value[i]), float(location_value[i]))
                for i in range(batch)]

    def _graph_inputs(self, observations: Sequence[Observation]
                      ) -> Tuple[Any, np.ndarray, np.ndarray, Candidates]:
        """The batched state, summaries, masks and candidate rows of graph
        observations (node indices offset into the batch's nodes)."""
        states = [o.state for o in observations]
        locations = [o.location_features() for o in observations]
        offsets = features.node_offsets(states)
        rows = max(max(len(loc.active) for loc in locations), 1)
        batch = len(observations)
        num_l, width = observations[0].location_mask.shape[1], locations[0].nodes.shape[2]
        xfers = np.full((batch, rows), -1, np.int32)
        masks = np.zeros((batch, rows, num_l), bool)
        nodes = np.full((batch, rows, num_l, width), -1, np.int32)
        cost_delta = np.zeros((batch, rows, num_l), np.float32)
        for b, (o, loc, offset) in enumerate(zip(observations, locations, offsets)):
            a = len(loc.active)
            xfers[b, :a] = loc.active
            masks[b, :a] = o.location_mask[loc.active]
            nodes[b, :a] = np.where(loc.nodes >= 0, loc.nodes + offset, -1)
            cost_delta[b, :a] = loc.cost_delta
        state = features.to_tensors(features.batch(states) if batch > 1 else states[0])
        summary = np.stack([loc.xfer_summary for loc in locations])
        xfer_masks = np.stack([o.xfer_mask for o in observations])
        return state, summary, xfer_masks, Candidates(xfers, masks, nodes, cost_delta)

    # -- public ------------------------------------------------------------

    def act(self, observation: Observation, greedy: bool = False,
            rng: Optional[np.random.Generator] = None) -> Action:
        """The action for one observation; sampling draws from `rng`, if
        given, instead of the actor's own generator (which it leaves as it is)."""
        if self.network.state_kind == "graph":
            return self.act_graphs([observation], greedy, rng)[0]
        return self.act_batch(np.asarray(observation.state, np.float32)[None],
                              observation.xfer_mask[None], observation.location_mask[None],
                              greedy, rng,
                              None if observation.xfer_summary is None
                              else observation.xfer_summary[None])[0]

    def act_graphs(self, observations: Sequence[Observation], greedy: bool = False,
                   rng: Optional[np.random.Generator] = None) -> List[Action]:
        """Actions for a batch of graph observations (one traced call);
        `rng` as in `act`."""
        if self.network.state_kind != "graph":
            raise ValueError("act_graphs serves graph states; use act_batch for vectors")
        return self._run(*self._graph_inputs(observations), greedy, rng)

    def act_batch(self, states: np.ndarray, xfer_masks: np.ndarray,
                  location_masks: np.ndarray, greedy: bool = False,
                  rng: Optional[np.random.Generator] = None,
                  xfer_summaries: Optional[np.ndarray] = None) -> List[Action]:
        """Actions for a batch of vector states.

        Args:
          states: [B, D] float32.
          xfer_masks: [B, N+1] bool.
          location_masks: [B, N+1, L] bool.
          greedy: the argmax of each head instead of a sample.
          rng: as in `act`.
          xfer_summaries: [B, N+1, S] float32 per-xfer summaries, where the
            environment provides them (`Observation.xfer_summary`); None:
            the xfer head reads the state alone.
        """
        if self.network.state_kind != "vector":
            raise ValueError("act_batch serves vector states; use act() for graphs")
        xfer_masks = np.asarray(xfer_masks, bool)
        batch, width = xfer_masks.shape
        rows = np.broadcast_to(np.arange(width, dtype=np.int32), (batch, width))
        candidates = Candidates(np.ascontiguousarray(rows),
                                np.asarray(location_masks, bool), None, None)
        summaries = (None if xfer_summaries is None
                     else np.asarray(xfer_summaries, np.float32))
        return self._run(np.asarray(states, np.float32), summaries, xfer_masks, candidates,
                         greedy, rng)

    def value(self, observation: Observation) -> float:
        """V_x(s): the bootstrap value of a state where an episode was cut."""
        summary: Optional[np.ndarray]
        if self.network.state_kind == "graph":
            state = features.to_tensors(observation.state)
            summary = observation.location_features().xfer_summary[None]
        else:
            state = np.asarray(observation.state, np.float32)[None]
            summary = (None if observation.xfer_summary is None
                       else np.asarray(observation.xfer_summary, np.float32)[None])
        step = self._traced_or_eager(self._value_step, self._value_step_impl)
        return float(step(state, summary, observation.xfer_mask[None]).numpy()[0])

    def _traced_or_eager(self, traced, eager):
        """`eager` for this actor's first call, `traced` from then on. The
        first call creates whatever variables the network still lacks (Sonnet
        makes them on first use); a traced call that creates variables is
        traced twice, and a trace costs far more than one eager step."""
        if traced not in self._called:
            self._called.add(traced)
            return eager
        return traced

    def build(self, observation: Observation) -> None:
        """Creates the network's variables: both heads, whatever the policy
        picks (a greedy call on `observation`, the generator untouched)."""
        self.act(observation, greedy=True)
        self.value(observation)

    @property
    def tracing_counts(self) -> dict:
        """How often each traced function was traced (one each is the goal)."""
        return {"policy_step": self._policy_step.tracing_count,
                "value_step": self._value_step.tracing_count}
