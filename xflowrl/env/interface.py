"""The one environment interface that the real and the dream environment share.

dm_env-like, one interface for the real and the dream environments
(docs/agents.md): an `Environment` has `reset()`,
`step(action)`, `observation_spec()` and `action_spec()`. Agents (PPO, the
random and greedy baselines) and training loops are typed against this
interface only, never against one environment's attributes.

- An action is `(xfer, location)`; `xfer == N` (`env.noop`) is NO-OP and
  ends the episode.
- `step` returns a `TimeStep(observation, reward, done, info)`, which unpacks
  like gym's 4-tuple. `info["invalid"]` is None or says why the action was
  invalid (an invalid action never raises); `info["truncated"]` is True when
  only the step limit ended the episode (so returns should be bootstrapped
  from the last state's value, not cut).
- An `Observation` holds the state the agent encodes (`state`: a graph_nets
  `GraphsTuple` in the real environment, a latent vector `[z, h]` in the
  dream), the masks, and the per-location features where the environment
  has them (the real environment does; the dream does not).
- Location masks are prefixes: location l of xfer x is valid iff
  l < count[x], so `location_counts` describes them completely.

`run_episode(env, act)` plays one episode with any policy function and
returns an `Episode` with its `Transition`s.
"""

from __future__ import annotations

import abc
import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

Action = Tuple[int, int]


class LocationFeatures(NamedTuple):
    """Per-location features of the real environment, for the xfers that
    have locations only (`active`: a handful of ~1,700; a dense [N+1, L, K]
    array would be megabytes per step, almost all padding). `cost_delta`
    and the last two summary columns are zero when the environment withholds
    cost information (`EnvConfig.cost_features`, an ablation).

    `nodes_of(x)` and `cost_delta_of(x)` give one xfer's rows (padding for
    an xfer without locations); `dense_nodes()` and `dense_cost_delta()` the
    full [N+1, ...] arrays, for readers that want them (the gymnasium view).
    """
    active: np.ndarray        # [A] int64: the xfers with locations, ascending
    nodes: np.ndarray         # [A, L, K] int32 matched node indices, -1 padded
    cost_delta: np.ndarray    # [A, L] float32: 100 * (candidate - current) / initial
    xfer_summary: np.ndarray  # [N+1, 3] float32: log1p(#locations), min and mean cost_delta

    def row(self, xfer: int) -> int:
        """The row of `xfer` in `nodes` and `cost_delta`; -1 if it has none."""
        i = int(np.searchsorted(self.active, xfer))
        return i if i < len(self.active) and self.active[i] == xfer else -1

    def nodes_of(self, xfer: int) -> np.ndarray:
        """[L, K] int32: the matched nodes of `xfer`'s locations (all -1 if none)."""
        i = self.row(xfer)
        return self.nodes[i] if i >= 0 else np.full(self.nodes.shape[1:], -1, np.int32)

    def cost_delta_of(self, xfer: int) -> np.ndarray:
        """[L] float32: the cost changes of `xfer`'s candidates (0 if none)."""
        i = self.row(xfer)
        return (self.cost_delta[i] if i >= 0
                else np.zeros(self.cost_delta.shape[1:], np.float32))

    def dense_nodes(self) -> np.ndarray:
        """[N+1, L, K] int32: `nodes` with a row per xfer (-1 elsewhere)."""
        out = np.full((len(self.xfer_summary),) + self.nodes.shape[1:], -1, np.int32)
        out[self.active] = self.nodes
        return out

    def dense_cost_delta(self) -> np.ndarray:
        """[N+1, L] float32: `cost_delta` with a row per xfer (0 elsewhere)."""
        out = np.zeros((len(self.xfer_summary),) + self.cost_delta.shape[1:], np.float32)
        out[self.active] = self.cost_delta
        return out


class Observation(NamedTuple):
    state: Any                 # GraphsTuple (real env) or float32 [D] vector (latent envs)
    locations: Optional[LocationFeatures]
    location_mask: np.ndarray  # [N+1, L] bool; row N (NO-OP) all False
    xfer_mask: np.ndarray      # [N+1] bool; entry N (NO-OP) always True
    # [N+1, 3] float32, a vector state's per-xfer summary (log1p location
    # count, min and mean cost change), where a latent environment provides
    # one (`WorldModelConfig.xfer_summaries`); graph states carry theirs in
    # `locations.xfer_summary`.
    xfer_summary: Optional[np.ndarray] = None

    def location_features(self) -> LocationFeatures:
        """`locations`, for readers that need them (graph-state agents, the
        gymnasium view); ValueError for an observation without them (a
        latent environment's)."""
        if self.locations is None:
            raise ValueError("this observation has no per-location features (a latent "
                             "environment's); graph-state readers need the real environment's")
        return self.locations


class TimeStep(NamedTuple):
    observation: Observation
    reward: float
    done: bool
    info: Dict[str, Any]


class ActionSpec(NamedTuple):
    num_xfers: int      # N; xfer ids are 0..N, N is NO-OP
    max_locations: int  # L


class ObservationSpec(NamedTuple):
    state: str                    # "graph" (a GraphsTuple) or "vector"
    state_size: Optional[int]     # D for "vector" states
    num_xfers: int                # N
    max_locations: int            # L
    location_features: bool       # whether `Observation.locations` is provided
    max_pattern_ops: int          # K of `LocationFeatures.nodes` (0 without features)


class Environment(abc.ABC):
    """The interface of every environment an agent acts in."""

    @abc.abstractmethod
    def reset(self) -> Observation:
        """Starts an episode and returns its first observation."""

    @abc.abstractmethod
    def step(self, action: Action) -> TimeStep:
        """Applies `(xfer, location)`; RuntimeError once the episode is done."""

    @abc.abstractmethod
    def observation_spec(self) -> ObservationSpec:
        """What observations look like."""

    def action_spec(self) -> ActionSpec:
        spec = self.observation_spec()
        return ActionSpec(spec.num_xfers, spec.max_locations)

    @property
    def num_xfers(self) -> int:
        return self.observation_spec().num_xfers

    @property
    def noop(self) -> int:
        """The NO-OP xfer id, N."""
        return self.num_xfers


def location_counts(location_mask: np.ndarray) -> np.ndarray:
    """[..., N+1] int32: the number of valid locations per xfer (masks are prefixes)."""
    return location_mask.sum(axis=-1).astype(np.int32)


def prefix_mask(counts: np.ndarray, max_locations: int) -> np.ndarray:
    """[..., N+1, L] bool from per-xfer location counts [..., N+1]."""
    return np.arange(max_locations) < np.asarray(counts)[..., None]


class Transition(NamedTuple):
    observation: Observation
    action: Action
    reward: float
    done: bool
    info: Dict[str, Any]


class Episode(NamedTuple):
    total_reward: float
    initial_cost: float        # NaN where the environment has no cost (the dream)
    final_cost: float
    steps: int
    applied: List[Tuple[str, int]]  # (xfer name, location) in order (real env)
    invalid_actions: int
    transitions: Optional[List[Transition]] = None
    # The cheapest cost the graph had at any point of the episode, the
    # initial graph included (what the cheapest prefix of `applied` reaches,
    # `xflowrl.env.replay.cheapest_prefix`); NaN where there is no cost.
    cheapest_cost: float = math.nan


def run_episode(env: Environment, act: Callable[[Observation], Action],
                keep_transitions: bool = False) -> Episode:
    """Plays one episode with the policy `act`; costs and the applied
    substitutions come from `info` where the environment reports them."""
    obs = env.reset()
    done, total, invalid, steps = False, 0.0, 0, 0
    transitions: List[Transition] = []
    info: Dict[str, Any] = {}
    lowest = math.nan
    while not done:
        action = act(obs)
        next_obs, reward, done, info = env.step(action)
        if keep_transitions:
            transitions.append(Transition(obs, action, reward, done, info))
        total += reward
        steps += 1
        invalid += info.get("invalid") is not None
        lowest = cheapest_cost_so_far(lowest, info)
        obs = next_obs
    return Episode(total, info.get("initial_cost", math.nan), info.get("cost", math.nan),
                   steps, list(info.get("history", [])), invalid,
                   transitions if keep_transitions else None, lowest)


def cheapest_cost_so_far(lowest: float, info: Dict[str, Any]) -> float:
    """`lowest` (NaN: none yet) lowered to a step's initial and current cost,
    where `info` reports them; NaN while no cost has been seen (the dream)."""
    seen = [c for c in (lowest, info.get("initial_cost"), info.get("cost"))
            if c is not None and not math.isnan(c)]
    return min(seen) if seen else math.nan
