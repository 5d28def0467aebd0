"""An environment over a distribution of graphs: each episode samples one.

`SampledGraphEnv(graphs, xfers, cost_model, config, seed)` plays every
episode on a graph drawn from `graphs` (name -> a graph, or a function
that builds one when it is first drawn; uniformly, or by `weights`, e.g.
equal weight per family), in the real environment
of that graph (`GraphEnv`: the same rules, cost model and config for all,
so observations have the same shape whatever the graph). An agent trained
on it is a policy for any graph the rules apply to: what the generalist of
docs/agents.md ("One policy for many graphs") learns from.

Step limits: `config.max_steps`, or with `equal_budget` the larger of it
and 1.5 times one-step greedy's steps on the drawn graph (computed the
first time the graph is drawn), so a policy has room to look ahead on
large graphs and short episodes on small ones.

`clone()` gives another environment over the same graphs with its own
episode and its own random stream (for agents that play several episodes
at once); the built graphs, the rules and the cost model are shared.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Dict, List, Mapping, Optional, Union

import numpy as np

from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.env.environment import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.env.interface import Action, Environment, Observation, ObservationSpec, TimeStep

GraphOrBuilder = Union[Graph, Callable[[], Graph]]
# The equal-budget factor of the entry points (`xflowrl.search.EQUAL_BUDGET_FACTOR`).
_EQUAL_BUDGET_FACTOR = 1.5


class _Shared:
    """What clones share: the graphs as built, and their step limits."""

    def __init__(self, graphs: Mapping[str, GraphOrBuilder]):
        self.sources = dict(graphs)
        self.built: Dict[str, Graph] = {}
        self.limits: Dict[str, int] = {}

    def graph(self, name: str) -> Graph:
        if name not in self.built:
            source = self.sources[name]
            self.built[name] = source if isinstance(source, Graph) else source()
        return self.built[name]


class SampledGraphEnv(Environment):
    """Episodes on graphs drawn from a set (see module docstring).

    Attributes:
      names: the graphs' names, in the order given.
      current: the name of the graph of the current (last reset) episode.
    """

    def __init__(self, graphs: Mapping[str, GraphOrBuilder], xfers: XferSet,
                 cost_model: CostModel, config: Optional[EnvConfig] = None, seed: int = 0,
                 equal_budget: bool = False, weights: Optional[Mapping[str, float]] = None,
                 _shared: Optional[_Shared] = None):
        if not graphs:
            raise ValueError("SampledGraphEnv needs at least one graph")
        self.xfers, self.cost_model = xfers, cost_model
        self.config = config or EnvConfig()
        self.equal_budget = equal_budget
        self.names: List[str] = list(graphs)
        self.weights = dict(weights) if weights else None
        if weights:
            missing = set(self.names) - set(weights)
            if missing:
                raise ValueError(f"weights lack graphs {sorted(missing)}")
            p = np.array([weights[n] for n in self.names], np.float64)
            if (p < 0).any() or p.sum() <= 0:
                raise ValueError("weights must be non-negative with a positive sum")
            self._p: Optional[np.ndarray] = p / p.sum()
        else:
            self._p = None
        self._shared = _shared or _Shared(graphs)
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self._clones = 0
        self._envs: Dict[str, GraphEnv] = {}
        self.current: Optional[str] = None
        self._max_pattern_ops = max(len(r.src) for r in xfers.rules)

    # -- the graphs ------------------------------------------------------------
    def env_of(self, name: str) -> GraphEnv:
        """This environment's `GraphEnv` of graph `name` (built on first use)."""
        if name not in self._envs:
            graph = self._shared.graph(name)
            self._envs[name] = GraphEnv(graph, self.xfers, self.cost_model,
                                        self._config_of(name, graph))
        return self._envs[name]

    def _config_of(self, name: str, graph: Graph) -> EnvConfig:
        if not self.equal_budget:
            return self.config
        if name not in self._shared.limits:
            from xflowrl.search import greedy_search  # pylint: disable=import-outside-toplevel
            probe = GraphEnv(graph, self.xfers, self.cost_model, EnvConfig(
                max_steps=NO_STEP_LIMIT, max_locations=self.config.max_locations))
            steps = len(greedy_search(probe).applied)
            self._shared.limits[name] = max(self.config.max_steps,
                                            math.ceil(_EQUAL_BUDGET_FACTOR * steps))
        return dataclasses.replace(self.config, max_steps=self._shared.limits[name])

    @property
    def env(self) -> GraphEnv:
        """The `GraphEnv` of the current episode."""
        if self.current is None:
            raise RuntimeError("no episode yet; call reset()")
        return self._envs[self.current]

    @property
    def rng(self) -> np.random.Generator:
        """The generator that draws each episode's graph (a trainer
        checkpoints its state, so that a resumed run draws the same graphs)."""
        return self._rng

    def reseed(self, seed: int) -> None:
        """Draws the graphs of the episodes from here on as a new environment
        of `seed` would (an agent keys each phase's draws this way, so that
        they do not depend on how many episodes came before)."""
        self._rng = np.random.default_rng(seed)

    def graph_envs(self) -> List[GraphEnv]:
        """The `GraphEnv` of every graph, in the order of `names` (built on
        first use): where episodes start."""
        return [self.env_of(name) for name in self.names]

    @property
    def initial_cost(self) -> float:
        return self.env.initial_cost

    # -- Environment -------------------------------------------------------------
    def draw(self) -> str:
        """The graph of the next episode, drawn as `reset` draws it (an agent
        that plays several episodes at once draws theirs in turn, then plays
        each on a clone of `env_of(name)`)."""
        return self.names[int(self._rng.choice(len(self.names), p=self._p))]

    def reset(self) -> Observation:
        self.current = self.draw()
        return self.env_of(self.current).reset()

    def reset_to(self, name: str) -> Observation:
        """Starts an episode on graph `name` (evaluation on a chosen graph)."""
        self.current = name
        return self.env_of(name).reset()

    def step(self, action: Action) -> TimeStep:
        return self.env.step(action)

    def observation_spec(self) -> ObservationSpec:
        return ObservationSpec(state="graph", state_size=None, num_xfers=len(self.xfers),
                               max_locations=self.config.max_locations,
                               location_features=True, max_pattern_ops=self._max_pattern_ops)

    @property
    def num_xfers(self) -> int:
        return len(self.xfers)

    def clone(self) -> "SampledGraphEnv":
        """Another environment over the same graphs, its own episode and random stream."""
        self._clones += 1
        stream = int(np.random.SeedSequence([self._seed, self._clones]).generate_state(1)[0])
        return SampledGraphEnv({n: self._shared.sources[n] for n in self.names}, self.xfers,
                               self.cost_model, self.config, stream, self.equal_budget,
                               self.weights, _shared=self._shared)
