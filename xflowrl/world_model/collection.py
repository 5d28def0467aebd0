"""The real episodes the model-based agent plays: who collects a round, the
graphs its episodes draw, and the clones of the real environment that
episodes played in lockstep step (`Collector`).

A round's episodes are random in the first round (the thesis' collector,
plus a few walks to the step limit, so that deeper xfers enter the
vocabulary) and with "random" collection, else the controller's (played in
lockstep, `LOCKSTEP_EPISODES` at a time). Every draw follows from the
agent's seed and the round (`seeds.Purpose`).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from xflowrl.agents.ppo import PPOAgent
from xflowrl.agents.random_agent import RandomAgent
from xflowrl.env import GraphEnv
from xflowrl.env.sampled import SampledGraphEnv
from xflowrl.world_model import data
from xflowrl.world_model.config import WorldModelConfig
from xflowrl.world_model.controller import collect_in_lockstep
from xflowrl.world_model.latent_env import LatentEnvBatch
from xflowrl.world_model.seeds import Purpose, purpose_seed

# Real episodes the controller collects at once (in lockstep: one batched
# encoding and one batched MDN-RNN step per step; more are played in turn).
LOCKSTEP_EPISODES = 64

# The collector's view of real environments stepped together (real masks).
Views = Callable[[Sequence[GraphEnv]], LatentEnvBatch]


class Collector:
    """The real episodes of one agent's rounds.

    Args:
      env: the real environment (one graph's, or a distribution's).
      config: the world model's configuration (who collects, how many).
      seed: the agent's seed.
    """

    def __init__(self, env: Union[GraphEnv, SampledGraphEnv], config: WorldModelConfig,
                 seed: int):
        self.env = env
        self.config = config
        self.seed = seed
        self._clones: Dict[str, List[GraphEnv]] = {}  # graph ("" for one) -> lockstep envs

    def graph_envs(self) -> List[GraphEnv]:
        """The real environment of every graph episodes start from."""
        if isinstance(self.env, SampledGraphEnv):
            return self.env.graph_envs()
        return [self.env]

    def reseed(self, purpose: Purpose, *keys: int) -> None:
        """Keys the graphs a distribution's next episodes draw by `purpose`
        and `keys`, so that what a round collects does not depend on earlier
        draws (a resumed run draws the same graphs). A single graph draws
        nothing."""
        if isinstance(self.env, SampledGraphEnv):
            self.env.reseed(purpose_seed(self.seed, purpose, *keys))

    def collected_by(self, r: int) -> str:
        """Who collects round r: "random" (the first round, and every round
        of the thesis' collection) or "controller"."""
        return "random" if r == 0 else self.config.collection

    def collect(self, r: int, vocab: Optional[data.XferVocabulary],
                controller: Callable[[], PPOAgent], views: Views) -> List[data.Rollout]:
        """Round r's real episodes (random in the first round and with
        "random" collection, then only xfers of `vocab`, where there is
        one; else `controller()`'s, seen through `views`)."""
        cfg = self.config
        self.reseed(Purpose.COLLECTION_GRAPHS, r)
        if self.collected_by(r) == "controller":
            rng = np.random.default_rng(purpose_seed(self.seed, Purpose.COLLECTION, r))
            rollouts: List[data.Rollout] = []
            envs = self.lockstep_envs(cfg.episodes_per_round)
            for i in range(0, len(envs), LOCKSTEP_EPISODES):
                rollouts += collect_in_lockstep(views(envs[i:i + LOCKSTEP_EPISODES]),
                                                controller(), cfg.explore, rng)
            return rollouts
        collector = RandomAgent(cfg.noop_probability,
                                seed=purpose_seed(self.seed, Purpose.COLLECTION, r))
        allowed = None if vocab is None else vocab.allowed()
        ranked = cfg.ranked_locations
        rollouts = data.collect_rollouts(self.env, cfg.episodes_per_round, collector, allowed,
                                         ranked)
        if vocab is None and cfg.vocabulary_episodes:
            walker = RandomAgent(0.0, seed=purpose_seed(self.seed, Purpose.VOCABULARY_WALK, r))
            rollouts += data.collect_rollouts(self.env, cfg.vocabulary_episodes, walker,
                                              ranked=ranked)
        return rollouts

    def held_out(self, vocab: data.XferVocabulary) -> List[data.Rollout]:
        """The held-out random episodes (collected once, after the first
        round), on which every round's world model is measured."""
        cfg = self.config
        self.reseed(Purpose.HELD_OUT_GRAPHS, 0)
        agent = RandomAgent(cfg.noop_probability,
                            seed=purpose_seed(self.seed, Purpose.HELD_OUT, 0))
        return data.collect_rollouts(self.env, cfg.held_out_episodes, agent, vocab.allowed(),
                                     cfg.ranked_locations)

    def lockstep_envs(self, n: int) -> List[GraphEnv]:
        """Real environments of n episodes to play at once: clones of the
        one graph's, or of the graphs a distribution draws for them in turn
        (those `reset` would draw). The clones are kept for later rounds."""
        env = self.env
        names = ([env.draw() for _ in range(n)] if isinstance(env, SampledGraphEnv)
                 else [""] * n)
        envs, used = [], {name: 0 for name in names}
        for name in names:
            clones = self._clones.setdefault(name, [])
            if used[name] == len(clones):
                base = env.env_of(name) if isinstance(env, SampledGraphEnv) else env
                clones.append(base.clone())
            envs.append(clones[used[name]])
            used[name] += 1
        return envs
