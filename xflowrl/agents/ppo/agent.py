"""The model-free hierarchical PPO agent: wires network, actor and learner.

`PPOAgent.run_episode(env)` plays one episode and keeps its transitions;
once `config.episodes_per_update` episodes are buffered, `update()` runs the
learner on them and clears the buffer. `checkpoint` holds everything that
must survive an interruption (network, both optimizers, counters).
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf

from xflowrl.agents.ppo.acting import Actor
from xflowrl.agents.ppo.config import PPOConfig
from xflowrl.agents.ppo.learning import Learner, Step
from xflowrl.agents.ppo.networks import PolicyValueNetwork
from xflowrl.env import GraphEnv


class Episode(NamedTuple):
    total_reward: float
    initial_cost: float
    final_cost: float
    steps: int
    applied: List[Tuple[str, int]]  # (xfer name, location) in order
    invalid_actions: int


class PPOAgent:
    """Hierarchical PPO over a `GraphEnv`'s xfer set."""

    def __init__(self, num_xfers: int, config: Optional[PPOConfig] = None, seed: int = 0):
        self.config = config or PPOConfig()
        tf.random.set_seed(seed)
        self.network = PolicyValueNetwork(num_xfers, self.config)
        self.actor = Actor(self.network, seed=seed)
        self.learner = Learner(self.network, self.config, seed=seed + 1)
        self.episodes = tf.Variable(0, dtype=tf.int64, name="episodes")
        self.updates = tf.Variable(0, dtype=tf.int64, name="updates")
        self.checkpoint = tf.train.Checkpoint(
            network=self.network, policy_optimizer=self.learner.policy_optimizer,
            value_optimizer=self.learner.value_optimizer, episodes=self.episodes,
            updates=self.updates)
        self._buffer: List[Step] = []

    def run_episode(self, env: GraphEnv, greedy: bool = False, learn: bool = True) -> Episode:
        """Plays one episode; with `learn`, keeps its transitions for `update`."""
        obs = env.reset()
        done, total, invalid = False, 0.0, 0
        steps: List[Step] = []
        while not done:
            a = self.actor.act(obs, greedy=greedy)
            next_obs, reward, done, info = env.step((a.xfer, a.location))
            invalid += info["invalid"] is not None
            steps.append(Step(
                graph=obs.graph, xfer_summary=obs.locations.xfer_summary,
                xfer_mask=obs.xfer_mask, location_nodes=obs.locations.nodes[a.xfer],
                cost_delta=obs.locations.cost_delta[a.xfer],
                location_mask=obs.location_mask[a.xfer], xfer=a.xfer, location=a.location,
                xfer_log_prob=a.xfer_log_prob, location_log_prob=a.location_log_prob,
                xfer_value=a.xfer_value, location_value=a.location_value,
                reward=reward, done=done))
            total += reward
            obs = next_obs
        if learn:
            self._buffer.extend(steps)
            self.episodes.assign_add(1)
        return Episode(total, env.initial_cost, env.cost, len(steps), list(env.history), invalid)

    @property
    def ready_to_update(self) -> bool:
        return sum(s.done for s in self._buffer) >= self.config.episodes_per_update

    def update(self) -> Dict[str, float]:
        """A PPO update on the buffered episodes, which are then dropped."""
        if not self._buffer:
            raise ValueError("update() with no buffered episodes")
        metrics = self.learner.update(self._buffer)
        self._buffer = []
        self.updates.assign_add(1)
        return metrics

    def build(self, env: GraphEnv) -> None:
        """Creates every variable (network and optimizer slots) without
        changing any, so that a checkpoint can be restored into them."""
        self.actor.act(env.reset(), greedy=True)
        self.learner.build()
