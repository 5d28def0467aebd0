"""The model-based agent: world model from random rollouts, controller in the dream.

`ModelBasedAgent` wires the pieces of this package in the thesis' order
(§3.4), each phase checkpointed under `logdir` so that a rerun resumes:

1. `learn_world_model()`: rounds of online random-agent rollouts (real
   steps counted). After the first round (plus a few episodes that walk to
   the step limit, so that deeper xfers are seen) the xfer vocabulary is
   fixed and the
   latent encoder is trained on that round's states, then frozen; every
   round then trains the MDN-RNN on minibatches of latent sequences (of all
   rounds so far with `replay`, else the latest). A few held-out episodes
   measure the world model after each round (NLL, reward MSE, mask
   accuracy).
2. `train_controller()`: PPO on [z_t, h_t] inside the batched dream only.
3. `evaluate()`: the controller in the real environment (`LatentEnv`),
   greedy and sampled, with the model's masks and, for comparison, the real
   ones.

TensorBoard summaries go to `logdir/tensorboard`; `progress` receives a line
with the rate and the time left after every round and controller update.

Every random draw follows from the agent's `seed`, passed explicitly: the
collectors and minibatch generators are seeded numpy generators, the
latent encoder's and the MDN-RNN's weights and the reward network's dropout
come from seeds derived from it (`component_seed`), the dream samples with
stateless ops, and the controller is a `PPOAgent` of the same seed. Nothing
sets or reads TensorFlow's global seed.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import pickle
import sys
import time
from typing import Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf

from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.embedding import features
from xflowrl.env import GraphEnv
from xflowrl.search import RandomAgent
from xflowrl.world_model import data, latent
from xflowrl.world_model.config import DreamConfig, WorldModelConfig, controller_ppo_config
from xflowrl.world_model.controller import Evaluation, evaluate, train_in_dream
from xflowrl.world_model.dream import BatchedDream
from xflowrl.world_model.latent_env import LatentEnv
from xflowrl.world_model.learning import WorldModelLearner
from xflowrl.world_model.networks import MDNRNN


class Component(enum.IntEnum):
    """The parts of the world model that draw from seeds of their own."""
    ENCODER_WEIGHTS = 0
    MODEL_WEIGHTS = 1
    MODEL_DROPOUT = 2


def component_seed(seed: int, component: Component) -> int:
    """The seed of one `Component` of an agent of `seed`.

    Derived by `np.random.SeedSequence` so that the components' weights are
    independent of one another and of the controller's, which a `PPOAgent`
    draws from `seed` itself.
    """
    return int(np.random.SeedSequence(seed, spawn_key=(int(component),)).generate_state(1)[0])


def _format_seconds(s: float) -> str:
    s = int(max(s, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _save_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)  # atomic: an interruption never leaves half a file


class ModelBasedAgent:
    """World model + dream-trained PPO controller for one real environment."""

    def __init__(self, env: GraphEnv, logdir: str,
                 world_model: Optional[WorldModelConfig] = None,
                 dream: Optional[DreamConfig] = None,
                 ppo: Optional[PPOConfig] = None, seed: int = 0,
                 progress: Optional[Callable[[str], None]] = None):
        self.env = env
        self.logdir = logdir
        self.wm_config = world_model or WorldModelConfig()
        self.dream_config = dream or DreamConfig()
        self.ppo_config = ppo or controller_ppo_config(self.dream_config.batch_size)
        self.seed = seed
        self.progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
        os.makedirs(logdir, exist_ok=True)
        self.writer = tf.summary.create_file_writer(os.path.join(logdir, "tensorboard"))
        self.vocab: Optional[data.XferVocabulary] = None
        self.encoder: Optional[latent.LatentEncoder] = None
        self.model: Optional[MDNRNN] = None
        self.learner: Optional[WorldModelLearner] = None
        self.controller: Optional[PPOAgent] = None
        self.state: Dict = {}
        self.dream_history: List[Dict[str, float]] = []  # one row per controller update
        self.lockstep_real_steps = 0

    # -- phase 1: the world model ---------------------------------------------
    def _wm_dir(self) -> str:
        return os.path.join(self.logdir, "world_model")

    def _build_world_model(self, vocab: data.XferVocabulary) -> None:
        cfg = self.wm_config
        if vocab.size == 0:
            raise ValueError("no xfer applies in any collected state: nothing to model")
        seeds = {c: component_seed(self.seed, c) for c in Component}
        self.vocab = vocab
        self.encoder = latent.LatentEncoder(cfg.latent_size, vocab.size,
                                            cfg.encoder_message_passing_steps,
                                            seed=seeds[Component.ENCODER_WEIGHTS])
        self.model = MDNRNN(cfg, vocab.size, self.env.config.max_locations,
                            seed=seeds[Component.MODEL_WEIGHTS])
        self.learner = WorldModelLearner(self.model, cfg, seed=seeds[Component.MODEL_DROPOUT])
        self._checkpoint = tf.train.Checkpoint(encoder=self.encoder, model=self.model,
                                               optimizer=self.learner.optimizer,
                                               steps=self.learner.steps)

    def _encode(self, rollouts: List[data.Rollout]) -> List[data.Sequences]:
        return [data.to_sequences(r, self.encoder.encode(r.states), self.vocab)
                for r in rollouts]

    def _train_encoder(self, rollouts: List[data.Rollout]) -> List[Dict[str, float]]:
        states = [s for r in rollouts for s in r.states]
        m = self.vocab.size
        valid = np.zeros((len(states), m), np.float32)
        counts = np.zeros((len(states), m), np.float32)
        i = 0
        for r in rollouts:
            for v in r.valid:
                for real, count in v.items():
                    valid[i, self.vocab.to_compact(real)] = 1.0
                    counts[i, self.vocab.to_compact(real)] = count
                i += 1
        targets = latent.EncoderTargets(
            np.array([latent.relative_cost(s) for s in states], np.float32), valid, counts)
        cfg = self.wm_config
        return latent.train_encoder(self.encoder, states, targets, cfg.encoder_steps,
                                    cfg.encoder_batch_size, cfg.encoder_learning_rate,
                                    seed=self.seed)

    def _save_world_model(self, buffer: List[data.Sequences],
                          held_out: List[data.Sequences]) -> None:
        directory = self._wm_dir()
        self._checkpoint.write(os.path.join(directory, "checkpoint"))
        with open(os.path.join(directory, "buffer.pkl.tmp"), "wb") as f:
            pickle.dump({"buffer": buffer, "held_out": held_out}, f)
        os.replace(os.path.join(directory, "buffer.pkl.tmp"),
                   os.path.join(directory, "buffer.pkl"))
        _save_json(os.path.join(directory, "state.json"), self.state)

    def _restore_world_model(self):
        directory = self._wm_dir()
        with open(os.path.join(directory, "state.json")) as f:
            self.state = json.load(f)
        self._build_world_model(data.XferVocabulary.from_json(self.state["vocab"]))
        with open(os.path.join(directory, "buffer.pkl"), "rb") as f:
            saved = pickle.load(f)
        first = self.env.reset().state
        self.encoder.predict(self.encoder(features.to_tensors(first)))
        self.learner.build(data.make_batch(saved["buffer"][:1]))
        self._checkpoint.read(os.path.join(directory, "checkpoint")).assert_consumed()
        return saved["buffer"], saved["held_out"]

    def learn_world_model(self) -> Dict:
        """Phase 1 (resumable); returns the state: real steps, per-round metrics."""
        cfg = self.wm_config
        os.makedirs(self._wm_dir(), exist_ok=True)
        rng = np.random.default_rng(self.seed)
        collector = RandomAgent(cfg.noop_probability, seed=self.seed)
        buffer: List[data.Sequences] = []
        held_out: List[data.Sequences] = []
        if os.path.exists(os.path.join(self._wm_dir(), "state.json")):
            buffer, held_out = self._restore_world_model()
            collector = RandomAgent(cfg.noop_probability, seed=self.seed + 1000 * self.state["round"])
            rng = np.random.default_rng(self.seed + 1000 * self.state["round"])
            self.progress(f"world model: resumed after round {self.state['round']}")
        else:
            self.state = {"round": 0, "real_steps": 0, "held_out_steps": 0, "rounds": [],
                          "encoder": {}, "seconds": 0.0}
        start, seconds_before = time.time(), self.state["seconds"]
        start_round = self.state["round"]
        while self.state["round"] < cfg.rounds:
            r = self.state["round"]
            allowed = None if self.vocab is None else self.vocab.allowed()
            rollouts = data.collect_rollouts(self.env, cfg.episodes_per_round, collector, allowed)
            if self.vocab is None and cfg.vocabulary_episodes:
                walker = RandomAgent(0.0, seed=self.seed + 1)
                rollouts += data.collect_rollouts(self.env, cfg.vocabulary_episodes, walker)
            self.state["real_steps"] += data.real_steps(rollouts)
            if self.vocab is None:
                self._build_world_model(data.XferVocabulary.from_rollouts(
                    rollouts, self.env.num_xfers))
                self.state["vocab"] = self.vocab.to_json()
                reward_std = float(np.std(np.concatenate([r.rewards for r in rollouts])))
                self.state["reward_scale"] = 1.0 / reward_std if reward_std > 1e-9 else 1.0
                self.model.set_reward_scale(self.state["reward_scale"])
                history = self._train_encoder(rollouts)
                self.state["encoder"] = {"first": history[0], "last": history[-1]}
                with self.writer.as_default():
                    for i, row in enumerate(history):
                        for k, v in row.items():
                            tf.summary.scalar(f"encoder/{k}", v, step=i)
                held = data.collect_rollouts(self.env, cfg.held_out_episodes, collector,
                                             self.vocab.allowed())
                self.state["held_out_steps"] = data.real_steps(held)
                held_out = self._encode(held)
            sequences = self._encode(rollouts)
            buffer = buffer + sequences if cfg.replay else sequences
            metrics = []
            for _ in range(cfg.train_steps_per_round):
                idx = rng.choice(len(buffer), size=min(cfg.batch_size, len(buffer)),
                                 replace=False)
                m = self.learner.step(data.make_batch([buffer[i] for i in idx]))
                if "first_loss" not in self.state:
                    self.state["first_loss"] = m["total"]
                metrics.append(m)
                with self.writer.as_default(step=int(self.learner.steps.numpy())):
                    for k, v in m.items():
                        tf.summary.scalar(f"world_model/{k}", v)
            evaluation = self.learner.evaluate(data.make_batch(held_out))
            row = {"round": r + 1, "real_steps": self.state["real_steps"],
                   "train_total": float(np.mean([m["total"] for m in metrics[-20:]])),
                   "train_latent_nll": float(np.mean([m["latent_nll"] for m in metrics[-20:]])),
                   **{f"held_out_{k}": v for k, v in evaluation.items()}}
            self.state["rounds"].append(row)
            with self.writer.as_default(step=r + 1):
                for k, v in evaluation.items():
                    tf.summary.scalar(f"world_model_held_out/{k}", v)
            self.state["round"] = r + 1
            self.state["seconds"] = seconds_before + time.time() - start
            self._save_world_model(buffer, held_out)
            rate = (self.state["round"] - start_round) / max(time.time() - start, 1e-9)
            left = (cfg.rounds - self.state["round"]) / max(rate, 1e-9)
            self.progress(
                f"world model round {r + 1}/{cfg.rounds}  {rate * 60:.1f} rounds/min  left "
                f"{_format_seconds(left)}  real steps {self.state['real_steps']}  loss "
                f"{row['train_total']:.3f}  held-out NLL {evaluation['latent_nll']:.3f}  "
                f"reward MSE {evaluation['reward_mse']:.2e}  mask acc "
                f"{evaluation['xfer_mask_accuracy']:.3f}")
        return self.state

    # -- phase 2: the controller in the dream ---------------------------------
    def initial_latent(self) -> np.ndarray:
        return self.encoder.encode([self.env.reset().state])[0]

    def resolve(self, config: DreamConfig) -> DreamConfig:
        """Fills in the count margin from the world model's held-out error."""
        if config.count_margin is not None:
            return config
        mse = self.state["rounds"][-1]["held_out_location_count"] if self.state.get(
            "rounds") else 0.0
        return dataclasses.replace(config, count_margin=2.0 * float(np.sqrt(mse)))

    def make_dream(self, config: Optional[DreamConfig] = None, seed: Optional[int] = None
                   ) -> BatchedDream:
        config = self.resolve(config or self.dream_config)
        lockstep = None
        if config.lockstep:
            lockstep = [GraphEnv(self.env.initial_graph, self.env.xfers, self.env.cost_model,
                                 self.env.config) for _ in range(config.batch_size)]
        return BatchedDream(self.model, self.initial_latent(), config,
                            self.env.config.max_steps, self.env.config.max_locations,
                            seed=self.seed if seed is None else seed,
                            invalid_penalty=self.env.config.invalid_penalty,
                            lockstep=lockstep, vocab=self.vocab)

    def train_controller(self, config: Optional[DreamConfig] = None,
                         subdir: str = "controller", seed: Optional[int] = None) -> PPOAgent:
        """Phase 2 (resumable): PPO trained only on imagined episodes."""
        config = config or self.dream_config
        seed = self.seed if seed is None else seed
        dream = self.make_dream(config, seed)
        agent = PPOAgent(self.vocab.size, self.ppo_config, seed=seed, state="vector",
                         max_locations=self.env.config.max_locations)
        directory = os.path.join(self.logdir, subdir)
        manager = tf.train.CheckpointManager(agent.checkpoint, directory, max_to_keep=2)
        view = LatentEnv(self.env, self.encoder, self.model, self.vocab)
        if manager.latest_checkpoint:
            agent.build(view)
            agent.checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
            self.progress(f"controller: resumed at episode {int(agent.episodes.numpy())}")
        start, start_episodes = time.time(), int(agent.episodes.numpy())
        history_path = os.path.join(directory, "history.json")
        self.dream_history = []
        if manager.latest_checkpoint and os.path.exists(history_path):
            with open(history_path) as f:
                self.dream_history = [r for r in json.load(f) if r["episodes"] <= start_episodes]

        def on_update(m: Dict[str, float]) -> None:
            n = int(m["episodes"])
            self.dream_history.append(m)
            with self.writer.as_default(step=n):
                for k, v in m.items():
                    tf.summary.scalar(f"dream/{k}", v)
            if int(agent.updates.numpy()) % 10 == 0 or n >= config.episodes:
                manager.save(checkpoint_number=n)
                _save_json(history_path, self.dream_history)
            rate = (n - start_episodes) / max(time.time() - start, 1e-9)
            self.progress(
                f"dream episode {n}/{config.episodes}  {rate:.0f} ep/s  left "
                f"{_format_seconds((config.episodes - n) / max(rate, 1e-9))}  imagined return "
                f"{m['dream_return']:+.4f}  length {m['dream_length']:.1f}  loss {m['loss']:.3f}")

        history = train_in_dream(dream, agent, config, on_update)
        self.lockstep_real_steps = dream.real_steps  # 0 for a pure dream (this run only)
        if history:
            manager.save(checkpoint_number=int(agent.episodes.numpy()))
            _save_json(history_path, self.dream_history)
        self.controller = agent
        return agent

    # -- phase 3: the real environment ----------------------------------------
    def evaluate(self, agent: Optional[PPOAgent] = None, masks: str = "model",
                 greedy: bool = True) -> Evaluation:
        agent = agent or self.controller
        config = self.resolve(self.dream_config)
        view = LatentEnv(self.env, self.encoder, self.model, self.vocab, masks=masks,
                         mask_threshold=config.mask_threshold, noop_reward=config.noop_reward,
                         count_margin=config.count_margin)
        return evaluate(view, agent, greedy)
