"""Search targets: what an engine planner's tree teaches a policy/value network.

Every expanded node of an engine planner's tree is a real graph whose
candidates the engine has costed exactly, so every action of it has a
known value (`Node.action_values`: the child's cheapest cost known below
where the search built it, the candidate's own cost elsewhere): Gumbel
MuZero's *completed* Q-values (Danihelka et al., ICLR 2022) are complete
here without any estimate. The targets per state:

- **Policy**: Gumbel MuZero's improved policy, `softmax(logits +
  sigma(q))`, `q` the completed values normalised to [0, 1] over the live
  actions (as the planner and mctx normalise them), `sigma(q) = (c_visit +
  max visits) * c_scale * q`, `logits` the prior's (`improved_policy`).
  Why not the visit distribution (AlphaZero, MuZero): under sequential
  halving with 16 simulations over 16 root actions the visits are shared
  out equally by phase, so they say which actions survived a halving, not
  by how much; and most expanded nodes are visited once or not at all
  below the root. The improved policy uses every action's exact value and
  is a policy improvement whatever the visit count (the paper's Theorem).
  `visit_policy` is kept for the ablation (`TargetConfig.policy`).
- **Heads**: the network's policy is factored, xfer head then location
  head (`xflowrl.agents.ppo.networks`), so a target over a node's actions
  becomes one per head (`by_head`): the xfer head's target is the
  marginal over xfers (a multi-location action counts for its xfer, as
  `PolicyPrior` gives it its xfer's probability); each xfer's location
  target is the target over that xfer's candidates, renormalised, with
  the xfer's marginal as its weight. NO-OP gets none: stopping is the
  search's decision, not an action it values.
- **Value**: in the PPO value head's unit, the points (%) of the initial
  cost still to gain (the return of the environment's `relative` reward):
  `best_below_value`, the node's cost above the cheapest cost known below
  it (every prefix of a route may be kept, so the best return of any
  real route from it), or `n_step_returns` along the decisions taken:
  n rewards, then the search value of the state n decisions on.
"""

from __future__ import annotations

import dataclasses
from typing import List, NamedTuple, Sequence

import numpy as np

from xflowrl.planning.simulator import EVERYWHERE


@dataclasses.dataclass(frozen=True)
class TargetConfig:
    """How a tree becomes targets (module docstring).

    Attributes:
      policy: "improved" (Gumbel's, from completed values) or "visits".
      c_visit, c_scale: sigma's constants for the improved policy (mctx's
        defaults, 50 and 0.1: the planner's own c_scale of 1 makes the
        target all but one-hot on the best action; at 0.1 a point's
        difference between the best and the worst action of a node is
        about 5 nats).
      value: "best_below" or "n_step".
      n_steps, discount: of the n-step returns (the PPO config's discount).
      states: "expanded" (every expanded node of the tree: each a real
        graph with exact candidate costs) or "roots" (the graphs the
        planner took decisions from, the agent's real states).
      location_xfers: per state, the location targets of at most this
        many xfers (those of the largest marginals); the rest keep their
        xfer target only.
    """
    policy: str = "improved"
    c_visit: float = 50.0
    c_scale: float = 0.1
    value: str = "best_below"
    n_steps: int = 5
    discount: float = 0.99
    states: str = "expanded"
    location_xfers: int = 4

    def __post_init__(self):
        if self.policy not in ("improved", "visits"):
            raise ValueError(f"policy must be 'improved' or 'visits', got {self.policy!r}")
        if self.value not in ("best_below", "n_step"):
            raise ValueError(f"value must be 'best_below' or 'n_step', got {self.value!r}")
        if self.states not in ("expanded", "roots"):
            raise ValueError(f"states must be 'expanded' or 'roots', got {self.states!r}")
        if self.n_steps < 1 or self.location_xfers < 0 or not 0 < self.discount <= 1:
            raise ValueError("n_steps must be >= 1, location_xfers >= 0, 0 < discount <= 1")


def normalise(values: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """`values` scaled to [0, 1] by the range of the `alive` ones; 0.5
    where they are all equal (the planner's normalisation)."""
    live = values[alive]
    if not len(live) or not live.max() > live.min():
        return np.full(values.shape, 0.5)
    return np.clip((values - live.min()) / (live.max() - live.min()), 0.0, 1.0)


def improved_policy(logits: np.ndarray, action_values: np.ndarray, alive: np.ndarray,
                    max_visits: int, c_visit: float, c_scale: float) -> np.ndarray:
    """Gumbel MuZero's improved policy over a node's actions.

    Args:
      logits: [M] the prior's logits.
      action_values: [M] completed values (any unit: they are normalised).
      alive: [M] bool, the actions that may be taken (dead ones get 0).
      max_visits: the most visits of any action of the node.
      c_visit, c_scale: sigma's constants.

    Returns:
      [M] probabilities, `softmax(logits + sigma(normalised q))` over `alive`.
    """
    q = normalise(np.asarray(action_values, np.float64), alive)
    scores = np.asarray(logits, np.float64) + (c_visit + max_visits) * c_scale * q
    return _softmax(scores, alive)


def visit_policy(edge_visits: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """The visit distribution over `alive` actions (uniform over them where
    none was visited)."""
    visits = np.where(alive, np.asarray(edge_visits, np.float64), 0.0)
    if visits.sum() <= 0:
        visits = alive.astype(np.float64)
    return visits / max(visits.sum(), 1e-300)


def _softmax(scores: np.ndarray, alive: np.ndarray) -> np.ndarray:
    out = np.zeros(len(scores))
    if not alive.any():
        return out
    live = scores[alive]
    shifted = np.exp(live - live.max())
    out[alive] = shifted / shifted.sum()
    return out


class LocationTarget(NamedTuple):
    """One xfer's location target: its weight (the xfer's marginal) and a
    distribution over its locations (by location index)."""
    xfer: int
    weight: float
    locations: np.ndarray  # [C] int64 location indices
    probs: np.ndarray      # [C] float64, sums to 1


class HeadTargets(NamedTuple):
    """A target over a node's actions, factored as the network's heads are."""
    xfer: np.ndarray                # [N+1] marginal over xfers; NO-OP 0
    locations: List[LocationTarget]  # by decreasing weight


def by_head(actions: np.ndarray, singles: int, policy: np.ndarray, num_xfers: int,
            location_xfers: int) -> HeadTargets:
    """`policy` over `actions` ([M, 2] (xfer, location or EVERYWHERE), the
    first `singles` candidates) as the xfer head's and the location head's
    targets (module docstring); the location targets of the
    `location_xfers` xfers of the largest marginals with candidates."""
    xfer = np.zeros(num_xfers + 1)
    np.add.at(xfer, actions[:, 0], policy)
    total = xfer.sum()
    if total > 0:
        xfer /= total
    out: List[LocationTarget] = []
    single_xfers = actions[:singles, 0]
    for x in sorted(np.unique(single_xfers), key=lambda x: -xfer[x]):
        if len(out) >= location_xfers or xfer[x] <= 0:
            break
        rows = np.flatnonzero(single_xfers == x)
        mass = policy[rows]
        if mass.sum() <= 0:
            continue
        assert (actions[rows, 1] != EVERYWHERE).all()
        out.append(LocationTarget(int(x), float(xfer[x]), actions[rows, 1].astype(np.int64),
                                  mass / mass.sum()))
    return HeadTargets(xfer, out)


def best_below_value(cost: float, best_cost: float, initial_cost: float) -> float:
    """The points of the initial cost still to gain below a node: the
    return, in the `relative` reward, of the best route known from it."""
    return 100.0 * (cost - best_cost) / initial_cost


def n_step_returns(rewards: Sequence[float], values: Sequence[float], discount: float,
                   n: int) -> np.ndarray:
    """n-step returns along one trajectory.

    Args:
      rewards: [T] r_0..r_{T-1}, the reward of each decision.
      values: [T+1] v_0..v_T, a value of each state (the last one's is the
        bootstrap after the trajectory's end).
      discount, n: gamma and n.

    Returns:
      [T+1] G_t = sum_{k < m} gamma^k r_{t+k} + gamma^m v_{t+m},
      m = min(n, T - t) (G_T = v_T).
    """
    reward = np.asarray(rewards, np.float64)
    value = np.asarray(values, np.float64)
    steps = len(reward)
    if len(value) != steps + 1:
        raise ValueError(f"n_step_returns needs T+1 values for T rewards, got {len(value)} "
                         f"and {steps}")
    out = np.empty(steps + 1)
    for t in range(steps + 1):
        m = min(n, steps - t)
        out[t] = sum(discount ** k * reward[t + k] for k in range(m)) + discount ** m * value[t + m]
    return out
