"""What a training run leaves in its result.json: the model-free agent's
(`ModelFreeRun`, experiments/train_mf.py) and the model-based agent's
(`ModelBasedRun`, experiments/train_mb.py, with its world model's rounds).

Each is a versioned record (`xflowrl.results.records`): a file of another
version is refused, to be written anew by running its entry point again.
The baselines inside a run (`baselines`, `taso`) are the baseline runner's
record as JSON (`xflowrl.search.Baselines.to_json`), read through
`xflowrl.results.layout.baseline_costs`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Tuple, Type

from xflowrl.results.records import OMIT_NONE, Record, RecordError, dataclass_from_plain, to_plain

# (xfer name, location) pairs: JSON lists of two.
Applied = List[Tuple[str, int]]


def _omit() -> Any:
    return dataclasses.field(default=None, metadata=OMIT_NONE)


@dataclasses.dataclass
class ModelFreeRun(Record):
    """experiments/train_mf.py's result: the trained agent's greedy episode,
    the best training episode and the graph handed over, beside the
    baselines on the same graph and setting, with the training's history."""

    SCHEMA = "model_free_run"
    VERSION = 3

    graph: str
    cost_model: str
    rules: str
    max_locations: int
    ppo: Dict[str, Any]                 # the PPOConfig, as dataclasses.asdict
    cost_features: str
    seed: int
    equal_budget: bool
    max_steps: int                      # the step limit used (raised to greedy's budget)
    requested_max_steps: int
    greedy_steps: int
    episodes: int
    interactions: int                   # real environment steps of the training
    train_seconds: float
    optimize_seconds: Optional[float]   # one greedy episode of the trained policy
    initial_cost_ms: float
    agent_cost_ms: float                # its greedy episode's final cost
    agent_applied: Applied
    best_training_cost_ms: float
    best_training_applied: Applied
    steps_to_final_cost: int            # real steps until a greedy evaluation reached it
    agent_vs_greedy: str
    random_mean_cost_ms: Optional[float]
    taso: Optional[Dict[str, Any]]
    baselines: Dict[str, Any]           # xflowrl.search.Baselines.to_json()
    history: List[Dict[str, Any]]       # per update: episode, mean_reward, ...
    onnx: Optional[str] = _omit()       # the user's model file, if not a zoo graph
    # The whole run's wall seconds, where a driver that ran train_mf.py
    # recorded them (experiments/observation_ablation.py).
    wall_seconds: Optional[float] = _omit()
    # The graph handed over (graph.json, graph.onnx): the cheapest the greedy
    # or the best training episode passed through, by its shortest prefix
    # (`xflowrl.optimize.handover.hand_over_model_free`; version 2 on).
    handed_over_cost_ms: Optional[float] = _omit()
    handed_over_applied: Optional[Applied] = _omit()


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One episode of the model-based controller in the real environment
    (`xflowrl.world_model.controller.evaluate`), as a run's result holds it."""
    final_cost: float
    real_return: float
    predicted_return: float     # the world model's reward predictions, summed
    invalid_actions: int        # actions the real engine rejected (mask errors)
    steps: int
    applied: Applied            # (xfer name, location) of the real graph
    cheapest_cost: float        # the cheapest graph of the episode (the initial one included)
    cheapest_prefix_length: int  # applied[:cheapest_prefix_length] builds it (the first)


@dataclasses.dataclass
class RealSteps:
    """The model-based agent's real environment steps, by use."""
    world_model_rollouts: int
    held_out_rollouts: int
    round_evaluations: int
    evaluation: int = 0
    lockstep_dream: int = 0                # --lockstep only
    controller_learning: int = 0           # --real_episodes_per_round: the controller's own
    model_free: Optional[Dict[str, Any]] = None   # train_mf.py's run beside it, if any

    @property
    def total(self) -> int:
        """Every real step the agent took (the model-free run's not counted)."""
        return (self.world_model_rollouts + self.held_out_rollouts + self.round_evaluations
                + self.evaluation + self.lockstep_dream + self.controller_learning)


@dataclasses.dataclass
class RoundController:
    """The controller after one world-model round: its greedy real episodes
    (on the agent's graph, or on up to 8 of its training graphs: `graphs`)
    beside the returns the world model predicted along them and imagines
    from the initial graph; `relative_cost`: the episodes' cheapest graphs
    against their initial ones, on average (which picks the deployed round).
    Fields absent in a round are left out of its JSON."""
    episodes: int
    real_return: float
    predicted_return: float
    imagined_return: float
    relative_cost: float
    cost_ms: Optional[float] = _omit()         # one graph: its episode's final cost
    cheapest_cost_ms: Optional[float] = _omit()    # and the cheapest graph it passed through
    graphs: Optional[int] = _omit()            # several graphs: how many were evaluated


_ROUND_CORE = ("round", "real_steps", "collection", "collected_return", "vocabulary_known",
               "vocabulary_full", "train_total", "train_latent_nll")
_HELD_OUT = "held_out_"
_CONTROLLER = "controller_"


@dataclasses.dataclass
class WorldModelRound(Record):
    """One round of the world model (`xflowrl.world_model.ModelBasedAgent`'s
    state["rounds"]): its collection, training loss, held-out evaluation
    and (with controller collection) the controller after it.

    Written flat, as the agent's state holds it: `held_out` as
    held_out_<metric> keys, `controller` as controller_<field> keys (in
    the order the agent writes them)."""

    SCHEMA = "world_model_round"

    round: int
    real_steps: int
    collection: str
    collected_return: float
    vocabulary_known: int
    vocabulary_full: Any
    train_total: float
    train_latent_nll: float
    held_out: Dict[str, Any]
    controller: Optional[RoundController] = None

    def _fields_to_json(self) -> Dict[str, Any]:
        out = {name: to_plain(getattr(self, name)) for name in _ROUND_CORE}
        out.update({_HELD_OUT + k: v for k, v in self.held_out.items()})
        if self.controller is not None:
            out.update({_CONTROLLER + f.name: getattr(self.controller, f.name)
                        for f in dataclasses.fields(self.controller)
                        if getattr(self.controller, f.name) is not None})
        return out

    @classmethod
    def _fields_from_json(cls: Type["WorldModelRound"], value: Any,
                          where: str) -> "WorldModelRound":
        if not isinstance(value, dict):
            raise RecordError(f"{where}: expected an object for a world-model round")
        core = {k: value[k] for k in _ROUND_CORE if k in value}
        held_out = {k[len(_HELD_OUT):]: v for k, v in value.items() if k.startswith(_HELD_OUT)}
        controller = {k[len(_CONTROLLER):]: v for k, v in value.items()
                      if k.startswith(_CONTROLLER)}
        unknown = sorted(set(value) - set(core) - {_HELD_OUT + k for k in held_out}
                         - {_CONTROLLER + k for k in controller})
        if unknown:
            raise RecordError(f"{where}: a world-model round has no fields {unknown}")
        return dataclass_from_plain(
            cls, dict(core, held_out=held_out,
                      controller=dataclass_from_plain(RoundController, controller,
                                                      f"{where}.controller")
                      if controller else None), where)

    @classmethod
    def from_state(cls, row: Dict[str, Any]) -> "WorldModelRound":
        """A round of the world-model agent's state (strict: every key known)."""
        return cls._fields_from_json(row, "world-model round")


@dataclasses.dataclass
class WorldModelSummary:
    """The world model of a model-based run: its xfer vocabulary, rounds,
    the latent encoder's first and last losses and its configuration."""
    vocabulary: int
    vocabulary_known: Optional[int]
    rounds: List[WorldModelRound]
    encoder: Dict[str, Any]
    config: Dict[str, Any]                 # the WorldModelConfig, as dataclasses.asdict


@dataclasses.dataclass
class ModelBasedSeconds:
    """Wall seconds of a model-based run, by phase."""
    world_model: float
    controller: float
    total: float
    optimize: Optional[float] = None           # the second greedy episode (the first traces)
    optimize_first_call: Optional[float] = None
    evaluation: Optional[float] = None         # every evaluation episode (version 2 on)
    baselines: Optional[float] = None          # the baselines beside it (version 2 on)


@dataclasses.dataclass
class ModelPlannerSeconds:
    """Wall seconds of the world-model planner beside a model-based run:
    training its model, planning (greedy's floor included), checking the
    graph it hands over (replay and outputs), and the three together."""
    train: float
    plan: float
    check: float
    total: float


@dataclasses.dataclass
class ModelPlannerRun:
    """The world-model planner (`xflowrl.planning.model_search`) on a
    model-based run's graph, its latent model trained on that run's real
    episodes (`xflowrl.planning.model_episodes`).

    Attributes:
      data: where its model learnt.
      data_real_steps: the real steps of those episodes (the model-based
        agent's, taken once and shared: not spent again).
      real_steps_elsewhere: real steps on other graphs its model needed.
      states, transitions: the training data (distinct states; steps that
        are the model's actions).
      train_steps, train_losses: its training (the last 100 steps' means).
      cost_ms: the graph it hands over (greedy's where that is cheaper).
      planner_cost_ms: its own best before greedy's floor.
      from_greedy: greedy's graph was handed over.
      route: (xfer name, location, hash) from the initial graph: a step
        at a location of the rule set's enumeration (hash 0), or, location
        -1, a step of a multi-location action, at the location of its xfer
        that leads to the graph of that hash (`replay_steps`).
      real_steps: engine expansions of this graph, greedy's floor included.
      real_steps_to_best: expansions when `cost_ms` was first reached.
      planner_real_steps: expansions before greedy's floor.
      model_steps: dynamics calls of its searches.
      rule_enumerations: single-rule enumerations of multi-location actions.
      decisions, checked_actions, stopped: its decisions, the root actions
        built to check them, why it stopped (`MODEL_STOPS`).
      replayed: `route` rebuilds the graph from the initial one.
      same_outputs: the graph computes the original's outputs (float64
        reference executor on random values; None: not checkable).
      seconds: wall seconds by part.
      config: the model's, training's and planner's configurations.
    """
    data: str
    data_real_steps: int
    real_steps_elsewhere: int
    states: int
    transitions: int
    train_steps: int
    train_losses: Dict[str, float]
    cost_ms: float
    planner_cost_ms: float
    from_greedy: bool
    route: List[Tuple[str, int, int]]
    real_steps: int
    real_steps_to_best: int
    planner_real_steps: int
    model_steps: int
    rule_enumerations: int
    decisions: int
    checked_actions: int
    stopped: str
    replayed: bool
    same_outputs: Optional[bool]
    seconds: ModelPlannerSeconds
    config: Dict[str, Any]

    @property
    def checked(self) -> bool:
        """Its graph replays and computes the original's outputs: a result."""
        return self.replayed and self.same_outputs is True


@dataclasses.dataclass
class ModelBasedRun(Record):
    """experiments/train_mb.py's result: the controller's evaluation
    episodes in the real environment (the graph handed over: the cheapest
    any of them passed through), beside the baselines; the real steps used;
    the world model's rounds; end-to-end TensorFlow times where measured;
    the world-model planner on the same graph where it ran (version 2 on:
    `model_planner`, `model_planner_note`, `imagined_steps`)."""

    SCHEMA = "model_based_run"
    VERSION = 3

    graph: str
    cost_model: str
    rules: str
    max_locations: int
    seed: int
    max_steps: int
    requested_max_steps: int
    greedy_steps: int
    eval_masks: str
    selected_round: Optional[Dict[str, Any]]   # the deployed round (round, cost_ms, episodes)
    initial_cost_ms: float
    controller_cost_ms: float                  # its greedy episode's final cost
    controller_cheapest_cost_ms: float
    controller_cheapest_applied: Applied
    controller: Dict[str, Evaluation]          # greedy, greedy_<other>_masks
    sampled: List[Evaluation]
    controller_vs_greedy: str
    baselines: Dict[str, Any]                  # xflowrl.search.Baselines.to_json()
    real_steps: RealSteps
    world_model: WorldModelSummary
    dream: Dict[str, Any]                      # the resolved DreamConfig
    ppo: Dict[str, Any]
    measured: Optional[Dict[str, Any]]         # graph -> TF timing, and "rounds"
    seconds: ModelBasedSeconds
    dream_episodes: int
    onnx: Optional[str] = _omit()
    # The controller's imagined steps in the dream (its model steps), where
    # its update history covers the whole training.
    imagined_steps: Optional[int] = _omit()
    # The world-model planner beside the controller (train_mb.py
    # --plan_with_model); absent where it did not run.
    model_planner: Optional[ModelPlannerRun] = _omit()
    # Why the planner did not run where it was asked to.
    model_planner_note: Optional[str] = _omit()
