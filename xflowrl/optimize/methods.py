"""The ways `optimize` can rewrite a graph, behind one call.

`optimise(graph, method, ...)` returns the cheapest graph a method found,
never one costlier than `graph` under the cost model (a method that ends
above the initial cost hands back the initial graph), with the
substitutions that build it. What `budget` counts depends on the method:

| method | what it does | budget (default) |
| --- | --- | --- |
| greedy | one-step greedy: the cheapest candidate each step until none improves | steps (no limit) |
| taso | TASO's backtracking search (`XferSet.search`, alpha 1.05) | graphs expanded (1000) |
| mf | model-free PPO trained on this graph, then its greedy episode | training episodes (200) |
| mb | the model-based agent: world model, controller trained in the dream, its best round deployed; its greedy and sampled episodes | world-model rounds (2) |
| policy | the shipped generalist policy acting greedily, no training | steps (1.5 x greedy's, at least 10) |
| policy:DIR | a trained policy (a policy folder, `xflowrl.policy`, or a `train_mf` results folder) acting greedily, no training | steps (1.5 x greedy's, at least 10) |
| plan | decision-time planning with the engine (`xflowrl.planning`: Gumbel root, pUCT, the candidates' costs as prior), from greedy's descent, with multi-location actions and identical ops merged | real steps, expansions (1000) |
| plan:DIR | the same with a trained policy's prior (a policy folder with `policy.npz`) | real steps (1000) |

The learned methods hand over what the entry points do, through the same
functions (`xflowrl.optimize.handover`): the cheapest graph any of their
episodes passed through; the model-based agent's of its best round. Where
their step limit is greedy's (the default), one-step greedy has walked to
its end first to set it; should its graph be cheaper than the method's,
that graph is handed over instead (`handover.no_worse_than_greedy`;
`MethodResult.found_by` says so): a learned method never hands back worse
than greedy's graph, which it computed anyway. The planner starts from
greedy's descent; where it merged identical ops (its descent then merged
too), plain greedy walks as well, and the same floor applies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import threading
import time
from typing import Callable, List, Optional, Tuple

from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS, TASO_ALPHA, TASO_BUDGET
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.optimize.handover import (
    HandOver,
    hand_over_model_based,
    hand_over_model_free,
    no_worse_than_greedy,
    train_model_based,
)
from xflowrl.optimize.model_io import BadInput
from xflowrl.planning.search import PlanConfig
from xflowrl.planning.simulator import MERGE_NAME

METHODS = ("greedy", "taso", "eqsat", "mf", "mb", "policy", "policy:DIR", "plan", "plan:DIR")
# eqsat's budget is its e-graph's node limit (EqsatConfig's default).
DEFAULT_BUDGET = {"greedy": 0, "taso": TASO_BUDGET, "eqsat": 10_000, "mf": 200, "mb": 2,
                  "policy": 0, "plan": 1000}

Progress = Callable[[str], None]


@dataclasses.dataclass
class MethodResult:
    """What a method found.

    Attributes:
      method: the method as given.
      graph: the cheapest graph found (the initial one if nothing helped).
      cost: its estimated cost (ms).
      applied: the substitutions, (xfer name, location), that build `graph`
        (TASO's search: -1 for a step past the first L locations of its
        xfer, which no environment of that L can take); empty for
        equality saturation, whose graph is extracted from an e-graph, not
        stepped to.
      seconds: the method's wall time.
      found_by: who found `graph`: the method's kind ("greedy", "taso",
        "eqsat", "mf", "mb", "policy", "plan"), or "greedy" where a learned method's
        step-limit walk found a cheaper graph than the method did.
    """
    method: str
    graph: Graph
    cost: float
    applied: List[Tuple[str, int]]
    seconds: float
    found_by: str


def parse_method(method: str) -> Tuple[str, str]:
    """("greedy", "") ... ("policy", DIR); BadInput for anything else.
    "policy" alone is the shipped generalist (`xflowrl.policy.shipped_policy`)."""
    kind, _, arg = method.partition(":")
    if kind == "policy":
        if not arg:
            from xflowrl.policy import (
                shipped_policy,  # pylint: disable=import-outside-toplevel
            )
            try:
                return kind, shipped_policy()
            except ValueError as e:
                raise BadInput(f"--method=policy: {e}; or name a trained policy with "
                               f"--method=policy:DIR") from None
        if not os.path.isdir(arg):
            raise BadInput(f"{arg}: no such policy folder (--method=policy:DIR takes a policy "
                           f"folder or a train_mf results folder)")
        return kind, arg
    if kind == "plan" and arg:
        from xflowrl.policy import has_arrays  # pylint: disable=import-outside-toplevel
        if not has_arrays(arg):
            raise BadInput(f"{arg}: no policy.npz there (--method=plan:DIR takes a policy "
                           f"folder that acts in NumPy, such as the shipped generalist's)")
        return kind, arg
    if kind not in DEFAULT_BUDGET or arg:
        raise BadInput(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return kind, ""


def make_environment(graph: Graph, xfers: XferSet, cost_model: CostModel,
                     max_steps: int = 0,
                     max_locations: int = DEFAULT_MAX_LOCATIONS) -> GraphEnv:
    """The real environment of `graph` (step limit `max_steps`, 0: no limit)."""
    return GraphEnv(graph, xfers, cost_model,
                    EnvConfig(max_steps=max_steps or NO_STEP_LIMIT, max_locations=max_locations))


def optimise(graph: Graph, method: str, xfers: XferSet, cost_model: CostModel, *,
             budget: int = 0, seed: int = 0, workdir: Optional[str] = None,
             progress: Optional[Progress] = None) -> MethodResult:
    """Optimises `graph` with `method` (see module docstring).

    Args:
      graph, xfers, cost_model: what to optimise, with which rules, under
        which cost.
      method: one of `METHODS` (policy:DIR names the folder).
      budget: the method's budget (0: its default).
      seed: seeds the learned methods and the random choices of their
        episodes.
      workdir: where the learned methods write checkpoints and logs (a
        temporary folder, removed afterwards, when None).
      progress: called with one line of progress at a time.

    Raises:
      BadInput: an unknown method or a policy folder that holds no policy.
    """
    kind, arg = parse_method(method)
    progress = progress or (lambda line: None)
    budget = budget or DEFAULT_BUDGET[kind]
    start = time.time()
    walk = None  # greedy's walk, where it set a learned method's step limit
    if kind == "taso":
        best, applied = _taso(graph, xfers, cost_model, budget, progress)
    elif kind == "eqsat":
        best, applied = _eqsat(graph, xfers, cost_model, budget, progress), []
    elif kind == "greedy":
        best, applied = _greedy(make_environment(graph, xfers, cost_model, budget), progress)
    elif kind == "plan":
        env = make_environment(graph, xfers, cost_model)
        best, applied = _plan(env, arg, budget, seed, progress)
        if merges(applied):   # its greedy start merged: plain greedy's is another walk
            from xflowrl.search import greedy_walk  # pylint: disable=C0415
            walk = greedy_walk(env)
    elif kind == "policy":
        if budget:
            env = make_environment(graph, xfers, cost_model, budget)
        else:
            env, walk = _equal_budget_environment(graph, xfers, cost_model)
        best, applied = _policy(env, arg, seed, progress)
    else:
        env, walk = _equal_budget_environment(graph, xfers, cost_model)
        with _workdir(workdir) as folder:
            learn = _model_free if kind == "mf" else _model_based
            learned = learn(env, budget, seed, folder, progress)
        best, applied = learned.graph, learned.applied
    found = HandOver(best, best.cost(cost_model), list(applied), kind)
    if walk is not None:
        floored = no_worse_than_greedy(found, walk)
        if floored is not found:
            progress(f"{kind}: {100 * (found.cost / graph.cost(cost_model) - 1):+.2f}%; "
                     f"greedy's walk for the step limit found "
                     f"{100 * (walk.cost / graph.cost(cost_model) - 1):+.2f}%: handing that over")
        found = floored
    best, applied = found.graph, found.applied
    if best.cost(cost_model) > graph.cost(cost_model):
        best, applied = graph, []
    return MethodResult(method, best, best.cost(cost_model), list(applied), time.time() - start,
                        found.found_by)


def merges(applied: List[Tuple[str, int]]) -> bool:
    """Whether a route merged identical ops somewhere (a planner's)."""
    return any(name == MERGE_NAME for name, _ in applied)


def _workdir(folder: Optional[str]):
    """A context giving `folder` (created), or a temporary folder removed on exit."""
    if folder:
        os.makedirs(folder, exist_ok=True)
        return contextlib.nullcontext(folder)
    return tempfile.TemporaryDirectory(prefix="xflowrl-")


def _equal_budget_environment(graph: Graph, xfers: XferSet, cost_model: CostModel):
    """(environment, greedy's walk): the real environment with the step limit
    the learned methods train and act with, 1.5 x one-step greedy's steps on
    `graph`, at least 10 (`xflowrl.search.equal_step_limit`), so that a
    policy that never picks NO-OP does not wander until `NO_STEP_LIMIT`;
    and greedy's walk that set it (`xflowrl.search.GreedyWalk`)."""
    from xflowrl.search import (  # pylint: disable=import-outside-toplevel
        equal_step_limit,
        greedy_walk,
    )
    walk = greedy_walk(make_environment(graph, xfers, cost_model))
    limit = equal_step_limit(10, len(walk.applied))
    return make_environment(graph, xfers, cost_model, limit), walk


def _greedy(env: GraphEnv, progress: Progress) -> Tuple[Graph, List[Tuple[str, int]]]:
    """One-step greedy (`xflowrl.search.greedy_walk`: no observations) for
    at most `env`'s step limit, a progress line per step; its last graph
    (its cheapest) and substitutions."""
    from xflowrl.search import greedy_walk  # pylint: disable=import-outside-toplevel

    def on_step(steps: int, cost: float) -> None:
        progress(f"greedy: step {steps}, cost {cost:.4f} ms "
                 f"({100 * (cost / env.initial_cost - 1):+.2f}%)")

    walk = greedy_walk(env, max_steps=env.config.max_steps, on_step=on_step)
    return walk.graph, walk.applied


def _taso(graph: Graph, xfers: XferSet, cost_model: CostModel, budget: int,
          progress: Progress) -> Tuple[Graph, List[Tuple[str, int]]]:
    """TASO's search and the substitutions it applied (locations as an
    environment of the default L numbers them; -1 for a step past its first
    L locations). One native call, so the progress line says how long it
    has run, every 2 s, until it returns."""
    stop = threading.Event()
    start = time.time()

    def tick() -> None:
        while not stop.wait(2.0):
            progress(f"taso: searching, {time.time() - start:.0f} s (budget {budget} graphs)")

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        result = xfers.search(graph, cost_model, alpha=TASO_ALPHA, budget=budget)
    finally:
        stop.set()
        ticker.join()
    progress(f"taso: done in {time.time() - start:.1f} s, {len(result.applied)} substitutions")
    return result.graph, list(result.applied)


# Equality saturation's handed-over graph (`SaturationResult.handed_over`) in words.
_EQSAT_GRAPHS = {"ilp": "the ILP's graph", "greedy": "greedy extraction's graph",
                 "descent": "one-step greedy's graph (the ILP's start)",
                 "original": "the original"}


def _eqsat(graph: Graph, xfers: XferSet, cost_model: CostModel, node_limit: int,
           progress: Progress) -> Graph:
    """Equality saturation (`xflowrl.search.eqsat`) with `node_limit` e-nodes
    and its default limits otherwise; its graph (never costlier than
    `graph`, its outputs checked on random values)."""
    from xflowrl.search.eqsat import (  # pylint: disable=import-outside-toplevel
        EqsatConfig,
        equality_saturation,
    )
    progress(f"eqsat: saturating (at most {node_limit} e-nodes, "
             f"{EqsatConfig.time_limit_s:.0f} s), then extracting")
    result = equality_saturation(graph, xfers, cost_model, EqsatConfig(node_limit=node_limit))
    progress(f"eqsat: {result.stop_reason} after {result.iterations} iterations "
             f"({result.e_nodes} e-nodes, {result.saturation_seconds:.1f} s); "
             f"{_EQSAT_GRAPHS.get(result.handed_over, result.handed_over)} "
             f"{100 * (result.best_cost / result.initial_cost - 1):+.2f}% "
             f"(ILP {result.ilp_status}, {result.extraction_seconds:.1f} s)")
    return result.graph


def _plan(env: GraphEnv, folder: str, real_steps: int, seed: int,
          progress: Progress) -> Tuple[Graph, List[Tuple[str, int]]]:
    """The engine planner (`xflowrl.planning.plan`, its defaults but for
    `real_steps`, multi-location actions, merging identical ops, one
    detour search and a stall of 200 real steps once past greedy on, and
    the prior: a policy's where `folder` names one,
    `PlanConfig`'s default otherwise) from greedy's descent, so never above
    greedy's graph; its
    graph and route (with merge steps where merging changed a graph:
    `xflowrl.planning.simulator.replay_route` replays it)."""
    # pylint: disable=import-outside-toplevel
    from xflowrl.planning import deployed_config, plan
    config = deployed_config(prior=f"policy:{folder}" if folder else PlanConfig.prior,
                             max_real_steps=real_steps, seed=seed)
    try:
        result = plan(env, config, progress=progress)
    except ValueError as e:
        raise BadInput(str(e)) from None
    progress(f"plan: {result.change_pct:+.2f}% after {result.real_steps} real steps, "
             f"{result.decisions} decisions, {result.seconds:.1f} s ({result.stopped})")
    return result.graph, result.applied


def _policy(env: GraphEnv, folder: str, seed: int,
            progress: Progress) -> Tuple[Graph, List[Tuple[str, int]]]:
    """A trained policy's greedy episode in `env` (its step limit: by default
    the budget the policy was trained with, `_equal_budget_environment`);
    the cheapest graph it passed through and the shortest prefix that
    builds it (kept by the environment as the episode goes,
    `GraphEnv.cheapest_prefix`: no replay). A policy folder with `policy.npz` (the
    shipped one, any saved by this code) acts in NumPy
    (`xflowrl.policy.runtime`: the same greedy choices, no TensorFlow to
    import; a progress line per step); others load the network
    (`xflowrl.policy.load_policy`)."""
    from xflowrl import policy  # pylint: disable=import-outside-toplevel
    info = policy.read_info(folder)
    if info is not None and info.cost_model and info.cost_model != env.cost_model.name:
        progress(f"policy: trained under {info.cost_model}, acting under "
                 f"{env.cost_model.name} (its candidates' costs, and so its choices, may "
                 f"differ from what it learnt; --cost_model={info.cost_model} is its own)")
    try:
        if policy.has_arrays(folder):
            from xflowrl.policy import runtime  # pylint: disable=import-outside-toplevel
            limit = env.config.max_steps

            def on_step(steps: int, cost: float) -> None:
                progress(f"policy: step {steps} of at most {limit}, cost {cost:.4f} ms "
                         f"({100 * (cost / env.initial_cost - 1):+.2f}%)")

            runtime.greedy_episode(policy.load_numpy_policy(folder, env), env, on_step)
        else:
            agent = policy.load_policy(folder, env, seed=seed)
            agent.run_episode(env, greedy=True, learn=False)
    except ValueError as e:
        raise BadInput(str(e)) from None
    cheapest = env.cheapest_prefix
    return cheapest.graph, cheapest.applied


def _model_free(env: GraphEnv, episodes: int, seed: int, folder: str,
                progress: Progress) -> HandOver:
    """PPO (X-RLflow's settings) trained for `episodes` in `env`; the
    cheapest graph its greedy episode or its best training episode passed
    through (`handover.hand_over_model_free`)."""
    from xflowrl.agents.ppo import PPOAgent, PPOConfig  # pylint: disable=import-outside-toplevel
    from xflowrl.agents.ppo.training import (  # pylint: disable=import-outside-toplevel
        TrainConfig,
        train,
    )
    ppo = PPOConfig.xrlflow()
    agent = PPOAgent(len(env.xfers), ppo, seed=seed)
    result = train(env, agent, TrainConfig(episodes=episodes,
                                           parallel_envs=ppo.episodes_per_update),
                   folder, progress=lambda line: progress(f"mf: {line}"))
    greedy = agent.run_episode(env, greedy=True, learn=False)
    return hand_over_model_free(env, greedy, result)


def _model_based(env: GraphEnv, rounds: int, seed: int, folder: str,
                 progress: Progress) -> HandOver:
    """The model-based agent with `rounds` world-model rounds (the other
    settings at their defaults), its best round deployed; the cheapest graph
    its greedy and sampled evaluation episodes passed through
    (`handover.train_model_based`, `handover.hand_over_model_based`)."""
    from xflowrl.world_model import (  # pylint: disable=import-outside-toplevel
        ModelBasedAgent,
        WorldModelConfig,
    )
    agent = ModelBasedAgent(env, folder, WorldModelConfig(rounds=rounds), seed=seed,
                            progress=lambda line: progress(f"mb: {line}"))
    train_model_based(agent)
    return hand_over_model_based(agent, env)
