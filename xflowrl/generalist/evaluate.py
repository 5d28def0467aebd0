"""A policy on graphs it was not trained on, beside the baselines.

`zero_shot(agent, graphs, xfers, cost_model, ...)` (`compare` for
several agents, the baselines run once) plays the policy's
greedy episode on every graph (real environment, real masks, the step
limit of the entry points' equal budgets: at least 1.5 x one-step
greedy's steps on that graph) and runs the baselines under the same rules
and cost model (`xflowrl.search.run_baselines`: one-step greedy, TASO's
search, the random agent). A row per graph
(`xflowrl.results.generalist.ZeroShotRow`): initial cost, the
policy's cheapest graph on the way, the baselines' costs, and the time
each took to optimise the graph. `zero_shot_summary(rows)` (`summary`: as a
dict) says how the policy
compares: the share of graphs within 2 points of greedy, above the initial
cost, better than greedy.

`route_log_probs(policy, env, applied)` says how likely a policy's
sampling is to follow a given substitution sequence, step by step;
`route_against(policy, env, applied)` sums that up (a `RouteSummary`) for
the route to the cheapest graph of a sequence, e.g. the per-graph agent's result, which
fine-tuning from the generalist has to find
(`experiments/train_generalist.py --finetune`): the rewrites of the route
that the policy's own greedy episode never applies are where its sampling
must leave its habits.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.engine.xfers import TASO_BUDGET
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.env.replay import cheapest_prefix
from xflowrl.results.generalist import RouteSummary, ZeroShotRow, ZeroShotSummary
from xflowrl.search import run_baselines, with_equal_step_limit

GraphOrBuilder = Union[Graph, Callable[[], Graph]]


def compare(agents: Mapping[str, Any], graphs: Mapping[str, GraphOrBuilder],
            xfers: XferSet, cost_model: CostModel, config: Optional[EnvConfig] = None,
            taso_budget: int = TASO_BUDGET, random_episodes: int = 5, seed: int = 0,
            progress: Optional[Callable[[str], None]] = None) -> Dict[str, List[ZeroShotRow]]:
    """Every agent of `agents` (label -> agent) on every graph of `graphs`
    (name -> graph or builder) beside the baselines, which are run once per
    graph for all the agents (see module docstring); label -> its rows.
    Each agent is credited with the cheapest graph of its greedy episode
    (`GraphEnv.cheapest_prefix`)."""
    config = config or EnvConfig()
    rows: Dict[str, List[ZeroShotRow]] = {label: [] for label in agents}
    for name, source in graphs.items():
        graph = source if isinstance(source, Graph) else source()
        env = with_equal_step_limit(GraphEnv(graph, xfers, cost_model, config))
        # Equality saturation is not in these tables: not run (up to 45 s a graph).
        base = run_baselines(env, taso_budget=taso_budget, random_episodes=random_episodes,
                             seed=seed, eqsat_time_limit=0)
        taso, rand = base.taso, base.random
        for label, agent in agents.items():
            start = time.time()
            agent.run_episode(env, greedy=True, learn=False)
            policy_seconds = time.time() - start
            cheapest = env.cheapest_prefix
            row = ZeroShotRow(name, graph.num_ops(), env.initial_cost, cheapest.cost,
                      base.greedy.cost_ms, taso.cost_ms if taso else None,
                      rand.cost_ms if rand else None, policy_seconds, base.greedy.seconds,
                      taso.seconds if taso else None, env.config.max_steps, cheapest.applied)
            if progress:
                progress(f"{label}: {name}: policy {row.policy_change:+.2f}%, greedy "
                         f"{row.greedy_change:+.2f}%")
            rows[label].append(row)
    return rows


def zero_shot(agent, graphs: Mapping[str, GraphOrBuilder], xfers: XferSet,
              cost_model: CostModel, config: Optional[EnvConfig] = None,
              taso_budget: int = TASO_BUDGET, random_episodes: int = 5, seed: int = 0,
              progress: Optional[Callable[[str], None]] = None) -> List[ZeroShotRow]:
    """`compare` for one agent: its rows."""
    return compare({"policy": agent}, graphs, xfers, cost_model, config, taso_budget,
                   random_episodes, seed, progress)["policy"]


def zero_shot_summary(rows: Sequence[ZeroShotRow], margin: float = 2.0) -> ZeroShotSummary:
    """How the policy compares over `rows` (percentage points of the initial cost)."""
    n = max(len(rows), 1)
    return ZeroShotSummary(
        graphs=len(rows),
        within_margin_of_greedy=sum(r.policy_change <= r.greedy_change + margin
                                    for r in rows) / n,
        margin_points=margin,
        above_initial=sum(r.policy_ms > r.initial_ms + 1e-9 for r in rows) / n,
        better_than_greedy=sum(r.policy_ms < r.greedy_ms - 1e-9 for r in rows) / n,
        matches_greedy=sum(abs(r.policy_ms - r.greedy_ms) <= 1e-9 for r in rows) / n,
        policy_vs_taso_time=(sum(r.policy_seconds for r in rows)
                             / max(sum(r.taso_seconds or 0.0 for r in rows), 1e-9)),
    )


def summary(rows: Sequence[ZeroShotRow], margin: float = 2.0) -> Dict[str, Any]:
    """`zero_shot_summary` as a dict, in its fields' order."""
    return dataclasses.asdict(zero_shot_summary(rows, margin))


def markdown(rows: Sequence[ZeroShotRow]) -> str:
    """The rows as a table: initial, policy, greedy, TASO, random, times."""
    def pct(v):
        return "" if v is None else f"{v:+.2f}%"
    lines = ["| graph | ops | initial ms | policy (zero-shot) | greedy | TASO | random | "
             "policy s | TASO s |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        note = " (= greedy)" if abs(r.policy_ms - r.greedy_ms) <= 1e-9 else ""
        lines.append(f"| {r.graph} | {r.ops} | {r.initial_ms:.4f} | {pct(r.policy_change)}"
                     f"{note} | {pct(r.greedy_change)} | {pct(r.change(r.taso_ms))} | "
                     f"{pct(r.change(r.random_ms))} | {r.policy_seconds:.2f} | "
                     f"{'' if r.taso_seconds is None else f'{r.taso_seconds:.2f}'} |")
    return "\n".join(lines)


FINAL_GRAPH_KEYS = ("best_final_cost", "greedy_cost")
CHEAPEST_GRAPH_KEYS = ("cheapest_cost", "greedy_cheapest_cost")


def steps_to_reach(target: float, zero_shot_cost: float, zero_shot_steps: int,
                   history: Sequence[Mapping[str, float]],
                   keys: Sequence[str] = FINAL_GRAPH_KEYS) -> Optional[int]:
    """Real steps a fine-tuned policy took to reach `target` (the cost a
    per-graph agent reached, every cost compared as that agent's is): its
    zero-shot greedy episode's steps if that reached it, else those plus
    the training steps up to the first update after which one of the
    history row's `keys` reached it; None if it never did. `history` is
    `TrainResult.history`. The zero-shot episode counts, so 0 never comes.

    `keys` says how costs count: `FINAL_GRAPH_KEYS`, the cheapest final
    graph of any training episode so far (`best_final_cost`) or of that update's
    greedy evaluation (`greedy_cost`); `CHEAPEST_GRAPH_KEYS`, the cheapest
    graph any of those episodes passed through (`cheapest_cost`,
    `greedy_cheapest_cost`), what the learned methods of `xflowrl optimize`
    hand over; `zero_shot_cost` and `target` must count the same way."""
    reached = lambda cost: cost <= target * (1.0 + 1e-9)
    if reached(zero_shot_cost):
        return zero_shot_steps
    for row in history:
        costs = [row[k] for k in keys if k in row]
        if any(reached(c) for c in costs):
            return zero_shot_steps + int(row["interactions"])
    return None


class RouteStep(NamedTuple):
    """One step of a route under a policy (`route_log_probs`)."""
    xfer: str
    location: int
    xfer_log_prob: float
    location_log_prob: float  # given the xfer; 0 for an xfer without locations
    greedy: bool              # the policy's greedy action at that state
    cost_ms: float            # the graph's cost after the step


def route_log_probs(policy, env: GraphEnv,
                    applied: Sequence[Tuple[str, int]]) -> List[RouteStep]:
    """Each step of `applied` (xfer names, locations, from `env`'s initial
    graph) under `policy` (a `runtime.NumpyPolicy`): the log-probabilities
    with which its sampling takes that xfer and that location, and whether
    it is its greedy action. Their sum over the route is the log-probability
    of one sampled episode following it.

    Raises:
      ValueError: an unknown xfer, or a step `env` rejects.
    """
    index = {name: x for x, name in enumerate(env.xfers.names)}
    observation = env.reset()
    steps = []
    for name, location in applied:
        if name not in index:
            raise ValueError(f"route: unknown xfer {name!r}")
        action = (index[name], int(location))
        xfer_lp, location_lp, greedy = policy.log_probs(observation, action)
        observation, _, _, info = env.step(action)
        if info["invalid"]:
            raise ValueError(f"route: step ({name}, {location}) is invalid: {info['invalid']}")
        steps.append(RouteStep(name, int(location), xfer_lp, location_lp, greedy, env.cost))
    return steps


def route_against(policy, env: GraphEnv, applied: Sequence[Tuple[str, int]]) -> RouteSummary:
    """`route_log_probs` of the shortest prefix of `applied` that reaches
    its cheapest graph (`cheapest_prefix`), summed up: its steps, the
    natural log-probability of a sampled episode taking exactly them, how
    many are not `policy`'s greedy action, and the steps whose xfer
    `policy`'s own greedy episode (`runtime.greedy_episode`) never applies,
    with their log-probabilities. Orders differ freely between routes to one
    graph (the same rewrites at other places first), so the total is that
    of this route, not of reaching its graph; the steps with xfers of its
    own are the ones no reordering of the policy's greedy episode contains."""
    from xflowrl.policy import runtime  # pylint: disable=import-outside-toplevel
    _, prefix = cheapest_prefix(env, applied)
    steps = route_log_probs(policy, env, prefix)
    own = {name for name, _ in runtime.greedy_episode(policy, env).applied}
    per_step = [s.xfer_log_prob + s.location_log_prob for s in steps]
    return RouteSummary(steps=len(steps), log_prob=float(sum(per_step)),
                        off_greedy=sum(not s.greedy for s in steps),
                        new_xfers=[(s.xfer, p) for s, p in zip(steps, per_step)
                                   if s.xfer not in own],
                        route=[list(s) for s in steps])
