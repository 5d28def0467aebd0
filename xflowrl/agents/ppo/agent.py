"""The model-free hierarchical PPO agent: wires network, actor and learner.

`PPOAgent.run_episode(env)` plays one episode of any `Environment` and keeps
its transitions; `add_steps` buffers transitions collected elsewhere (the
batched dream). Once `config.episodes_per_update` episodes are buffered,
`update()` runs the learner on them and clears the buffer. `checkpoint` holds everything that
must survive an interruption (network, both optimizers, counters).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import tensorflow as tf

from xflowrl.agents.ppo.acting import Actor
from xflowrl.agents.ppo.config import PPOConfig
from xflowrl.agents.ppo.learning import Learner, Step
from xflowrl.agents.ppo.networks import PolicyValueNetwork
from xflowrl.env import Environment, Episode


class PPOAgent:
    """Hierarchical PPO over an environment's xfer set."""

    def __init__(self, num_xfers: int, config: Optional[PPOConfig] = None, seed: int = 0,
                 state: str = "graph", max_locations: int = 200):
        """
        Args:
          num_xfers: N of the environment's action spec.
          config: PPO hyper-parameters.
          seed: seeds the networks' initialisation, the actor's sampling and
            the learner's minibatch order (explicitly; TensorFlow's global
            seed is left alone).
          state: the observation spec's state kind, "graph" or "vector".
          max_locations: L of the action spec.
        """
        self.config = config or PPOConfig()
        self.network = PolicyValueNetwork(num_xfers, self.config, state=state,
                                          max_locations=max_locations, seed=seed)
        self.actor = Actor(self.network, seed=seed)
        self.learner = Learner(self.network, self.config, seed=seed + 1)
        self.episodes = tf.Variable(0, dtype=tf.int64, name="episodes")
        self.updates = tf.Variable(0, dtype=tf.int64, name="updates")
        self.checkpoint = tf.train.Checkpoint(
            network=self.network, policy_optimizer=self.learner.policy_optimizer,
            value_optimizer=self.learner.value_optimizer, episodes=self.episodes,
            updates=self.updates)
        self._buffer: List[Step] = []

    def run_episode(self, env: Environment, greedy: bool = False, learn: bool = True) -> Episode:
        """Plays one episode; with `learn`, keeps its transitions for `update`."""
        obs = env.reset()
        done, total, invalid = False, 0.0, 0
        steps: List[Step] = []
        info: dict = {}
        while not done:
            a = self.actor.act(obs, greedy=greedy)
            next_obs, reward, done, info = env.step((a.xfer, a.location))
            invalid += info["invalid"] is not None
            bootstrap = self.actor.value(next_obs) if info["truncated"] else 0.0
            loc = obs.locations
            steps.append(Step(
                state=obs.state, xfer_summary=None if loc is None else loc.xfer_summary,
                xfer_mask=obs.xfer_mask,
                location_nodes=None if loc is None else loc.nodes_of(a.xfer),
                cost_delta=None if loc is None else loc.cost_delta_of(a.xfer),
                location_mask=obs.location_mask[a.xfer], xfer=a.xfer, location=a.location,
                xfer_log_prob=a.xfer_log_prob, location_log_prob=a.location_log_prob,
                xfer_value=a.xfer_value, location_value=a.location_value,
                reward=reward, done=done, bootstrap_value=bootstrap))
            total += reward
            obs = next_obs
        if learn:
            self.add_steps(steps)
        return Episode(total, info.get("initial_cost", float("nan")),
                       info.get("cost", float("nan")), len(steps),
                       list(info.get("history", [])), invalid)

    def add_steps(self, steps: Sequence[Step]) -> None:
        """Buffers the transitions of whole episodes (each ends with a done step)."""
        if steps and not steps[-1].done:
            raise ValueError("add_steps needs whole episodes; the last step is not done")
        self._buffer.extend(steps)
        self.episodes.assign_add(sum(s.done for s in steps))

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

    def build(self, env: Environment) -> None:
        """Creates every variable (network and optimizer slots) without
        changing any, so that a checkpoint can be restored into them."""
        self.actor.build(env.reset())
        self.learner.build()
