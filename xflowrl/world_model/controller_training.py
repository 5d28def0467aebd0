"""Training the model-based agent's controllers (phase 2 of `ModelBasedAgent`).

`ControllerTraining` keeps the agent's controllers, each a `PPOAgent` of
its own folder (`controller` the default one, which collects the rounds
and is evaluated after each), loaded from its latest checkpoint the first
time it is asked for. `train` runs PPO on imagined episodes only
(`train_in_dream`) until a controller has seen a number of them,
checkpointing every `CONTROLLER_CHECKPOINT_EVERY` updates and at the end;
`learn_from_real` lets the default controller learn from real episodes of
its own too (Dyna). `sample_starts` draws a batch's starts: real collected
states (`StartPool`) and the initial graph.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.agents.ppo.learning import Step
from xflowrl.env import GraphEnv
from xflowrl.env.sampled import SampledGraphEnv
from xflowrl.world_model.collection import Collector, LOCKSTEP_EPISODES, Views
from xflowrl.world_model.config import DreamConfig
from xflowrl.world_model.controller import play_in_lockstep, train_in_dream
from xflowrl.world_model.dream import BatchedDream, DreamStarts
from xflowrl.world_model.latent_env import LatentEnv
from xflowrl.world_model.parts import StartPool, WorldModelParts
from xflowrl.world_model.persistence import ControllerFiles
from xflowrl.world_model.reporting import Reporter
from xflowrl.world_model.seeds import Purpose, purpose_seed

# Controller updates between its checkpoints (and at the end of every stretch).
CONTROLLER_CHECKPOINT_EVERY = 10

# The default controller's folder.
DEFAULT = "controller"

StartSampler = Callable[[int], DreamStarts]


@dataclasses.dataclass
class _Controller:
    agent: PPOAgent
    files: ControllerFiles
    history: List[Dict[str, float]]  # one row per update


def sample_starts(pool: Optional[StartPool], config: DreamConfig, rng: np.random.Generator,
                  dream: BatchedDream, n: int, max_steps: int) -> DreamStarts:
    """n starts: `config.real_starts` of them real states of `pool` (step
    limit `start_horizon`, cut at `max_steps` less the steps that reached
    the state), the rest the initial graph."""
    k = 0 if pool is None else int(round(n * config.real_starts))
    initial = dream.initial_starts(n - k)
    if pool is None or k == 0:
        return initial
    i = rng.integers(len(pool.t), size=k)
    limit = np.minimum(config.start_horizon, max_steps - pool.t[i])
    return DreamStarts(np.concatenate([pool.latent[i], initial.latent]),
                       np.concatenate([pool.hidden[i], initial.hidden]),
                       np.concatenate([pool.cell[i], initial.cell]),
                       np.concatenate([np.maximum(limit, 1), initial.max_steps]),
                       np.concatenate([np.zeros(k, bool), initial.initial]))


def build_dream(env: Union[GraphEnv, SampledGraphEnv], parts: WorldModelParts,
                config: DreamConfig, initials: Callable[[], Tuple[np.ndarray, np.ndarray]],
                seed: int, ranked: bool) -> BatchedDream:
    """The batched dream of the world model `parts` (`config` resolved),
    its episodes starting from the initial graphs' latents and step limits
    (`initials()`), sampling from `seed`.

    Raises:
      ValueError: a lockstep dream over many graphs, or of ranked locations.
    """
    lockstep = None
    if config.lockstep:
        if not isinstance(env, GraphEnv):
            raise ValueError("a lockstep dream needs one graph's environment")
        if ranked:
            raise ValueError("a lockstep dream steps real locations, not ranks: "
                             "ranked_locations needs a pure dream")
        lockstep = [env.clone() for _ in range(config.batch_size)]
    latents, limits = initials()
    return BatchedDream(parts.model, latents, config, int(limits.max()),
                        env.config.max_locations, seed=seed,
                        invalid_penalty=env.config.invalid_penalty, lockstep=lockstep,
                        vocab=parts.vocab, initial_max_steps=limits)


class ControllerTraining:
    """The controllers of one agent and what the default one learned from
    real episodes (`real_history`, one row a round).

    Args:
      logdir: the agent's folder (each controller in a subfolder).
      ppo: the controllers' PPO configuration.
      max_locations: the environment's locations per xfer.
      reporter: the agent's reporter.
    """

    def __init__(self, logdir: str, ppo: PPOConfig, max_locations: int, reporter: Reporter):
        self.logdir = logdir
        self.ppo = ppo
        self.max_locations = max_locations
        self.reporter = reporter
        self.real_history: List[Dict[str, float]] = []
        self.lockstep_real_steps = 0  # real steps of lockstep dreams (this process only)
        self._controllers: Dict[str, _Controller] = {}

    @property
    def default(self) -> Optional[PPOAgent]:
        """The default controller, once loaded or created."""
        found = self._controllers.get(DEFAULT)
        return None if found is None else found.agent

    @property
    def default_history(self) -> List[Dict[str, float]]:
        """The default controller's update rows (none before it is loaded)."""
        found = self._controllers.get(DEFAULT)
        return [] if found is None else found.history

    def controller(self, subdir: str, seed: int, vocab_size: int,
                   view: Callable[[], LatentEnv]) -> PPOAgent:
        """The controller of `subdir`: loaded from its latest checkpoint the
        first time (its network built on `view()`), or new, of `seed`."""
        if subdir not in self._controllers:
            self._controllers[subdir] = self._load(subdir, seed, vocab_size, view)
        return self._controllers[subdir].agent

    def _load(self, subdir: str, seed: int, vocab_size: int,
              view: Callable[[], LatentEnv]) -> _Controller:
        agent = PPOAgent(vocab_size, self.ppo, seed=seed, state="vector",
                         max_locations=self.max_locations)
        files = ControllerFiles(self.logdir, subdir, agent.checkpoint)
        history: List[Dict[str, float]] = []
        if files.manager.latest_checkpoint:
            agent.build(view())
            agent.restore(files.manager.latest_checkpoint)
            episodes = int(agent.episodes.numpy())
            self.reporter.say(f"controller ({subdir}): resumed at episode {episodes}")
            history = files.history(episodes)
            real = files.real_history(episodes) if subdir == DEFAULT else None
            if real is not None:
                self.real_history = real
        return _Controller(agent, files, history)

    def train(self, subdir: str, dream: BatchedDream, config: DreamConfig, until: int,
              starts: Optional[StartSampler], seed: int) -> PPOAgent:
        """PPO of the (loaded) controller of `subdir` on imagined episodes of
        `dream` until it has seen `until`; the dream's samples follow from
        [agent seed, `seed`] (`dream_seed`) and the episodes so far."""
        trained = self._controllers[subdir]
        agent = trained.agent
        start, start_episodes = time.time(), int(agent.episodes.numpy())

        def save(n: int) -> None:
            trained.files.save(n, trained.history,
                               self.real_history if subdir == DEFAULT else None)

        def on_update(m: Dict[str, float]) -> None:
            n = int(m["episodes"])
            trained.history.append(m)
            if int(agent.updates.numpy()) % CONTROLLER_CHECKPOINT_EVERY == 0 or n >= until:
                save(n)
            rate = (n - start_episodes) / max(time.time() - start, 1e-9)
            self.reporter.controller_update(m, config.episodes, until, rate)

        done = train_in_dream(dream, agent, config, on_update, starts=starts, until=until,
                              seed=seed)
        self.lockstep_real_steps += dream.real_steps  # 0 for a pure dream
        if done:
            save(int(agent.episodes.numpy()))
        return agent

    def learn_from_real(self, r: int, agent: PPOAgent, collector: Collector, views: Views,
                        batch_size: int) -> None:
        """Round r's real episodes of `agent` (its own samples, real masks;
        `real_episodes_per_round` of them, on graphs `collector` draws for
        them; every draw follows from [seed, r]) and its PPO updates on
        them, one per `batch_size` episodes; their row goes into
        `real_history` (written with the default controller's checkpoints)."""
        n = collector.config.real_episodes_per_round
        start = time.time()
        collector.reseed(Purpose.REAL_EPISODE_GRAPHS, r)
        rng = np.random.default_rng(purpose_seed(collector.seed, Purpose.REAL_EPISODES, r))
        envs = collector.lockstep_envs(n)
        episodes: List[List[Step]] = []
        for i in range(0, n, LOCKSTEP_EPISODES):
            episodes += play_in_lockstep(views(envs[i:i + LOCKSTEP_EPISODES]), agent, rng)
        metrics = [agent.update_on([s for e in episodes[i:i + batch_size] for s in e])
                   for i in range(0, n, batch_size)]
        row = {"round": r + 1, "episodes": int(agent.episodes.numpy()),
               "updates": int(agent.updates.numpy()), "real_episodes": n,
               "real_steps": sum(len(e) for e in episodes),
               "real_return": float(np.mean([sum(s.reward for s in e) for e in episodes])),
               "loss": float(np.mean([m["loss"] for m in metrics])),
               "seconds": time.time() - start}
        self.real_history.append(row)
        self.reporter.learned_from_real(row)

    @property
    def real_steps(self) -> int:
        """The real steps of the episodes the default controller learned
        from, as far as its checkpoint has them."""
        return sum(int(row["real_steps"]) for row in self.real_history)
