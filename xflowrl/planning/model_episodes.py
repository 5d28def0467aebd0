"""The world-model planner beside the model-based agent, on the agent's real data.

experiments/train_mb.py runs the thesis' model-based agent (an MDN-RNN
world model, a controller trained in its dream) and, beside it on the same
graph, the world-model planner (`xflowrl.planning.model_search`). For a
fair comparison the planner's latent model learns from the same real
transitions the agent collected, and from nothing else:

- `EpisodeStore` receives every real episode the agent's world model
  learns from or is measured on, with its graphs, as the agent collects
  it (`ModelBasedAgent(on_rollouts=store.add)`), and harvests it into
  training data (`xflowrl.planning.model_learning.EpisodeHarvest`). The
  data are kept on disk after each batch, so a resumed run has every
  round's, as the agent's own buffer has them.
- `plan_beside(env, store, config)` (the record and the graph) trains a `LatentModel` on the data,
  plans from the graph's initial state with greedy's floor, replays the
  route it hands over, and checks that the graph computes the original's
  outputs (`xflowrl.search.eqsat.same_outputs`); only a graph that passes
  both is a result (`ModelPlannerRun.checked`).

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
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

from xflowrl.engine import Graph
from xflowrl.env import GraphEnv
from xflowrl.planning.model import LatentModel, ModelConfig
from xflowrl.planning.model_learning import Episode, EpisodeHarvest, TrainConfig, train
from xflowrl.planning.model_search import ModelPlanConfig, plan_with_model, replay_steps
from xflowrl.planning.simulator import Step
from xflowrl.results.runs import ModelPlannerRun, ModelPlannerSeconds

# The store's file in its folder.
STORE_FILE = "episodes.pkl"

# What the planner's model learns from, as the record says it.
DATA = "the model-based agent's real episodes (world-model rollouts and held-out)"


class EpisodeStore:
    """The agent's real episodes of one graph as the planner's training
    data, saved to `directory` after every batch (module docstring).

    Args:
      directory: where the data are kept (created); data already there
        from the same graph, rules and reward are loaded.
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
        self.path = os.path.join(directory, STORE_FILE)
        self._identity = (env.initial_graph.hash(), len(env.xfers), env.config.reward,
                          env.config.max_locations)
        self.keys: List[str] = []
        self.harvest = EpisodeHarvest(len(env.xfers), env.config.reward, env.initial_cost)
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                saved = pickle.load(f)
            if saved["identity"] == self._identity:
                self.keys, self.harvest = saved["keys"], saved["harvest"]

    def add(self, key: str, episodes: Sequence[Episode]) -> None:
        """Harvests a batch of episodes (once per key: a resumed round
        collects its episodes again) and saves the data."""
        if key in self.keys:
            return
        self.harvest.add(episodes)
        self.keys.append(key)
        os.makedirs(self.directory, exist_ok=True)
        temporary = self.path + ".tmp"
        with open(temporary, "wb") as f:
            pickle.dump({"identity": self._identity, "keys": self.keys,
                         "harvest": self.harvest}, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, self.path)

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
