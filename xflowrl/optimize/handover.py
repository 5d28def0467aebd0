"""Train, select, hand over: the one deployment path of the learned agents.

Every place a learned agent gives a graph away goes through here: the
entry points (experiments/train_mb.py, train_mf.py, train_generalist.py)
and `xflowrl optimize --method=mb|mf` (`xflowrl.optimize.methods`).

- Model-based (`xflowrl.world_model.ModelBasedAgent`): `train_model_based`
  learns the world model, trains the controller in the dream and deploys
  the round whose greedy real episode reached the cheapest graph
  (`ModelBasedAgent.select_best_round`); `evaluate_model_based` plays the
  deployed controller in the real environment, greedily and sampled;
  `hand_over_evaluations` hands over the cheapest graph any of those
  episodes passed through. `hand_over_model_based` is the last two in one.
- Model-free (`xflowrl.agents.ppo.PPOAgent`): `hand_over_model_free`
  hands over the cheapest graph the trained agent's greedy episode or its
  best training episode passed through.

One rule for both: the cheapest graph an episode passed through, built by
the shortest prefix of its substitutions that reaches it
(`xflowrl.env.replay.cheapest_prefix`), never where the episode happened
to end when a prefix was cheaper.

`no_worse_than_greedy` is the project's floor: a learned method never hands
over a graph costlier than one-step greedy's
(`xflowrl.search.greedy_walk`). `xflowrl.optimize.methods.optimise`
applies it to every learned method whose step limit greedy's walk set;
the entry points, which measure the agent itself, report greedy beside
the agent's graph instead.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import List, NamedTuple, Optional, TYPE_CHECKING, Tuple

from xflowrl.engine import Graph
from xflowrl.env import CHEAPER, GraphEnv
from xflowrl.env.interface import Episode
from xflowrl.env.replay import cheapest_prefix, replay
from xflowrl.results import WorldModelState

if TYPE_CHECKING:
    from xflowrl.agents.ppo import PPOAgent
    from xflowrl.agents.ppo.training import TrainResult
    from xflowrl.search import GreedyWalk
    from xflowrl.world_model import ModelBasedAgent
    from xflowrl.world_model.controller import Evaluation

# Sampled evaluation episodes of the model-based controller beside its
# greedy one (experiments/train_mb.py's --eval_episodes default).
SAMPLED_EPISODES = 10

Applied = List[Tuple[str, int]]


@dataclasses.dataclass(frozen=True)
class HandOver:
    """The graph a learned method hands over.

    Attributes:
      graph: the cheapest graph found (the initial one if nothing helped).
      cost: its estimated cost (ms) under the environment's cost model.
      applied: the shortest substitution sequence, (xfer name, location),
        that builds `graph` from the initial graph.
      found_by: "mb", "mf", or "greedy" where `no_worse_than_greedy` put
        greedy's graph in the method's place.
    """
    graph: Graph
    cost: float
    applied: Applied
    found_by: str


class ModelBasedTraining(NamedTuple):
    """What `train_model_based` did: the world model's state after its
    rounds, the trained controller, the deployed round (None: the last,
    unselected, or rounds that were not evaluated) and the wall seconds of
    the two phases."""
    world_model: WorldModelState
    controller: "PPOAgent"
    selected_round: Optional[dict]
    world_model_seconds: float
    controller_seconds: float


class ModelBasedEvaluations(NamedTuple):
    """The deployed controller's episodes in the real environment.

    Attributes:
      greedy: its greedy episode on the chosen masks (the timed one).
      sampled: its sampled episodes on the chosen masks.
      ablation: its greedy episode on the other masks, where asked for.
      warm_up: a first greedy episode that traced the real environment's
        path, where asked for (the same episode as `greedy`).
      seconds: wall seconds of `greedy`.
      first_call_seconds: wall seconds of `warm_up` (None without).
    """
    greedy: "Evaluation"
    sampled: List["Evaluation"]
    ablation: Optional["Evaluation"]
    warm_up: Optional["Evaluation"]
    seconds: float
    first_call_seconds: Optional[float]

    @property
    def cheapest_episode(self) -> "Evaluation":
        """The greedy or sampled episode that passed through the cheapest
        graph (of equal ones, the shortest prefix, then the first)."""
        return min([self.greedy] + list(self.sampled),
                   key=lambda e: (e.cheapest_cost, e.cheapest_prefix_length))

    @property
    def steps(self) -> int:
        """The real environment steps of all these episodes."""
        episodes = [self.warm_up, self.greedy, self.ablation] + list(self.sampled)
        return sum(e.steps for e in episodes if e is not None)


def train_model_based(agent: "ModelBasedAgent", select_round: bool = True
                      ) -> ModelBasedTraining:
    """Trains `agent` (resuming from its logdir) and deploys its best round.

    Learns the world model (`learn_world_model`), trains the controller in
    the dream (`train_controller`) and, with `select_round`, restores the
    round whose greedy real episode reached the cheapest graph
    (`select_best_round`, the later of equal rounds; per-round evaluation
    as model selection); without it, the last round's agent is deployed.
    """
    start = time.time()
    world_model = WorldModelState.from_state(agent.learn_world_model())
    world_model_seconds = time.time() - start
    controller = agent.train_controller()
    controller_seconds = time.time() - start - world_model_seconds
    selected = agent.select_best_round() if select_round else None
    return ModelBasedTraining(world_model, controller, selected, world_model_seconds,
                              controller_seconds)


def evaluate_model_based(agent: "ModelBasedAgent", masks: str = "real",
                         sampled_episodes: int = SAMPLED_EPISODES,
                         ablation_masks: Optional[str] = None,
                         warm_up: bool = False) -> ModelBasedEvaluations:
    """The deployed controller of `agent` in the real environment.

    In this order: with `warm_up`, a greedy episode that traces the real
    environment's path (timed apart: optimising a graph is timed on the
    next; a warning where the two greedy episodes differ); the greedy
    episode on `masks` (timed); with `ablation_masks`, a greedy episode on
    those; then `sampled_episodes` sampled episodes on `masks`.

    Args:
      agent: a trained model-based agent (`train_model_based`).
      masks: "real" (the real environment's masks, part of its
        observation) or "model" (the world model's predictions: the
        thesis' evaluation, an ablation).
      sampled_episodes: how many sampled episodes.
      ablation_masks: the masks of a further greedy episode, or None.
      warm_up: whether to play the tracing episode first.
    """
    first_call_seconds = None
    first = None
    if warm_up:
        start = time.time()
        first = agent.evaluate(masks=masks, greedy=True)
        first_call_seconds = time.time() - start
    start = time.time()
    greedy = agent.evaluate(masks=masks, greedy=True)
    seconds = time.time() - start
    if first is not None and first.applied != greedy.applied:
        logging.getLogger(__name__).warning(
            "two greedy episodes of the controller differ: %s vs %s", first.applied,
            greedy.applied)
    ablation = (agent.evaluate(masks=ablation_masks, greedy=True)
                if ablation_masks is not None else None)
    sampled = [agent.evaluate(masks=masks, greedy=False) for _ in range(sampled_episodes)]
    return ModelBasedEvaluations(greedy, sampled, ablation, first, seconds, first_call_seconds)


def hand_over_evaluations(env: GraphEnv, evaluations: ModelBasedEvaluations) -> HandOver:
    """The cheapest graph any greedy or sampled episode of `evaluations`
    passed through, rebuilt in `env` (reset and stepped) by the shortest
    prefix that reaches it."""
    best = evaluations.cheapest_episode
    applied = list(best.applied[:best.cheapest_prefix_length])
    return HandOver(replay(env, applied), best.cheapest_cost, applied, "mb")


def hand_over_model_based(agent: "ModelBasedAgent", env: GraphEnv,
                          sampled_episodes: int = SAMPLED_EPISODES,
                          masks: str = "real") -> HandOver:
    """`hand_over_evaluations` of `evaluate_model_based(agent, masks,
    sampled_episodes)`: the graph a trained and selected model-based agent
    (`train_model_based`) hands over, rebuilt in `env`, the agent's real
    environment or one of its graph and settings."""
    return hand_over_evaluations(env, evaluate_model_based(agent, masks, sampled_episodes))


def hand_over_model_free(env: GraphEnv, greedy: Episode, training: "TrainResult") -> HandOver:
    """The cheapest graph the trained model-free agent's greedy episode
    (`greedy`, played in `env`) or its best training episode
    (`training.best_sequence`) passed through, rebuilt in `env` by the
    shortest prefix that reaches it (the greedy episode's on equal costs)."""
    found = [cheapest_prefix(env, sequence)
             for sequence in (greedy.applied, training.best_sequence)]
    cost, applied = min(found, key=lambda candidate: candidate[0])
    return HandOver(replay(env, applied), cost, applied, "mf")


def no_worse_than_greedy(found: HandOver, walk: "GreedyWalk") -> HandOver:
    """`found`, or greedy's walk (`found_by="greedy"`) where that reached
    a cheaper graph (by more than `CHEAPER`): a learned method never hands
    over worse than one-step greedy."""
    if walk.cost < found.cost - CHEAPER:
        return HandOver(walk.graph, walk.cost, list(walk.applied), "greedy")
    return found

