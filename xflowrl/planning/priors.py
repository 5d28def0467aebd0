"""Where a planner looks first: prior logits over a graph's candidates.

A prior gives one logit per candidate of an `Expansion` (its `actions`, in
order). The search turns them into probabilities for pUCT and samples its
root candidates from them (Gumbel-top-k), so a prior decides which of a
graph's hundreds of candidates get simulations at all.

- `CostPrior`: the candidates' own cost changes, `-delta / temperature`
  with delta in points of the initial cost (a multi-location action's:
  its estimate, `xflowrl.planning.simulator.Expansion`): a candidate one point cheaper
  is e times likelier than a cost-neutral one at temperature 1. Needs no
  training; what one-step greedy knows, as a distribution.
- `PolicyPrior`: a trained graph policy's joint distribution, the xfer
  head's masked softmax times the location head's given that xfer (a
  multi-location action: the xfer's probability alone)
  (`xflowrl.policy.runtime.NumpyPolicy`, NumPy only: the shipped
  generalist or any policy folder with `policy.npz`).
- `XferCostPrior`: the cost prior factored as a policy is, xfer first,
  then location: an xfer's probability is a softmax of its best
  candidate's `-delta / temperature` over the active xfers, a
  candidate's its xfer's times a softmax of `-delta / temperature` over
  that xfer's candidates, and a multi-location action's its xfer's (as
  `PolicyPrior` gives it). Every active xfer gets a share, however
  little its first application gains, so a rewrite that pays only
  through the ones it enables (a fusion before a merge) is drawn at the
  root, and an xfer with many locations does not crowd out the others.
- `UniformPrior`: all equal; the ablation that shows what a prior adds.

`make_prior(spec, env)` builds one from its name: "cost", "cost:0.5",
"xfer", "xfer:0.5", "uniform" or "policy:FOLDER".
"""

from __future__ import annotations

from typing import Optional, Protocol

import numpy as np

from xflowrl.env import GraphEnv
from xflowrl.planning import _inner
from xflowrl.planning.simulator import Expansion


class Prior(Protocol):
    """Logits over an expansion's candidates."""

    name: str

    def logits(self, expansion: Expansion) -> np.ndarray:
        """[M] float64 logits, one per candidate of `expansion`."""


class _CostTemperature:
    """What both cost priors keep: the initial cost (changes are in points
    of it), the temperature and the name `<kind>:<temperature>`."""
    kind = ""

    def __init__(self, initial_cost: float, temperature: float = 1.0):
        if temperature <= 0:
            raise ValueError(f"the {self.kind} prior's temperature must be > 0, "
                             f"got {temperature}")
        self.initial_cost = initial_cost
        self.temperature = temperature
        self.name = f"{self.kind}:{temperature:g}"


class CostPrior(_CostTemperature):
    """Logits `-delta / temperature` (module docstring)."""
    kind = "cost"

    def logits(self, expansion: Expansion) -> np.ndarray:
        delta = 100.0 * (expansion.costs - expansion.cost) / self.initial_cost
        return -delta / self.temperature


class XferCostPrior(_CostTemperature):
    """Logits of the xfer-then-location factoring of the cost prior
    (module docstring)."""
    kind = "xfer"

    def logits(self, expansion: Expansion) -> np.ndarray:
        out = _inner.xfer_cost_logits(expansion.actions, expansion.costs, expansion.singles,
                                      expansion.cost, self.initial_cost * self.temperature)
        return self.logits_numpy(expansion) if out is None else out

    def logits_numpy(self, expansion: Expansion) -> np.ndarray:
        """`logits` in numpy: what `xflowrl.planning._inner.xfer_cost_logits`
        computes in C, and what decides where it cannot (a NaN cost,
        candidates not listed xfer by xfer)."""
        out = np.zeros(len(expansion.actions))
        singles = expansion.singles
        if not singles:
            return out
        scaled = -100.0 * (expansion.candidate_costs - expansion.cost) / (
            self.initial_cost * self.temperature)
        xfers = expansion.actions[:, 0]
        # The candidates grouped by xfer, each group in its own order (a
        # stable sort; `Expansion` lists them xfer by xfer already), so
        # that each group's sums add the same terms in the same order as
        # a mask per xfer would, without one pass over all per xfer.
        order = np.argsort(xfers[:singles], kind="stable")
        grouped = xfers[:singles][order]
        starts = np.flatnonzero(np.concatenate(([True], grouped[1:] != grouped[:-1])))
        bounds = list(zip(starts.tolist(), starts[1:].tolist() + [singles]))
        active = grouped[starts]
        values = scaled[order]
        best = np.array([values[s:e].max() for s, e in bounds])
        xfer_log_p = best - _log_sum_exp(best)
        for (s, e), top, log_p in zip(bounds, best.tolist(), xfer_log_p):
            group = values[s:e]
            out[order[s:e]] = log_p + group - _log_sum_exp(group, top)
        if len(xfers) > singles:  # multi-location actions: their xfer's probability
            several = xfers[singles:]
            at = np.minimum(np.searchsorted(active, several), len(active) - 1)
            found = active[at] == several
            out[singles:][found] = xfer_log_p[at[found]]
        return out


def _log_sum_exp(values: np.ndarray, top: Optional[float] = None) -> float:
    """log(sum(exp(values))), shifted by their maximum (`top`, where the
    caller has it already)."""
    top = float(values.max()) if top is None else top
    return top + float(np.log(np.exp(values - top).sum()))


class UniformPrior:
    """Equal logits for every candidate."""

    name = "uniform"

    def logits(self, expansion: Expansion) -> np.ndarray:
        return np.zeros(len(expansion.actions))


class PolicyPrior:
    """A trained graph policy's log-probabilities of each candidate."""

    def __init__(self, folder: str, env: GraphEnv):
        # Imported here: the runtime loads threadpoolctl and the policy's arrays.
        from xflowrl.policy import runtime  # pylint: disable=import-outside-toplevel
        self._runtime = runtime
        self.policy = runtime.NumpyPolicy.load(folder)
        if self.policy.num_xfers != len(env.xfers):
            raise ValueError(f"the policy in {folder} has {self.policy.num_xfers} xfers, the "
                             f"rule set {len(env.xfers)}: plan with the rules it was trained on")
        self.env = env
        self.name = f"policy:{folder}"

    def logits(self, expansion: Expansion) -> np.ndarray:
        if len(expansion.actions) == 0:
            return np.zeros(0)
        observation = self.env.observation_of(expansion.locations, expansion.cost)
        locations = observation.location_features()
        policy, masked_log_softmax = self.policy, self._runtime._masked_log_softmax  # pylint: disable=protected-access
        nodes, graph_embedding = policy.encode(observation.state)
        xfer_mask = observation.xfer_mask.copy()
        xfer_mask[-1] = False  # NO-OP is no candidate: stopping is the search's decision
        xfer_log_p = masked_log_softmax(
            policy.xfer_logits(graph_embedding, locations.xfer_summary, xfer_mask), xfer_mask)
        out = np.empty(len(expansion.actions))
        xfers = expansion.actions[:, 0]
        for xfer in np.unique(xfers):
            rows = np.flatnonzero(xfers == xfer)
            singles = rows[rows < expansion.singles]
            # A multi-location action: the xfer's probability.
            out[rows[rows >= expansion.singles]] = xfer_log_p[xfer]
            mask = observation.location_mask[xfer]
            location_log_p = masked_log_softmax(policy.location_logits(
                nodes, graph_embedding, int(xfer), locations.nodes_of(int(xfer)),
                locations.cost_delta_of(int(xfer)), mask), mask)
            out[singles] = xfer_log_p[xfer] + location_log_p[expansion.actions[singles, 1]]
        return out


def make_prior(spec: str, env: GraphEnv) -> Prior:
    """The prior named `spec` for planning in `env` (module docstring).

    Raises:
      ValueError: an unknown name or a bad temperature.
    """
    kind, _, argument = spec.partition(":")
    if kind == "cost":
        return CostPrior(env.initial_cost, float(argument) if argument else 1.0)
    if kind == "xfer":
        return XferCostPrior(env.initial_cost, float(argument) if argument else 1.0)
    if kind == "uniform" and not argument:
        return UniformPrior()
    if kind == "policy" and argument:
        return PolicyPrior(argument, env)
    raise ValueError(f"unknown prior {spec!r}: use 'cost', 'cost:TEMPERATURE', 'xfer', "
                     f"'xfer:TEMPERATURE', 'uniform' or 'policy:FOLDER'")
