"""The model-based agent in the real environment (phase 3 of
`ModelBasedAgent`): the controller's view of real environments through the
world model (`latent_view`, `latent_views`), its evaluation after every
round on up to `EVALUATION_GRAPHS` graphs (`evaluate_round`), and the
choice of the round to deploy (`better_round`): the one whose greedy real
episodes reached the cheapest graphs relative to their initial ones, the
later of equal rounds.
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Sequence, Union

import numpy as np

from xflowrl.agents.ppo import PPOAgent
from xflowrl.env import GraphEnv
from xflowrl.env.sampled import SampledGraphEnv
from xflowrl.results.runs import RoundController
from xflowrl.results.state import BestRound
from xflowrl.world_model.config import DreamConfig
from xflowrl.world_model.controller import Evaluation, evaluate, imagine_batch
from xflowrl.world_model.dream import BatchedDream
from xflowrl.world_model.latent_env import LatentEnv, LatentEnvBatch
from xflowrl.world_model.parts import WorldModelParts

# Relative difference below which two graphs' costs count as equal.
COST_TOLERANCE = 1e-9

# Greedy imagined episodes from the initial graph behind a round's
# "imagined return" (the dream samples z_{t+1}, so greedy episodes differ).
IMAGINED_EVAL_EPISODES = 16

# Graphs of a distribution on which a round's controller is evaluated (spread
# evenly over the environment's graphs).
EVALUATION_GRAPHS = 8


def latent_view(env: Union[GraphEnv, SampledGraphEnv], parts: WorldModelParts, config: DreamConfig,
                count_margin: float, ranked: bool, masks: str) -> LatentEnv:
    """`env` seen through the world model, acting on `masks` ("real": the
    real environment's; "model": the world model's predictions)."""
    return LatentEnv(env, parts.encoder, parts.model, parts.vocab, masks=masks,
                     mask_threshold=config.mask_threshold, noop_reward=config.noop_reward,
                     count_margin=count_margin, ranked=ranked)


def latent_views(envs: Sequence[GraphEnv], parts: WorldModelParts, config: DreamConfig,
                 count_margin: float, ranked: bool) -> LatentEnvBatch:
    """Real environments stepped together, seen through the world model
    (real masks): the collector's view."""
    return LatentEnvBatch(envs, parts.encoder, parts.model, parts.vocab, masks="real",
                          mask_threshold=config.mask_threshold, noop_reward=config.noop_reward,
                          count_margin=count_margin, ranked=ranked)


def evaluation_envs(graph_envs: List[GraphEnv]) -> List[GraphEnv]:
    """The graphs a round's controller is evaluated on: the one graph, or
    up to `EVALUATION_GRAPHS` spread evenly over a distribution's."""
    if len(graph_envs) <= EVALUATION_GRAPHS:
        return graph_envs
    picks = np.linspace(0, len(graph_envs) - 1, EVALUATION_GRAPHS).round().astype(int)
    return [graph_envs[i] for i in sorted(set(picks.tolist()))]


class RoundEvaluation(NamedTuple):
    """A round's controller in the real environment: its record, its greedy
    episodes (one per graph of `envs`) and what they reached on average
    relative to the graphs' initial costs."""
    controller: RoundController
    episodes: List[Evaluation]
    envs: List[GraphEnv]
    relative_cost: float

    def where(self) -> str:
        """Where the greedy episodes ended, for the progress line."""
        if len(self.envs) == 1:
            first = self.episodes[0]
            return f"cost {first.final_cost:.4f} ms, {first.steps} steps"
        return (f"{len(self.envs)} graphs, cheapest {100 * (self.relative_cost - 1):+.2f}% "
                "on average")

    def best_round(self, r: int) -> BestRound:
        """The record of round r as the best so far."""
        one = self.episodes[0].cheapest_cost if len(self.envs) == 1 else None
        return BestRound(round=r + 1, relative_cost=self.relative_cost,
                         episodes=self.controller.episodes, cost_ms=one)


def evaluate_round(agent: PPOAgent, envs: List[GraphEnv],
                   view_of: Callable[[GraphEnv], LatentEnv],
                   make_dream: Callable[[], BatchedDream]) -> RoundEvaluation:
    """`agent`'s greedy episode in each of `envs` (seen through `view_of`,
    real masks) beside what the world model predicted along them, then its
    greedy imagined episodes from the initial graph in `make_dream()`."""
    episodes = [evaluate(view_of(env), agent, greedy=True) for env in envs]
    imagined = imagine_batch(make_dream(), agent, IMAGINED_EVAL_EPISODES, greedy=True)
    relative = float(np.mean([e.cheapest_cost / env.initial_cost
                              for e, env in zip(episodes, envs)]))
    one = len(envs) == 1
    controller = RoundController(
        episodes=int(agent.episodes.numpy()),
        real_return=float(np.mean([e.real_return for e in episodes])),
        predicted_return=float(np.mean([e.predicted_return for e in episodes])),
        imagined_return=float(np.mean([sum(s.reward for s in e) for e in imagined])),
        relative_cost=relative,
        cost_ms=episodes[0].final_cost if one else None,
        cheapest_cost_ms=episodes[0].cheapest_cost if one else None,
        graphs=None if one else len(envs))
    return RoundEvaluation(controller, episodes, envs, relative)


def better_round(relative: float, best: Optional[BestRound]) -> bool:
    """Whether a round that reached `relative` replaces `best` (the later of
    equal rounds: equal costs reached by other rewrite orders differ in the
    last bits)."""
    return best is None or relative <= best.relative_cost * (1 + COST_TOLERANCE)
