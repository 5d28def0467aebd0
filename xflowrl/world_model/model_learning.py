"""Learning the world model, round by round (phase 1 of `ModelBasedAgent`).

`WorldModelLearning` holds the world model's training: its parts
(`WorldModelParts`, built by the first round), its episodes
(`EpisodeBuffer`) and its state (`WorldModelState`, saved with them by
`WorldModelFiles`). `round(r, ...)` is one round:

1. collect the round's real episodes (`Collector`);
2. the first round fixes the vocabulary's first xfers (free slots left),
   the reward scale and the latent encoder (then frozen) and collects the
   held-out episodes; a later round's new xfers fill free slots, and every
   stored sequence is re-labelled;
3. minibatches of latent sequences (of every round so far with `replay`,
   else the latest) train the MDN-RNN; the held-out episodes measure it;
4. the round's record (`WorldModelRound`) goes into the state, and the
   parts, the episodes and the state are saved.

`on_rollouts(key, rollouts)`, where given, sees every real episode the
world model learns from or is measured on, with its graphs, as it is
collected ("round <r>" for round r's, "held_out"), before the round is
saved: the buffer keeps episodes without their graphs, and a world-model
planner beside the agent learns from the same real data
(`xflowrl.planning.model_episodes`).
"""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Optional, Tuple

# Sees a batch of real episodes as they are collected (module docstring).
RolloutSink = Callable[[str, List["data.Rollout"]], None]

import numpy as np

from xflowrl.agents.ppo import PPOAgent
from xflowrl.results.runs import WorldModelRound
from xflowrl.results.state import WorldModelState
from xflowrl.world_model import data, latent
from xflowrl.world_model.buffer import EpisodeBuffer
from xflowrl.world_model.collection import Collector, Views
from xflowrl.world_model.config import WorldModelConfig
from xflowrl.world_model.parts import StartPool, WorldModelParts, encoder_targets, model_inputs
from xflowrl.world_model.persistence import WorldModelFiles
from xflowrl.world_model.reporting import Reporter
from xflowrl.world_model.seeds import Purpose, purpose_seed


def fresh_state() -> WorldModelState:
    """The state of a world model before its first round."""
    return WorldModelState(round=0, real_steps=0, held_out_steps=0, evaluation_steps=0,
                           rounds=[], encoder={}, seconds=0.0)


class WorldModelLearning:
    """The world model of one agent and its training.

    Args:
      collector: the agent's real episodes.
      config: the world model's configuration.
      max_locations: the environment's locations per xfer.
      seed: the agent's seed.
      files: where the world model is saved.
      reporter: the agent's reporter.
      on_rollouts: sees the collected and held-out episodes (module
        docstring).

    Attributes:
      state: the training so far (rounds, real steps, vocabulary, best round).
      parts: the built parts (None before the first round or a restore).
      buffer: the collected and held-out episodes.
      start_pool: the collected states imagined episodes may start from
        (this world model's LSTM states).
    """

    def __init__(self, collector: Collector, config: WorldModelConfig, max_locations: int,
                 seed: int, files: WorldModelFiles, reporter: Reporter,
                 on_rollouts: Optional[RolloutSink] = None):
        self.collector = collector
        self.on_rollouts = on_rollouts
        self.config = config
        self.max_locations = max_locations
        self.seed = seed
        self.files = files
        self.reporter = reporter
        self.state = fresh_state()
        self.parts: Optional[WorldModelParts] = None
        self.buffer = EpisodeBuffer()
        self.start_pool: Optional[StartPool] = None
        self._initials: Optional[Tuple[np.ndarray, np.ndarray]] = None

    @property
    def built(self) -> WorldModelParts:
        """The parts, or a RuntimeError saying they are not built yet."""
        if self.parts is None:
            raise RuntimeError("the world model is not built yet: call learn_world_model() "
                               "or restore_world_model() first")
        return self.parts

    def _build(self, vocab: data.XferVocabulary) -> WorldModelParts:
        self.parts = WorldModelParts.build(vocab, self.config, self.seed, self.max_locations)
        self._initials = None
        return self.parts

    def initial_latents(self) -> Tuple[np.ndarray, np.ndarray]:
        """([G, Z] latents, [G] step limits) of the initial graphs (the
        frozen encoder's; computed once per encoder)."""
        if self._initials is None:
            envs = self.collector.graph_envs()
            latents = self.built.encoder.encode([env.reset().state for env in envs])
            self._initials = (np.asarray(latents, np.float32),
                              np.array([env.config.max_steps for env in envs], np.int64))
        return self._initials

    def restore(self) -> None:
        """The latest saved parts, episodes and state.

        Raises:
          FileNotFoundError: nothing was saved.
          ValueError: the saved world model has other input options.
        """
        state = self.files.load_state()
        ours = model_inputs(self.config)
        saved_inputs = state.inputs or {name: False for name in ours}
        if saved_inputs != ours:
            flags = " ".join(f"--{'' if on else 'no'}{name}" for name, on in saved_inputs.items())
            raise ValueError(f"{self.files.directory}: this run's world model was trained with "
                             f"{saved_inputs}, not {ours}; resume it with the same settings "
                             f"({flags})")
        assert state.vocab is not None, "a saved state without its vocabulary"
        self.state = state
        parts = self._build(data.XferVocabulary.from_json(state.vocab))
        self.buffer = self.files.load_buffer()
        parts.build_variables(self.collector.graph_envs()[0].reset().state, self.buffer)
        self.files.read_checkpoint(parts.checkpoint)
        self._initials = None  # the restored encoder's
        self.start_pool = parts.start_pool(self.buffer)

    def round(self, r: int, controller: Callable[[], PPOAgent], views: Views) -> None:
        """Round r: collect, (first round) fix the vocabulary and the
        encoder or grow the vocabulary, train, measure, save."""
        cfg, state = self.config, self.state
        start = time.time()
        rollouts = self.collector.collect(r, None if self.parts is None else self.parts.vocab,
                                          controller, views)
        state.real_steps += data.real_steps(rollouts)
        if self.on_rollouts is not None:
            self.on_rollouts(f"round {r}", rollouts)
        dropped = 0
        if self.parts is None:
            self._first_round(rollouts)
        else:
            dropped = self._grow_vocabulary(rollouts)
        parts = self.built
        self.buffer.add(parts.encode(rollouts), rollouts, cfg.replay)
        rng = np.random.default_rng(purpose_seed(self.seed, Purpose.MINIBATCHES, r))
        metrics = self._train(rng)
        held_out = parts.learner.evaluate(data.make_batch(self.buffer.held_out))
        row = WorldModelRound(
            round=r + 1, real_steps=state.real_steps, collection=self.collector.collected_by(r),
            collected_return=float(np.mean([float(np.sum(x.rewards)) for x in rollouts])),
            vocabulary_known=parts.vocab.known, vocabulary_full=dropped,
            train_total=float(np.mean([m["total"] for m in metrics[-20:]])),
            train_latent_nll=float(np.mean([m["latent_nll"] for m in metrics[-20:]])),
            held_out=dict(held_out))
        state.rounds.append(row)
        state.round = r + 1
        state.seconds += time.time() - start
        self.start_pool = parts.start_pool(self.buffer)
        self.files.save(parts.checkpoint, self.buffer, state)
        self.reporter.world_model_round(row, cfg.rounds, parts.vocab)

    def _first_round(self, rollouts: List[data.Rollout]) -> None:
        """Fixes the vocabulary's first xfers, the reward scale and the latent
        encoder from the first round's episodes; collects the held-out ones."""
        cfg, state = self.config, self.state
        parts = self._build(data.XferVocabulary.from_rollouts(
            rollouts, self.collector.env.num_xfers, cfg.vocabulary_headroom))
        state.vocab = parts.vocab.to_json()
        state.inputs = model_inputs(cfg)
        reward_std = float(np.std(np.concatenate([r.rewards for r in rollouts])))
        state.reward_scale = 1.0 / reward_std if reward_std > 1e-9 else 1.0
        parts.model.set_reward_scale(state.reward_scale)
        states = [s for r in rollouts for s in r.states]
        history = latent.train_encoder(parts.encoder, states,
                                       encoder_targets(rollouts, parts.vocab),
                                       cfg.encoder_steps, cfg.encoder_batch_size,
                                       cfg.encoder_learning_rate, seed=self.seed)
        self._initials = None  # the trained encoder's
        state.encoder = {"first": history[0], "last": history[-1]}
        self.reporter.encoder(history)
        held = self.collector.held_out(parts.vocab)
        state.held_out_steps = data.real_steps(held)
        if self.on_rollouts is not None:
            self.on_rollouts("held_out", held)
        self.buffer.set_held_out(parts.encode(held), held)

    def _grow_vocabulary(self, rollouts: List[data.Rollout]) -> int:
        """Adds the xfers valid in the new episodes' states that the
        vocabulary lacks (as many as fit) and re-labels every stored
        sequence's masks; returns how many did not fit."""
        parts = self.built
        grown, dropped = parts.vocab.grow(data.visited_xfers(rollouts))
        if grown.known > parts.vocab.known:
            parts.vocab = grown
            self.state.vocab = grown.to_json()
            self.buffer.relabel(grown)
        return len(dropped)

    def _train(self, rng: np.random.Generator) -> List[Dict[str, float]]:
        """The round's training steps of the MDN-RNN on minibatches drawn by
        `rng`; the run's first step sets `state.first_loss`."""
        parts, buffer, cfg = self.built, self.buffer, self.config
        metrics = []
        for _ in range(cfg.train_steps_per_round):
            idx = rng.choice(len(buffer.sequences),
                             size=min(cfg.batch_size, len(buffer.sequences)), replace=False)
            m = parts.learner.step(data.make_batch([buffer.sequences[i] for i in idx]))
            if self.state.first_loss is None:
                self.state.first_loss = m["total"]
            metrics.append(m)
            self.reporter.world_model_step(int(parts.learner.steps.numpy()), m)
        return metrics

    def count_margin(self) -> float:
        """The dream's count margin from the latest round's held-out error
        of the location counts (0 before any round)."""
        rounds = self.state.rounds
        mse = rounds[-1].held_out["location_count"] if rounds else 0.0
        return 2.0 * float(np.sqrt(mse))
