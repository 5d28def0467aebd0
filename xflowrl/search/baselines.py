"""Every baseline of a results table, under one environment's rules and cost
model (docs/agents.md): one-step greedy, TASO's backtracking search and the
random agent.
"""

from __future__ import annotations

import math
import time
from typing import Dict, List, Optional, Tuple

import numpy as np

from xflowrl.engine.xfers import TASO_ALPHA, TASO_BUDGET
from xflowrl.env import GraphEnv, NO_STEP_LIMIT
from xflowrl.search.greedy import greedy_search
from xflowrl.search.random_agent import RandomAgent

# An agent compared with greedy gets at least this many times greedy's steps
# on the same graph and setting, so that a row never compares unequal budgets.
EQUAL_BUDGET_FACTOR = 1.5


def greedy_steps(env: GraphEnv) -> int:
    """The substitutions one-step greedy applies to `env`'s initial graph
    (without the environment's step limit, and with every cost feature: an
    observation ablation, `EnvConfig.cost_features`, hides from the agent
    what greedy reads, but the setting and so greedy's steps are the same)."""
    unlimited = env.with_config(max_steps=NO_STEP_LIMIT, cost_features="full")
    return len(greedy_search(unlimited).applied)


def equal_step_limit(requested: int, steps_of_greedy: int,
                     factor: float = EQUAL_BUDGET_FACTOR) -> int:
    """An agent's step limit on a graph where greedy takes `steps_of_greedy`
    steps: the `requested` limit, raised to `factor` times greedy's steps
    where that is more (a limit below what greedy needs would compare
    unequal budgets)."""
    if requested < 1 or steps_of_greedy < 0 or factor < 1:
        raise ValueError(f"need requested >= 1, steps_of_greedy >= 0 and factor >= 1; got "
                         f"{requested}, {steps_of_greedy}, {factor}")
    return max(int(requested), int(math.ceil(factor * steps_of_greedy)))


def with_equal_step_limit(env: GraphEnv, factor: float = EQUAL_BUDGET_FACTOR) -> GraphEnv:
    """`env` itself when its step limit is at least `factor` times greedy's
    steps on its graph, else the same environment with that limit."""
    limit = equal_step_limit(env.config.max_steps, greedy_steps(env), factor)
    if limit == env.config.max_steps:
        return env
    return env.with_config(max_steps=limit)


def run_baselines(env: GraphEnv, taso_alpha: float = TASO_ALPHA, taso_budget: int = TASO_BUDGET,
                  random_episodes: int = 20, seed: int = 0) -> Dict[str, Optional[dict]]:
    """Costs (ms) and substitutions of the baselines on `env`'s initial graph.

    Greedy runs without the environment's step limit (it stops when no
    candidate improves, as defined); the random agent keeps the limit, like
    the learned agents. Returns a dict with "greedy", "taso" (None when `taso_budget` is 0) and
    "random" (None when `random_episodes` is 0) entries, each with `cost_ms`,
    `seconds` and, where there is one, the sequence `applied`.
    """
    out: Dict[str, Optional[dict]] = {"greedy": None, "taso": None, "random": None}
    start = time.time()
    unlimited = env.with_config(max_steps=NO_STEP_LIMIT)
    greedy = greedy_search(unlimited)
    out["greedy"] = {"cost_ms": greedy.final_cost, "seconds": time.time() - start,
                     "steps": len(greedy.applied), "applied": greedy.applied}
    if taso_budget > 0:
        start = time.time()
        search = env.xfers.search(env.initial_graph, env.cost_model, alpha=taso_alpha,
                                  budget=taso_budget)
        out["taso"] = {"cost_ms": search.best_cost, "seconds": time.time() - start,
                       "alpha": taso_alpha, "budget": taso_budget,
                       "expansions": search.expansions, "applied": search.applied}
    if random_episodes > 0:
        agent = RandomAgent(seed=seed)
        costs: List[float] = [agent.run_episode(env).final_cost for _ in range(random_episodes)]
        out["random"] = {"cost_ms": float(np.mean(costs)), "std_ms": float(np.std(costs)),
                         "best_ms": float(np.min(costs)), "episodes": random_episodes}
    return out


def baseline_rows(baselines: Dict[str, Optional[dict]]) -> List[Tuple[str, float]]:
    """(row name, cost) for a results table."""
    rows = []
    if baselines.get("greedy"):
        rows.append(("one-step greedy", baselines["greedy"]["cost_ms"]))
    if baselines.get("taso"):
        t = baselines["taso"]
        rows.append((f"TASO search (alpha {t['alpha']}, budget {t['budget']})", t["cost_ms"]))
    if baselines.get("random"):
        r = baselines["random"]
        rows.append((f"random agent (mean of {r['episodes']})", r["cost_ms"]))
    return rows


def versus_greedy(cost: float, greedy_cost: float, tolerance: float = 1e-6) -> str:
    """A predicate for a sentence: the agent "is better than", "only matches" or
    "is worse than" one-step greedy."""
    if cost < greedy_cost * (1 - tolerance):
        return "is better than one-step greedy"
    if cost > greedy_cost * (1 + tolerance):
        return "is worse than one-step greedy"
    return "only matches one-step greedy (no gain over the one-step baseline)"
