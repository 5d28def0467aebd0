"""Planning with the learned model (MuZero-style), acting in the real environment.

`plan_with_model(env, model, config)` optimises `env`'s initial graph one
decision at a time. At each decision:

1. **A real step**: the current graph is expanded by the engine
   (`xflowrl.planning.simulator.EngineSimulator.expand`, multi-location
   actions on): its real mask (the xfers that apply) and its candidates'
   exact costs. The model's actions are the xfers that apply, each at all
   its locations, and with the model's `single_actions` also each xfer
   with several locations at its cheapest one
   (`xflowrl.planning.model.model_actions`).
2. **A search in latent space**: the graph is represented once (`h`),
   then Gumbel MuZero's root (Danihelka et al., ICLR 2022), as in
   `xflowrl.planning.search`: `root_actions` xfers drawn without
   replacement by Gumbel-top-k from the policy head's logits over the real
   mask, sequential halving over ceil(log2 k) phases with the
   `simulations` shared out, keeping the better half by `g + logits +
   sigma(q)`; below the root pUCT over the model's own mask
   (`mask_threshold` on the mask head's sigmoid) to `max_depth` model
   steps. Every dynamics call is a counted model step. Values back up as
   maxima (the model is deterministic and stopping is allowed: a node's
   value is the larger of its value head and its best action's reward
   plus its child's value). The root's rewards come from the real step
   (`real_root_rewards`, default): exact for an xfer with one location
   and for a cheapest-location action, for a multi-location action the
   expansion's estimate (its candidates' gains added up); below the root
   every reward is the model's.
3. **A real action**: the root action of the highest backed-up value is
   checked on the real graph before it is taken: the engine builds its
   graph (not a real step: no enumeration of all rules; a multi-location
   action's single-rule enumerations are counted apart, as
   `EngineSimulator` counts them), and its value becomes its real reward
   plus the value head's estimate for that real graph, represented from
   its features alone (`value_of`). The choice is then made again, until
   the best action is one already checked; that one is taken. An action
   back to a graph already on the route is dropped.

Planning stops when the best value at the root is below `stop_below`
points (the model sees nothing more to gain), when no action is left,
after `patience` decisions in a row that found no cheaper real graph,
after `max_decisions` decisions or at `max_real_steps`.

**Hand-over and the deployment rule**: the cheapest real graph seen (a
graph acted to, or the cheapest candidate of an expanded graph, whose cost
the real step gave exactly), never a prediction. With `greedy_floor`
(default) one-step greedy's descent is then run with the same simulator
(graphs already expanded are not expanded again) and the cheaper of the
two graphs is handed over: a learned method never hands over a graph
costlier than greedy's.

Real steps are the simulator's expansions: on the target graph, greedy's
included. `ModelPlanResult.real_steps_to_best` is the count when the
handed-over cost was first reached.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from xflowrl.embedding import features
from xflowrl.engine import Graph
from xflowrl.env import CHEAPER, GraphEnv
from xflowrl.planning.model import LatentModel, NumpyHeads, model_actions
from xflowrl.planning.simulator import EVERYWHERE, EngineSimulator, Expansion, Step

# Why planning ended (`ModelPlanResult.stopped`).
# "no_candidates": none left, or every one led back onto the route.
MODEL_STOPS = ("no_gain_predicted", "no_candidates", "decisions", "real_steps", "patience")


@dataclasses.dataclass(frozen=True)
class ModelPlanConfig:
    """Settings of the model planner (module docstring).

    Attributes:
      simulations: per decision.
      root_actions: k of the Gumbel-top-k sample at the root.
      c_puct: pUCT's constant below the root.
      c_visit, c_scale: Gumbel MuZero's sigma(q) = (c_visit + max visits) *
        c_scale * q, q normalised to [0, 1] over the root's visited actions.
      max_depth: model steps of a simulation at most.
      mask_threshold: an xfer applies below the root where the mask head's
        sigmoid exceeds this.
      stop_below: points; planning stops when the root's best value is
        below this.
      max_decisions: real actions at most.
      max_real_steps: expansions at most (greedy's floor may add its own).
      patience: decisions in a row that find no cheaper real graph before
        planning stops.
      real_root_rewards: the root's rewards from the real step (the
        expansion's costs: exact for an xfer with one location, the sum of
        its candidates' gains for a multi-location action) instead of the
        model's.
      check_simulations: simulations of the search that values the real
        graph of a checked action (`value_of`; 0: the value head alone).
      greedy_floor: hand over greedy's graph where it is cheaper.
      seed: of the Gumbel noise.
    """
    simulations: int = 32
    root_actions: int = 16
    c_puct: float = 1.25
    c_visit: float = 50.0
    c_scale: float = 1.0
    max_depth: int = 5
    mask_threshold: float = 0.5
    stop_below: float = 0.05
    max_decisions: int = 20
    max_real_steps: int = 1000
    patience: int = 3
    real_root_rewards: bool = True
    check_simulations: int = 0
    greedy_floor: bool = True
    seed: int = 0

    def __post_init__(self):
        if min(self.simulations, self.root_actions, self.max_depth, self.max_decisions,
               self.max_real_steps) < 1:
            raise ValueError("simulations, root_actions, max_depth, max_decisions and "
                             "max_real_steps must be >= 1")


class ModelPlanResult(NamedTuple):
    """What `plan_with_model` hands over and what it took."""
    graph: Graph
    cost: float                      # ms
    route: List[Step]                # from the initial graph (`replay_steps`)
    initial_cost: float              # ms
    real_steps: int                  # expansions on this graph, greedy's floor included
    real_steps_to_best: int          # expansions when `cost` was first reached
    planner_real_steps: int          # expansions before greedy's floor
    model_steps: int                 # dynamics calls
    representations: int             # representation calls (one per decision)
    rule_enumerations: int           # single-rule enumerations of multi-location actions
    decisions: int
    checked: int                     # root actions built to check them (`ModelPlanner.value_of`)
    seconds: float
    stopped: str                     # one of MODEL_STOPS
    from_greedy: bool                # greedy's graph was handed over (the floor)
    planner_cost: float              # ms, the planner's own best before the floor

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.cost / self.initial_cost - 1.0)


class _LatentNode:
    __slots__ = ("h", "value", "xfers", "prior", "children", "rewards", "edge_visits",
                 "visits", "best")

    def __init__(self, h: np.ndarray, value: float, xfers: np.ndarray, prior: np.ndarray):
        self.h = h
        self.value = max(0.0, value)
        self.xfers = xfers            # [A] the actions of this node
        self.prior = prior            # [A] probabilities
        self.children: Dict[int, _LatentNode] = {}   # action position -> node
        self.rewards = np.zeros(len(xfers))
        self.edge_visits = np.zeros(len(xfers), np.int64)
        self.visits = 0
        self.best = self.value

    def q(self) -> np.ndarray:
        """[A] backed-up values of the actions (0 where not taken)."""
        out = np.zeros(len(self.xfers))
        for position, child in self.children.items():
            out[position] = self.rewards[position] + child.best
        return out

    def backup(self) -> None:
        values = [self.rewards[p] + c.best for p, c in self.children.items()]
        self.best = max([self.value] + values)


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max())
    return shifted / shifted.sum()


def _normalise(values: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """`values` scaled to [0, 1] by the range of the `alive` ones; 0.5
    where they are all equal."""
    live = values[alive]
    if not len(live) or not live.max() > live.min():
        return np.full(values.shape, 0.5)
    return np.clip((values - live.min()) / (live.max() - live.min()), 0.0, 1.0)


class ModelPlanner:
    """One planning run over one graph with a learned model."""

    def __init__(self, env: GraphEnv, model: LatentModel, config: ModelPlanConfig,
                 heads: Optional[NumpyHeads] = None,
                 progress: Optional[Callable[[str], None]] = None):
        self.env = env
        self.progress = progress
        self.model = model
        self.heads = heads if heads is not None else model.numpy_heads()
        self.config = config
        self.sim = EngineSimulator.of(env)
        self.rng = np.random.default_rng(config.seed)
        self.points = 100.0 / env.initial_cost
        self.num_xfers = len(env.xfers)
        self.model_steps = 0
        self.representations = 0
        self.checked = 0
        self._expansions: Dict[int, Expansion] = {}
        self._start = time.monotonic()
        # The cheapest real graph: (cost, route to it, graph or None: the
        # cheapest candidate of the expansion at the route's end, `_pending`).
        self.best_cost = env.initial_cost
        self.best_route: List[Step] = []
        self.best_graph: Optional[Graph] = env.initial_graph
        self.best_at = 0

    def action_name(self, action: int) -> str:
        """The xfer's name, with " (cheapest)" for a cheapest-location action."""
        name = self.env.xfers.names[int(action) % self.num_xfers]
        return name + (" (cheapest)" if action >= self.num_xfers else "")

    # -- real steps ----------------------------------------------------------

    def expand(self, graph: Graph, cost: float, route: List[Step]) -> Expansion:
        """The graph's expansion (a real step unless it was expanded before),
        its cheapest candidate offered as a real graph."""
        key = graph.hash()
        expansion = self._expansions.get(key)
        if expansion is None:
            expansion = self._expansions[key] = self.sim.expand(graph, cost, everywhere=True)
        if expansion.singles:
            index = int(np.argmin(expansion.candidate_costs))
            xfer, location = (int(a) for a in expansion.actions[index])
            self._offer(float(expansion.costs[index]), route + [Step(xfer, location)], None)
        return expansion

    def _offer(self, cost: float, route: List[Step], graph: Optional[Graph]) -> None:
        if cost < self.best_cost - CHEAPER:
            self.best_cost, self.best_route, self.best_graph = cost, list(route), graph
            self.best_at = self.sim.real_steps

    # -- the search ----------------------------------------------------------

    def _node(self, h: np.ndarray, xfers: Optional[np.ndarray]) -> _LatentNode:
        value, policy, mask = self.heads.predict(h[None])
        if xfers is None:   # below the root: the model's own mask
            xfers = np.flatnonzero(1.0 / (1.0 + np.exp(-mask[0])) > self.config.mask_threshold)
        logits = policy[0][xfers] if len(xfers) else np.zeros(0)
        return _LatentNode(h, float(value[0]), xfers,
                           _softmax(logits) if len(xfers) else logits)

    def _child(self, node: _LatentNode, position: int,
               exact: Optional[Dict[int, float]] = None) -> _LatentNode:
        child = node.children.get(position)
        if child is None:
            xfer = int(node.xfers[position])
            h, reward = self.heads.dynamics(node.h[None], np.array([xfer]))
            self.model_steps += 1
            child = node.children[position] = self._node(h[0], None)
            node.rewards[position] = (exact[xfer] if exact is not None and xfer in exact
                                      else float(reward[0]))
        return child

    def _simulate(self, root: _LatentNode, first: int, exact: Dict[int, float]) -> None:
        path = [root]
        node, position, depth = root, first, 0
        while True:
            is_new = position not in node.children
            child = self._child(node, position, exact if node is root else None)
            node.edge_visits[position] += 1
            node.visits += 1
            path.append(child)
            depth += 1
            if is_new or depth >= self.config.max_depth or not len(child.xfers):
                break
            node = child
            position = self._puct(node)
        for below in reversed(path):
            below.backup()

    def _puct(self, node: _LatentNode) -> int:
        q = _normalise(node.q(), node.edge_visits > 0)
        u = self.config.c_puct * node.prior * math.sqrt(node.visits + 1) / (1 + node.edge_visits)
        return int(np.argmax(np.where(node.edge_visits > 0, q, 0.0) + u))

    def decide(self, h: np.ndarray, xfers: np.ndarray, exact: Dict[int, float]) -> np.ndarray:
        """[A] the backed-up value (points) of each root action the search
        visited, -inf for the others."""
        root = self._node(h, xfers)
        if not len(xfers):
            return np.zeros(0)
        logits = np.log(np.maximum(root.prior, 1e-30))
        gumbel = self.rng.gumbel(size=len(xfers))
        k = min(self.config.root_actions, len(xfers))
        survivors = list(np.argsort(-(gumbel + logits), kind="stable")[:k])
        phases = max(1, math.ceil(math.log2(k))) if k > 1 else 1
        for _ in range(phases):
            per = max(1, self.config.simulations // (phases * len(survivors)))
            for position in survivors:
                for _ in range(per):
                    self._simulate(root, int(position), exact)
            q = root.q()
            visited = root.edge_visits > 0
            sigma = ((self.config.c_visit + root.edge_visits.max()) * self.config.c_scale
                     * _normalise(q, visited))
            score = gumbel + logits + sigma
            survivors.sort(key=lambda p: -score[p])
            if len(survivors) > 1:
                survivors = survivors[:math.ceil(len(survivors) / 2)]
        return np.where(root.edge_visits > 0, root.q(), -np.inf)

    def value_of(self, graph: Graph, cost: float) -> float:
        """The model's value (points, >= 0) of a real graph, represented
        from its features alone (no enumeration: no real step): the value
        head's, or with `check_simulations` > 0 the backed-up value of a
        pUCT search of that many simulations from it over the model's own
        masks."""
        state = features.featurize(graph, graph.op_costs(self.sim.cost_model), cost,
                                   self.env.initial_cost)
        self.representations += 1
        root = self._node(self.model.represent_states([state])[0], None)
        if len(root.xfers):
            for _ in range(self.config.check_simulations):
                self._simulate(root, self._puct(root), {})
        return root.best

    # -- the run -------------------------------------------------------------

    def run(self) -> ModelPlanResult:
        config = self.config
        graph, cost = self.env.initial_graph, self.env.initial_cost
        route: List[Step] = []
        on_route = {graph.hash()}
        decisions, stopped, fruitless = 0, "decisions", 0
        expansion = self.expand(graph, cost, route)
        best_before = self.best_cost
        while decisions < config.max_decisions:
            if not len(expansion.actions):
                stopped = "no_candidates"
                break
            xfers, rows = model_actions(expansion, self.num_xfers,
                                        self.model.config.single_actions)
            counts = expansion.locations.count_array[xfers % self.num_xfers]
            # Exact: an xfer with one location and one at its cheapest location.
            exact = {int(x): self.points * (cost - float(expansion.costs[r]))
                     for x, r, c in zip(xfers, rows, counts)
                     if c == 1 or x >= self.num_xfers or config.real_root_rewards}
            h = self.model.represent_states(
                [self.env.observation_of(expansion.locations, cost).state])[0]
            self.representations += 1
            q = self.decide(h, xfers, exact)
            built: Dict[int, Tuple[Graph, Tuple[Step, ...], float]] = {}
            while True:
                position = int(np.argmax(q)) if len(q) else -1
                if position < 0 or q[position] == -np.inf:
                    stopped = "no_candidates"
                    break
                if q[position] < config.stop_below:
                    stopped = "no_gain_predicted"
                    break
                if position in built:
                    break
                # Check the chosen action on the real graph: its real reward
                # and the value of the real graph it builds replace its
                # backed-up value, and the choice is made again.
                child, steps = self.sim.child(expansion, int(rows[position]))
                if child.hash() in on_route:
                    q[position] = -np.inf
                    continue
                child_cost = child.cost(self.sim.cost_model)
                self._offer(child_cost, route + list(steps), child)
                self.checked += 1
                checked = self.points * (cost - child_cost) + self.value_of(child, child_cost)
                if self.progress is not None:
                    self.progress(f"checked {self.action_name(xfers[position])}: "
                                  f"{q[position]:+.2f} pt predicted, {checked:+.2f} with its "
                                  f"real reward ({self.points * child_cost - 100:+.2f}%)")
                q[position] = checked
                built[position] = (child, steps, child_cost)
            if position not in built or stopped in ("no_candidates", "no_gain_predicted"):
                break
            if self.sim.real_steps >= config.max_real_steps:
                stopped = "real_steps"
                break
            child, steps, child_cost = built[position]
            value = float(q[position])
            graph, route, cost = child, route + list(steps), child_cost
            if self.progress is not None:
                self.progress(f"decision {decisions + 1}: {self.action_name(xfers[position])} "
                              f"(predicted {value:+.2f} pt) -> {self.points * cost - 100:+.2f}%, "
                              f"real steps {self.sim.real_steps}, model steps {self.model_steps}")
            on_route.add(graph.hash())
            decisions += 1
            expansion = self.expand(graph, cost, route)
            fruitless = 0 if self.best_cost < best_before - CHEAPER else fruitless + 1
            best_before = self.best_cost
            if fruitless >= config.patience:
                stopped = "patience"
                break
        planner_steps, planner_cost = self.sim.real_steps, self.best_cost
        from_greedy = False
        if config.greedy_floor:
            from_greedy = self._greedy_floor()
        return ModelPlanResult(
            graph=self._best_graph(), cost=self.best_cost, route=self.best_route,
            initial_cost=self.env.initial_cost, real_steps=self.sim.real_steps,
            real_steps_to_best=self.best_at, planner_real_steps=planner_steps,
            model_steps=self.model_steps, representations=self.representations,
            rule_enumerations=self.sim.rule_enumerations, decisions=decisions,
            checked=self.checked,
            seconds=time.monotonic() - self._start, stopped=stopped,
            from_greedy=from_greedy, planner_cost=planner_cost)

    def _greedy_floor(self) -> bool:
        """One-step greedy's descent with this simulator; its graph replaces
        the planner's where cheaper. True where it did."""
        graph, cost = self.env.initial_graph, self.env.initial_cost
        route: List[Step] = []
        best_before = self.best_cost
        while True:
            expansion = self._expansions.get(graph.hash())
            if expansion is None:
                expansion = self._expansions[graph.hash()] = self.sim.expand(
                    graph, cost, everywhere=True)
            if not expansion.singles:
                break
            index = int(np.argmin(expansion.candidate_costs))
            if expansion.costs[index] >= cost - CHEAPER:
                break
            graph, steps = self.sim.child(expansion, index)
            cost = float(expansion.costs[index])
            route = route + list(steps)
        if cost < best_before - CHEAPER:
            self.best_cost, self.best_route, self.best_graph = cost, route, graph
            self.best_at = self.sim.real_steps
            return True
        return False

    def _best_graph(self) -> Graph:
        if self.best_graph is not None:
            return self.best_graph
        return replay_steps(self.env, self.best_route)


def replay_steps(env: GraphEnv, route: List[Step]) -> Graph:
    """The graph `route` builds from `env`'s initial graph: a step at a
    location of the rule set's enumeration, or (location `EVERYWHERE`) the
    candidate of its xfer alone whose graph has hash `after`.

    Raises:
      ValueError: a step that leads nowhere.
    """
    from xflowrl.engine import XferSet  # pylint: disable=import-outside-toplevel
    graph = env.initial_graph
    singles: Dict[int, XferSet] = {}
    for step in route:
        if step.location != EVERYWHERE:
            graph = env.xfers.locations(graph, env.config.max_locations,
                                        env.max_ops).apply(step.xfer, step.location)
            continue
        rule = singles.get(step.xfer)
        if rule is None:
            rule = singles[step.xfer] = XferSet([env.xfers.rules[step.xfer]])
        locs = rule.locations(graph, env.config.max_locations, env.max_ops)
        hashes = locs.hashes()[0]
        if step.after not in hashes:
            raise ValueError(f"no location of xfer {step.xfer} leads to the step's graph")
        graph = locs.apply(0, hashes.index(step.after))
    return graph


def plan_with_model(env: GraphEnv, model: LatentModel,
                    config: Optional[ModelPlanConfig] = None,
                    progress: Optional[Callable[[str], None]] = None) -> ModelPlanResult:
    """Plans from `env`'s initial graph with `model` (module docstring);
    `env` itself is not stepped."""
    return ModelPlanner(env, model, config or ModelPlanConfig(), progress=progress).run()
