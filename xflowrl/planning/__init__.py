"""Agents that plan: decision-time search over (xfer, location).

`plan(env, PlanConfig(...))` searches with the real engine as its exact
simulator (AlphaZero-style; every expansion a counted real step): Gumbel
sampling and sequential halving at the root, pUCT below, a prior from the
candidates' costs or a trained policy (`xflowrl.planning.priors`). It hands
over the cheapest graph it reached and the route to it.
"""

from xflowrl.planning.priors import CostPrior, PolicyPrior, Prior, UniformPrior, make_prior
from xflowrl.planning.search import (
    PlanConfig,
    PlanResult,
    Planner,
    STOPS,
    deployed_config,
    plan,
)
from xflowrl.planning.simulator import EngineSimulator, Expansion

__all__ = ["CostPrior", "EngineSimulator", "Expansion", "PlanConfig", "PlanResult", "Planner",
           "PolicyPrior", "Prior", "STOPS", "UniformPrior", "deployed_config", "make_prior",
           "plan"]
