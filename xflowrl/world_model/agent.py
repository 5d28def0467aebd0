"""The model-based agent: a world model from real episodes, a controller in the dream.

`ModelBasedAgent` wires the roles of this package (thesis §3.4, with the
changes docs/world_model.md lists), each phase resumable from `logdir`:

1. `learn_world_model()`: rounds of real episodes (`collection`) that
   train the world model (`model_learning`); with "controller"
   collection the default controller then trains its share of the dream
   (`controller_training`; first on real episodes of its own with
   `real_episodes_per_round`), is evaluated for real, the best round
   snapshotted (`acting`), and collects the next round.
2. `train_controller()`: PPO on [z_t, h_t] inside the batched dream only.
3. `evaluate()`, `run_episode(env)` (zero-shot): the controller in a real
   environment (`LatentEnv`); `select_best_round()` deploys the best round.

`env` may be a `SampledGraphEnv`. Files: `persistence`; TensorBoard and
progress lines: `reporting`; seeds: `seeds` (nothing touches TensorFlow's
global seed; a resumed run repeats the uninterrupted run of its seed).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.env import GraphEnv
from xflowrl.env.sampled import SampledGraphEnv
from xflowrl.results.records import to_plain
from xflowrl.results.state import WorldModelState
from xflowrl.world_model import acting, data, latent
from xflowrl.world_model.collection import Collector
from xflowrl.world_model.config import DreamConfig, WorldModelConfig, controller_ppo_config
from xflowrl.world_model.controller import Evaluation, evaluate
from xflowrl.world_model.controller_training import (
    ControllerTraining,
    DEFAULT,
    StartSampler,
    build_dream,
    sample_starts,
)
from xflowrl.world_model.dream import BatchedDream, DreamStarts
from xflowrl.world_model.latent_env import LatentEnv, LatentEnvBatch
from xflowrl.world_model.learning import WorldModelLearner
from xflowrl.world_model.model_learning import RolloutSink, WorldModelLearning
from xflowrl.world_model.networks import MDNRNN
from xflowrl.world_model.persistence import WorldModelFiles, best_round_path, best_round_snapshot
from xflowrl.world_model.reporting import Reporter
from xflowrl.world_model.seeds import Purpose, purpose_seed


class ModelBasedAgent:
    """World model + dream-trained PPO controller for one real environment
    (one graph's, or a `SampledGraphEnv` over many graphs). `on_rollouts`
    sees the world model's real episodes with their graphs as they are
    collected (`WorldModelLearning`).

    Attributes:
      world: the world model and its training (`state`, `parts`, `buffer`).
      training: the controllers and their training.
      collector: the real episodes of the rounds.
      reporter: TensorBoard and progress lines.
    """

    def __init__(self, env: Union[GraphEnv, SampledGraphEnv], logdir: str,
                 world_model: Optional[WorldModelConfig] = None,
                 dream: Optional[DreamConfig] = None,
                 ppo: Optional[PPOConfig] = None, seed: int = 0,
                 progress: Optional[Callable[[str], None]] = None,
                 on_rollouts: Optional[RolloutSink] = None):
        self.env = env
        self.logdir = logdir
        self.wm_config = world_model or WorldModelConfig()
        self.dream_config = dream or DreamConfig()
        self.ppo_config = ppo or controller_ppo_config(self.dream_config.batch_size)
        self.seed = seed
        os.makedirs(logdir, exist_ok=True)
        self.reporter = Reporter(logdir, progress)
        self.collector = Collector(env, self.wm_config, seed)
        self.world = WorldModelLearning(self.collector, self.wm_config,
                                        env.config.max_locations, seed,
                                        WorldModelFiles(logdir), self.reporter, on_rollouts)
        self.training = ControllerTraining(logdir, self.ppo_config, env.config.max_locations,
                                           self.reporter)

    # -- what the agent holds ----------------------------------------------------
    @property
    def state(self) -> WorldModelState:
        """The world model's training so far (world_model/state.json)."""
        return self.world.state

    @property
    def vocab(self) -> Optional[data.XferVocabulary]:
        return None if self.world.parts is None else self.world.parts.vocab

    @property
    def encoder(self) -> Optional[latent.LatentEncoder]:
        return None if self.world.parts is None else self.world.parts.encoder

    @property
    def model(self) -> Optional[MDNRNN]:
        return None if self.world.parts is None else self.world.parts.model

    @property
    def learner(self) -> Optional[WorldModelLearner]:
        return None if self.world.parts is None else self.world.parts.learner

    @property
    def controller(self) -> Optional[PPOAgent]:
        """The default controller (None before it is trained or loaded)."""
        return self.training.default

    @property
    def _controller(self) -> PPOAgent:
        if self.training.default is None:
            raise RuntimeError("no controller yet: call train_controller() (or "
                               "learn_world_model() with controller collection) first")
        return self.training.default

    # The default controller's update rows and rows of its own real
    # episodes, their real steps (as far as its checkpoint has them), the
    # real steps of lockstep dreams (this process only), TensorBoard's writer.
    @property
    def dream_history(self) -> List[Dict[str, float]]:
        return self.training.default_history

    @property
    def real_history(self) -> List[Dict[str, float]]:
        return self.training.real_history

    @property
    def controller_real_steps(self) -> int:
        return self.training.real_steps

    @property
    def lockstep_real_steps(self) -> int:
        return self.training.lockstep_real_steps

    @property
    def writer(self) -> tf.summary.SummaryWriter:
        return self.reporter.writer

    def initial_latents(self) -> Tuple[np.ndarray, np.ndarray]:
        """([G, Z] latents, [G] step limits) of the initial graphs."""
        return self.world.initial_latents()

    def _seed(self, purpose: Purpose, *keys: int) -> int:
        return purpose_seed(self.seed, purpose, *keys)

    # -- phase 1: the world model ---------------------------------------------
    def learn_world_model(self) -> Dict:
        """Phase 1 (resumable): the world model's rounds and, with
        `collection="controller"`, the default controller's after each;
        with "random" every round is random and `train_controller` trains
        the controller afterwards.

        Returns:
          the state as the plain dict of its record (`WorldModelState.to_state`).
        """
        world = self.world
        if world.files.exists():
            world.restore()
            self.reporter.say(f"world model: resumed after round {world.state.round}")
        self.reporter.start_rounds(world.state.round)
        for r in range(self.wm_config.rounds):
            if r >= world.state.round:
                world.round(r, lambda: self._controller, self._views)
            if self.wm_config.collection == "controller":
                self._controller_round(r)
        return world.state.to_state()

    def restore_world_model(self) -> None:
        """Restores the latest saved world model (encoder, MDN-RNN, buffer,
        state) without training further: to inspect a finished run."""
        self.world.restore()

    def _controller_round(self, r: int) -> None:
        """The default controller's share of the dream after round r (its own
        real episodes first, where set), then its greedy real episodes beside
        what the world model predicted and imagines; the best round so far
        is snapshotted."""
        rounds, episodes = self.wm_config.rounds, self.dream_config.episodes
        start = int(np.ceil(episodes * r / rounds))
        until = int(np.ceil(episodes * (r + 1) / rounds))
        if self.wm_config.real_episodes_per_round and until > start:
            # Before the stretch's first imagined episode: a run interrupted
            # before the stretch's first checkpoint resumes from the same
            # controller and plays the same real episodes again.
            controller = self._controller_of(DEFAULT, self.seed)
            if int(controller.episodes.numpy()) == start:
                self.training.learn_from_real(r, controller, self.collector, self._views,
                                              self.dream_config.batch_size)
        agent = self.train_controller(until=until)
        state = self.world.state
        row = state.rounds[r]
        if row.controller is not None:
            return
        evaluation = acting.evaluate_round(
            agent, acting.evaluation_envs(self.collector.graph_envs()),
            lambda env: self._view("real", env),
            lambda: self.make_dream(seed=self._seed(Purpose.IMAGINED_EVALUATION, r)))
        state.evaluation_steps += sum(e.steps for e in evaluation.episodes)
        row.controller = evaluation.controller
        if acting.better_round(evaluation.relative_cost, state.best_round):
            # The snapshot first: an interruption never leaves a state that
            # names a round whose weights were not written.
            self._snapshot().write(best_round_path(self.logdir))
            state.best_round = evaluation.best_round(r)
        self.world.files.save_state(state)
        self.reporter.controller_round(row, rounds, evaluation.where())

    def _snapshot(self) -> tf.train.Checkpoint:
        return best_round_snapshot(self._controller.network, self.world.built.model)

    def select_best_round(self) -> Optional[dict]:
        """Makes the agent the one of the round whose greedy real episodes
        reached the cheapest graphs (the later of equal rounds): restores
        that round's controller network and world model. Those per-round
        episodes are real steps, counted in `state.evaluation_steps`; the
        choice is model selection on them, as early stopping on a validation
        set. Returns the round's record as a plain dict (None without
        "controller" collection, whose rounds are not evaluated)."""
        best = self.world.state.best_round
        if best is None:
            return None
        if best.round != len(self.world.state.rounds):
            self._snapshot().read(best_round_path(self.logdir)).assert_consumed()
            reached = (f"{best.cost_ms:.4f} ms" if best.cost_ms is not None else
                       f"{100 * (best.relative_cost - 1):+.2f}% on average")
            self.reporter.say(f"deploying the agent of round {best.round} (its greedy real "
                              f"episodes reached {reached})")
        return to_plain(best)

    # -- phase 2: the controller in the dream ---------------------------------
    def resolve(self, config: DreamConfig) -> DreamConfig:
        """Fills in the count margin from the world model's held-out error."""
        if config.count_margin is not None:
            return config
        return dataclasses.replace(config, count_margin=self.world.count_margin())

    def make_dream(self, config: Optional[DreamConfig] = None, seed: Optional[int] = None
                   ) -> BatchedDream:
        """The batched dream (`config`, default the agent's, resolved),
        sampling from `seed` (default the agent's)."""
        return build_dream(self.env, self.world.built, self.resolve(config or self.dream_config),
                           self.world.initial_latents, self.seed if seed is None else seed,
                           self.wm_config.ranked_locations)

    def train_controller(self, config: Optional[DreamConfig] = None,
                         subdir: str = DEFAULT, seed: Optional[int] = None,
                         until: Optional[int] = None) -> PPOAgent:
        """Phase 2 (resumable): PPO trained only on imagined episodes, until
        it has seen `until` of them (default `config.episodes`; a controller
        already there is returned as it is). A controller of `subdir` is
        kept between calls, so rounds continue it."""
        config = config or self.dream_config
        seed = self.seed if seed is None else seed
        until = config.episodes if until is None else until
        agent = self._controller_of(subdir, seed)
        if int(agent.episodes.numpy()) >= until:
            return agent
        dream = self.make_dream(config, seed)
        starts: Optional[StartSampler] = None
        if config.real_starts > 0 and not config.lockstep:
            def starts(n: int) -> DreamStarts:
                # Keyed by where training stands: a resumed stretch draws the same.
                seen = int(agent.episodes.numpy())
                rng = np.random.default_rng(self._seed(Purpose.DREAM_STARTS, seed, seen))
                max_steps = int(self.world.initial_latents()[1].max())
                return sample_starts(self.world.start_pool, config, rng, dream, n, max_steps)
        return self.training.train(subdir, dream, config, until, starts,
                                   self._seed(Purpose.DREAM_SAMPLES, seed))

    def _controller_of(self, subdir: str, seed: int) -> PPOAgent:
        return self.training.controller(subdir, seed, self.world.built.vocab.size,
                                        lambda: self._view("real"))

    # -- phase 3: the real environment ----------------------------------------
    def _count_margin(self) -> float:
        margin = self.dream_config.count_margin
        return self.world.count_margin() if margin is None else margin

    def _view(self, masks: str, env: Optional[GraphEnv] = None) -> LatentEnv:
        return acting.latent_view(env or self.env, self.world.built, self.dream_config,
                                  self._count_margin(), self.wm_config.ranked_locations, masks)

    def _views(self, envs: Sequence[GraphEnv]) -> LatentEnvBatch:
        return acting.latent_views(envs, self.world.built, self.dream_config,
                                   self._count_margin(), self.wm_config.ranked_locations)

    def evaluate(self, agent: Optional[PPOAgent] = None, masks: str = "real",
                 greedy: bool = True) -> Evaluation:
        """One episode of the controller in the real environment. It acts on
        the real environment's masks (part of the real observation); the
        world model's predicted masks (`masks="model"`) are an ablation."""
        return evaluate(self._view(masks), agent or self._controller, greedy)

    def evaluate_on(self, env: GraphEnv, agent: Optional[PPOAgent] = None,
                    masks: str = "real", greedy: bool = True) -> Evaluation:
        """`evaluate` in another real environment: one of the training
        graphs, or a graph the agent never saw (the same rules and
        `max_locations`; xfers outside the vocabulary are never chosen)."""
        if env.config.max_locations != self.env.config.max_locations:
            raise ValueError(f"the agent was built for {self.env.config.max_locations} "
                             f"locations per xfer, the environment has "
                             f"{env.config.max_locations}")
        return evaluate(self._view(masks, env), agent or self._controller, greedy)

    def run_episode(self, env: GraphEnv, greedy: bool = True, learn: bool = False
                    ) -> Evaluation:
        """The deployed controller's episode on `env` (real masks), in the
        model-free agent's terms, so that the zero-shot evaluation
        (`xflowrl.generalist.evaluate`) takes either agent: `.applied` holds
        the episode's (xfer name, location) pairs. The model-based agent
        does not learn from real episodes outside its rounds."""
        if learn:
            raise ValueError("the model-based agent learns in rounds (learn_world_model, "
                             "train_controller), not from single episodes")
        return self.evaluate_on(env, greedy=greedy)
