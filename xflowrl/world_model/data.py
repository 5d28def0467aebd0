"""The world model's data: rollouts of the real environment.

- `XferVocabulary`: the xfers the world model knows. The default rule set has
  1,678 xfers but a graph's rollouts make only a few dozen of them valid;
  the world model's action embeddings and mask heads cover those plus free
  slots (M in all) plus NO-OP, so their size follows the graph, not the rule
  set. The first collection round fills it; later rounds (and the
  controller) act only on its xfers, and an xfer valid in a state they visit
  fills a free slot (`grow`).
- `Rollout`: one real episode: the graph of every state (s_0..s_T), the
  per-state valid xfers and location counts, the actions, rewards and done
  flags, and whether the step limit cut it; and each valid xfer's best and
  mean cost change (`gains`, from the real observation's xfer summary),
  which a world model with `WorldModelConfig.xfer_summaries` learns to
  predict.
- `collect_rollouts`: episodes of the thesis' collection policy (NO-OP with
  probability 0.2, else uniform over valid actions), counting real steps.
- `Sequences` / `make_batch`: rollouts as latent sequences (after the frozen
  latent encoder) and padded, weighted minibatches for the MDN-RNN.

Alignment in a batch of T steps: the inputs at t are z_t and a_t; the
targets are z_{t+1}, r_t, the done flag d_t (a real end; a step-limit cut is
not a terminal the model should predict), and, for the mask decoder, the
valid xfers and location counts of s_t itself (and, with summaries, the
valid xfers' best and mean cost changes in s_t).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

import numpy as np

from xflowrl.agents.random_agent import RandomAgent
from xflowrl.env import Environment, Observation, location_counts


class XferVocabulary:
    """Maps the world model's compact xfer ids (0..M-1, M = NO-OP) to real ones.

    M is the vocabulary's `size`: the width of the world model's action
    embedding and mask heads and of the controller's xfer head. It may
    exceed the number of `known` xfers: the free slots let the vocabulary
    `grow` when later rounds visit states where other xfers apply, without
    changing any network's shape. A free slot maps to no real xfer (`to_real`
    gives -1, which the real environment rejects) and is never valid in a
    compact mask.
    """

    def __init__(self, xfer_ids: Sequence[int], num_real_xfers: int,
                 capacity: Optional[int] = None, keep_order: bool = False):
        """
        Args:
          xfer_ids: the known real xfer ids (duplicates are dropped).
          num_real_xfers: N of the real environment.
          capacity: M (default: the number of known xfers).
          keep_order: keep `xfer_ids`' order as the compact order (as
            `grow` and `from_json` do); else the ids are sorted.
        """
        unique = list(dict.fromkeys(int(x) for x in xfer_ids))
        self.xfer_ids = np.array(unique if keep_order else sorted(unique), np.int64)
        if len(self.xfer_ids) and (self.xfer_ids.min() < 0
                                   or self.xfer_ids.max() >= num_real_xfers):
            raise ValueError(f"xfer ids must lie in [0, {num_real_xfers})")
        self.capacity = len(self.xfer_ids) if capacity is None else int(capacity)
        if self.capacity < len(self.xfer_ids):
            raise ValueError(f"capacity {self.capacity} < {len(self.xfer_ids)} known xfers")
        self.num_real_xfers = num_real_xfers
        self._compact = np.full(num_real_xfers + 1, -1, np.int64)
        self._compact[self.xfer_ids] = np.arange(len(self.xfer_ids))
        self._compact[num_real_xfers] = self.capacity

    @property
    def size(self) -> int:
        """M, the compact ids of xfers (NO-OP excluded), free slots included."""
        return self.capacity

    @property
    def known(self) -> int:
        """The xfers the vocabulary knows (the filled slots)."""
        return len(self.xfer_ids)

    def to_real(self, compact: int) -> int:
        """The real id of a compact one; NO-OP's is N, a free slot's -1."""
        if not 0 <= compact <= self.size:
            raise ValueError(f"compact xfer {compact} out of range [0, {self.size}]")
        if compact == self.size:
            return self.num_real_xfers
        return int(self.xfer_ids[compact]) if compact < self.known else -1

    def to_compact(self, real: int) -> int:
        """The compact id of a real xfer id (N is NO-OP), -1 if the
        vocabulary lacks it or it is no real id."""
        if not 0 <= real <= self.num_real_xfers:
            return -1
        return int(self._compact[real])

    def allowed(self) -> np.ndarray:
        """[N+1] bool over real xfers: the known ones and NO-OP."""
        return self._compact >= 0

    def compact_masks(self, xfer_mask: np.ndarray, location_mask: np.ndarray):
        """Real masks [N+1], [N+1, L] -> compact masks [M+1], [M+1, L]
        (free slots are never valid)."""
        compact_xfer = np.zeros(self.size + 1, bool)
        compact_location = np.zeros((self.size + 1, location_mask.shape[1]), bool)
        compact_xfer[:self.known] = xfer_mask[self.xfer_ids]
        compact_location[:self.known] = location_mask[self.xfer_ids]
        compact_xfer[-1] = xfer_mask[self.num_real_xfers]
        compact_location[-1] = location_mask[self.num_real_xfers]
        return compact_xfer, compact_location

    def compact_summary(self, summary: np.ndarray) -> np.ndarray:
        """A real observation's xfer summary [N+1, S] -> [M+1, S] (free
        slots zero, NO-OP's row last)."""
        out = np.zeros((self.size + 1, summary.shape[1]), np.float32)
        out[:self.known] = summary[self.xfer_ids]
        out[-1] = summary[self.num_real_xfers]
        return out

    def grow(self, xfer_ids: Sequence[int]) -> Tuple["XferVocabulary", List[int]]:
        """The vocabulary with the unknown ones of `xfer_ids` in its free
        slots (in the order given; known ids keep their compact ids), and
        the ids that did not fit."""
        new = [x for x in dict.fromkeys(int(x) for x in xfer_ids) if self.to_compact(x) < 0]
        room = self.capacity - self.known
        grown = XferVocabulary(list(self.xfer_ids) + new[:room], self.num_real_xfers,
                               self.capacity, keep_order=True)
        return grown, new[room:]

    def to_json(self) -> str:
        return json.dumps({"xfer_ids": self.xfer_ids.tolist(),
                           "num_real_xfers": self.num_real_xfers, "capacity": self.capacity})

    @classmethod
    def from_json(cls, text: str) -> "XferVocabulary":
        d = json.loads(text)
        return cls(d["xfer_ids"], d["num_real_xfers"], d.get("capacity"), keep_order=True)

    @classmethod
    def from_rollouts(cls, rollouts: Sequence["Rollout"], num_real_xfers: int,
                      headroom: int = 0) -> "XferVocabulary":
        """Every xfer valid in some state of the rollouts, with `headroom`
        free slots to grow into."""
        ids = visited_xfers(rollouts)
        return cls(ids, num_real_xfers, len(ids) + headroom)


def visited_xfers(rollouts: Sequence["Rollout"]) -> List[int]:
    """The real ids of the xfers valid in some state of the rollouts, sorted."""
    ids: Set[int] = set()
    for r in rollouts:
        for valid in r.valid:
            ids.update(valid.keys())
    return sorted(ids)


class Rollout(NamedTuple):
    states: List                   # T+1 numpy GraphsTuples, s_0..s_T
    valid: List[Dict[int, int]]    # T+1 dicts: real xfer id -> location count
    actions: np.ndarray            # [T, 2] int64 real (xfer, location; a rank if ranked)
    rewards: np.ndarray            # [T] float32
    dones: np.ndarray              # [T] bool; the last is True
    truncated: bool                # the step limit ended it
    final_cost: float
    # T+1 dicts: real xfer id -> (min, mean) cost change of its candidates,
    # in percent of the initial cost (the real observation's xfer summary);
    # None where the observations carried no location features.
    gains: Optional[List[Dict[int, Tuple[float, float]]]] = None


def valid_xfers(obs: Observation) -> Dict[int, int]:
    counts = location_counts(obs.location_mask[:-1])
    return {int(x): int(counts[x]) for x in np.flatnonzero(counts)}


def location_order(obs: Observation, xfer: int) -> np.ndarray:
    """The positions of `xfer`'s valid locations in `obs`, cheapest
    candidate first (by cost change; ties keep the engine's order): rank r
    names location `location_order(obs, xfer)[r]`
    (`WorldModelConfig.ranked_locations`)."""
    count = int(obs.location_mask[xfer].sum())
    deltas = obs.location_features().cost_delta_of(xfer)[:count]
    return np.argsort(deltas, kind="stable")


def to_rank(obs: Observation, xfer: int, location: int) -> int:
    """The rank of a real (xfer, location) of `obs`; the location as it
    is for NO-OP and for what is no valid location."""
    if not 0 <= xfer < len(obs.xfer_mask) - 1 or not obs.xfer_mask[xfer]:
        return location
    order = location_order(obs, xfer)
    hit = np.flatnonzero(order == location)
    return int(hit[0]) if len(hit) else location


def from_rank(obs: Observation, xfer: int, rank: int) -> int:
    """The real location of rank `rank` of `xfer` in `obs`; the rank as it
    is for NO-OP and out of range (the real environment then rejects it or
    takes NO-OP, as it would the position)."""
    if not 0 <= xfer < len(obs.xfer_mask) - 1 or not obs.xfer_mask[xfer]:
        return rank
    order = location_order(obs, xfer)
    return int(order[rank]) if 0 <= rank < len(order) else rank


def xfer_gains(obs: Observation, valid: Optional[Dict[int, int]] = None
               ) -> Optional[Dict[int, Tuple[float, float]]]:
    """Real xfer id -> (min, mean) cost change of its valid candidates
    (columns 1 and 2 of the real observation's `xfer_summary`); None for an
    observation without location features. `valid`: `valid_xfers(obs)`,
    where the caller has it."""
    if obs.locations is None:
        return None
    summary = obs.locations.xfer_summary
    return {x: (float(summary[x, 1]), float(summary[x, 2]))
            for x in (valid_xfers(obs) if valid is None else valid)}


class RolloutRecorder:
    """Records one real episode as a `Rollout`, step by step."""

    def __init__(self, first: Observation):
        """`first`: the real observation after reset."""
        self.states, self.valid = [first.state], [valid_xfers(first)]
        self.gains = [xfer_gains(first, self.valid[0])]
        self.actions: List = []
        self.rewards: List[float] = []
        self.dones: List[bool] = []

    def add(self, action, reward: float, done: bool, observation: Observation) -> None:
        """One step: the real (xfer, location), its reward and done flag, and
        the real observation it led to."""
        self.states.append(observation.state)
        self.valid.append(valid_xfers(observation))
        self.gains.append(xfer_gains(observation, self.valid[-1]))
        self.actions.append(tuple(action))
        self.rewards.append(reward)
        self.dones.append(done)

    def finish(self, info) -> Rollout:
        """The rollout; `info`: the last step's info (truncated, cost)."""
        gains = [g for g in self.gains if g is not None]
        return Rollout(self.states, self.valid,
                       np.array(self.actions, np.int64).reshape(-1, 2),
                       np.array(self.rewards, np.float32), np.array(self.dones, bool),
                       bool(info["truncated"]), float(info.get("cost", np.nan)),
                       gains if len(gains) == len(self.gains) else None)


def collect_rollouts(env: Environment, episodes: int, agent: RandomAgent,
                     allowed: Optional[np.ndarray] = None,
                     ranked: bool = False) -> List[Rollout]:
    """Random-agent episodes of the real environment.

    Args:
      env: the real environment (graph states).
      episodes: how many.
      agent: the collection policy (`RandomAgent.thesis_collector`).
      allowed: [N+1] bool; when given, the agent acts only on these xfers
        (the vocabulary's), as the controller will.
      ranked: record each location as its rank (`to_rank`).
    """
    rollouts = []
    for _ in range(episodes):
        obs = env.reset()
        recorder = RolloutRecorder(obs)
        done = False
        info: Dict[str, Any] = {}
        while not done:
            view = obs if allowed is None else obs._replace(
                xfer_mask=obs.xfer_mask & allowed,
                location_mask=obs.location_mask & allowed[:, None])
            action = agent.act(view)
            named = (action[0], to_rank(obs, *action)) if ranked else action
            obs, reward, done, info = env.step(action)
            recorder.add(named, reward, done, obs)
        rollouts.append(recorder.finish(info))
    return rollouts


def real_steps(rollouts: Sequence[Rollout]) -> int:
    """Real environment steps the rollouts took."""
    return int(sum(len(r.actions) for r in rollouts))


class Sequences(NamedTuple):
    """One rollout in the world model's terms (compact xfer ids, latents)."""
    latents: np.ndarray      # [T+1, Z]
    xfers: np.ndarray        # [T] compact
    locations: np.ndarray    # [T]
    rewards: np.ndarray      # [T]
    terminals: np.ndarray    # [T] float: a real end (not a step-limit cut)
    xfer_valid: np.ndarray   # [T+1, M] float
    counts: np.ndarray       # [T+1, M] float: location counts
    gains: np.ndarray        # [T+1, M, 2] float: valid xfers' (min, mean) cost change


def to_sequences(rollout: Rollout, latents: np.ndarray, vocab: XferVocabulary) -> Sequences:
    """A rollout with its states' latents [T+1, Z] in compact ids.

    Raises:
      ValueError: if the rollout took an xfer the vocabulary lacks.
    """
    xfers = np.array([vocab.to_compact(int(x)) for x in rollout.actions[:, 0]], np.int64)
    if (xfers < 0).any():
        raise ValueError("rollout takes an xfer outside the vocabulary")
    m = vocab.size
    valid = np.zeros((len(rollout.states), m), np.float32)
    counts = np.zeros((len(rollout.states), m), np.float32)
    gains = np.zeros((len(rollout.states), m, 2), np.float32)
    for t, v in enumerate(rollout.valid):
        for real, count in v.items():
            c = vocab.to_compact(real)
            if c >= 0:
                valid[t, c], counts[t, c] = 1.0, count
                if rollout.gains is not None:
                    gains[t, c] = rollout.gains[t][real]
    terminals = rollout.dones.astype(np.float32)
    if rollout.truncated:
        terminals[-1] = 0.0
    return Sequences(latents.astype(np.float32), xfers, rollout.actions[:, 1].copy(),
                     rollout.rewards.astype(np.float32), terminals, valid, counts, gains)


class Batch(NamedTuple):
    latents: np.ndarray       # [B, T, Z]  z_t
    next_latents: np.ndarray  # [B, T, Z]  z_{t+1}
    xfers: np.ndarray         # [B, T] int32
    locations: np.ndarray     # [B, T] int32
    rewards: np.ndarray       # [B, T]
    terminals: np.ndarray     # [B, T]
    xfer_valid: np.ndarray    # [B, T, M]  of s_t
    counts: np.ndarray        # [B, T, M]  of s_t
    weights: np.ndarray       # [B, T] 1 for real steps, 0 for padding
    gains: np.ndarray         # [B, T, M, 2]  of s_t


def make_batch(sequences: Sequence[Sequences]) -> Batch:
    """Pads sequences to the longest one; padding has weight 0."""
    b = len(sequences)
    t = max(len(s.xfers) for s in sequences)
    z, m = sequences[0].latents.shape[1], sequences[0].xfer_valid.shape[1]
    out = Batch(np.zeros((b, t, z), np.float32), np.zeros((b, t, z), np.float32),
                np.zeros((b, t), np.int32), np.zeros((b, t), np.int32),
                np.zeros((b, t), np.float32), np.zeros((b, t), np.float32),
                np.zeros((b, t, m), np.float32), np.zeros((b, t, m), np.float32),
                np.zeros((b, t), np.float32), np.zeros((b, t, m, 2), np.float32))
    for i, s in enumerate(sequences):
        n = len(s.xfers)
        out.latents[i, :n] = s.latents[:n]
        out.next_latents[i, :n] = s.latents[1:n + 1]
        out.xfers[i, :n] = s.xfers
        out.locations[i, :n] = s.locations
        out.rewards[i, :n] = s.rewards
        out.terminals[i, :n] = s.terminals
        out.xfer_valid[i, :n] = s.xfer_valid[:n]
        out.counts[i, :n] = s.counts[:n]
        out.gains[i, :n] = s.gains[:n]
        out.weights[i, :n] = 1.0
    return out
