"""Learning from search: self-play, reanalyse and learning, iteration by iteration.

`train_from_search(config, out_dir)` starts from a policy folder (the
shipped generalist by default) and repeats:

1. **self-play**: engine-planner runs on graphs of the corpus' training
   split (or on one graph: fine-tuning), with the current policy as prior
   (`xflowrl.planning.self_play`, on Ray actors or in this process); their
   trees become search states with targets, added to the store
   (`xflowrl.planning.target_store`, `<out_dir>/store`);
2. **reanalyse** (optional): stored states of earlier iterations are
   searched again with the current policy, their targets refreshed;
3. **learning**: the current policy's network takes gradient steps on every
   stored state (`xflowrl.planning.learner`) and is saved as the next
   policy folder (`<out_dir>/policies/iteration_NNN`).

Real steps (the planner's expansions) of self-play and reanalyse are
counted per iteration, apart from everything else; `real_step_budget`
bounds them. After every iteration the run's record (`SearchRun`,
`<out_dir>/run.json`) is written; a run started again in the same folder
with the same config resumes after the last recorded iteration (each
iteration's learner starts from the previous iteration's saved folder, so
nothing else needs saving).

`finetune_by_search(graph, budget, config, out_dir)` is the generalist's
fine-tuning path on one graph: learning from search on that graph within a
share of a real-step budget, then one planner run with the learned policy
as prior on the rest; it hands over the cheapest graph of all those runs
(each with greedy's floor: never worse than one-step greedy's graph).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from xflowrl import corpus
from xflowrl.planning.learner import LearnConfig, SearchLearner
from xflowrl.planning.search import PlanConfig, plan
from xflowrl.planning.search_targets import TargetConfig
from xflowrl.planning.self_play import (
    Played,
    ReanalyseJob,
    Reanalysed,
    SelfPlayJob,
    environment,
    run_jobs,
)
from xflowrl.planning.target_store import TargetStore
from xflowrl.policy.folder import SHIPPED

RUN_JSON = "run.json"


@dataclasses.dataclass(frozen=True)
class SearchTrainingConfig:
    """A learning-from-search run (module docstring).

    Attributes:
      policy: the policy folder it starts from.
      graphs: corpus members to self-play on (empty: the training split).
      graphs_per_iteration: self-play runs per iteration (graphs drawn
        without replacement; with one graph, that graph once).
      iterations: self-play, reanalyse and learning rounds.
      rules, cost_model: the rule set's and the cost model's names (the
        policy's: `PolicyPrior` refuses another rule set).
      plan: the self-play planner's settings (its `prior` is replaced by
        the current policy, its `seed` by the run's per job).
      targets: how trees become targets.
      learn: the learner's settings (its `seed` by the run's per iteration).
      reanalyse_states: stored states of earlier iterations searched again
        per iteration (0: no reanalyse).
      reanalyse_plan: the reanalyse searches' planner settings (one
        decision from each state).
      real_step_budget: real steps of self-play and reanalyse at most (None:
        no bound); an iteration's runs share what is left.
      actors: Ray actors for self-play and reanalyse (0: this process).
      seed: of graph draws, planners and learners.
    """
    policy: str = SHIPPED
    graphs: Tuple[str, ...] = ()
    graphs_per_iteration: int = 4
    iterations: int = 3
    rules: str = "default"
    cost_model: str = "analytic/v100"
    plan: PlanConfig = PlanConfig(simulations=16, max_real_steps=200)
    targets: TargetConfig = TargetConfig()
    learn: LearnConfig = LearnConfig()
    reanalyse_states: int = 0
    reanalyse_plan: PlanConfig = PlanConfig(simulations=8, max_real_steps=20)
    real_step_budget: Optional[int] = None
    actors: int = 0
    seed: int = 0

    def __post_init__(self):
        if self.iterations < 0 or self.graphs_per_iteration < 1 or self.reanalyse_states < 0:
            raise ValueError("iterations must be >= 0, graphs_per_iteration >= 1 and "
                             "reanalyse_states >= 0")

    def to_json(self) -> Dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))


@dataclasses.dataclass
class IterationRecord:
    """What one iteration did.

    Attributes:
      graphs: the graphs self-played on.
      self_play_real_steps, reanalyse_real_steps: expansions spent.
      self_play_rule_enumerations: the self-play runs' single-rule
        enumerations (multi-location actions), counted apart.
      states_added, states_reanalysed, states_stored: search states.
      loss_before: the loss terms of the new states under the policy that
        self-played them (before learning on them).
      losses: the mean loss terms of the iteration's gradient steps.
      change_pct: per graph, the self-play run's handed-over change (%).
      policy: the policy folder saved at its end.
    """
    iteration: int
    graphs: List[str]
    self_play_real_steps: int
    reanalyse_real_steps: int
    self_play_rule_enumerations: int
    states_added: int
    states_reanalysed: int
    states_stored: int
    loss_before: Dict[str, float]
    losses: Dict[str, float]
    change_pct: Dict[str, float]
    policy: str


@dataclasses.dataclass
class BestGraph:
    """The cheapest graph a run's planners handed over on one graph, and
    the real steps spent on that graph when it was first seen."""
    cost: float
    initial_cost: float
    change_pct: float
    applied: List[Tuple[str, int]]
    real_steps_to_best: int


@dataclasses.dataclass
class SearchRun:
    """The record of a run (`<out_dir>/run.json`)."""
    config: Dict[str, Any]
    iterations: List[IterationRecord]
    best: Dict[str, BestGraph]
    policy: str          # the latest policy folder
    real_steps: int      # self-play and reanalyse, all iterations
    store_parts: int     # parts of the store the recorded iterations wrote
    rule_enumerations: int = 0  # self-play's, all iterations
    spent: Dict[str, int] = dataclasses.field(default_factory=dict)  # real steps per graph

    def save(self, out_dir: str) -> None:
        tmp = os.path.join(out_dir, RUN_JSON + ".tmp")
        with open(tmp, "w") as f:
            json.dump(dataclasses.asdict(self), f, indent=1)
        os.replace(tmp, os.path.join(out_dir, RUN_JSON))

    @classmethod
    def load(cls, out_dir: str) -> Optional["SearchRun"]:
        path = os.path.join(out_dir, RUN_JSON)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            data = json.load(f)
        return cls(config=data["config"],
                   iterations=[IterationRecord(**r) for r in data["iterations"]],
                   best={k: BestGraph(**{**v, "applied": [tuple(a) for a in v["applied"]]})
                         for k, v in data["best"].items()},
                   policy=data["policy"], real_steps=data["real_steps"],
                   store_parts=data["store_parts"],
                   rule_enumerations=data["rule_enumerations"], spent=data.get("spent", {}))


def _graphs_of(config: SearchTrainingConfig, iteration: int) -> List[str]:
    pool = list(config.graphs) or corpus.CORPUS.names("train")
    if len(pool) <= config.graphs_per_iteration:
        return pool
    rng = np.random.default_rng([config.seed, iteration])
    return [pool[i] for i in sorted(rng.choice(len(pool), config.graphs_per_iteration,
                                               replace=False))]


def _start(config: SearchTrainingConfig, out_dir: str) -> Tuple[SearchRun, TargetStore]:
    """The run's record and store: resumed where `out_dir` holds a run of
    the same config, new otherwise (ValueError for another config's)."""
    os.makedirs(out_dir, exist_ok=True)
    run = SearchRun.load(out_dir)
    store = TargetStore(os.path.join(out_dir, "store"))
    if run is not None and run.config != config.to_json():
        raise ValueError(f"{out_dir} holds a run of another config; use another folder")
    if run is None:
        run = SearchRun(config.to_json(), [], {}, config.policy, 0, 0)
    for part in store.parts():  # written by an iteration that did not finish
        if part >= run.store_parts:
            os.remove(store._path(part))  # pylint: disable=protected-access
    return run, store


def _reanalyse(config: SearchTrainingConfig, store: TargetStore, iteration: int,
               parts: int, policy: str, spent: Dict[str, int]) -> Tuple[int, int]:
    """Searches again from `reanalyse_states` stored states of the first
    `parts` parts with `policy` as prior and rewrites their parts, adding
    the real steps to `spent` per graph; (states, real steps)."""
    if not config.reanalyse_states or not parts:
        return 0, 0
    index = [(p, i) for p in range(parts) for i in range(len(store.read(p)))]
    rng = np.random.default_rng([config.seed, iteration, 1])
    chosen = [index[k] for k in sorted(rng.choice(len(index), min(config.reanalyse_states,
                                                                  len(index)), replace=False))]
    stored = {p: store.read(p) for p in {p for p, _ in chosen}}
    by_graph: Dict[str, List[Tuple[int, int]]] = {}
    for p, i in chosen:
        by_graph.setdefault(stored[p][i].graph, []).append((p, i))
    prior = f"policy:{policy}"
    jobs = [ReanalyseJob(g, config.rules, config.cost_model, prior,
                         dataclasses.replace(config.reanalyse_plan, seed=config.seed),
                         config.targets, tuple(stored[p][i] for p, i in where))
            for g, where in by_graph.items()]
    steps = 0
    for where, done in zip(by_graph.values(), run_jobs(jobs, config.actors)):
        assert isinstance(done, Reanalysed)
        steps += done.real_steps
        spent[done.graph] = spent.get(done.graph, 0) + done.real_steps
        for (p, i), state in zip(where, done.states):
            stored[p][i] = state
    for p, states in stored.items():
        store.replace(p, states)
    return len(chosen), steps


def train_from_search(config: SearchTrainingConfig, out_dir: str,
                      progress: Optional[Callable[[str], None]] = None) -> SearchRun:
    """Runs (or resumes) learning from search (module docstring)."""
    run, store = _start(config, out_dir)
    say = progress or (lambda _: None)
    for iteration in range(len(run.iterations), config.iterations):
        left = (None if config.real_step_budget is None
                else config.real_step_budget - run.real_steps)
        if left is not None and left < 1:
            say(f"iteration {iteration}: the real-step budget is spent")
            break
        graphs = _graphs_of(config, iteration)
        steps_each = config.plan.max_real_steps
        if left is not None:
            steps_each = min(steps_each,
                             left // ((config.iterations - iteration) * len(graphs)))
            if steps_each < 1:
                break
        prior = f"policy:{run.policy}"
        jobs = [SelfPlayJob(g, config.rules, config.cost_model, prior,
                            dataclasses.replace(config.plan, max_real_steps=steps_each,
                                                seed=config.seed * 1000 + iteration),
                            config.targets) for g in graphs]
        played: List[Played] = run_jobs(jobs, config.actors)
        new = [s for p in played for s in p.states]
        self_steps = sum(p.real_steps for p in played)
        for p in played:
            best = run.best.get(p.graph)
            spent = run.spent.get(p.graph, 0)
            if best is None or p.cost < best.cost:
                run.best[p.graph] = BestGraph(p.cost, p.initial_cost, p.change_pct, p.applied,
                                              spent + p.real_steps_to_best)
            run.spent[p.graph] = spent + p.real_steps
        if new:
            store.add(new)
        reanalysed, re_steps = _reanalyse(config, store, iteration, run.store_parts,
                                          run.policy, run.spent)
        env = environment(graphs[0], config.rules, config.cost_model)
        learner = SearchLearner(run.policy, env, dataclasses.replace(
            config.learn, seed=config.seed * 1000 + iteration))
        loss_before = learner.evaluate(new[:64]) if new else {}
        states = store.load()
        losses = learner.update(states) if states else {}
        folder = os.path.join(out_dir, "policies", f"iteration_{iteration:03d}")
        if os.path.exists(folder):
            shutil.rmtree(folder)
        learner.save(folder, graphs)
        run.iterations.append(IterationRecord(
            iteration=iteration, graphs=graphs, self_play_real_steps=self_steps,
            reanalyse_real_steps=re_steps,
            self_play_rule_enumerations=sum(p.rule_enumerations for p in played),
            states_added=len(new),
            states_reanalysed=reanalysed, states_stored=len(states), loss_before=loss_before,
            losses=losses, change_pct={p.graph: p.change_pct for p in played}, policy=folder))
        run.policy = folder
        run.real_steps += self_steps + re_steps
        run.rule_enumerations += sum(p.rule_enumerations for p in played)
        run.store_parts = len(store.parts())
        run.save(out_dir)
        say(f"iteration {iteration + 1}/{config.iterations}: real steps "
            f"{self_steps + re_steps} (total {run.real_steps}), states {len(states)}, "
            f"loss {losses.get('loss', float('nan')):.3f} (before "
            f"{loss_before.get('loss', float('nan')):.3f}), self-play "
            + ", ".join(f"{p.graph} {p.change_pct:+.2f}%" for p in played))
    return run


@dataclasses.dataclass
class FinetuneOutcome:
    """What `finetune_by_search` handed over and what it spent.

    Attributes:
      cost, initial_cost: ms; change_pct: the handed-over graph's change.
      applied: its route from the initial graph.
      real_steps: all expansions on the graph: self-play, reanalyse and
        the final planner run.
      self_play_real_steps: those of self-play and reanalyse.
      final_change_pct: the final planner run's own result.
      rule_enumerations: single-rule enumerations (multi-location
        actions) of self-play and the final run, counted apart.
      run: the learning run's record.
    """
    cost: float
    initial_cost: float
    change_pct: float
    applied: List[Tuple[str, int]]
    real_steps: int
    real_steps_to_best: int
    self_play_real_steps: int
    final_change_pct: float
    rule_enumerations: int
    run: SearchRun


def finetune_by_search(graph: str, budget: int, config: SearchTrainingConfig, out_dir: str,
                       self_play_share: float = 2 / 3,
                       progress: Optional[Callable[[str], None]] = None) -> FinetuneOutcome:
    """Learning from search on corpus graph `graph` (the generalist's
    fine-tuning path; module docstring) within `budget` real steps:
    `self_play_share` of it for self-play (and reanalyse), the rest for a
    final planner run from the learned policy (with `config.plan`'s
    settings and seed); the cheapest graph any of them handed over."""
    if not 0 < self_play_share < 1:
        raise ValueError(f"self_play_share must be in (0, 1), got {self_play_share}")
    config = dataclasses.replace(config, graphs=(graph,), graphs_per_iteration=1,
                                 real_step_budget=int(self_play_share * budget))
    run = train_from_search(config, out_dir, progress)
    env = environment(graph, config.rules, config.cost_model)
    final = plan(env, dataclasses.replace(config.plan, prior=f"policy:{run.policy}",
                                          max_real_steps=max(1, budget - run.real_steps)))
    best = run.best.get(graph)
    if best is None or final.cost < best.cost:
        best = BestGraph(final.cost, final.initial_cost, final.change_pct, final.applied,
                         run.real_steps + final.real_steps_to_best)
    return FinetuneOutcome(cost=best.cost, initial_cost=best.initial_cost,
                           change_pct=best.change_pct, applied=list(best.applied),
                           real_steps=run.real_steps + final.real_steps,
                           real_steps_to_best=best.real_steps_to_best,
                           self_play_real_steps=run.real_steps,
                           final_change_pct=final.change_pct,
                           rule_enumerations=run.rule_enumerations + final.rule_enumerations,
                           run=run)
