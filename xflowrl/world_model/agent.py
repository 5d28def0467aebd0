"""The model-based agent: a world model from real episodes, a controller in the dream.

`ModelBasedAgent` wires the pieces of this package (thesis §3.4, with the
changes `docs/world_model.md` lists), each phase checkpointed under
`logdir` so that a rerun resumes:

1. `learn_world_model()`: rounds of online real episodes (real steps
   counted). The first round's are random (plus a few episodes that walk
   to the step limit, so that deeper xfers are seen); they fix the
   vocabulary's first xfers (free slots left for later ones), the reward
   scale and the latent encoder, which is then frozen. Every round trains
   the MDN-RNN on minibatches of latent sequences (of all rounds so far
   with `replay`, else the latest) and measures it on held-out random
   episodes (NLL, reward MSE, mask accuracy). With
   `WorldModelConfig.collection == "controller"` the controller then
   trains its share of the imagined episodes, plays a greedy real episode
   (real, predicted and imagined returns per round) and collects the next
   round, its episodes in lockstep (`collect_in_lockstep`, on clones of
   the real environment); a xfer that applies in a visited state fills a
   free slot. With `WorldModelConfig.real_episodes_per_round` the
   controller first plays that many real episodes of its own and learns
   from them with PPO (Dyna; `_learn_from_real`), before each round's
   share of the dream.
2. `train_controller()`: PPO on [z_t, h_t] inside the batched dream only,
   imagined episodes starting from the initial graph and from real
   collected states (`DreamConfig.real_starts`).
3. `evaluate()`: the controller in the real environment (`LatentEnv`),
   greedy or sampled, acting on the real environment's masks (or, as an
   ablation, the world model's); `run_episode(env)` on any other graph's
   real environment (zero-shot: `xflowrl.transfer.evaluate`).

Over a distribution of graphs (`env` a `SampledGraphEnv`): every real
episode draws its graph, so the encoder and the world model learn from
all of them; imagined episodes start from the initial graph of one of
them (each with its step limit) or from real states of any; a round's
controller is evaluated on up to `EVALUATION_GRAPHS` of them (the best
round is the one of the lowest mean cost relative to the initial cost).

TensorBoard summaries go to `logdir/tensorboard`; `progress` receives a line
with the rate and the time left after every round and controller update.

Every random draw follows from the agent's `seed`, passed explicitly: the
collectors and minibatch generators are seeded numpy generators, the
latent encoder's and the MDN-RNN's weights and the reward network's dropout
come from seeds derived from it (`component_seed`), the dream samples with
stateless ops, and the controller is a `PPOAgent` of the same seed. Nothing
sets or reads TensorFlow's global seed.

A resumed run repeats the uninterrupted run of its seed. What a round
draws follows from [seed, round, purpose] (`_seed_of`), the controller's
collection included, which samples its policy with that round's generator;
what a batch of controller training draws (the dream's z_{t+1}, the real
starts) from [seed, the controller's episodes so far]; the dropout masks
from the learner's checkpointed step. The one stateful stream left, the
controller's (its actor's Gumbel noise, its learner's minibatch order),
is in the controller's checkpoint (`PPOAgent.restore`).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import pickle
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union

import numpy as np
import tensorflow as tf

from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.agents.ppo.learning import Step
from xflowrl.embedding import features
from xflowrl.env import GraphEnv
from xflowrl.env.sampled import SampledGraphEnv
from xflowrl.results.state import WorldModelState
from xflowrl.search import RandomAgent
from xflowrl.world_model import data, latent
from xflowrl.world_model.config import DreamConfig, WorldModelConfig, controller_ppo_config
from xflowrl.world_model.controller import (
    Evaluation,
    collect_in_lockstep,
    evaluate,
    imagine_batch,
    play_in_lockstep,
    train_in_dream,
)
from xflowrl.world_model.dream import BatchedDream, DreamStarts
from xflowrl.world_model.latent_env import LatentEnv, LatentEnvBatch
from xflowrl.world_model.learning import WorldModelLearner
from xflowrl.world_model.networks import MDNRNN

# Relative difference below which two graphs' costs count as equal.
COST_TOLERANCE = 1e-9

# Greedy imagined episodes from the initial graph behind a round's
# "imagined return" (the dream samples z_{t+1}, so greedy episodes differ).
IMAGINED_EVAL_EPISODES = 16

# Controller updates between its checkpoints (and at the end of every stretch).
CONTROLLER_CHECKPOINT_EVERY = 10

# Real episodes the controller collects at once (in lockstep: one batched
# encoding and one batched MDN-RNN step per step; more are played in turn).
LOCKSTEP_EPISODES = 64

# Graphs of a distribution on which a round's controller is evaluated (spread
# evenly over the environment's graphs).
EVALUATION_GRAPHS = 8


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
    """World model + dream-trained PPO controller for one real environment
    (one graph's, or a `SampledGraphEnv` over many graphs)."""

    def __init__(self, env: Union[GraphEnv, SampledGraphEnv], logdir: str,
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
        self.real_history: List[Dict[str, float]] = []   # one row per round's real episodes
        self.lockstep_real_steps = 0
        self._controllers: Dict[str, tuple] = {}  # subdir -> (agent, manager, history)
        self._clones: Dict[str, List[GraphEnv]] = {}  # graph ("" for one) -> lockstep envs
        self._buffer: List[data.Sequences] = []
        self._raw: List[data.Rollout] = []        # the buffer's rollouts without graphs
        self._held_out: List[data.Sequences] = []
        self._held_out_raw: List[data.Rollout] = []
        self._starts_pool: Optional[dict] = None
        self._initials: Optional[Tuple[np.ndarray, np.ndarray]] = None

    # -- the built parts -----------------------------------------------------
    # The world model's parts are None until the first round (or a restore)
    # builds them, the default controller until `train_controller`; these
    # give them where they must be there, or say what was skipped.
    @property
    def _vocab(self) -> data.XferVocabulary:
        return _built(self.vocab, "vocabulary")

    @property
    def _encoder(self) -> latent.LatentEncoder:
        return _built(self.encoder, "encoder")

    @property
    def _model(self) -> MDNRNN:
        return _built(self.model, "MDN-RNN")

    @property
    def _learner(self) -> WorldModelLearner:
        return _built(self.learner, "learner")

    @property
    def _controller(self) -> PPOAgent:
        if self.controller is None:
            raise RuntimeError("no controller yet: call train_controller() (or "
                               "learn_world_model() with controller collection) first")
        return self.controller

    # -- the graphs --------------------------------------------------------------
    def _graph_envs(self) -> List[GraphEnv]:
        """The real environment of every graph episodes start from."""
        if isinstance(self.env, SampledGraphEnv):
            return self.env.graph_envs()
        return [self.env]

    def _reseed_env(self, *keys: int) -> None:
        """Keys the graphs a distribution's next episodes draw by `keys`, so
        that what a round collects does not depend on earlier draws (a
        resumed run draws the same graphs). A single graph draws nothing."""
        if isinstance(self.env, SampledGraphEnv):
            self.env.reseed(self._seed_of(*keys))

    def initial_latents(self) -> Tuple[np.ndarray, np.ndarray]:
        """([G, Z] latents, [G] step limits) of the initial graphs (the
        frozen encoder's; computed once per encoder)."""
        if self._initials is None:
            envs = self._graph_envs()
            latents = self._encoder.encode([env.reset().state for env in envs])
            self._initials = (np.asarray(latents, np.float32),
                              np.array([env.config.max_steps for env in envs], np.int64))
        return self._initials

    def _max_steps(self) -> int:
        """The longest step limit of the graphs."""
        return int(self.initial_latents()[1].max())

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
        self._initials = None
        self._checkpoint = tf.train.Checkpoint(encoder=self.encoder, model=self.model,
                                               optimizer=self.learner.optimizer,
                                               steps=self.learner.steps)

    def _encode(self, rollouts: List[data.Rollout]) -> List[data.Sequences]:
        return [data.to_sequences(r, self._encoder.encode(r.states), self._vocab)
                for r in rollouts]

    def _train_encoder(self, rollouts: List[data.Rollout]) -> List[Dict[str, float]]:
        states = [s for r in rollouts for s in r.states]
        vocab = self._vocab
        m = vocab.size
        valid = np.zeros((len(states), m), np.float32)
        counts = np.zeros((len(states), m), np.float32)
        i = 0
        for r in rollouts:
            for v in r.valid:
                for real, count in v.items():
                    valid[i, vocab.to_compact(real)] = 1.0
                    counts[i, vocab.to_compact(real)] = count
                i += 1
        targets = latent.EncoderTargets(
            np.array([latent.relative_cost(s) for s in states], np.float32), valid, counts)
        cfg = self.wm_config
        return latent.train_encoder(self._encoder, states, targets, cfg.encoder_steps,
                                    cfg.encoder_batch_size, cfg.encoder_learning_rate,
                                    seed=self.seed)

    def _inputs(self) -> Dict[str, bool]:
        """The input options a saved world model was trained with: a run
        resumed with others would restore a model of another shape, or
        (ranks) read its actions with another meaning."""
        cfg = self.wm_config
        return {"xfer_summaries": cfg.xfer_summaries, "ranked_locations": cfg.ranked_locations}

    def _save_world_model(self) -> None:
        directory = self._wm_dir()
        self._checkpoint.write(os.path.join(directory, "checkpoint"))
        with open(os.path.join(directory, "buffer.pkl.tmp"), "wb") as f:
            pickle.dump({"buffer": self._buffer, "held_out": self._held_out, "raw": self._raw,
                         "held_out_raw": self._held_out_raw}, f)
        os.replace(os.path.join(directory, "buffer.pkl.tmp"),
                   os.path.join(directory, "buffer.pkl"))
        self._save_state()

    def _save_state(self) -> None:
        """Writes the state as its record (`WorldModelState`: a key it does
        not know is refused here, not found on resuming)."""
        _save_json(os.path.join(self._wm_dir(), "state.json"),
                   WorldModelState.from_state(self.state).to_json())

    def restore_world_model(self) -> None:
        """Restores the latest saved world model (encoder, MDN-RNN, buffer,
        state) without training further: to inspect a finished run."""
        self._restore_world_model()

    def _restore_world_model(self) -> None:
        directory = self._wm_dir()
        # A state.json of before the record (no schema) reads too.
        saved_state = WorldModelState.load(os.path.join(directory, "state.json"))
        if saved_state is None:
            raise FileNotFoundError(f"{directory}: no state.json to resume from")
        self.state = saved_state.to_state()
        saved_inputs = self.state.get("inputs", {name: False for name in self._inputs()})
        if saved_inputs != self._inputs():
            flags = " ".join(f"--{'' if on else 'no'}{name}" for name, on in saved_inputs.items())
            raise ValueError(f"{directory}: this run's world model was trained with "
                             f"{saved_inputs}, not {self._inputs()}; resume it with the same "
                             f"settings ({flags})")
        self._build_world_model(data.XferVocabulary.from_json(self.state["vocab"]))
        with open(os.path.join(directory, "buffer.pkl"), "rb") as f:
            saved = pickle.load(f)
        self._buffer, self._held_out = saved["buffer"], saved["held_out"]
        self._raw, self._held_out_raw = saved["raw"], saved["held_out_raw"]
        first = self._graph_envs()[0].reset().state
        self._encoder.predict(self._encoder(features.to_tensors(first)))
        self._learner.build(data.make_batch(self._buffer[:1]))
        self._checkpoint.read(os.path.join(directory, "checkpoint")).assert_consumed()
        self._initials = None  # the restored encoder's
        self._starts_pool = self._start_pool()

    def learn_world_model(self) -> Dict:
        """Phase 1 (resumable); returns the state: real steps, per-round metrics.

        Every round collects real episodes, trains the world model on them
        (and, with `replay`, on all earlier rounds') and measures it on the
        held-out episodes. The first round's episodes are random (the
        thesis' collector). With `collection="controller"` the default
        controller then trains in the dream after every round (its share of
        `DreamConfig.episodes`), is evaluated in the real environment (real
        masks: its real, predicted and imagined returns go into the round's
        row) and collects the next round; with "random" every round is
        random and `train_controller` trains the controller afterwards.
        """
        cfg = self.wm_config
        os.makedirs(self._wm_dir(), exist_ok=True)
        if os.path.exists(os.path.join(self._wm_dir(), "state.json")):
            self._restore_world_model()
            self.progress(f"world model: resumed after round {self.state['round']}")
        else:
            self.state = {"round": 0, "real_steps": 0, "held_out_steps": 0,
                          "evaluation_steps": 0, "rounds": [], "encoder": {}, "seconds": 0.0}
        self._round_clock = (time.time(), self.state["round"])
        for r in range(cfg.rounds):
            if r >= self.state["round"]:
                self._world_model_round(r)
            if cfg.collection == "controller":
                self._controller_round(r)
        return self.state

    def _seed_of(self, *keys: int) -> int:
        return int(np.random.SeedSequence([self.seed, *keys]).generate_state(1)[0])

    def _collected_by(self, r: int) -> str:
        """Who collects round r: "random" (the first round, and every round
        of the thesis' collection) or "controller"."""
        return "random" if r == 0 else self.wm_config.collection

    def _collect(self, r: int) -> List[data.Rollout]:
        """Round r's real episodes (random in the first round and with
        "random" collection; else the controller's)."""
        cfg = self.wm_config
        self._reseed_env(r, 8)
        if self._collected_by(r) == "controller":
            rng = np.random.default_rng(self._seed_of(r, 1))
            rollouts: List[data.Rollout] = []
            envs = self._lockstep_envs(cfg.episodes_per_round)
            for i in range(0, len(envs), LOCKSTEP_EPISODES):
                rollouts += collect_in_lockstep(self._views(envs[i:i + LOCKSTEP_EPISODES]),
                                                self._controller, cfg.explore, rng)
            return rollouts
        collector = RandomAgent(cfg.noop_probability, seed=self._seed_of(r, 1))
        allowed = None if self.vocab is None else self.vocab.allowed()
        ranked = cfg.ranked_locations
        rollouts = data.collect_rollouts(self.env, cfg.episodes_per_round, collector, allowed,
                                         ranked)
        if self.vocab is None and cfg.vocabulary_episodes:
            walker = RandomAgent(0.0, seed=self._seed_of(r, 2))
            rollouts += data.collect_rollouts(self.env, cfg.vocabulary_episodes, walker,
                                              ranked=ranked)
        return rollouts

    def _lockstep_envs(self, n: int) -> List[GraphEnv]:
        """Real environments of n episodes to play at once: clones of the
        one graph's, or of the graphs a distribution draws for them in turn
        (those `reset` would draw). The clones are kept for later rounds."""
        names = ([self.env.draw() for _ in range(n)] if isinstance(self.env, SampledGraphEnv)
                 else [""] * n)
        envs, used = [], {name: 0 for name in names}
        for name in names:
            clones = self._clones.setdefault(name, [])
            if used[name] == len(clones):
                base = self.env.env_of(name) if isinstance(self.env, SampledGraphEnv) else self.env
                clones.append(base.clone())
            envs.append(clones[used[name]])
            used[name] += 1
        return envs

    def _first_round(self, rollouts: List[data.Rollout]) -> None:
        """Fixes the vocabulary's first xfers, the reward scale and the latent
        encoder from the first round's episodes; collects the held-out ones."""
        cfg = self.wm_config
        self._build_world_model(data.XferVocabulary.from_rollouts(
            rollouts, self.env.num_xfers, cfg.vocabulary_headroom))
        self.state["vocab"] = self._vocab.to_json()
        self.state["inputs"] = self._inputs()
        reward_std = float(np.std(np.concatenate([r.rewards for r in rollouts])))
        self.state["reward_scale"] = 1.0 / reward_std if reward_std > 1e-9 else 1.0
        self._model.set_reward_scale(self.state["reward_scale"])
        history = self._train_encoder(rollouts)
        self._initials = None  # the trained encoder's
        self.state["encoder"] = {"first": history[0], "last": history[-1]}
        with self.writer.as_default():
            for i, row in enumerate(history):
                for k, v in row.items():
                    tf.summary.scalar(f"encoder/{k}", v, step=i)
        self._reseed_env(0, 9)
        held = data.collect_rollouts(self.env, cfg.held_out_episodes,
                                     RandomAgent(cfg.noop_probability, seed=self._seed_of(0, 3)),
                                     self._vocab.allowed(), cfg.ranked_locations)
        self.state["held_out_steps"] = data.real_steps(held)
        self._held_out_raw = [_without_graphs(h) for h in held]
        self._held_out = self._encode(held)

    def _grow_vocabulary(self, rollouts: List[data.Rollout]) -> int:
        """Adds the xfers valid in the new episodes' states that the
        vocabulary lacks (as many as fit) and re-labels every stored
        sequence's masks; returns how many did not fit."""
        grown, dropped = self._vocab.grow(data.visited_xfers(rollouts))
        if grown.known > self._vocab.known:
            self.vocab = grown
            self.state["vocab"] = grown.to_json()
            self._buffer = [data.to_sequences(raw, s.latents, grown)
                            for raw, s in zip(self._raw, self._buffer)]
            self._held_out = [data.to_sequences(raw, s.latents, grown)
                              for raw, s in zip(self._held_out_raw, self._held_out)]
        return len(dropped)

    def _world_model_round(self, r: int) -> None:
        cfg = self.wm_config
        start = time.time()
        rollouts = self._collect(r)
        self.state["real_steps"] += data.real_steps(rollouts)
        dropped = 0
        if self.vocab is None:
            self._first_round(rollouts)
        else:
            dropped = self._grow_vocabulary(rollouts)
        sequences = self._encode(rollouts)
        raw = [_without_graphs(x) for x in rollouts]
        self._buffer = self._buffer + sequences if cfg.replay else sequences
        self._raw = self._raw + raw if cfg.replay else raw
        rng = np.random.default_rng(self._seed_of(r, 4))
        metrics = []
        for _ in range(cfg.train_steps_per_round):
            idx = rng.choice(len(self._buffer), size=min(cfg.batch_size, len(self._buffer)),
                             replace=False)
            m = self._learner.step(data.make_batch([self._buffer[i] for i in idx]))
            if "first_loss" not in self.state:
                self.state["first_loss"] = m["total"]
            metrics.append(m)
            with self.writer.as_default(step=int(self._learner.steps.numpy())):
                for k, v in m.items():
                    tf.summary.scalar(f"world_model/{k}", v)
        evaluation = self._learner.evaluate(data.make_batch(self._held_out))
        row = {"round": r + 1, "real_steps": self.state["real_steps"],
               "collection": self._collected_by(r),
               "collected_return": float(np.mean([float(np.sum(x.rewards)) for x in rollouts])),
               "vocabulary_known": self._vocab.known, "vocabulary_full": dropped,
               "train_total": float(np.mean([m["total"] for m in metrics[-20:]])),
               "train_latent_nll": float(np.mean([m["latent_nll"] for m in metrics[-20:]])),
               **{f"held_out_{k}": v for k, v in evaluation.items()}}
        self.state["rounds"].append(row)
        with self.writer.as_default(step=r + 1):
            for k, v in evaluation.items():
                tf.summary.scalar(f"world_model_held_out/{k}", v)
        self.state["round"] = r + 1
        self.state["seconds"] += time.time() - start
        self._starts_pool = self._start_pool()
        self._save_world_model()
        began, first = self._round_clock
        rate = (self.state["round"] - first) / max(time.time() - began, 1e-9)
        left = (cfg.rounds - self.state["round"]) / max(rate, 1e-9)
        self.progress(
            f"world model round {r + 1}/{cfg.rounds}  {rate * 60:.1f} rounds/min  left "
            f"{_format_seconds(left)}  real steps {self.state['real_steps']}  collected return "
            f"{row['collected_return']:+.3f}  loss {row['train_total']:.3f}  held-out NLL "
            f"{evaluation['latent_nll']:.3f}  reward MSE {evaluation['reward_mse']:.2e}  "
            f"mask acc {evaluation['xfer_mask_accuracy']:.3f}  vocabulary {self._vocab.known}/"
            f"{self._vocab.size}")

    def _controller_round(self, r: int) -> None:
        """The default controller's share of the dream after round r, then
        its greedy episode in the real environment (real masks) beside what
        the world model predicted for it and imagines from the initial graph."""
        rounds = self.wm_config.rounds
        start = int(np.ceil(self.dream_config.episodes * r / rounds))
        until = int(np.ceil(self.dream_config.episodes * (r + 1) / rounds))
        if self.wm_config.real_episodes_per_round and until > start:
            # Before the stretch's first imagined episode: a run interrupted
            # before the stretch's first checkpoint resumes from the same
            # controller and plays the same real episodes again.
            controller = self._controller_of("controller", self.seed)
            if int(controller.episodes.numpy()) == start:
                self._learn_from_real(r, controller)
        agent = self.train_controller(until=until)
        row = self.state["rounds"][r]
        if "controller_real_return" in row:
            return
        envs = self._evaluation_envs()
        evaluations = [self.evaluate_on(env, agent, masks="real", greedy=True) for env in envs]
        self.state["evaluation_steps"] += sum(e.steps for e in evaluations)
        imagined = imagine_batch(self.make_dream(seed=self._seed_of(r, 5)), agent,
                                 IMAGINED_EVAL_EPISODES, greedy=True)
        relative = float(np.mean([e.best_cost / env.initial_cost
                                  for e, env in zip(evaluations, envs)]))
        row.update(controller_episodes=int(agent.episodes.numpy()),
                   controller_real_return=float(np.mean([e.real_return for e in evaluations])),
                   controller_predicted_return=float(np.mean(
                       [e.predicted_return for e in evaluations])),
                   controller_imagined_return=float(np.mean(
                       [sum(s.reward for s in e) for e in imagined])),
                   controller_relative_cost=relative)
        if len(envs) == 1:
            row.update(controller_cost_ms=evaluations[0].final_cost,
                       controller_best_cost_ms=evaluations[0].best_cost)
        else:
            row.update(controller_graphs=len(envs))
        best = self.state.get("best_round")
        # Equal costs reached by other rewrite orders differ in the last bits.
        if best is None or relative <= self._relative(best) * (1 + COST_TOLERANCE):
            # The snapshot first: an interruption never leaves a state that
            # names a round whose weights were not written.
            self._snapshot().write(os.path.join(self.logdir, "best_round", "snapshot"))
            self.state["best_round"] = {"round": r + 1, "relative_cost": relative,
                                        "episodes": int(agent.episodes.numpy())}
            if len(envs) == 1:
                self.state["best_round"]["cost_ms"] = evaluations[0].best_cost
        self._save_state()
        with self.writer.as_default(step=r + 1):
            for key in ("controller_real_return", "controller_predicted_return",
                        "controller_imagined_return", "controller_relative_cost",
                        "controller_cost_ms"):
                if key in row:
                    tf.summary.scalar(f"rounds/{key[len('controller_'):]}", row[key])
        where = (f"cost {evaluations[0].final_cost:.4f} ms, {evaluations[0].steps} steps"
                 if len(envs) == 1 else
                 f"{len(envs)} graphs, cheapest {100 * (relative - 1):+.2f}% on average")
        self.progress(
            f"controller after round {r + 1}/{rounds}: real return "
            f"{row['controller_real_return']:+.3f} ({where}), predicted "
            f"{row['controller_predicted_return']:+.3f}, imagined "
            f"{row['controller_imagined_return']:+.3f}")

    def _learn_from_real(self, r: int, agent: PPOAgent) -> None:
        """Round r's real episodes of the controller (its own samples, real
        masks; `WorldModelConfig.real_episodes_per_round` of them, on graphs
        drawn for them) and its PPO updates on them, one per dream batch
        of episodes. Every draw follows from [seed, r]. Kept in the
        controller's real.json (written with its checkpoints)."""
        n = self.wm_config.real_episodes_per_round
        start = time.time()
        self._reseed_env(r, 10)
        rng = np.random.default_rng(self._seed_of(r, 11))
        envs = self._lockstep_envs(n)
        episodes: List[List[Step]] = []
        for i in range(0, n, LOCKSTEP_EPISODES):
            episodes += play_in_lockstep(self._views(envs[i:i + LOCKSTEP_EPISODES]), agent, rng)
        size = self.dream_config.batch_size
        metrics = [agent.update_on([s for e in episodes[i:i + size] for s in e])
                   for i in range(0, n, size)]
        row = {"round": r + 1, "episodes": int(agent.episodes.numpy()),
               "updates": int(agent.updates.numpy()), "real_episodes": n,
               "real_steps": sum(len(e) for e in episodes),
               "real_return": float(np.mean([sum(s.reward for s in e) for e in episodes])),
               "loss": float(np.mean([m["loss"] for m in metrics])),
               "seconds": time.time() - start}
        self.real_history.append(row)
        with self.writer.as_default(step=r + 1):
            tf.summary.scalar("rounds/learned_real_return", row["real_return"])
        self.progress(f"controller before round {r + 1}'s dream: learned from {n} real "
                      f"episodes ({row['real_steps']} steps, mean return "
                      f"{row['real_return']:+.3f}) in {row['seconds']:.0f} s")

    @property
    def controller_real_steps(self) -> int:
        """The real steps of the episodes the controller learned from
        (`WorldModelConfig.real_episodes_per_round`), as far as its
        checkpoint has them."""
        return sum(int(row["real_steps"]) for row in self.real_history)

    def _evaluation_envs(self) -> List[GraphEnv]:
        """The graphs a round's controller is evaluated on: the one graph, or
        up to `EVALUATION_GRAPHS` spread evenly over a distribution's."""
        envs = self._graph_envs()
        if len(envs) <= EVALUATION_GRAPHS:
            return envs
        picks = np.linspace(0, len(envs) - 1, EVALUATION_GRAPHS).round().astype(int)
        return [envs[i] for i in sorted(set(picks.tolist()))]

    def _relative(self, best: dict) -> float:
        """A best round's mean cost relative to the initial cost (a state
        written before that was recorded has the one graph's cost)."""
        if "relative_cost" in best:
            return float(best["relative_cost"])
        return float(best["cost_ms"]) / self._graph_envs()[0].initial_cost

    def _snapshot(self) -> tf.train.Checkpoint:
        """The default controller's network and the world model together
        (the controller reads the world model's h_t: one is not used
        without the other)."""
        return tf.train.Checkpoint(network=self._controller.network, model=self._model)

    def select_best_round(self) -> Optional[dict]:
        """Makes the agent the one of the round whose greedy real episode
        reached the cheapest graph (the later of equal rounds): restores
        that round's controller network and world model. Those per-round
        episodes are real steps, counted in `state["evaluation_steps"]`; the
        choice is model selection on them, as early stopping on a validation
        set. Returns the round's record (None without "controller"
        collection, whose rounds are not evaluated)."""
        best = self.state.get("best_round")
        if best is None:
            return None
        if best["round"] != len(self.state["rounds"]):
            self._snapshot().read(
                os.path.join(self.logdir, "best_round", "snapshot")).assert_consumed()
            reached = (f"{best['cost_ms']:.4f} ms" if "cost_ms" in best else
                       f"{100 * (best['relative_cost'] - 1):+.2f}% on average")
            self.progress(f"deploying the agent of round {best['round']} (its greedy real "
                          f"episodes reached {reached})")
        return best

    # -- imagined episodes from real states ------------------------------------
    def _start_pool(self) -> Optional[dict]:
        """Every non-final state of the buffer's episodes with the LSTM's
        state after its real prefix (the current world model's)."""
        if not self._buffer:
            return None
        batch = data.make_batch(self._buffer)
        state = self._model.recurrent_states(tf.constant(batch.latents),
                                             tf.constant(batch.xfers),
                                             tf.constant(batch.locations))
        rows, steps = np.nonzero(batch.weights > 0)
        return {"latent": batch.latents[rows, steps], "hidden": state.hidden.numpy()[rows, steps],
                "cell": state.cell.numpy()[rows, steps], "t": steps.astype(np.int64)}

    def _sample_starts(self, config: DreamConfig, rng: np.random.Generator,
                       dream: BatchedDream, n: int) -> DreamStarts:
        """n starts: `config.real_starts` of them real states of the buffer
        (step limit `start_horizon`, cut at the episode's own), the rest
        the initial graph."""
        pool = self._starts_pool
        k = 0 if pool is None else int(round(n * config.real_starts))
        initial = dream.initial_starts(n - k)
        if pool is None or k == 0:
            return initial
        i = rng.integers(len(pool["t"]), size=k)
        limit = np.minimum(config.start_horizon, self._max_steps() - pool["t"][i])
        return DreamStarts(np.concatenate([pool["latent"][i], initial.latent]),
                           np.concatenate([pool["hidden"][i], initial.hidden]),
                           np.concatenate([pool["cell"][i], initial.cell]),
                           np.concatenate([np.maximum(limit, 1), initial.max_steps]),
                           np.concatenate([np.zeros(k, bool), initial.initial]))

    # -- phase 2: the controller in the dream ---------------------------------
    def initial_latent(self) -> np.ndarray:
        """z_0 of the (first) initial graph."""
        return self.initial_latents()[0][0]

    def resolve(self, config: DreamConfig) -> DreamConfig:
        """Fills in the count margin from the world model's held-out error."""
        if config.count_margin is not None:
            return config
        return dataclasses.replace(config, count_margin=self._count_margin(config))

    def _count_margin(self, config: DreamConfig) -> float:
        """`config`'s count margin, or where that is None the one from the
        world model's held-out error."""
        if config.count_margin is not None:
            return config.count_margin
        mse = self.state["rounds"][-1]["held_out_location_count"] if self.state.get(
            "rounds") else 0.0
        return 2.0 * float(np.sqrt(mse))

    def make_dream(self, config: Optional[DreamConfig] = None, seed: Optional[int] = None
                   ) -> BatchedDream:
        config = self.resolve(config or self.dream_config)
        lockstep = None
        if config.lockstep:
            if not isinstance(self.env, GraphEnv):
                raise ValueError("a lockstep dream needs one graph's environment")
            if self.wm_config.ranked_locations:
                raise ValueError("a lockstep dream steps real locations, not ranks: "
                                 "ranked_locations needs a pure dream")
            lockstep = [self.env.clone() for _ in range(config.batch_size)]
        latents, limits = self.initial_latents()
        return BatchedDream(self._model, latents, config,
                            self._max_steps(), self.env.config.max_locations,
                            seed=self.seed if seed is None else seed,
                            invalid_penalty=self.env.config.invalid_penalty,
                            lockstep=lockstep, vocab=self.vocab, initial_max_steps=limits)

    def dream_start_masks(self, thresholds: Sequence[float], starts: int = 256,
                          seed: int = 0) -> Dict[str, object]:
        """How many xfers the dream offers where episodes start, per mask
        threshold: the share of `starts` initial-graph starts with at least
        one predicted-valid known xfer and the mean number offered, beside
        the mean number of xfers the real engine finds valid at the initial
        graphs ("real_valid_xfers"). A threshold that offers nothing leaves
        the controller nothing to learn in the dream (every imagined episode
        ends at once); over many graphs the mask decoder is less sure than
        on one, so the single graph's threshold can be too high."""
        out: Dict[str, object] = {}
        for threshold in thresholds:
            config = dataclasses.replace(self.resolve(self.dream_config),
                                         mask_threshold=float(threshold), lockstep=False,
                                         real_starts=0.0)
            batch = self.make_dream(config, seed=seed).reset(starts)
            offered = batch.xfer_mask[:, :-1]
            out[f"{threshold:g}"] = {"starts_with_a_valid_xfer": float(offered.any(1).mean()),
                                     "mean_valid_xfers": float(offered.sum(1).mean())}
        vocab = self._vocab
        real = [np.count_nonzero(vocab.compact_masks(obs.xfer_mask, obs.location_mask)[0][:-1])
                for obs in (env.reset() for env in self._graph_envs())]
        out["real_valid_xfers"] = float(np.mean(real))
        return out

    def train_controller(self, config: Optional[DreamConfig] = None,
                         subdir: str = "controller", seed: Optional[int] = None,
                         until: Optional[int] = None) -> PPOAgent:
        """Phase 2 (resumable): PPO trained only on imagined episodes, until
        it has seen `until` of them (default `config.episodes`; a controller
        already there is returned as it is). A controller of `subdir` is
        kept between calls, so rounds continue it."""
        config = config or self.dream_config
        seed = self.seed if seed is None else seed
        until = config.episodes if until is None else until
        agent = self._controller_of(subdir, seed)
        _, manager, history = self._controllers[subdir]
        if int(agent.episodes.numpy()) >= until:
            return agent
        dream = self.make_dream(config, seed)
        directory = os.path.join(self.logdir, subdir)
        history_path = os.path.join(directory, "history.json")
        start, start_episodes = time.time(), int(agent.episodes.numpy())

        def save(n: int) -> None:
            manager.save(checkpoint_number=n)
            _save_json(history_path, history)
            if subdir == "controller":
                _save_json(os.path.join(directory, "real.json"), self.real_history)

        def on_update(m: Dict[str, float]) -> None:
            n = int(m["episodes"])
            history.append(m)
            with self.writer.as_default(step=n):
                for k, v in m.items():
                    tf.summary.scalar(f"dream/{k}", v)
            if int(agent.updates.numpy()) % CONTROLLER_CHECKPOINT_EVERY == 0 or n >= until:
                save(n)
            rate = (n - start_episodes) / max(time.time() - start, 1e-9)
            self.progress(
                f"dream episode {n}/{config.episodes}  {rate:.0f} ep/s  left "
                f"{_format_seconds((until - n) / max(rate, 1e-9))} (this stretch)  imagined "
                f"return {m['dream_return']:+.4f} (all starts "
                f"{m['dream_return_all']:+.4f})  length {m['dream_length']:.1f}  "
                f"loss {m['loss']:.3f}")

        starts: Optional[Callable[[int], DreamStarts]] = None
        if config.real_starts > 0 and not config.lockstep:
            def starts(n: int) -> DreamStarts:
                # Keyed by where training stands: a resumed stretch draws the same.
                seen = int(agent.episodes.numpy())
                rng = np.random.default_rng(self._seed_of(seed, seen, 6))
                return self._sample_starts(config, rng, dream, n)
        done = train_in_dream(dream, agent, config, on_update, starts=starts, until=until,
                              seed=self._seed_of(seed, 7))
        self.lockstep_real_steps += dream.real_steps  # 0 for a pure dream (this process only)
        if done:
            save(int(agent.episodes.numpy()))
        return agent

    def _controller_of(self, subdir: str, seed: int) -> PPOAgent:
        """The controller of `subdir` (loaded from its latest checkpoint the
        first time); "controller" is the default one."""
        if subdir not in self._controllers:
            self._controllers[subdir] = self._load_controller(subdir, seed)
        agent, _, history = self._controllers[subdir]
        if subdir == "controller":
            self.controller, self.dream_history = agent, history
        return agent

    def _load_controller(self, subdir: str, seed: int):
        """A controller of `subdir`, from its latest checkpoint if there is one."""
        agent = PPOAgent(self._vocab.size, self.ppo_config, seed=seed, state="vector",
                         max_locations=self.env.config.max_locations)
        directory = os.path.join(self.logdir, subdir)
        manager = tf.train.CheckpointManager(agent.checkpoint, directory, max_to_keep=2)
        history: List[Dict[str, float]] = []
        if manager.latest_checkpoint:
            agent.build(self._view("real"))
            exact = agent.restore(manager.latest_checkpoint)
            episodes = int(agent.episodes.numpy())
            self.progress(f"controller ({subdir}): resumed at episode {episodes}" + (
                "" if exact else " (a checkpoint without the sampling generators: they "
                "start afresh)"))
            path = os.path.join(directory, "history.json")
            if os.path.exists(path):
                with open(path) as f:
                    history = [r for r in json.load(f) if r["episodes"] <= episodes]
            path = os.path.join(directory, "real.json")
            if subdir == "controller" and os.path.exists(path):
                # A round's real episodes precede its first imagined ones:
                # the checkpoint has them where it is past that point.
                with open(path) as f:
                    self.real_history = [r for r in json.load(f) if r["episodes"] < episodes]
        return agent, manager, history

    # -- phase 3: the real environment ----------------------------------------
    def _view(self, masks: str, env=None) -> LatentEnv:
        config = self.dream_config
        return LatentEnv(env or self.env, self._encoder, self._model, self._vocab, masks=masks,
                         mask_threshold=config.mask_threshold, noop_reward=config.noop_reward,
                         count_margin=self._count_margin(config),
                         ranked=self.wm_config.ranked_locations)

    def _views(self, envs: Sequence[GraphEnv]) -> LatentEnvBatch:
        """The collector's view of real environments stepped together (real masks)."""
        config = self.dream_config
        return LatentEnvBatch(envs, self._encoder, self._model, self._vocab, masks="real",
                              mask_threshold=config.mask_threshold, noop_reward=config.noop_reward,
                              count_margin=self._count_margin(config),
                              ranked=self.wm_config.ranked_locations)

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
        (`xflowrl.transfer.evaluate`) takes either agent: `.applied` holds
        the episode's (xfer name, location) pairs. The model-based agent
        does not learn from real episodes outside its rounds."""
        if learn:
            raise ValueError("the model-based agent learns in rounds (learn_world_model, "
                             "train_controller), not from single episodes")
        return self.evaluate_on(env, greedy=greedy)


T = TypeVar("T")


def _built(part: Optional[T], name: str) -> T:
    """`part` of the world model, or a RuntimeError saying it is not built yet."""
    if part is None:
        raise RuntimeError(f"the world model's {name} is not built yet: call "
                           "learn_world_model() or restore_world_model() first")
    return part


def _without_graphs(rollout: data.Rollout) -> data.Rollout:
    """A rollout without its graphs (what re-labelling masks needs)."""
    return rollout._replace(states=[None] * len(rollout.states))
