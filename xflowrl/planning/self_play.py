"""Self-play: engine-planner runs whose trees become training targets.

A self-play run is an engine planner's run (`xflowrl.planning.search`) on
one graph with the current network as prior (`PolicyPrior` over a policy
folder); `harvest` turns its tree into `SearchState`s
(`xflowrl.planning.search_targets` for the targets). The run acts in the
real environment as every planner does: its states are real graphs, its
masks the real ones, and every expansion is a real step, counted
(`Played.real_steps`) and kept apart from the learner's work.

Reanalyse (MuZero Reanalyse; EfficientZero refreshes its targets the same
way): a stored state's graph is searched again with the current network
as prior (one decision's search from it, without greedy's descent), and
the state's policy target becomes the new search's; its value target the
larger of the old and the new (both are costs known to be reachable).
Those searches' expansions are real steps too, counted
(`Reanalysed.real_steps`).

Jobs are plain records (a corpus graph's name, the rule set's and the cost
model's names, the prior's spec, the configs), so that they run the same
in this process (`run_jobs(jobs, actors=0)`, the tests') or on Ray actors
(`actors` > 0: a local Ray instance unless this process joined one), as
the project's other parallel work does; each actor builds its own
environments, and no native object crosses processes.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from xflowrl import corpus
from xflowrl.engine import Graph, XferSet
from xflowrl.engine.cost import cost_model_from_spec
from xflowrl.engine.graph import graph_from_data
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.planning.search import PlanConfig, Planner
from xflowrl.planning.search_targets import (
    HeadTargets,
    TargetConfig,
    best_below_value,
    by_head,
    improved_policy,
    n_step_returns,
    visit_policy,
)
from xflowrl.planning.target_store import SearchState
from xflowrl.planning.tree import Node


class RecordingPlanner(Planner):
    """A planner that records the graphs it took decisions from."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.roots: List[Node] = []
        super().__init__(*args, **kwargs)

    def decide(self, root: Node) -> Optional[int]:
        if not self.roots or self.roots[-1] is not root:
            self.roots.append(root)
        return super().decide(root)


def node_targets(node: Node, config: TargetConfig, num_xfers: int) -> HeadTargets:
    """The policy target over an expanded node's actions, by head."""
    expansion = node.expansion
    assert expansion is not None
    alive = ~node.dead
    if config.policy == "improved":
        logits = np.log(np.maximum(node.prior, 1e-30))
        visits = int(node.edge_visits.max()) if len(node.edge_visits) else 0
        policy = improved_policy(logits, node.action_values(), alive, visits,
                                 config.c_visit, config.c_scale)
    else:
        policy = visit_policy(node.edge_visits, alive)
    return by_head(expansion.actions, expansion.singles, policy, num_xfers,
                   config.location_xfers)


def state_of(env: GraphEnv, node: Node, head: HeadTargets, value: float, graph: str,
             root: bool) -> SearchState:
    """`node` as a `SearchState` with the targets `head` and `value`; its
    observation comes from the node's expansion (no engine call)."""
    expansion = node.expansion
    assert expansion is not None
    observation = env.observation_of(expansion.locations, node.cost)
    features = observation.location_features()
    num_l = observation.location_mask.shape[1]
    k = features.nodes.shape[-1]
    count = len(head.locations)
    nodes = np.full((count, num_l, k), -1, np.int32)
    deltas = np.zeros((count, num_l), np.float32)
    masks = np.zeros((count, num_l), bool)
    probs = np.zeros((count, num_l), np.float32)
    for i, target in enumerate(head.locations):
        nodes[i] = features.nodes_of(target.xfer)
        deltas[i] = features.cost_delta_of(target.xfer)
        masks[i] = observation.location_mask[target.xfer]
        if not masks[i, target.locations].all():
            raise ValueError(f"a location target of xfer {target.xfer} lies outside its mask")
        probs[i, target.locations] = target.probs
    return SearchState(
        graph=graph, graph_data=node.graph.to_data(), cost=float(node.cost),
        initial_cost=float(env.initial_cost), root=root, state=observation.state,
        xfer_summary=features.xfer_summary.astype(np.float32),
        xfer_mask=observation.xfer_mask.copy(),
        xfer_target=head.xfer.astype(np.float32),
        location_xfer=np.array([t.xfer for t in head.locations], np.int32),
        location_weight=np.array([t.weight for t in head.locations], np.float32),
        location_nodes=nodes, cost_delta=deltas, location_mask=masks, location_target=probs,
        value_target=float(value))


def harvest(planner: RecordingPlanner, env: GraphEnv, config: TargetConfig,
            graph: str) -> List[SearchState]:
    """The search states of a finished run (`TargetConfig.states`): its
    decision roots in order, then (with "expanded") every other expanded
    node with actions."""
    num_xfers = len(env.xfers)
    roots = [n for n in planner.roots if n.expansion is not None
             and len(n.expansion.actions)]
    initial = env.initial_cost
    values = {id(n): best_below_value(n.cost, n.best_cost, initial) for n in roots}
    if config.value == "n_step" and roots:
        rewards = [100.0 * (a.cost - b.cost) / initial for a, b in zip(roots, roots[1:])]
        returns = n_step_returns(rewards, [values[id(n)] for n in roots], config.discount,
                                 config.n_steps)
        values = {id(n): float(g) for n, g in zip(roots, returns)}
    out = [state_of(env, n, node_targets(n, config, num_xfers), values[id(n)], graph, True)
           for n in roots]
    if config.states == "expanded":
        seen = {id(n) for n in roots}
        for node in planner.tree.nodes():
            if id(node) in seen or node.expansion is None or not len(node.expansion.actions):
                continue
            out.append(state_of(env, node, node_targets(node, config, num_xfers),
                                best_below_value(node.cost, node.best_cost, initial), graph,
                                False))
    return out


# -- jobs ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SelfPlayJob:
    """One self-play run: plan on corpus graph `graph` under `rules` and
    `cost_model` with prior `prior` (`make_prior`'s spec)."""
    graph: str
    rules: str
    cost_model: str
    prior: str
    plan: PlanConfig
    targets: TargetConfig


@dataclasses.dataclass(frozen=True)
class ReanalyseJob(SelfPlayJob):
    """A self-play job's search run again from each of `states` (all of its
    graph) with prior `prior`."""
    states: Tuple[SearchState, ...]


class Played(NamedTuple):
    """What a self-play run gave: its states and its own result."""
    graph: str
    states: List[SearchState]
    real_steps: int
    cost: float                    # ms, the cheapest graph it handed over
    initial_cost: float            # ms
    applied: List[Tuple[str, int]]  # the route to it from the initial graph
    stopped: str
    rule_enumerations: int         # single-rule enumerations (multi-location actions)
    real_steps_to_best: int        # real steps when its cost was first seen

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.cost / self.initial_cost - 1.0)


class Reanalysed(NamedTuple):
    graph: str
    states: List[SearchState]  # the job's states, targets refreshed, in order
    real_steps: int


@functools.lru_cache(maxsize=4)
def _rules(name: str) -> XferSet:
    return XferSet.from_name(name)


@functools.lru_cache(maxsize=8)
def environment(graph: str, rules: str, cost_model: str) -> GraphEnv:
    """The corpus graph `graph` under `rules` and `cost_model`, without a
    step limit (as the planner's benchmarks run it); one per process."""
    return GraphEnv(corpus.get(graph), _rules(rules), cost_model_from_spec(cost_model),
                    EnvConfig(max_steps=NO_STEP_LIMIT))


def play(job: SelfPlayJob) -> Played:
    """One self-play run (module docstring)."""
    env = environment(job.graph, job.rules, job.cost_model)
    planner = RecordingPlanner(env, dataclasses.replace(job.plan, prior=job.prior))
    result = planner.run()
    states = harvest(planner, env, job.targets, job.graph)
    planner.tree.release()   # freed here, not by a later pass of the collector
    return Played(job.graph, states, result.real_steps, result.cost, result.initial_cost,
                  result.applied, result.stopped, result.rule_enumerations,
                  result.real_steps_to_best)


def reanalyse(job: ReanalyseJob) -> Reanalysed:
    """The job's states with targets from a fresh search from each (module
    docstring)."""
    env = environment(job.graph, job.rules, job.cost_model)
    config = dataclasses.replace(job.plan, prior=job.prior, greedy_start=False,
                                 max_decisions=1)
    out, steps = [], 0
    for state in job.states:
        planner = RecordingPlanner(env, config, start=graph_from_data(state.graph_data))
        planner.run()
        steps += planner.sim.real_steps
        fresh = [s for s in harvest(planner, env, dataclasses.replace(job.targets,
                                                                      states="roots"),
                                    job.graph) if s.cost == state.cost][:1]
        planner.tree.release()
        if not fresh:  # nothing to decide there (no candidates): keep the old targets
            out.append(state)
            continue
        new = fresh[0]
        out.append(new._replace(root=state.root,
                                value_target=max(state.value_target, new.value_target)))
    return Reanalysed(job.graph, out, steps)


def run_job(job: Union[SelfPlayJob, ReanalyseJob]) -> Union[Played, Reanalysed]:
    return reanalyse(job) if isinstance(job, ReanalyseJob) else play(job)


class _Worker:
    """The body of a Ray actor: runs jobs in its own process."""

    def run(self, job: Union[SelfPlayJob, ReanalyseJob]) -> Union[Played, Reanalysed]:
        return run_job(job)


def run_jobs(jobs: Sequence[Union[SelfPlayJob, ReanalyseJob]], actors: int = 0
             ) -> List[Any]:
    """Runs `jobs`, in this process (`actors` 0) or on `actors` Ray actors
    (one CPU each; a local Ray instance unless this process joined one);
    their results in the order of `jobs`."""
    if actors <= 0:
        return [run_job(job) for job in jobs]
    import ray  # pylint: disable=import-outside-toplevel
    if not ray.is_initialized():
        ray.init(num_cpus=actors, include_dashboard=False, log_to_driver=False)
    worker = ray.remote(num_cpus=1)(_Worker)
    pool: List[Any] = [worker.remote() for _ in range(min(actors, len(jobs)))]
    try:
        futures = [pool[i % len(pool)].run.remote(job) for i, job in enumerate(jobs)]
        return ray.get(futures)
    finally:
        for actor in pool:
            ray.kill(actor)


def graph_of(state: SearchState) -> Graph:
    """The stored graph of `state`."""
    return graph_from_data(state.graph_data)
