"""Training the latent model from real transitions.

**Data** (`Transitions`): what real steps showed. `harvest(planner, env,
data)` reads the tree of an engine planner's run (`xflowrl.planning.
search.Planner`, with multi-location actions on): every expanded node is
a state (its observation, from the environment's own featurisation) and
every child reached by one of the model's actions (`xflowrl.planning.
model.model_actions`: with `single_actions` also an xfer at its cheapest
location, where its cheapest candidate's child was built) an observed
transition with its exact reward. Per state the targets are

- value: the most the cost fell below it in the real data, in points of
  the initial cost (`node.cost - node.best_cost`): the best return of
  any real trajectory from it, every prefix allowed since stopping is
  (a max, the n-step return of a deterministic problem where n is the
  rest of the data; no bootstrap);
- mask: the xfers that apply (the real enumeration);
- rewards of every action whose cost is known exactly without a model:
  an xfer with one location and an xfer at its cheapest location (their
  candidates' costs came with the expansion), and every action whose
  child was built;
- policy: a softmax, at `policy_temperature` points, of the actions'
  completed values (the reward plus the child's value where the child
  is known, the expansion's estimate elsewhere), Gumbel MuZero's policy
  target from completed Q-values.

Real steps spent collecting are the planner's (`PlanResult.real_steps`),
counted by whoever collects (per graph: the target graph's apart from the
others').

**Data from episodes** (`EpisodeHarvest`): real episodes of one graph (the
model-based agent's rollouts, `xflowrl.world_model.data.Rollout`: the
observation's state, valid xfers with their location counts and their
candidates' (min, mean) cost changes per state; the actions and rewards)
as the same `Transitions`. A state seen twice (the same features) is one
state. Per state:

- value: as above, the most the cost fell below it along any recorded
  continuation (`cost - ` the cheapest state reachable from it in the
  data, episodes joined where they pass through one state);
- mask: the valid xfers;
- rewards known exactly: every xfer with one location (its candidate's
  cost change from the observation), and every step taken;
- transitions: steps whose xfer had one location (the model's action
  there); a step at one location of an xfer with several is no model
  action, but its next state still counts for the values;
- estimates for the policy target: an xfer's best candidate's gain, or,
  where its candidates' gains added up are larger (the mean times the
  count), that sum (what a multi-location action gains at least under
  the expansion's additive estimate, from the two figures the
  observation keeps).

Rewards are read as points of the initial cost (the "relative" reward),
or converted from ms ("delta"); other rewards cannot be turned into
costs and are refused.

**Learning** (`train`): MuZero's loss on sampled K-step unrolls through
the data (`unroll` steps; each step follows the best known child or a
random one): value, reward, policy and mask at every unrolled step where
the target is known; the step-0 rewards of every exactly known action;
and EfficientZero's consistency of the unrolled latent with the
representation of the real next state (cosine, target without gradient).
The dynamics' gradient is halved at every step, as in MuZero. Values and
rewards are regressed in units of `value_scale` points.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Any, Dict, List, NamedTuple, Optional, Protocol, Sequence, Set, Tuple

import numpy as np
import sonnet as snt
import tensorflow as tf

from xflowrl.embedding import features
from xflowrl.env import GraphEnv
from xflowrl.nn.optimizers import apply_adam, build_adam
from xflowrl.planning.model import LatentModel, model_actions
from xflowrl.planning.search import Planner
from xflowrl.planning.tree import Node
from xflowrl.tracing import traced_once


class Edge(NamedTuple):
    """An observed transition of the model's action space."""
    xfer: int
    reward: float   # points of the initial cost, positive: cheaper
    child: int      # the child's state index, -1 where it was not expanded


@dataclasses.dataclass
class Transitions:
    """States and transitions seen in real steps (module docstring)."""
    states: List[features.GraphsTuple] = dataclasses.field(default_factory=list)
    values: List[float] = dataclasses.field(default_factory=list)
    active: List[np.ndarray] = dataclasses.field(default_factory=list)
    known_xfers: List[np.ndarray] = dataclasses.field(default_factory=list)
    known_rewards: List[np.ndarray] = dataclasses.field(default_factory=list)
    estimates: List[np.ndarray] = dataclasses.field(default_factory=list)
    edges: List[List[Edge]] = dataclasses.field(default_factory=list)
    graphs: Dict[str, int] = dataclasses.field(default_factory=dict)  # name -> states added

    def __len__(self) -> int:
        return len(self.states)

    def transitions(self) -> int:
        return sum(len(e) for e in self.edges)


def harvest(planner: Planner, env: GraphEnv, data: Transitions, name: str = "",
            single_actions: bool = False) -> int:
    """Adds the states and transitions of `planner`'s tree to `data` (the
    planner must have run with `everywhere=True`); returns how many states
    it added. With `single_actions` the model's actions are those of
    `model_actions(..., single_actions=True)`: also each xfer with several
    locations at its cheapest one, its reward exact (the expansion costs
    every candidate), its transition observed where that candidate's
    child was built."""
    points = 100.0 / env.initial_cost
    num_xfers = len(env.xfers)
    index: Dict[int, int] = {}
    order: List[Node] = []
    stack = [planner.root]
    seen = {id(planner.root)}
    while stack:
        node = stack.pop()
        if node.expansion is not None:
            index[id(node)] = len(data.states) + len(order)
            order.append(node)
        for child in node.children.values():
            if id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    for node in order:
        expansion = node.expansion
        assert expansion is not None
        xfers, rows = model_actions(expansion, num_xfers, single_actions)
        counts = (expansion.locations.count_array[xfers % num_xfers] if len(xfers)
                  else np.zeros(0))
        estimates = points * (node.cost - expansion.costs[rows])
        # Exact: an xfer with one location, and a cheapest-location action.
        known = {int(x): float(r) for x, r, c in zip(xfers, estimates, counts)
                 if c == 1 or x >= num_xfers}
        edges: List[Edge] = []
        by_row = {int(r): int(x) for x, r in zip(xfers, rows)}
        for row, child in node.children.items():
            xfer = by_row.get(int(row))
            if xfer is None:
                continue   # a single location of an xfer with several: not a model action
            reward = points * (node.cost - child.cost)
            known[xfer] = reward
            edges.append(Edge(xfer, reward, index.get(id(child), -1)))
        data.states.append(env.observation_of(expansion.locations, node.cost).state)
        data.values.append(max(0.0, points * (node.cost - node.best_cost)))
        data.active.append(xfers)
        data.known_xfers.append(np.array(sorted(known), np.int64))
        data.known_rewards.append(np.array([known[x] for x in sorted(known)], np.float32))
        data.estimates.append(estimates.astype(np.float32))
        data.edges.append(edges)
    data.graphs[name] = data.graphs.get(name, 0) + len(order)
    return len(order)


class Episode(Protocol):
    """What `EpisodeHarvest` reads of a real episode (the fields of
    `xflowrl.world_model.data.Rollout` of the same names; read-only, as a
    NamedTuple's are)."""

    @property
    def states(self) -> List[Any]:                # T+1 numpy GraphsTuples
        ...

    @property
    def valid(self) -> List[Dict[int, int]]:      # T+1: xfer -> location count
        ...

    @property
    def actions(self) -> np.ndarray:              # [T, 2] (xfer, location); N is NO-OP
        ...

    @property
    def rewards(self) -> np.ndarray:              # [T]
        ...

    @property
    def gains(self) -> Optional[List[Dict[int, Tuple[float, float]]]]:  # T+1: (min, mean)
        ...


# Rewards that convert to points of the initial cost: reward -> points,
# given the initial cost in ms.
_TO_POINTS = {"relative": lambda initial: 1.0, "delta": lambda initial: 100.0 / initial}


def state_key(state: features.GraphsTuple) -> bytes:
    """A digest of a state's features: states with equal keys are one state."""
    digest = hashlib.blake2b(digest_size=16)
    for name in ("nodes", "edges", "senders", "receivers", "globals"):
        array = np.ascontiguousarray(getattr(state, name))
        digest.update(str(array.shape).encode())
        digest.update(array.tobytes())
    return digest.digest()


class EpisodeHarvest:
    """Real episodes of one graph as training data (module docstring).

    Args:
      num_xfers: N, the rule set's xfers (N itself is NO-OP).
      reward: the environment's reward function (`EnvConfig.reward`).
      initial_cost: the graph's initial cost, ms.

    Attributes:
      real_steps: the steps of the episodes added.
      episodes: how many were added.

    Raises:
      ValueError: a reward that does not convert to points.
    """

    def __init__(self, num_xfers: int, reward: str, initial_cost: float):
        if reward not in _TO_POINTS:
            raise ValueError(f"the {reward!r} reward does not give each step's cost change; "
                             f"harvesting episodes needs one of {sorted(_TO_POINTS)}")
        self.num_xfers = num_xfers
        self.scale = _TO_POINTS[reward](initial_cost)
        self.real_steps = 0
        self.episodes = 0
        self._index: Dict[bytes, int] = {}
        self._states: List[features.GraphsTuple] = []
        self._costs: List[float] = []          # points above the initial cost
        self._valid: List[Dict[int, int]] = []
        self._gains: List[Dict[int, Tuple[float, float]]] = []
        self._edges: List[Dict[int, Edge]] = []   # xfer -> the transition seen
        self._known: List[Dict[int, float]] = []
        self._next: List[Set[int]] = []        # every state a step led to

    def __len__(self) -> int:
        return len(self._states)

    def has(self, key: bytes) -> bool:
        """Whether a state of this `state_key` is in the data."""
        return key in self._index

    def _state(self, state: features.GraphsTuple, cost: float, valid: Dict[int, int],
               gains: Optional[Dict[int, Tuple[float, float]]]) -> int:
        key = state_key(state)
        index = self._index.get(key)
        if index is None:
            index = self._index[key] = len(self._states)
            self._states.append(state)
            self._costs.append(cost)
            self._valid.append(dict(valid))
            self._gains.append(dict(gains or {}))
            self._edges.append({})
            self._next.append(set())
            self._known.append({x: -float(g[0]) for x, g in (gains or {}).items()
                                if valid.get(x) == 1})
        return index

    def add(self, episodes: Sequence[Episode]) -> int:
        """Adds real episodes (each from the graph's initial state);
        returns how many new states they brought."""
        before = len(self)
        for episode in episodes:
            cost = 0.0
            gains = episode.gains
            at = self._state(episode.states[0], cost, episode.valid[0],
                             gains[0] if gains else None)
            for t, (xfer, _) in enumerate(np.asarray(episode.actions).reshape(-1, 2)):
                xfer = int(xfer)
                count = episode.valid[t].get(xfer, 0)
                # NO-OP and an action the environment refused leave the graph as it is.
                reward = self.scale * float(episode.rewards[t]) if count else 0.0
                cost -= reward
                child = self._state(episode.states[t + 1], cost, episode.valid[t + 1],
                                    gains[t + 1] if gains else None)
                if count:
                    self._next[at].add(child)
                if count == 1:
                    self._edges[at][xfer] = Edge(xfer, reward, child)
                    self._known[at][xfer] = reward
                at = child
            self.real_steps += len(episode.actions)
            self.episodes += 1
        return len(self) - before

    def values(self) -> np.ndarray:
        """[S] each state's value: its cost above the cheapest state
        reachable from it in the data (points, >= 0)."""
        costs = np.array(self._costs, np.float64)
        sources = np.array([s for s, n in enumerate(self._next) for _ in n], np.int64)
        targets = np.array([c for n in self._next for c in n], np.int64)
        lowest = costs.copy()
        while True:
            updated = lowest.copy()
            np.minimum.at(updated, sources, lowest[targets])
            if np.array_equal(updated, lowest):
                break
            lowest = updated
        return np.maximum(costs - lowest, 0.0)

    def transitions(self) -> Transitions:
        """The data as `Transitions` (the values computed now)."""
        data = Transitions()
        values = self.values()
        for s, state in enumerate(self._states):
            xfers = np.array(sorted(x for x in self._valid[s] if x < self.num_xfers), np.int64)
            known = self._known[s]
            estimates = np.zeros(len(xfers), np.float32)
            for i, x in enumerate(xfers):
                best, mean = self._gains[s].get(int(x), (0.0, 0.0))
                estimates[i] = known.get(int(x), max(-best, -mean * self._valid[s][int(x)], 0.0))
            data.states.append(state)
            data.values.append(float(values[s]))
            data.active.append(xfers)
            data.known_xfers.append(np.array(sorted(known), np.int64))
            data.known_rewards.append(np.array([known[x] for x in sorted(known)], np.float32))
            data.estimates.append(estimates)
            data.edges.append(list(self._edges[s].values()))
        data.graphs["episodes"] = len(self)
        return data


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Settings of `train`.

    Attributes:
      steps: gradient steps.
      batch_size: unrolls per step.
      unroll: K, model steps unrolled per example.
      learning_rate: Adam's.
      value_scale: points per regression unit of values and rewards.
      policy_temperature: points, of the policy target's softmax.
      consistency: weight of the latent consistency loss (0: off).
      mask_weight: weight of the mask loss (a mean over the xfers).
      greedy_path: probability that an unroll follows the best known child.
      seed: of the sampling.
    """
    steps: int = 1500
    batch_size: int = 32
    unroll: int = 3
    learning_rate: float = 1e-3
    value_scale: float = 10.0
    policy_temperature: float = 2.0
    consistency: float = 1.0
    mask_weight: float = 10.0
    greedy_path: float = 0.5
    seed: int = 0


class TrainResult(NamedTuple):
    steps: int
    seconds: float
    losses: Dict[str, float]   # the last 100 steps' means, per loss


def _policy_target(data: Transitions, state: int, temperature: float) -> Tuple[np.ndarray, np.ndarray]:
    xfers = data.active[state]
    if not len(xfers):   # no candidates: no policy target (a zero row)
        return xfers, np.zeros(0)
    q = data.estimates[state].astype(np.float64).copy()
    position = {int(x): i for i, x in enumerate(xfers)}
    for edge in data.edges[state]:
        below = data.values[edge.child] if edge.child >= 0 else 0.0
        q[position[edge.xfer]] = edge.reward + below
    logits = q / temperature
    probs = np.exp(logits - logits.max())
    return xfers, probs / probs.sum()


def _sample_batch(data: Transitions, config: TrainConfig, num_actions: int,
                  rng: np.random.Generator) -> Dict[str, Any]:
    b, k = config.batch_size, config.unroll
    starts = rng.integers(len(data), size=b)
    actions = np.zeros((b, k), np.int32)
    act_valid = np.zeros((b, k), np.float32)
    rewards = np.zeros((b, k), np.float32)
    state_at = np.full((b, k + 1), -1, np.int64)
    for i, start in enumerate(starts):
        state = int(start)
        state_at[i, 0] = state
        for step in range(k):
            edges = data.edges[state]
            if not edges:
                break
            if rng.random() < config.greedy_path:
                edge = max(edges, key=lambda e: e.reward + (data.values[e.child]
                                                            if e.child >= 0 else 0.0))
            else:
                edge = edges[int(rng.integers(len(edges)))]
            actions[i, step], rewards[i, step], act_valid[i, step] = edge.xfer, edge.reward, 1.0
            state = edge.child
            if state < 0:
                break
            state_at[i, step + 1] = state
    valid = (state_at >= 0).astype(np.float32)
    values = np.zeros((b, k + 1), np.float32)
    policy = np.zeros((b, k + 1, num_actions), np.float32)
    masks = np.zeros((b, k + 1, num_actions), np.float32)
    # The states to encode: the starts, then every later real state once.
    encoded: List[int] = list(starts)
    slot = np.zeros((b, k + 1), np.int32)
    slot[:, 0] = np.arange(b)
    for i in range(b):
        for step in range(k + 1):
            state = int(state_at[i, step])
            if state < 0:
                continue
            values[i, step] = data.values[state]
            xfers, probs = _policy_target(data, state, config.policy_temperature)
            policy[i, step, xfers] = probs
            masks[i, step, data.active[state]] = 1.0
            if step:
                slot[i, step] = len(encoded)
                encoded.append(state)
    known_b = np.concatenate([np.full(len(data.known_xfers[s]), i, np.int32)
                              for i, s in enumerate(starts)])
    known_x = np.concatenate([data.known_xfers[s] for s in starts]).astype(np.int32)
    known_r = np.concatenate([data.known_rewards[s] for s in starts]).astype(np.float32)
    graph = features.batch([data.states[s] for s in encoded])
    return {"graph": graph, "actions": actions, "act_valid": act_valid, "rewards": rewards,
            "valid": valid, "values": values, "policy": policy, "masks": masks, "slot": slot,
            "known_b": known_b, "known_x": known_x, "known_r": known_r}


def _losses(model: LatentModel, config: TrainConfig, batch) -> Dict[str, tf.Tensor]:
    scale = config.value_scale
    batch_size = tf.shape(batch["actions"])[0]
    latents = model.represent(batch["graph"])
    h = latents[:batch_size]
    totals = {name: tf.constant(0.0) for name in
              ("value", "reward", "policy", "mask", "known", "consistency")}

    def weighted_mean(x, w):
        return tf.reduce_sum(x * w) / tf.maximum(tf.reduce_sum(w), 1.0)

    k = config.unroll
    for step in range(k + 1):
        valid = batch["valid"][:, step]
        prediction = model.predict(h)
        totals["value"] += weighted_mean(
            tf.square((prediction.value - batch["values"][:, step]) / scale), valid)
        policy_ce = tf.nn.softmax_cross_entropy_with_logits(
            labels=batch["policy"][:, step], logits=prediction.policy_logits)
        totals["policy"] += weighted_mean(policy_ce, valid)
        mask_ce = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
            labels=batch["masks"][:, step], logits=prediction.mask_logits), axis=-1)
        totals["mask"] += config.mask_weight * weighted_mean(mask_ce, valid)
        if step and config.consistency:
            target = tf.stop_gradient(tf.gather(latents, batch["slot"][:, step]))
            cosine = tf.reduce_sum(tf.math.l2_normalize(h, -1)
                                   * tf.math.l2_normalize(target, -1), -1)
            totals["consistency"] += config.consistency * weighted_mean(1.0 - cosine, valid)
        if step == 0:
            x = tf.gather(h, batch["known_b"])
            _, known = model.dynamics(x, batch["known_x"])
            totals["known"] += tf.reduce_mean(tf.square((known - batch["known_r"]) / scale))
        if step < k:
            h_next, reward = model.dynamics(h, batch["actions"][:, step])
            totals["reward"] += weighted_mean(
                tf.square((reward - batch["rewards"][:, step]) / scale),
                batch["act_valid"][:, step])
            # MuZero halves the gradient through the dynamics at each step.
            h = 0.5 * h_next + 0.5 * tf.stop_gradient(h_next)
    return totals


def evaluate(model: LatentModel, data: Transitions, config: TrainConfig,
             batches: int = 4) -> Dict[str, float]:
    """The mean of each loss over `batches` batches drawn with
    `config.seed`, without training (the same batches on every call)."""
    rng = np.random.default_rng(config.seed)
    sums: Dict[str, float] = {}
    for _ in range(batches):
        batch = dict(_sample_batch(data, config, model.config.num_actions, rng))
        batch["graph"] = features.to_tensors(batch["graph"])
        for name, value in _losses(model, config, batch).items():
            sums[name] = sums.get(name, 0.0) + float(value) / batches
    return sums


def train(model: LatentModel, data: Transitions, config: Optional[TrainConfig] = None,
          progress=None) -> TrainResult:
    """Trains `model` on `data` (module docstring)."""
    config = config or TrainConfig()
    if not len(data):
        raise ValueError("no states to train on")
    rng = np.random.default_rng(config.seed)
    optimizer = snt.optimizers.Adam(config.learning_rate)
    num_xfers = model.config.num_actions

    def to_inputs(batch):
        out = dict(batch)
        out["graph"] = features.to_tensors(batch["graph"])
        return out

    first = to_inputs(_sample_batch(data, config, num_xfers, rng))
    _losses(model, config, first)  # creates the variables
    variables = model.trainable_variables
    build_adam(optimizer, variables)

    def step_fn(batch):
        with tf.GradientTape() as tape:
            totals = _losses(model, config, batch)
            loss = tf.add_n(list(totals.values()))
        grads = tape.gradient(loss, variables)
        grads, _ = tf.clip_by_global_norm(grads, 5.0)
        apply_adam(optimizer, grads, variables)
        return totals

    traced = traced_once(step_fn)
    start = time.monotonic()
    history: Dict[str, List[float]] = {}
    for step in range(config.steps):
        batch = first if step == 0 else to_inputs(_sample_batch(data, config, num_xfers, rng))
        totals = traced(batch)
        for name, value in totals.items():
            history.setdefault(name, []).append(float(value))
        if progress is not None and (step + 1) % 100 == 0:
            progress(f"train step {step + 1}: " + ", ".join(
                f"{n} {np.mean(v[-100:]):.4f}" for n, v in history.items()))
    return TrainResult(config.steps, time.monotonic() - start,
                       {n: float(np.mean(v[-100:])) for n, v in history.items()})
