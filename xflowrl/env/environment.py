"""The real environment: graph rewriting as an episodic MDP (thesis §3.2).

`GraphEnv.reset()` returns the first `Observation`; `step((xfer, location))`
returns `(observation, reward, done, info)`. It implements `xflowrl.env.interface.Environment`. The
observation is the 4-tuple of thesis §3.2.3, with per-location features that
let the agent tell candidates apart (the thesis
code's location head mean-pools the candidate graphs, so it cannot):

  state:         the current graph as a numpy `GraphsTuple`
                 (`xflowrl.embedding.features`).
  locations:     `LocationFeatures` — per xfer and location, the node indices
                 of the ops the xfer's source pattern matched and the
                 candidate's cost change; per xfer, summary features.
  location_mask: [N+1, L] bool; row N (NO-OP) is all False.
  xfer_mask:     [N+1] bool; entry N (NO-OP) is always True.

`EnvConfig(cost_features=...)` withholds cost information for an ablation
(`COST_FEATURES`): "no_deltas" zeroes the candidates' cost changes,
"none" also every op and graph cost in `state`; shapes are unchanged.

Action `(N, any)` is NO-OP and ends the episode. An episode also ends when no
xfer applies or after `max_steps` steps. An invalid action (out of range or
masked) never raises: `info["invalid"]` says why, the reward is
`invalid_penalty`, and the episode ends (`invalid_action="end"`, default) or
continues unchanged (`"ignore"`). `info["truncated"]` is True when only the
step limit ended the episode; `info` also holds `cost`, `initial_cost`,
`steps` and, on the last step, `history` (the substitutions applied):
`StepInfo` documents every key.
`xflowrl.env.gym_env.GymGraphEnv` wraps this class in the gymnasium API.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, TypedDict, cast

import numpy as np

from xflowrl import zoo
from xflowrl.embedding import features
from xflowrl.engine import CostModel, Graph, Locations, XferSet
from xflowrl.engine.cost import DEFAULT_BACKEND, DEFAULT_PROFILE
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
from xflowrl.env import rewards
from xflowrl.env.interface import (
    Action,
    Environment,
    LocationFeatures,
    Observation,
    ObservationSpec,
    TimeStep,
)
from xflowrl.rules.sets import DEFAULT_RULE_SET

XFER_SUMMARY_SIZE = 3

# The step limit of an episode (`EnvConfig.max_steps`) unless one is given.
DEFAULT_MAX_STEPS = 50
# `EnvConfig.max_steps` meaning "no step limit": one-step greedy, a replay
# and a probe of greedy's steps stop on their own (greedy when nothing
# improves: a few hundred steps at most on any zoo or corpus graph), long
# before it; `info["truncated"]` still works as for any limit.
NO_STEP_LIMIT = 100_000

# How much cheaper (ms) a graph must be to count as cheaper than the
# cheapest one before it (`GraphEnv.cheapest_prefix`, `replay.cheapest_prefix`):
# a float's rounding apart is the same cost.
CHEAPER = 1e-12

# What cost information the observation carries (`EnvConfig.cost_features`):
#   "full":      everything (default): each candidate's cost change
#                (`LocationFeatures.cost_delta`, the min and mean of
#                `xfer_summary`), each op's cost (a node feature) and the
#                graph's cost (globals).
#   "no_deltas": no candidate cost changes (zeros), so the agent cannot
#                just take their argmin; op and graph costs stay.
#   "none":      additionally no op or graph cost (the node cost column and
#                the two cost globals are zero): only structure is left.
# Shapes never change, so agents run unchanged; the reward always carries
# the cost. An ablation of the observation (docs/agents.md,
# experiments/observation_ablation.py).
COST_FEATURES = ("full", "no_deltas", "none")


class CheapestPrefix(NamedTuple):
    """The cheapest graph an episode has passed through so far
    (`GraphEnv.cheapest_prefix`), the initial graph included: what an optimiser
    hands over, not where the episode happens to end."""
    graph: Graph
    cost: float                     # ms
    applied: List[Tuple[str, int]]  # the shortest prefix of the episode's substitutions that builds it


class _StepInfoAlways(TypedDict):
    invalid: Optional[str]   # why the action was invalid; None for a valid one
    applied: Optional[str]   # the xfer's name, "NO-OP", or None (invalid)
    location: int            # the action's location, as given
    truncated: bool          # only the step limit ended the episode
    cost: float              # the current graph's cost (ms), after the step
    initial_cost: float      # the episode's first graph's cost (ms)
    steps: int               # steps taken in this episode, this one included


class StepInfo(_StepInfoAlways, total=False):
    """`info` of `GraphEnv.step`: a dict (gymnasium's API passes it on as
    one) whose keys are typed here; `history` only on an episode's last step."""
    history: List[Tuple[str, int]]  # (xfer name, location) of every substitution applied


@dataclasses.dataclass
class EnvConfig:
    """Environment settings.

    Attributes:
      max_steps: step limit per episode (the thesis code had none);
        `NO_STEP_LIMIT` for none.
      max_locations: L, locations exposed per xfer.
      reward: a name from `xflowrl.env.rewards.REWARDS`.
      invalid_action: "end" the episode or "ignore" the action (graph kept).
      invalid_penalty: reward of an invalid action.
      max_ops_factor: candidates with more ops than this times the initial
        graph's are dropped.
      cost_features: which cost information observations carry, one of
        `COST_FEATURES` ("full", "no_deltas", "none"); masks, locations and
        shapes are the same under all three.
    """
    max_steps: int = DEFAULT_MAX_STEPS
    max_locations: int = DEFAULT_MAX_LOCATIONS
    reward: str = "relative"
    invalid_action: str = "end"
    invalid_penalty: float = -10.0
    max_ops_factor: float = 2.0
    cost_features: str = "full"

    def __post_init__(self):
        rewards.get(self.reward)
        if self.cost_features not in COST_FEATURES:
            raise ValueError(f"cost_features must be one of {COST_FEATURES}, got "
                             f"{self.cost_features!r}")
        if self.invalid_action not in ("end", "ignore"):
            raise ValueError(f"invalid_action must be 'end' or 'ignore', got "
                             f"{self.invalid_action!r}")
        if self.max_steps < 1 or self.max_locations < 1:
            raise ValueError("max_steps and max_locations must be >= 1")


class GraphEnv(Environment):
    """Applies xfers to one graph; costs come from one cost model."""

    def __init__(self, graph: Graph, xfers: XferSet, cost_model: CostModel,
                 config: Optional[EnvConfig] = None):
        self.initial_graph = graph
        self.xfers = xfers
        self.cost_model = cost_model
        self.config = config or EnvConfig()
        self._reward_fn = rewards.get(self.config.reward)
        self._num_xfers = len(xfers)
        self.max_pattern_ops = max(len(r.src) for r in xfers.rules)
        # Candidates with more ops than this are dropped (`EnvConfig.max_ops_factor`).
        self.max_ops = int(self.config.max_ops_factor * graph.num_ops())
        self.initial_cost = graph.cost(cost_model)
        self.graph: Graph = graph
        self.cost = self.initial_cost
        self.steps = 0
        self.history: List[Tuple[str, int]] = []
        self._cheapest = (graph, self.initial_cost, 0)
        self._locations: Optional[Locations] = None
        self._done = True

    @property
    def num_xfers(self) -> int:
        return self._num_xfers

    def clone(self) -> "GraphEnv":
        """Another environment of the same graph, rules, cost model and
        config, with its own episode (for agents that play several episodes
        at once). The rules and the cost model are shared, not copied."""
        return self.with_config()

    def with_config(self, **changes: Any) -> "GraphEnv":
        """Another environment of the same graph, rules and cost model (shared,
        not copied) whose config is this one's with `changes` (`EnvConfig`
        fields), e.g. `env.with_config(max_steps=NO_STEP_LIMIT)`."""
        return GraphEnv(self.initial_graph, self.xfers, self.cost_model,
                        dataclasses.replace(self.config, **changes))

    def observation_spec(self) -> ObservationSpec:
        return ObservationSpec(state="graph", state_size=None, num_xfers=self._num_xfers,
                               max_locations=self.config.max_locations,
                               location_features=True, max_pattern_ops=self.max_pattern_ops)

    def reset(self) -> Observation:
        self.graph = self.initial_graph
        self.cost = self.initial_cost
        self.steps = 0
        self.history = []
        self._cheapest = (self.graph, self.cost, 0)
        self._done = False
        return self._observe()

    @property
    def cheapest_prefix(self) -> CheapestPrefix:
        """The cheapest graph of the current (or last) episode so far, and
        the shortest prefix of its substitutions that builds it: what
        `xflowrl.env.replay.cheapest_prefix` finds by replaying the episode,
        kept as the episode goes, so that no replay is needed."""
        graph, cost, length = self._cheapest
        return CheapestPrefix(graph, cost, self.history[:length])

    def step(self, action: Action) -> TimeStep:
        if self._done:
            raise RuntimeError("step() called on a finished episode; call reset()")
        locations = self._locations
        if locations is None:  # set by reset(), the only way out of _done
            raise RuntimeError("step() called before reset()")
        xfer, location = int(action[0]), int(action[1])
        previous = self.cost
        self.steps += 1
        truncated = False
        if xfer == self.noop:
            done, applied = True, "NO-OP"
        else:
            invalid = self._check(locations, xfer, location)
            if invalid:
                truncated = (self.config.invalid_action == "ignore"
                             and self.steps >= self.config.max_steps)
                done = self.config.invalid_action == "end" or truncated
                self._done = done
                info = self._info(invalid, None, location, truncated, done)
                return TimeStep(self._observation, self.config.invalid_penalty, done, info)
            self.graph = locations.apply(xfer, location)
            self.cost = self.graph.cost(self.cost_model)
            self.history.append((self.xfers.names[xfer], location))
            if self.cost < self._cheapest[1] - CHEAPER:
                self._cheapest = (self.graph, self.cost, len(self.history))
            done, applied = False, self.xfers.names[xfer]
        observation = self._observation if done else self._observe()
        if not done:
            stuck = not observation.xfer_mask[:self.noop].any()
            truncated = self.steps >= self.config.max_steps and not stuck
            done = stuck or truncated
        reward = self._reward_fn(rewards.Transition(
            self.initial_cost, previous, self.cost, done))
        self._done = done
        return TimeStep(observation, reward, done,
                        self._info(None, applied, location, truncated, done))

    def _info(self, invalid: Optional[str], applied: Optional[str], location: int,
              truncated: bool, done: bool) -> Dict[str, Any]:
        """The step's `info`, after the step: `history` on an episode's last step."""
        info = StepInfo(invalid=invalid, applied=applied, location=location,
                        truncated=truncated, cost=self.cost, initial_cost=self.initial_cost,
                        steps=self.steps)
        if done:
            info["history"] = list(self.history)
        return cast(Dict[str, Any], info)  # TimeStep.info is a plain dict

    def _check(self, locations: Locations, xfer: int, location: int) -> Optional[str]:
        if not 0 <= xfer <= self.noop:
            return f"xfer {xfer} out of range [0, {self.noop}]"
        counts = locations.counts
        if counts[xfer] == 0:
            return f"xfer {xfer} ({self.xfers.names[xfer]}) has no location"
        if not 0 <= location < counts[xfer]:
            return f"location {location} out of range [0, {counts[xfer]}) for xfer {xfer}"
        return None

    def _observe(self) -> Observation:
        """Enumerates the current graph's locations and builds the observation."""
        self._locations = self.xfers.locations(self.graph, self.config.max_locations,
                                               self.max_ops)
        self._observation = self._assemble(self._locations)
        return self._observation

    def observation_of(self, locs: Locations, cost: float) -> Observation:
        """The observation an episode at `locs.graph` (of cost `cost`, ms)
        would see, from its enumerated `locs`, without stepping or touching
        the episode: for planners that hold graphs of their own
        (`xflowrl.planning`)."""
        return self._assemble(locs, locs.graph, cost)

    def _assemble(self, locs: Locations, graph: Optional[Graph] = None,
                  cost: Optional[float] = None) -> Observation:
        """The observation of the current graph (or `graph` of cost `cost`)
        from its enumerated `locs` (apart from enumeration so that
        benchmarks/observation_bench.py can time it alone); `structure()` is
        read once and shared by the state's features and the location
        features."""
        graph = self.graph if graph is None else graph
        cost = self.cost if cost is None else cost
        structure = graph.structure()
        location_mask = locs.location_mask()
        return Observation(
            state=self._featurize(structure, graph, cost),
            locations=self._location_features(locs, structure["guids"], location_mask, cost),
            location_mask=location_mask,
            xfer_mask=locs.xfer_mask())

    def _location_features(self, locs: Locations, guids: np.ndarray,
                           location_mask: np.ndarray, cost: float) -> LocationFeatures:
        """The `LocationFeatures` of `locs`, without a Python loop over xfers
        or locations, for the xfers that have locations only (a handful of
        ~1,700): their counts, node indices and candidate costs in one
        native call (`Locations.step_arrays`), the cost changes with numpy
        (`candidate_deltas`' figures).

        Without cost features the candidates' costs are not computed at all
        (their deltas and the summary's min and mean stay zero).
        """
        num_l = self.config.max_locations
        full = self.config.cost_features == "full"
        arrays = locs.step_arrays(_node_of(guids), self.max_pattern_ops,
                                  self.cost_model if full else None)
        active, nodes = arrays.active, arrays.nodes
        assert nodes is not None  # node_of was given
        cost_delta = np.zeros((len(active), num_l), np.float32)
        summary = np.zeros((self.num_xfers + 1, XFER_SUMMARY_SIZE), np.float32)
        if len(active) == 0:
            return LocationFeatures(active, nodes, cost_delta, summary)
        counts = arrays.counts
        summary[active, 0] = np.log1p(counts)
        if full:
            assert arrays.costs is not None
            delta, low, mean = _delta_stats(arrays.costs, location_mask[active], counts, cost,
                                            self.initial_cost)
            cost_delta[:] = delta.astype(np.float32)
            summary[active, 1] = low
            summary[active, 2] = mean
        return LocationFeatures(active, nodes, cost_delta, summary)

    def _featurize(self, structure: Dict[str, np.ndarray], graph: Graph, cost: float):
        """`graph`'s GraphsTuple; under `cost_features="none"` featurized
        with zero op costs and graph cost 0 of 1, which zeroes the node cost
        column and the two cost globals (`xflowrl.embedding.features`)."""
        if self.config.cost_features == "none":
            no_costs = np.zeros(len(structure["types"]), np.float32)
            return features.featurize(graph, no_costs, 0.0, 1.0, structure=structure)
        return features.featurize(graph, graph.op_costs(self.cost_model),
                                  cost, self.initial_cost, structure=structure)


def _node_of(guids: np.ndarray) -> np.ndarray:
    """int32 map from guid to node index (-1 for guids not in the graph)."""
    node_of = np.full(int(guids.max()) + 1, -1, np.int32)
    node_of[guids] = np.arange(len(guids), dtype=np.int32)
    return node_of


def candidate_deltas(locs: Locations, cost_model: CostModel, cost: float, initial_cost: float,
                     active: np.ndarray, valid: np.ndarray
                     ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The candidates' cost changes of `locs` (rows: `active`) as an
    observation carries them (`LocationFeatures.cost_delta`, float32, in
    percent of `initial_cost`, 0 at missing locations), with each row's min
    and mean (float64). What one-step greedy reads, whether from an
    observation (`GreedyAgent`) or from `locs` alone (`greedy_walk`).

    Args:
      active: `locs.active_xfers()`.
      valid: [A, L] bool, those rows of `locs.location_mask()`.
    """
    delta, low, mean = _delta_stats(locs.active_costs(cost_model), valid,
                                    locs.count_array[active], cost, initial_cost)
    return delta.astype(np.float32), low, mean


def _delta_stats(costs: np.ndarray, valid: np.ndarray, counts: np.ndarray, cost: float,
                 initial_cost: float) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row (an xfer): the candidates' cost changes in percent of the
    initial cost (0 where `valid` is False) and their min and mean.

    The mean is a masked row sum over count, which numpy computes with the
    same pairwise summation as a row slice's `.mean()`: the features are
    bitwise those of the per-xfer loop this replaced
    (tests/env/observation_test.py checks both).

    Args:
      costs: [A, L] candidate costs (ms), rows of xfers with locations.
      valid: [A, L] bool, the first `counts` entries of each row.
      counts: [A] locations per row (>= 1).
    """
    delta = 100.0 * (costs - cost) / initial_cost
    low = np.min(delta, axis=1, where=valid, initial=np.inf)
    mean = np.sum(delta, axis=1, where=valid) / counts
    return np.where(valid, delta, 0.0), low, mean


def make_env(graph_name: str, rules: str = DEFAULT_RULE_SET, cost_model: str = DEFAULT_BACKEND,
             profile: str = DEFAULT_PROFILE, cost_cache: Optional[str] = None,
             config: Optional[EnvConfig] = None) -> GraphEnv:
    """The real environment of a zoo graph under a named rule set and cost backend."""
    return GraphEnv(zoo.get_graph(graph_name), XferSet.from_name(rules),
                    CostModel(cost_model, profile=profile, cache_path=cost_cache), config)
