"""Decision-time planning with the engine: Gumbel root, pUCT below, max backups.

`plan(env, config)` optimises `env`'s initial graph the way an agent that
plans would act: at each decision it runs `simulations` simulations from
the current graph, takes one action, keeps the subtree below it, and
stops once no simulation has found anything cheaper below the current
graph (or a budget runs out). It hands over the cheapest graph any
simulation reached, with the shortest known route to it: every node is a
real graph, built by the engine (`xflowrl.planning.simulator`).

- **Root**: Gumbel MuZero's selection (Danihelka et al., ICLR 2022):
  `root_actions` candidates drawn without replacement by Gumbel-top-k on
  the prior's logits, then sequential halving: the simulations are shared
  out over ceil(log2 k) phases, each phase gives the survivors equal
  visits and keeps the better half by `g + logits + sigma(q)`, with
  `sigma(q) = (c_visit + max visits) * c_scale * q` and q normalised to
  [0, 1] over the node's actions (`_normalise`). The action taken is
  the one towards the cheapest graph known below, the last survivor
  among equals.
- **Below the root**: pUCT (AlphaZero, MuZero: c = `c_puct`), over every
  candidate of the node, q normalised as at the root.
- **Values** (`xflowrl.planning.tree`): the cheapest cost known below a
  node. A leaf's value is what its expansion shows (its cheapest
  candidate, exactly: the candidates are costed), or, with
  `rollout_steps` > 0, the cheapest graph of a one-step-greedy rollout of
  that many steps from it (each a real step, each graph a node).
- **Stopping**: where nothing cheaper than the current graph is known
  below it, the root is searched again, with new Gumbel draws, up to
  `patience` times before planning stops there; with `restarts`, where
  nothing cheaper than greedy's graph is known yet, it first goes back to
  the first graph (up to that many times) and decides again from there,
  the tree kept. With `stall_real_steps`, once a graph cheaper than
  greedy's is known, that many real steps without a cheaper one count as
  such a stop (`stalled`); by default "greedy's" is the dearer of the
  greedy start's graph and one-step greedy's without merging
  (`stall_from`).
- **Detours** (`detours` > 0): where planning would stop for good
  (`no_improvement`), a local look-ahead from the cheapest graph known
  first looks for a costlier route to a cheaper graph in one place, and
  takes that route's xfers everywhere (`xflowrl.planning.detour`);
  planning goes on from what it found, if anything.
- **Greedy start** (default): before the first decision, one-step
  greedy's descent from the input is put into the tree, so that planning
  starts from greedy's route and hands over nothing worse than greedy's
  graph (with `merge_identical`: than greedy's with identical ops merged
  after every step, which may differ); its real steps are counted like
  any others.

Real steps (expansions) are counted as an agent's steps in the real
environment are; the budget `max_real_steps` bounds them, `time_limit_s`
the wall time.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set, Tuple

import numpy as np

from xflowrl.engine import Graph
from xflowrl.env import CHEAPER, GraphEnv
from xflowrl.planning import _inner, detour
from xflowrl.planning.priors import Prior, make_prior
from xflowrl.planning.simulator import EngineSimulator, MERGE, MERGE_NAME, Step
from xflowrl.planning.tree import Node, Tree
from xflowrl.search.greedy import greedy_walk

# Where the search takes multi-location actions of no estimated gain
# (`PlanConfig.neutral_everywhere`).
NEUTRAL_EVERYWHERE = ("search", "root", "detours")

# Which greedy graph a stall counts from (`PlanConfig.stall_from`).
STALL_FROM = ("greedy", "descent")

# Why planning ended (`PlanResult.stopped`).
STOPS = ("no_improvement", "no_candidates", "step_limit", "real_steps", "time_limit",
         "stalled")


@dataclasses.dataclass(frozen=True)
class PlanConfig:
    """Settings of the engine planner (module docstring).

    Attributes:
      prior: `xflowrl.planning.priors.make_prior`'s spec.
      simulations: per decision.
      root_actions: k of the Gumbel-top-k sample at the root.
      c_puct: pUCT's exploration constant below the root.
      c_visit, c_scale: the constants of Gumbel MuZero's monotone
        transform sigma of q in [0, 1] (module docstring).
      rollout_steps: one-step-greedy rollout length at leaves (0: none).
      greedy_start: first descend from the input as one-step greedy would
        (its graphs become nodes, its real steps count), so that the search
        starts out knowing greedy's route and can only end at or below it.
      everywhere: offer multi-location actions too, an xfer at all its
        locations in one step (`xflowrl.planning.simulator`).
      neutral_everywhere: where the search takes the multi-location
        actions of no estimated gain (no candidate of the xfer cheaper than
        the graph): "search" at every node, "root" at the decision's root
        only, "detours" nowhere. Where the search does not take them, a
        detour still builds them (`xflowrl.planning.detour.
        replay_everywhere`). Each costs one single-rule enumeration per
        application; on NASNet-A they were most of the planner's CPU
        (docs/planning.md, "Speed").
      merge_identical: merge identical ops in the input and in every graph
        built (`xflowrl.engine.dedupe`), as an e-graph does; the route then
        holds merge steps (`xflowrl.planning.simulator.replay_route`).
      max_decisions: actions taken at most (the environment's step limit
        by default, `plan`'s `env.config.max_steps`).
      max_real_steps: expansions at most, rollouts included.
      count_enumerations: `max_real_steps` bounds every engine call: the
        expansions and the multi-location actions' single-rule
        enumerations together (the fine-tuning budget's count). A
        multi-location action runs whole, so the last one may pass the
        budget; `PlanResult.engine_calls_to_best` says when the result was
        first seen.
      time_limit_s: wall time at most.
      patience: searches from a graph below which nothing cheaper is known
        before planning stops there (each draws other root actions).
      restarts: times planning, stopped that way below the first graph
        with nothing known cheaper than greedy's graph (the greedy start's
        last; the first graph without one), goes back to the first graph
        and decides again from there (the tree and what it knows kept; the
        budgets still bound it). The first decisions follow greedy's route
        where the first searches find nothing cheaper, and a stall at its
        end cannot undo them; once past greedy's graph, planning stops as
        before.
      detours: times planning, about to stop for good with nothing cheaper
        known below, first looks for a detour from the cheapest graph known
        (`xflowrl.planning.detour`; from each graph once; 0: never) and goes
        on from what it found.
      detour_expansions: expansions one detour search may spend (real
        steps, within `max_real_steps`).
      stall_real_steps: real steps after the last cheaper graph at which
        planning, once it knows a graph cheaper than greedy's, counts as
        stalled (None: never): as when its searches find nothing cheaper,
        a detour search runs where `detours` allows, and planning stops
        (`stalled`) unless it found a cheaper graph. Until then the
        searches, restarts and detours go on as without it.
      stall_from: what the cheapest graph known must be below for the
        stall to count: "descent", the greedy start's last graph (the
        first graph without a greedy start); or
        "greedy", the dearer of that and one-step greedy's graph as every
        benchmark runs it, identical ops not merged. With
        `merge_identical` the descent merges, and may end far below
        one-step greedy's graph (NASNet-A's separable branches); with
        "descent", a planner whose descent already holds the best graph
        then searches on to its budget, with "greedy" it stalls. One-step
        greedy's walk runs only where it decides that (the descent merged
        ops, and a stall's real steps passed with nothing found below its
        graph); its expansions are real steps (docs/planning.md, "A
        stall").
      seed: of the Gumbel noise.
    """
    prior: str = "xfer"
    simulations: int = 16
    root_actions: int = 16
    c_puct: float = 1.25
    c_visit: float = 50.0
    c_scale: float = 1.0
    rollout_steps: int = 0
    max_decisions: Optional[int] = None
    max_real_steps: int = 5_000
    count_enumerations: bool = False
    time_limit_s: float = 60.0
    greedy_start: bool = True
    everywhere: bool = False
    neutral_everywhere: str = "search"
    merge_identical: bool = False
    patience: int = 2
    restarts: int = 1
    detours: int = 0
    detour_expansions: int = 200
    stall_real_steps: Optional[int] = None
    stall_from: str = "greedy"
    seed: int = 0

    def __post_init__(self):
        if self.simulations < 1 or self.root_actions < 1:
            raise ValueError("simulations and root_actions must be >= 1")
        if self.patience < 0 or self.restarts < 0 or self.detours < 0:
            raise ValueError("patience, restarts and detours must be >= 0")
        if self.neutral_everywhere not in NEUTRAL_EVERYWHERE:
            raise ValueError(f"neutral_everywhere must be one of {NEUTRAL_EVERYWHERE}, not "
                             f"{self.neutral_everywhere!r}")
        if self.detour_expansions < 1:
            raise ValueError("detour_expansions must be >= 1")
        if self.stall_real_steps is not None and self.stall_real_steps < 1:
            raise ValueError("stall_real_steps must be >= 1 or None")
        if self.stall_from not in STALL_FROM:
            raise ValueError(f"stall_from must be one of {STALL_FROM}, not "
                             f"{self.stall_from!r}")
        if self.rollout_steps < 0 or self.max_real_steps < 1 or self.time_limit_s <= 0:
            raise ValueError("rollout_steps must be >= 0, max_real_steps >= 1 and "
                             "time_limit_s > 0")


def deployed_config(**changes: Any) -> PlanConfig:
    """The configuration `xflowrl optimize --method=plan` runs:
    multi-location actions, those of no estimated gain taken at the
    decision's root only (`neutral_everywhere="root"`: far faster on
    NASNet-A with the large rule sets, a point less on NasRNN at batch 1;
    docs/planning.md), identical ops merged, one detour search, 1,000 real
    steps, a stall after 200 real steps without a cheaper graph once past
    one-step greedy's (docs/planning.md, "A stall"),
    `PlanConfig`'s defaults otherwise; `changes` replace fields (the prior,
    the budget, the seed)."""
    fields: Dict[str, Any] = dict(max_real_steps=1000, everywhere=True, merge_identical=True,
                                  detours=1, neutral_everywhere="root", stall_real_steps=200)
    fields.update(changes)
    return PlanConfig(**fields)


class PlanResult(NamedTuple):
    """What `plan` hands over and what it took."""
    graph: Graph
    cost: float                       # ms
    applied: List[Tuple[str, int]]    # (xfer name, location) from the original
    initial_cost: float               # ms
    real_steps: int                   # expansions, rollouts included
    applies: int                      # candidate graphs built
    rule_enumerations: int            # single-rule enumerations (multi-location actions)
    decisions: int                    # actions taken
    nodes: int                        # graphs in the tree
    seconds: float
    stopped: str                      # one of STOPS
    prior: str
    real_steps_to_best: int = 0       # expansions when the handed-over cost was first seen
    engine_calls_to_best: int = 0     # expansions and single-rule enumerations by then
    cpu_seconds_to_best: float = 0.0  # the planning thread's CPU seconds by then
    detour_real_steps: int = 0        # expansions of detour searches and their replays
    detours_found: int = 0            # detour searches that led to a cheaper graph

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.cost / self.initial_cost - 1.0)


class _Best(NamedTuple):
    """The cheapest graph seen: reached from `node` by `suffix` (empty:
    `node` itself); `graph` where it was built."""
    cost: float
    node: Node
    suffix: Tuple[Step, ...]
    graph: Optional[Graph]


class Planner:
    """One planning run over one graph (`plan` is the usual way in)."""

    def __init__(self, env: GraphEnv, config: PlanConfig, prior: Optional[Prior] = None,
                 progress: Optional[Callable[[str], None]] = None,
                 start: Optional[Graph] = None):
        """`start`: plan from this graph instead of `env`'s initial graph
        (a graph reached from it: costs stay in points of the initial
        graph's, and the route handed over starts at `start`); reanalyse
        searches again from stored graphs this way."""
        self._cpu_start = time.thread_time()   # cpu_seconds_to_best counts from here
        self.env = env
        self.start_graph = env.initial_graph if start is None else start
        self.config = config
        self.sim = EngineSimulator.of(env, config.merge_identical)
        self.prior = prior if prior is not None else make_prior(config.prior, env)
        self.tree = Tree()
        self.rng = np.random.default_rng(config.seed)
        self.progress = progress
        self._start = time.monotonic()
        first, self._prefix = self.sim.canonical(self.start_graph)
        cost = (first.cost(env.cost_model) if self._prefix or start is not None
                else env.initial_cost)
        self.root = self.tree.node_of(first, cost, None)
        self.best = _Best(cost, self.root, (), first)
        self.best_at = self.best_calls = 0
        self.best_cpu = 0.0
        self._expand(self.root, rollout=False)
        if config.greedy_start:
            self._descend(self.root, self.env.config.max_steps)
        self._greedy_cost = self.best.cost   # what a restart must get below
        # Whether one-step greedy's walk may be dearer than the descent: a
        # merge changed the descent. Without a greedy start the reference
        # stays the first graph (`_stall_reference`).
        self._walk_may_be_dearer = config.greedy_start and self.sim.merges > 0
        self._walk_cost: Optional[float] = None   # that walk's, once run
        self._detoured: Set[Node] = set()    # the nodes detour searches started from
        self._detour_steps = self._detours_found = 0

    # -- budgets -------------------------------------------------------------

    def _out_of(self) -> Optional[str]:
        """The budget that has run out, if any."""
        if self._calls() >= self.config.max_real_steps:
            return "real_steps"
        if time.monotonic() - self._start >= self.config.time_limit_s:
            return "time_limit"
        return None

    def _calls(self) -> int:
        """What `max_real_steps` bounds: the expansions, and with
        `count_enumerations` the single-rule enumerations too."""
        enumerations = self.sim.rule_enumerations if self.config.count_enumerations else 0
        return self.sim.real_steps + enumerations

    def out_of_budget(self) -> bool:
        """Whether a budget (real steps, time) has run out."""
        return self._out_of() is not None

    # -- expansion and leaf values ------------------------------------------

    def expand(self, node: Node) -> None:
        """Expands `node` (a real step) without a rollout."""
        self._expand(node, rollout=False)

    def child(self, node: Node, index: int) -> Node:
        """The node action `index` of expanded `node` leads to (built once)."""
        return self._child(node, index)

    def _expand(self, node: Node, rollout: bool = True) -> None:
        """Expands `node` (a real step), sets its prior and its leaf value
        (and rolls out from it, where `rollout_steps` asks)."""
        expansion = self.sim.expand(node.graph, node.cost, self.config.everywhere)
        node.attach(expansion, self.prior.logits)
        if self.config.neutral_everywhere != "search":
            several = slice(expansion.singles, None)
            neutral = expansion.costs[several] >= expansion.cost - CHEAPER
            if self.config.neutral_everywhere == "root":
                node.root_only[several] = neutral
            else:
                node.dead[several] = neutral
        if expansion.singles:
            index = int(np.argmin(expansion.candidate_costs))
            xfer, location = (int(a) for a in expansion.actions[index])
            self._offer(float(expansion.costs[index]), node, (Step(xfer, location),), None)
            if rollout and self.config.rollout_steps:
                self._descend(node, self.config.rollout_steps)

    def _descend(self, node: Node, steps: int) -> None:
        """One-step greedy from `node` for at most `steps` steps, each graph
        a node of the tree (expanded: a real step each), and its cheapest
        cost backed up to `node`: the greedy rollout of a leaf, or, from the
        root, greedy's whole descent (`PlanConfig.greedy_start`)."""
        path = [node]
        for _ in range(steps):
            expansion = path[-1].expansion
            assert expansion is not None
            if not expansion.singles or self._out_of():
                break
            index = int(np.argmin(expansion.candidate_costs))
            if expansion.costs[index] >= expansion.cost - CHEAPER:
                break
            child = self._child(path[-1], index)
            if child in path:
                break
            path[-1].edge_visits[index] += 1
            path.append(child)
            if not child.expanded:
                self._expand(child, rollout=False)
        _backup(path)

    def _offer(self, cost: float, node: Node, suffix: Tuple[Step, ...],
               graph: Optional[Graph]) -> None:
        if cost < self.best.cost - CHEAPER:
            self.best = _Best(cost, node, suffix, graph)
            self.best_at = self.sim.real_steps
            self.best_calls = self.sim.real_steps + self.sim.rule_enumerations
            self.best_cpu = time.thread_time() - self._cpu_start

    # -- simulations ---------------------------------------------------------

    def _child(self, node: Node, index: int) -> Node:
        child = node.children.get(index)
        if child is None:
            expansion = node.expansion
            assert expansion is not None
            graph, steps = self.sim.child(expansion, index)
            # A candidate's cost is exact, and offered already; not a
            # multi-location action's, nor a graph's once ops were merged.
            known = index < expansion.singles and steps[-1].xfer != MERGE
            cost = (float(expansion.costs[index]) if known
                    else graph.cost(self.sim.cost_model))
            child = self.tree.node_of(graph, cost, node, steps)
            if not known:
                self._offer(cost, child, (), graph)
            node.children[index] = child
        return child

    def _select(self, node: Node) -> Optional[int]:
        """pUCT's action at an interior node; None if every action is dead
        (or taken at the root only). In C (`xflowrl.planning._inner`), the
        same action as `select_numpy`'s."""
        index = _inner.select(node, self.config.c_puct)
        if index == -2:   # a NaN value or prior: numpy's rules decide
            return select_numpy(node, self.config.c_puct)
        return None if index < 0 else index

    def _simulate(self, root: Node, first: int) -> None:
        """One simulation from `root` starting with action `first`."""
        path, on_path = [root], {id(root)}
        node, index = root, first
        while True:
            child = self._child(node, index)
            if id(child) in on_path:
                node.dead[index] = True   # a cycle: back to a graph on this path
                break
            node.edge_visits[index] += 1
            path.append(child)
            on_path.add(id(child))
            if not child.expanded:
                self._expand(child)
                break
            node = child
            assert node.expansion is not None
            if not len(node.expansion.actions) or self._out_of():
                break
            next_index = self._select(node)
            if next_index is None:
                break
            index = next_index
        _backup(path)
        root.visits += 1

    def _sigma(self, node: Node, q: np.ndarray) -> np.ndarray:
        visits = node.edge_visits.max() if len(node.edge_visits) else 0
        return (self.config.c_visit + visits) * self.config.c_scale * q

    def decide(self, root: Node) -> Optional[int]:
        """Gumbel-top-k and sequential halving at `root` (module docstring);
        the action to take, or None when a budget ran out before any
        simulation or every action is dead."""
        expansion = root.expansion
        assert expansion is not None
        logits = np.log(np.maximum(root.prior, 1e-30))
        gumbel = self.rng.gumbel(size=len(logits))
        alive = np.flatnonzero(~root.dead)
        k = min(self.config.root_actions, len(alive))
        if k == 0:
            return None
        order = alive[np.argsort(-(gumbel + logits)[alive], kind="stable")]
        survivors = list(order[:k])
        phases = max(1, math.ceil(math.log2(k))) if k > 1 else 1
        for _ in range(phases):
            per = max(1, self.config.simulations // (phases * len(survivors)))
            for index in survivors:
                for _ in range(per):
                    if self._out_of() or root.dead[index]:
                        break
                    self._simulate(root, index)
            survivors = [i for i in survivors if not root.dead[i]]
            if not survivors:
                return None
            values = root.action_values()
            score = gumbel + logits + self._sigma(root, _normalise(values, ~root.dead))
            survivors.sort(key=lambda i: -score[i])
            if len(survivors) > 1:
                survivors = survivors[:math.ceil(len(survivors) / 2)]
            if self._out_of():
                break
        # The simulator is exact and every value a graph it built, so the
        # action taken is the one towards the cheapest graph known below
        # (the halving's winner among equals).
        values = np.where(root.dead, -np.inf, root.action_values())
        best = np.flatnonzero(values >= values.max() - CHEAPER)
        return int(survivors[0]) if survivors[0] in best else int(best[0])

    # -- the run -------------------------------------------------------------

    def run(self) -> PlanResult:
        """Decides, acts and moves down until a stop (module docstring)."""
        limit = (self.config.max_decisions if self.config.max_decisions is not None
                 else self.env.config.max_steps)
        root, decisions, stopped, fruitless = self.root, 0, "step_limit", 0
        restarts = 0
        while decisions < limit:
            assert root.expansion is not None
            if not len(root.expansion.actions):
                stopped = "no_candidates"
                break
            out = self._out_of()
            if out:
                stopped = out
                break
            stall = "stalled" if self._stalled() else None
            if stall is None:
                index = self.decide(root)
                if index is None:
                    stopped = self._out_of() or "no_candidates"
                    break
                if root.best_cost < root.cost - CHEAPER:
                    fruitless = 0
                    root = self._child(root, index)
                    if not root.expanded:
                        self._expand(root)
                    decisions += 1
                    if self.progress is not None:
                        self.progress(f"plan: decision {decisions}, real steps "
                                      f"{self.sim.real_steps}, best "
                                      f"{self.sim.points(self.best.cost) - 100:+.2f}%")
                    continue
                # Nothing cheaper known below: search again from here (other
                # Gumbel draws, other actions) up to `patience` times.
                fruitless += 1
                if fruitless <= self.config.patience:
                    continue
                if not (root is self.root or restarts >= self.config.restarts
                        or self.best.cost < self._greedy_cost - CHEAPER):
                    root, fruitless, restarts = self.root, 0, restarts + 1
                    continue
                stall = "no_improvement"
            # Stalled (fruitless searches, or `stall_real_steps`): a detour
            # search, and planning goes on from what it found.
            found = self._detour()
            if found is None:
                # A detour search may have spent the last budget.
                stopped = (self._out_of() if self._detoured else None) or stall
                break
            root, fruitless = found, 0
        return self._result(decisions, stopped)

    def _stalled(self) -> bool:
        """Whether `stall_real_steps` real steps have passed since the
        cheapest graph known, one cheaper than greedy's, was first seen."""
        stall = self.config.stall_real_steps
        if stall is None or self.sim.real_steps - self.best_at < stall:
            return False
        return self.best.cost < self._stall_reference() - CHEAPER

    def _stall_reference(self) -> float:
        """What the cheapest graph known must be below for a stall to count
        (`PlanConfig.stall_from`): the greedy start's last graph, or with
        "greedy" the dearer of that and one-step greedy's graph without
        merging. The walk to the latter runs only where it decides: the
        descent merged ops and planning has found nothing below its graph."""
        descent = self._greedy_cost
        if (self.config.stall_from == "descent" or not self._walk_may_be_dearer
                or self.best.cost < descent - CHEAPER):
            return descent
        if self._walk_cost is None:
            self._walk_cost = self._one_step_greedy_cost()
        return max(descent, self._walk_cost)

    def _one_step_greedy_cost(self) -> float:
        """The cost of one-step greedy's graph from the start graph, identical
        ops not merged (`greedy_walk`, no graph put into the tree): an
        expansion per graph it reaches, its last included, counted as real
        steps once it has run (so it may pass `max_real_steps` by its length,
        and planning then stops on that budget)."""
        walk = greedy_walk(self.env, start=self.start_graph)
        self.sim.real_steps += len(walk.applied) + 1
        self.sim.applies += len(walk.applied)
        return walk.cost

    def _detour(self) -> Optional[Node]:
        """A detour search from the cheapest graph known (`PlanConfig.detours`):
        the node of the cheapest graph known after it, where that is cheaper
        than before; None where no search is left or it found nothing."""
        if len(self._detoured) >= self.config.detours or self._out_of():
            return None
        start = self._best_node()
        if start in self._detoured:
            return None
        self._detoured.add(start)
        before, steps = self.best.cost, self.sim.real_steps
        try:
            found = detour.find_detour(self, start, self.config.detour_expansions)
            if found is None:
                return None
            _backup(found.nodes)
            if self.config.everywhere:
                _backup(detour.replay_everywhere(self, start, found.xfers))
            if self.best.cost >= before - CHEAPER:
                return None
            self._detours_found += 1
            return self._best_node()
        finally:
            self._detour_steps += self.sim.real_steps - steps

    def _best_node(self) -> Node:
        """The node of the cheapest graph known, built and expanded if it is
        a candidate (a real step)."""
        best = self.best
        node = best.node
        if best.suffix:
            assert node.expansion is not None and len(best.suffix) == 1
            step = best.suffix[0]
            actions = node.expansion.actions[:node.expansion.singles]
            index = int(np.flatnonzero((actions[:, 0] == step.xfer)
                                       & (actions[:, 1] == step.location))[0])
            node = self._child(node, index)
        if not node.expanded:
            self._expand(node, rollout=False)
        return node

    def _result(self, decisions: int, stopped: str) -> PlanResult:
        best = self.best
        route = self.sim.full_route(self.start_graph, list(self._prefix)
                                    + best.node.path() + list(best.suffix))
        graph = best.graph
        if graph is None:   # the cheapest candidate of an expanded node: build it
            expansion = best.node.expansion
            assert expansion is not None and len(best.suffix) == 1
            graph = expansion.locations.apply(best.suffix[0].xfer, best.suffix[0].location)
            self.sim.applies += 1
        names = self.env.xfers.names
        return PlanResult(graph=graph, cost=best.cost,
                          applied=[(names[x] if x != MERGE else MERGE_NAME, int(loc))
                                   for x, loc in route],
                          initial_cost=self.env.initial_cost, real_steps=self.sim.real_steps,
                          applies=self.sim.applies,
                          rule_enumerations=self.sim.rule_enumerations,
                          decisions=decisions, nodes=len(self.tree),
                          seconds=time.monotonic() - self._start, stopped=stopped,
                          prior=self.prior.name, real_steps_to_best=self.best_at,
                          engine_calls_to_best=self.best_calls,
                          cpu_seconds_to_best=self.best_cpu,
                          detour_real_steps=self._detour_steps,
                          detours_found=self._detours_found)


def _backup(path: List[Node]) -> None:
    """Counts a visit to every node of `path` but its first and backs the
    cheapest cost known below each up to its parent (max backups)."""
    for parent, below in zip(path[-2::-1], path[:0:-1]):
        below.visits += 1
        parent.best_cost = min(parent.best_cost, below.best_cost)


def select_numpy(node: Node, c_puct: float) -> Optional[int]:
    """pUCT's action at expanded `node` (c = `c_puct`) over its live
    actions, q normalised over them (`_normalise`); None if none is alive.
    `Planner._select` computes the same in C."""
    alive = ~(node.dead | node.root_only)
    if not alive.any():
        return None
    q = _normalise(node.action_values(), alive)
    u = c_puct * node.prior * math.sqrt(node.visits + 1) / (1 + node.edge_visits)
    return int(np.argmax(np.where(alive, q + u, -np.inf)))


def _normalise(values: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """`values` scaled to [0, 1] by the range of the `alive` ones (per
    node, as mctx's completed Q-values are); 0.5 where they are all equal."""
    live = values[alive]
    if not len(live):
        return np.full(values.shape, 0.5)
    low, high = live.min(), live.max()
    if not high > low:
        return np.full(values.shape, 0.5)
    # np.clip's bounds, without its wrapper's checks (the same values).
    return np.minimum(np.maximum((values - low) / (high - low), 0.0), 1.0)


def plan(env: GraphEnv, config: Optional[PlanConfig] = None, prior: Optional[Prior] = None,
         progress: Optional[Callable[[str], None]] = None) -> PlanResult:
    """Plans from `env`'s initial graph under its rules, cost model, L and
    size cap (module docstring); `env` itself is not stepped. The tree is
    freed before it returns (`Tree.release`), so that what planning
    built is paid for by this call."""
    planner = Planner(env, config or PlanConfig(), prior, progress)
    try:
        return planner.run()
    finally:
        planner.tree.release()
