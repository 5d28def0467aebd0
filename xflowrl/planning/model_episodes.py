"""The world-model planner beside the model-based agent, on the agent's real data.

experiments/train_mb.py runs the thesis' model-based agent (an MDN-RNN
world model, a controller trained in its dream) and, beside it on the same
graph, the world-model planner (`xflowrl.planning.model_search`). For a
fair comparison the planner's latent model learns from the same real
transitions the agent collected, and from nothing else:

- `EpisodeStore` receives every real episode the agent's world model
  learns from or is measured on, with its graphs, as the agent collects
  it (`ModelBasedAgent(on_rollouts=store.add)`), and harvests it into
  training data (`xflowrl.planning.model_learning.EpisodeHarvest`). Each
  batch is kept on disk (its new states compressed), so a resumed run has
  every round's, as the agent's own buffer has them.
- `plan_beside(env, store, config)` (the record and the graph) trains a `LatentModel` on the data,
  plans from the graph's initial state with greedy's floor, replays the
  route it hands over, and checks that the graph computes the original's
  outputs (`xflowrl.search.eqsat.same_outputs`); only a graph that passes
  both is a result (`ModelPlannerRun.checked`).

`PlannerBeside` is both in one run of the agent: the store while the agent
trains, then the plan, or a note saying why the planner did not run.

Real steps: the episodes' are the agent's, taken once (`data_real_steps`,
not spent again by the planner); the planner's own are the engine
expansions of the graph while it plans (`real_steps`); no real step is
spent on another graph (`real_steps_elsewhere` is 0). Model steps (its
searches' dynamics calls) are counted apart.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple
import zlib

import numpy as np

from xflowrl.embedding import features
from xflowrl.engine import Graph
from xflowrl.env import GraphEnv
from xflowrl.planning.model import LatentModel, ModelConfig
from xflowrl.planning.model_learning import (
    Episode,
    EpisodeHarvest,
    TrainConfig,
    state_key,
    train,
)
from xflowrl.planning.model_search import ModelPlanConfig, plan_with_model, replay_steps
from xflowrl.planning.simulator import Step
from xflowrl.results.runs import ModelPlannerRun, ModelPlannerSeconds

# What the planner's model learns from, as the record says it.
DATA = "the model-based agent's real episodes (world-model rollouts and held-out)"


class _Stored(NamedTuple):
    """A stored episode, its states named by `state_key` (an `Episode`
    again once `states` holds the states)."""
    states: List
    valid: List[Dict[int, int]]
    actions: np.ndarray
    rewards: np.ndarray
    gains: Optional[List[Dict[int, Tuple[float, float]]]]


def _pack(state: features.GraphsTuple) -> bytes:
    return zlib.compress(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), 1)


def _unpack(blob: bytes) -> features.GraphsTuple:
    return pickle.loads(zlib.decompress(blob))


class EpisodeStore:
    """The agent's real episodes of one graph as the planner's training
    data, saved to `directory` after every batch (module docstring).

    A batch is one file, `<n>.pkl`: its key, the environment it came from,
    its episodes with their states named by `state_key`, and the states no
    earlier batch had, compressed. Loading harvests the files again in
    order, which rebuilds the same data.

    Args:
      directory: where the data are kept (created); batches already there
        from the same graph, rules, reward and location limit are loaded,
        others deleted.
      env: the agent's real environment (one graph).

    Attributes:
      keys: the batches added, in order ("round 0", "held_out", ...).
      harvest: the data.

    Raises:
      ValueError: the environment's reward does not give cost changes
        (`EpisodeHarvest`).
    """

    def __init__(self, directory: str, env: GraphEnv):
        self.directory = directory
        self._identity = (env.initial_graph.hash(), len(env.xfers), env.config.reward,
                          env.config.max_locations)
        self.keys: List[str] = []
        self.harvest = EpisodeHarvest(len(env.xfers), env.config.reward, env.initial_cost)
        files = sorted(f for f in os.listdir(directory) if f.endswith(".pkl")) \
            if os.path.isdir(directory) else []
        batches = []
        for name in files:
            with open(os.path.join(directory, name), "rb") as f:
                batches.append(pickle.load(f))
        if any(b["identity"] != self._identity for b in batches):
            for name in files:   # another graph's or setting's data: not ours
                os.remove(os.path.join(directory, name))
            batches = []
        states: Dict[bytes, features.GraphsTuple] = {}
        for batch in batches:
            states.update({k: _unpack(blob) for k, blob in batch["states"].items()})
            self.harvest.add([e._replace(states=[states[k] for k in e.states])
                              for e in batch["episodes"]])
            self.keys.append(batch["key"])

    def add(self, key: str, episodes: Sequence[Episode]) -> None:
        """Harvests a batch of episodes (once per key: a resumed round
        collects its episodes again) and saves it."""
        if key in self.keys:
            return
        new: Dict[bytes, bytes] = {}
        stored = []
        for episode in episodes:
            names = []
            for state in episode.states:
                name = state_key(state)
                if name not in new and not self.harvest.has(name):
                    new[name] = _pack(state)
                names.append(name)
            stored.append(_Stored(names, list(episode.valid), np.asarray(episode.actions),
                                  np.asarray(episode.rewards),
                                  None if episode.gains is None else list(episode.gains)))
        self.harvest.add(episodes)
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"{len(self.keys):04d}.pkl")
        temporary = path + ".tmp"
        with open(temporary, "wb") as f:
            pickle.dump({"identity": self._identity, "key": key, "episodes": stored,
                         "states": new}, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)
        self.keys.append(key)

    def missing(self, rounds: int) -> List[str]:
        """The batches of a world model of `rounds` rounds the store lacks."""
        wanted = [f"round {r}" for r in range(rounds)] + (["held_out"] if rounds else [])
        return [key for key in wanted if key not in self.keys]


@dataclasses.dataclass(frozen=True)
class BesideConfig:
    """The world-model planner beside the agent.

    Attributes:
      model: the latent model's sizes (`num_xfers` is the environment's).
      train: its training.
      plan: the planner.
      check_outputs: run the original and the planner's graph on random
        values and compare their outputs.
    """
    model: ModelConfig
    train: TrainConfig
    plan: ModelPlanConfig
    check_outputs: bool = True

    @classmethod
    def of(cls, env: GraphEnv, seed: int, train_steps: int,
           check_outputs: bool = True) -> "BesideConfig":
        """The defaults of every part for `env`'s rule set, seeded by `seed`,
        with `train_steps` gradient steps."""
        return cls(ModelConfig(num_xfers=len(env.xfers), seed=seed),
                   TrainConfig(steps=train_steps, seed=seed), ModelPlanConfig(seed=seed),
                   check_outputs)


class Beside(NamedTuple):
    """What `plan_beside` returns: the record and the graph handed over."""
    run: ModelPlannerRun
    graph: Graph


def _named(env: GraphEnv, route: Sequence[Step]) -> List[Tuple[str, int, int]]:
    return [(env.xfers.names[step.xfer], int(step.location), int(step.after))
            for step in route]


def plan_beside(env: GraphEnv, store: EpisodeStore, config: BesideConfig,
                progress: Optional[Callable[[str], None]] = None) -> Beside:
    """Trains the planner's model on `store`'s data, plans on `env`'s
    initial graph, and checks the graph it hands over (module docstring).

    Raises:
      ValueError: the store holds no states.
    """
    start = time.monotonic()
    data = store.harvest.transitions()
    model = LatentModel(config.model)
    trained = train(model, data, config.train, progress=progress)
    train_seconds = time.monotonic() - start
    start = time.monotonic()
    result = plan_with_model(env, model, config.plan, progress=progress)
    plan_seconds = time.monotonic() - start
    start = time.monotonic()
    replayed = replay_steps(env, result.route).hash() == result.graph.hash()
    same = None
    if config.check_outputs:
        # Imported here: the reference executor is needed by this check only.
        from xflowrl.search.eqsat import same_outputs  # pylint: disable=import-outside-toplevel
        same = same_outputs(env.initial_graph, result.graph, seed=config.model.seed)
    check_seconds = time.monotonic() - start
    run = ModelPlannerRun(
        data=DATA, data_real_steps=store.harvest.real_steps, real_steps_elsewhere=0,
        states=len(data), transitions=data.transitions(), train_steps=trained.steps,
        train_losses=trained.losses, cost_ms=result.cost, planner_cost_ms=result.planner_cost,
        from_greedy=result.from_greedy, route=_named(env, result.route),
        real_steps=result.real_steps, real_steps_to_best=result.real_steps_to_best,
        planner_real_steps=result.planner_real_steps, model_steps=result.model_steps,
        rule_enumerations=result.rule_enumerations, decisions=result.decisions,
        checked_actions=result.checked, stopped=result.stopped, replayed=replayed,
        same_outputs=same,
        seconds=ModelPlannerSeconds(train=train_seconds, plan=plan_seconds,
                                    check=check_seconds,
                                    total=train_seconds + plan_seconds + check_seconds),
        config={"model": dataclasses.asdict(config.model),
                "train": dataclasses.asdict(config.train),
                "plan": dataclasses.asdict(config.plan), "check_outputs": config.check_outputs})
    return Beside(run, result.graph)


class PlannerBeside:
    """The world-model planner in one run of the model-based agent: its data
    kept as the agent collects them (`on_rollouts`, for
    `ModelBasedAgent(on_rollouts=...)`), then its run on the graph once the
    agent is trained (`plan`). `note` says why it did not run, where it did
    not: an environment whose data it cannot learn from, or a resumed run
    whose earlier part was collected without it."""

    def __init__(self, directory: str, env: GraphEnv, enabled: bool = True):
        """Keeps the planner's data in `directory` (`EpisodeStore`) if `enabled`."""
        self.store: Optional[EpisodeStore] = None
        self.note: Optional[str] = None
        if enabled:
            try:
                self.store = EpisodeStore(directory, env)
            except ValueError as e:
                self.note = str(e)

    @property
    def on_rollouts(self) -> Optional[Callable[[str, Sequence[Episode]], None]]:
        """What receives the agent's episodes (None when it does not run)."""
        return self.store.add if self.store is not None else None

    def plan(self, env: GraphEnv, rounds: int, config: BesideConfig,
             progress: Optional[Callable[[str], None]] = None) -> Optional[Beside]:
        """`plan_beside` on the data of a world model of `rounds` rounds, or
        None (with `note` saying why) where it does not run."""
        if self.store is None:
            return None
        missing = self.store.missing(rounds)
        if missing:
            self.note = (f"its data lack the episodes of {', '.join(missing)} (collected by a "
                         "run without --plan_with_model, which this one resumed)")
            return None
        return plan_beside(env, self.store, config, progress=progress)
