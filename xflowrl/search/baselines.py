"""Every baseline of a results table, under one environment's rules, cost
model and location cap (docs/agents.md): one-step greedy, TASO's
backtracking search, the random agent and equality saturation, run by one
runner (`run_baselines`, or one at a time: `run_greedy`, `run_taso`,
`run_random`, `run_eqsat`) into one record
(`xflowrl.search.record.Baselines`). Every result keeps its steps with
their locations, so its graph is replayed (`replay_result`), never
searched again; equality saturation's graph, extracted rather than
stepped to, is kept whole.
"""

from __future__ import annotations

import math
import time
from typing import List, Tuple, Union

import numpy as np

from xflowrl.agents.random_agent import RandomAgent
from xflowrl.engine import Graph, graph_from_data
from xflowrl.engine.xfers import TASO_ALPHA, TASO_BUDGET
from xflowrl.env import GraphEnv, NO_STEP_LIMIT
from xflowrl.search.greedy import greedy_search, greedy_walk
from xflowrl.search.record import (
    Baselines,
    EqsatResult,
    GreedyResult,
    NO_LOCATION,
    RandomResult,
    TasoResult,
    TracePoint,
)

# An agent compared with greedy gets at least this many times greedy's steps
# on the same graph and setting, so that a row never compares unequal budgets.
EQUAL_BUDGET_FACTOR = 1.5

# Seconds of saturation of the equality-saturation baseline (its
# extraction adds up to `EqsatConfig.ilp_time_limit_s` per ILP program).
EQSAT_TIME_LIMIT = 30.0


def greedy_steps(env: GraphEnv) -> int:
    """The substitutions one-step greedy applies to `env`'s initial graph
    (without the environment's step limit, and with every cost feature: an
    observation ablation, `EnvConfig.cost_features`, hides from the agent
    what greedy reads, but the setting and so greedy's steps are the same).
    Walked without observations (`greedy_walk`)."""
    return len(greedy_walk(env).applied)


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


def with_full_observation(env: GraphEnv) -> GraphEnv:
    """`env` with every cost feature in its observations: the baselines run
    on it, since one-step greedy reads the candidates' cost changes (which
    an ablated environment withholds from the agent)."""
    if env.config.cost_features == "full":
        return env
    return env.with_config(cost_features="full")


def run_greedy(env: GraphEnv) -> Tuple[GreedyResult, Graph]:
    """One-step greedy on `env`'s initial graph, without the environment's
    step limit (it stops when no candidate improves, as defined); its
    result and final graph."""
    start = time.time()
    unlimited = env.with_config(max_steps=NO_STEP_LIMIT)
    episode = greedy_search(unlimited)
    return GreedyResult(cost_ms=episode.final_cost, seconds=time.time() - start,
                        steps=len(episode.applied), applied=list(episode.applied)), unlimited.graph


def run_taso(env: GraphEnv, alpha: float = TASO_ALPHA, budget: int = TASO_BUDGET,
             time_limit_s: float = 0.0) -> Tuple[TasoResult, Graph]:
    """TASO's backtracking search (`XferSet.search`) from `env`'s initial
    graph under its rules, cost model and size cap; its result and best
    graph. `seconds` is the search's wall time.

    The steps' locations are numbered under the environment's L, so that
    `replay_result` (or `xflowrl.env.replay` in `env`) rebuilds the best
    graph. Where the search took a candidate past the first L of its xfer
    (no environment with that L can take it), they are numbered under a
    larger cap (`TasoResult.max_locations`), found by searching again with
    the same expansions (the search is deterministic; it checks that the
    best graph is the same).
    """
    max_ops = int(env.config.max_ops_factor * env.initial_graph.num_ops())
    cap = env.config.max_locations
    start = time.time()
    result = env.xfers.search(env.initial_graph, env.cost_model, alpha=alpha, budget=budget,
                              max_ops=max_ops, time_limit_s=time_limit_s, max_locations=cap)
    seconds = time.time() - start
    applied = result.applied
    while any(location == NO_LOCATION for _, location in applied):
        cap *= 4
        again = env.xfers.search(env.initial_graph, env.cost_model, alpha=alpha,
                                 budget=result.expansions, max_ops=max_ops, max_locations=cap)
        if again.graph.hash() != result.graph.hash() or again.best_cost != result.best_cost:
            raise RuntimeError("TASO's search found another graph when run again with the "
                               "same expansions")
        applied = again.applied
    return TasoResult(
        cost_ms=result.best_cost, seconds=seconds, steps=len(applied), applied=applied,
        alpha=alpha, budget=budget, expansions=result.expansions, enqueued=result.enqueued,
        initial_cost_ms=result.initial_cost,
        trace=[TracePoint(e, s, c) for e, s, c in result.trace], max_locations=cap,
    ), result.graph


def run_random(env: GraphEnv, episodes: int = 20, seed: int = 0) -> RandomResult:
    """`episodes` episodes of the random agent (`RandomAgent(seed=seed)`) on
    `env`, with its step limit, like the learned agents."""
    if episodes < 1:
        raise ValueError(f"the random agent needs episodes >= 1, got {episodes}")
    agent = RandomAgent(seed=seed)
    start = time.time()
    runs = [agent.run_episode(env) for _ in range(episodes)]
    seconds = time.time() - start
    costs = [e.final_cost for e in runs]
    best = runs[int(np.argmin(costs))]
    return RandomResult(cost_ms=float(np.mean(costs)), std_ms=float(np.std(costs)),
                        best_ms=float(np.min(costs)), episodes=episodes, seconds=seconds,
                        steps=len(best.applied), applied=list(best.applied))


def run_eqsat(env: GraphEnv, time_limit_s: float = EQSAT_TIME_LIMIT) -> EqsatResult:
    """Equality saturation (`xflowrl.search.eqsat`, its default limits but
    `time_limit_s` of saturation and at most half that for the ILP) on
    `env`'s initial graph under its rules and cost model. Its graph's
    outputs are not checked here (as no baseline's are; `xflowrl optimize`
    checks what it writes)."""
    from xflowrl.search.eqsat import (  # pylint: disable=import-outside-toplevel
        EqsatConfig,
        equality_saturation,
    )
    config = EqsatConfig(time_limit_s=time_limit_s, check_outputs=False,
                         ilp_time_limit_s=min(EqsatConfig.ilp_time_limit_s, time_limit_s / 2))
    result = equality_saturation(env.initial_graph, env.xfers, env.cost_model, config)
    return EqsatResult(
        cost_ms=result.best_cost, seconds=result.seconds, handed_over=result.handed_over,
        greedy_extraction_ms=result.greedy_cost, ilp_ms=result.ilp_cost,
        ilp_status=result.ilp_status, stop_reason=result.stop_reason,
        iterations=result.iterations, e_nodes=result.e_nodes, time_limit_s=time_limit_s,
        graph=result.graph.to_data())


def run_baselines(env: GraphEnv, taso_alpha: float = TASO_ALPHA, taso_budget: int = TASO_BUDGET,
                  random_episodes: int = 20, seed: int = 0,
                  eqsat_time_limit: float = EQSAT_TIME_LIMIT) -> Baselines:
    """The baselines on `env`'s initial graph: one-step greedy
    (`run_greedy`), TASO's search (`run_taso`; None when `taso_budget` is 0),
    the random agent (`run_random`; None when `random_episodes` is 0) and
    equality saturation (`run_eqsat`; None when `eqsat_time_limit` is 0)."""
    greedy, _ = run_greedy(env)
    taso = run_taso(env, taso_alpha, taso_budget)[0] if taso_budget > 0 else None
    random = run_random(env, random_episodes, seed) if random_episodes > 0 else None
    eqsat = run_eqsat(env, eqsat_time_limit) if eqsat_time_limit > 0 else None
    return Baselines(greedy=greedy, taso=taso, random=random,
                     max_locations=env.config.max_locations, eqsat=eqsat)


def replay_result(env: GraphEnv,
                  result: Union[GreedyResult, TasoResult, RandomResult, EqsatResult]) -> Graph:
    """The graph a baseline's steps build from `env`'s initial graph (its
    rules and size cap; locations under the result's cap, TASO's own where
    it has one, else `env`'s L); equality saturation's graph from the
    record itself. Nothing is searched again.

    Raises:
      ValueError: the result has no steps to replay (a random agent's of an
        old record), or a step without a location (`NO_LOCATION`: TASO's
        steps in a record written before they were kept; run the baselines
        again) or one the graph does not have.
    """
    if isinstance(result, EqsatResult):
        return graph_from_data(result.graph)
    if result.applied is None:
        raise ValueError("this baseline result records no steps (a record written before "
                         "they were kept): run the baselines again")
    missing = [k for k, (_, location) in enumerate(result.applied) if location == NO_LOCATION]
    if missing:
        raise ValueError(f"this baseline result's steps {missing[:5]} have no location (a "
                         f"record written before locations were kept): run the baselines "
                         f"again to replay it")
    cap = getattr(result, "max_locations", None) or env.config.max_locations
    max_ops = int(env.config.max_ops_factor * env.initial_graph.num_ops())
    return env.xfers.replay(env.initial_graph, result.applied, cap, max_ops)


def baseline_rows(baselines: Baselines) -> List[Tuple[str, float]]:
    """(row name, cost) for a results table (`Baselines.rows`)."""
    return baselines.rows()


def versus_greedy(cost: float, greedy_cost: float, tolerance: float = 1e-6) -> str:
    """A predicate for a sentence: the agent "is better than", "only matches" or
    "is worse than" one-step greedy."""
    if cost < greedy_cost * (1 - tolerance):
        return "is better than one-step greedy"
    if cost > greedy_cost * (1 + tolerance):
        return "is worse than one-step greedy"
    return "only matches one-step greedy (no gain over the one-step baseline)"
