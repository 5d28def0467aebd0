"""The model-free hierarchical PPO agent: wires network, actor and learner.

`PPOAgent.run_episode(env)` plays one episode of any `Environment` and keeps
its transitions (`run_episodes(envs)` one in each of several environments,
acting for all of them in one batch); `add_steps` buffers transitions collected elsewhere (the
batched dream). Once `config.episodes_per_update` episodes are buffered,
`update()` runs the learner on them and clears the buffer (`update_on`
learns from episodes the agent does not count). `checkpoint` holds everything that
must survive an interruption: network, both optimizers, counters, and the
sampling generators' states (the actor's Gumbel noise, the learner's
minibatch order), so that a run resumed from it with `restore` draws what
the uninterrupted run would have drawn.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from xflowrl.agents.ppo.acting import Action, Actor
from xflowrl.agents.ppo.config import PPOConfig
from xflowrl.agents.ppo.learning import Learner, Step
from xflowrl.agents.ppo.networks import PolicyValueNetwork
from xflowrl.agents.ppo.random_state import GeneratorStates
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
from xflowrl.env import Environment, Episode, Observation, cheapest_cost_so_far


class PPOAgent:
    """Hierarchical PPO over an environment's xfer set."""

    def __init__(self, num_xfers: int, config: Optional[PPOConfig] = None, seed: int = 0,
                 state: str = "graph", max_locations: int = DEFAULT_MAX_LOCATIONS):
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
        self.generators = GeneratorStates({"actor": self.actor.rng,
                                           "learner": self.learner.rng})
        self._learning_state = dict(
            network=self.network, policy_optimizer=self.learner.policy_optimizer,
            value_optimizer=self.learner.value_optimizer, episodes=self.episodes,
            updates=self.updates)
        self.checkpoint = tf.train.Checkpoint(**self._learning_state, generators=self.generators)
        self._buffer: List[Step] = []
        self.built = False  # `build` has run: every variable exists

    def run_episode(self, env: Environment, greedy: bool = False, learn: bool = True) -> Episode:
        """Plays one episode; with `learn`, keeps its transitions for `update`."""
        return self.run_episodes([env], greedy, learn)[0]

    def run_episodes(self, envs: Sequence[Environment], greedy: bool = False,
                     learn: bool = True) -> List[Episode]:
        """Plays one episode in each of `envs` at once: every step, the live
        episodes' observations go through the policy as one batch (a batch
        of graphs costs far less per graph than one graph alone). With
        `learn`, keeps their transitions for `update`, episode by episode
        in the order of `envs`."""
        observations = [env.reset() for env in envs]
        steps: List[List[Step]] = [[] for _ in envs]
        totals = [0.0] * len(envs)
        invalid = [0] * len(envs)
        infos: List[dict] = [{} for _ in envs]
        lowest = [math.nan] * len(envs)
        live = list(range(len(envs)))
        while live:
            actions = self._act([observations[i] for i in live], greedy)
            still_live = []
            for i, a in zip(live, actions):
                obs = observations[i]
                next_obs, reward, done, info = envs[i].step((a.xfer, a.location))
                invalid[i] += info["invalid"] is not None
                bootstrap = self.actor.value(next_obs) if info["truncated"] else 0.0
                loc = obs.locations
                steps[i].append(Step(
                    state=obs.state, xfer_summary=None if loc is None else loc.xfer_summary,
                    xfer_mask=obs.xfer_mask,
                    location_nodes=None if loc is None else loc.nodes_of(a.xfer),
                    cost_delta=None if loc is None else loc.cost_delta_of(a.xfer),
                    location_mask=obs.location_mask[a.xfer], xfer=a.xfer, location=a.location,
                    xfer_log_prob=a.xfer_log_prob, location_log_prob=a.location_log_prob,
                    xfer_value=a.xfer_value, location_value=a.location_value,
                    reward=reward, done=done, bootstrap_value=bootstrap))
                totals[i] += reward
                infos[i] = info
                lowest[i] = cheapest_cost_so_far(lowest[i], info)
                observations[i] = next_obs
                if not done:
                    still_live.append(i)
            live = still_live
        if learn:
            for episode_steps in steps:
                self.add_steps(episode_steps)
        return [Episode(totals[i], info.get("initial_cost", float("nan")),
                        info.get("cost", float("nan")), len(steps[i]),
                        list(info.get("history", [])), invalid[i], None, lowest[i])
                for i, info in enumerate(infos)]

    def _act(self, observations: Sequence[Observation], greedy: bool) -> List[Action]:
        """Actions for observations of one kind of state, in one batch."""
        if self.network.state_kind == "graph":
            return self.actor.act_graphs(observations, greedy)
        return self.actor.act_batch(np.stack([np.asarray(o.state, np.float32)
                                              for o in observations]),
                                    np.stack([o.xfer_mask for o in observations]),
                                    np.stack([o.location_mask for o in observations]), greedy)

    def add_steps(self, steps: Sequence[Step]) -> None:
        """Buffers the transitions of whole episodes (each ends with a done step)."""
        if steps and not steps[-1].done:
            raise ValueError("add_steps needs whole episodes; the last step is not done")
        self._buffer.extend(steps)
        self.episodes.assign_add(sum(s.done for s in steps))

    @property
    def buffered_episodes(self) -> int:
        """Whole episodes waiting for `update`."""
        return sum(s.done for s in self._buffer)

    @property
    def ready_to_update(self) -> bool:
        return sum(s.done for s in self._buffer) >= self.config.episodes_per_update

    def update(self) -> Dict[str, float]:
        """A PPO update on the buffered episodes, which are then dropped."""
        if not self._buffer:
            raise ValueError("update() with no buffered episodes")
        metrics = self._learn(self._buffer)
        self._buffer = []
        return metrics

    def update_on(self, steps: Sequence[Step]) -> Dict[str, float]:
        """A PPO update on whole episodes played outside the agent (the
        model-based controller's real episodes, `xflowrl.world_model`),
        which `episodes` does not count: that counter is the controller's
        imagined episodes. The buffer must be empty."""
        if self._buffer:
            raise ValueError("update_on() with episodes buffered for update()")
        if not steps:
            raise ValueError("update_on() with no episodes")
        return self._learn(list(steps))

    def _learn(self, steps: List[Step]) -> Dict[str, float]:
        """One PPO update on whole episodes (the learner refuses others)."""
        metrics = self.learner.update(steps)
        self.updates.assign_add(1)
        return metrics

    def restore(self, path: str, generators: bool = True) -> None:
        """Restores a checkpoint of `checkpoint` (built variables needed:
        `build`).

        Args:
          path: the checkpoint's prefix.
          generators: restore the sampling generators too (a trainer
            resuming); False keeps this agent's own, as seeded (a policy
            loaded to act with a seed of its own).

        Raises:
          AssertionError: a variable of this agent has no value in the
            checkpoint (another network, say).
          ValueError: `generators` and a checkpoint without them (one of an
            older layout: a run resumed from it would not repeat an
            uninterrupted one).
        """
        children: Dict[str, Any] = dict(self._learning_state)
        if generators:
            if not any(name.startswith("generators/")
                       for name, _ in tf.train.list_variables(path)):
                raise ValueError(f"{path}: a checkpoint without the sampling generators (an "
                                 "older layout); this code resumes the current one only: run "
                                 "again in a fresh folder")
            children["generators"] = self.generators
        status = tf.train.Checkpoint(**children).restore(path)
        if not generators:
            status.expect_partial()
        status.assert_existing_objects_matched()

    def build(self, env: Environment) -> None:
        """Creates every variable (network and optimizer slots) without
        changing any, so that a checkpoint can be restored into them."""
        self.actor.build(env.reset())
        self.learner.build()
        self.built = True
