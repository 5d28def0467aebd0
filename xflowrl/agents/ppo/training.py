"""The model-free training loop: episodes, updates, logs, checkpoints, resume.

`train(env, agent, config, logdir)` plays `config.episodes` episodes in the
real environment, updating the agent every `episodes_per_update` episodes
(`parallel_envs` of them at once, in copies of the environment).
It writes TensorBoard summaries (episode reward, final cost, losses,
entropies) under `logdir/tensorboard`, checkpoints under `logdir/checkpoints`
(network, optimizers, counters, the agent's sampling generators) with
`logdir/progress.json` (the best substitution sequence found so far, so
nothing is lost, and the states of the environments' generators where they
draw at random: `SampledGraphEnv.rng`), and resumes from them when run again
with the same `logdir`: a resumed run repeats the uninterrupted run of its
seed to the bit. A progress line with the rate and the time left goes to
`progress` (stderr by default). With `actors` (`rollouts.RolloutActors`)
Ray actors play the training episodes instead of `env`'s copies; their
generators are checkpointed too (`progress.json`), and `env` plays the
greedy evaluations.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from xflowrl.agents.ppo.agent import PPOAgent
from xflowrl.agents.ppo.rollouts import RolloutActors
from xflowrl.env import Environment, Episode
from xflowrl.env.replay import replay  # noqa: F401  (re-exported for the entry points)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Attributes:
      episodes: total training episodes (resumed runs count earlier ones).
      checkpoint_every: updates between checkpoints.
      eval_every: updates between greedy evaluation episodes (logged).
      parallel_envs: episodes played at once, in copies of the environment
        (`GraphEnv.clone`), the policy acting for all of them in one batch;
        never more than the episodes left before the next update, so
        updates see the same number of episodes either way. 1: one at a time.
    """
    episodes: int = 1000
    checkpoint_every: int = 10
    eval_every: int = 5
    parallel_envs: int = 1

    def __post_init__(self):
        if self.parallel_envs < 1:
            raise ValueError(f"parallel_envs must be >= 1, got {self.parallel_envs}")


@dataclasses.dataclass
class TrainResult:
    episodes: int
    interactions: int          # real environment steps taken in training
    seconds: float
    best_final_cost: float     # best final cost of any episode
    best_sequence: List[Tuple[str, int]]
    history: List[Dict[str, float]]  # one row per update
    # The cheapest graph any episode passed through (`Episode.cheapest_cost`):
    # what a user of the agent gets from its training episodes (the
    # learned methods of `xflowrl optimize` keep it).
    cheapest_cost: float = math.inf


@dataclasses.dataclass
class Progress:
    """What training has found and spent so far, saved beside the checkpoints
    as `progress.json` (its fields are the file's keys) and read on resume."""
    best_final_cost: float = math.inf  # best final cost of any episode
    best_sequence: List[Tuple[str, int]] = dataclasses.field(default_factory=list)
    interactions: int = 0        # real environment steps taken in training
    seconds: float = 0.0         # training time of all runs so far
    history: List[Dict[str, float]] = dataclasses.field(default_factory=list)  # per update
    # `bit_generator.state` of each environment copy's `rng`, by copy index
    # (only copies that have one; the agent's own are in the checkpoint).
    environment_generators: Dict[str, dict] = dataclasses.field(default_factory=dict)
    # `RolloutActors.generator_states()`, one per actor, when actors collect.
    actor_generators: List[dict] = dataclasses.field(default_factory=list)
    cheapest_cost: float = math.inf  # the cheapest graph any episode passed through

    def save(self, path: str) -> None:
        """Writes the file atomically: an interruption never leaves half a file."""
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dataclasses.asdict(self), f)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str) -> "Progress":
        """The progress in the file `path`, which `save` wrote.

        Raises:
          ValueError: a file of another layout (an older one lacks fields).
        """
        with open(path) as f:
            fields = json.load(f)
        names = {f.name for f in dataclasses.fields(cls)}
        if set(fields) != names:
            raise ValueError(f"{path}: a progress file of another layout (lacks "
                             f"{sorted(names - set(fields))}, has unknown "
                             f"{sorted(set(fields) - names)}); this code reads the current "
                             "one only: run again in a fresh folder")
        fields["best_sequence"] = [tuple(s) for s in fields["best_sequence"]]
        return cls(**fields)


def _copies(env: Environment, n: int) -> List[Environment]:
    """`env` and n - 1 clones of it (an environment that cannot be cloned
    serves one episode at a time)."""
    if n == 1:
        return [env]
    if not hasattr(env, "clone"):
        raise ValueError(f"parallel_envs={n} needs an environment with clone(); "
                         f"{type(env).__name__} has none")
    return [env] + [env.clone() for _ in range(n - 1)]


def _generators(envs: List[Environment]) -> Dict[str, np.random.Generator]:
    """The generators of the environment copies that draw at random (an
    `rng` attribute), by copy index."""
    found = {str(i): getattr(env, "rng", None) for i, env in enumerate(envs)}
    return {i: g for i, g in found.items() if isinstance(g, np.random.Generator)}


def _format_seconds(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def train(env: Environment, agent: PPOAgent, config: TrainConfig, logdir: str,
          progress: Optional[Callable[[str], None]] = None,
          actors: Optional[RolloutActors] = None) -> TrainResult:
    """Trains `agent` on `env`; see the module docstring."""
    if progress is None:
        progress = lambda line: print(line, file=sys.stderr, flush=True)
    os.makedirs(logdir, exist_ok=True)
    manager = tf.train.CheckpointManager(agent.checkpoint, os.path.join(logdir, "checkpoints"),
                                         max_to_keep=3)
    progress_path = os.path.join(logdir, "progress.json")
    state = Progress()
    envs = _copies(env, config.parallel_envs)
    generators = _generators(envs)
    if manager.latest_checkpoint:
        agent.build(env)
        agent.restore(manager.latest_checkpoint)
        state = Progress.load(progress_path)
        saved = state.environment_generators
        for copy in set(saved) & set(generators):  # build's reset() drew from them
            generators[copy].bit_generator.state = saved[copy]
        exact = set(saved) == set(generators)
        if actors is not None and state.actor_generators:
            actors.restore_generators(state.actor_generators)
        exact &= (actors is not None) == bool(state.actor_generators)
        progress(f"resumed from {manager.latest_checkpoint} at episode "
                 f"{int(agent.episodes.numpy())}" + ("" if exact else
                 " (a checkpoint without every sampling generator: those start afresh)"))
    writer = tf.summary.create_file_writer(os.path.join(logdir, "tensorboard"))
    start, start_episode = time.time(), int(agent.episodes.numpy())
    seconds_before = state.seconds

    def save():
        state.seconds = seconds_before + time.time() - start
        state.environment_generators = {copy: g.bit_generator.state
                                        for copy, g in generators.items()}
        state.actor_generators = [] if actors is None else actors.generator_states()
        manager.save(checkpoint_number=int(agent.episodes.numpy()))
        state.save(progress_path)

    recent: List[Episode] = []
    while int(agent.episodes.numpy()) < config.episodes:
        done_before = int(agent.episodes.numpy())
        batch = min(len(envs), config.episodes - done_before,
                    agent.config.episodes_per_update - agent.buffered_episodes)
        episodes = (agent.run_episodes(envs[:batch]) if actors is None else
                    actors.run_episodes(agent, min(config.episodes - done_before,
                                                   agent.config.episodes_per_update
                                                   - agent.buffered_episodes)))
        for i, episode in enumerate(episodes):
            recent.append(episode)
            state.interactions += episode.steps
            if episode.final_cost < state.best_final_cost:
                state.best_final_cost = episode.final_cost
                state.best_sequence = episode.applied
            if episode.cheapest_cost < state.cheapest_cost:
                state.cheapest_cost = episode.cheapest_cost
            with writer.as_default(step=done_before + i + 1):
                tf.summary.scalar("episode/reward", episode.total_reward)
                tf.summary.scalar("episode/final_cost", episode.final_cost)
                tf.summary.scalar("episode/steps", episode.steps)
                tf.summary.scalar("episode/best_final_cost", state.best_final_cost)
        n = int(agent.episodes.numpy())
        if not agent.ready_to_update and n < config.episodes:
            continue
        metrics = agent.update()
        updates = int(agent.updates.numpy())
        row = {"episode": n, "updates": updates, "interactions": state.interactions,
               "best_final_cost": state.best_final_cost,
               "mean_reward": float(np.mean([e.total_reward for e in recent])),
               "mean_final_cost": float(np.mean([e.final_cost for e in recent])), **metrics}
        if math.isfinite(state.cheapest_cost):  # environments with a cost
            row["cheapest_cost"] = state.cheapest_cost
        if updates % config.eval_every == 0:
            greedy = agent.run_episode(env, greedy=True, learn=False)
            row["greedy_cost"] = greedy.final_cost
            if math.isfinite(greedy.cheapest_cost):
                row["greedy_cheapest_cost"] = greedy.cheapest_cost
        state.history.append(row)
        recent = []
        with writer.as_default(step=n):
            for k, v in row.items():
                if k not in ("episode", "updates"):
                    tf.summary.scalar(f"train/{k}", v)
        if updates % config.checkpoint_every == 0:
            save()
        elapsed = time.time() - start
        rate = (n - start_episode) / max(elapsed, 1e-9)
        left = (config.episodes - n) / max(rate, 1e-9)
        progress(f"episode {n}/{config.episodes}  {rate:.2f} ep/s  left {_format_seconds(left)}"
                 f"  mean cost {row['mean_final_cost']:.4f}  best {state.best_final_cost:.4f}"
                 f"  (initial {episode.initial_cost:.4f})  loss {metrics['loss']:.3f}")
    save()
    writer.flush()
    return TrainResult(int(agent.episodes.numpy()), state.interactions, state.seconds,
                       state.best_final_cost, [(name, loc) for name, loc in state.best_sequence],
                       state.history, state.cheapest_cost)
