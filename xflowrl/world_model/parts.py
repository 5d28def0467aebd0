"""The world model's built parts (`WorldModelParts`): the xfer vocabulary,
the latent encoder, the MDN-RNN and its learner, each seeded by its
`Component`, with the checkpoint of all of them; what they compute for the
rest of the agent: latent sequences of rollouts, the encoder's targets and
the real states imagined episodes may start from (`StartPool`)."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, NamedTuple, Optional

import numpy as np
import tensorflow as tf

from xflowrl.embedding import features
from xflowrl.world_model import data, latent
from xflowrl.world_model.buffer import EpisodeBuffer
from xflowrl.world_model.config import WorldModelConfig
from xflowrl.world_model.learning import WorldModelLearner
from xflowrl.world_model.networks import MDNRNN
from xflowrl.world_model.seeds import Component, component_seed


class StartPool(NamedTuple):
    """Real states imagined episodes may start from: [P, Z] latents, [P, H]
    LSTM hidden and cell states after each state's real prefix, [P] steps
    taken to reach it."""
    latent: np.ndarray
    hidden: np.ndarray
    cell: np.ndarray
    t: np.ndarray


@dataclasses.dataclass
class WorldModelParts:
    """The world model's built parts; `vocab` is replaced when it grows."""
    vocab: data.XferVocabulary
    encoder: latent.LatentEncoder
    model: MDNRNN
    learner: WorldModelLearner
    checkpoint: tf.train.Checkpoint

    @classmethod
    def build(cls, vocab: data.XferVocabulary, config: WorldModelConfig, seed: int,
              max_locations: int) -> "WorldModelParts":
        """Untrained parts for `vocab`, each drawn from its component's seed.

        Raises:
          ValueError: an empty vocabulary (nothing to model).
        """
        if vocab.size == 0:
            raise ValueError("no xfer applies in any collected state: nothing to model")
        seeds = {c: component_seed(seed, c) for c in Component}
        encoder = latent.LatentEncoder(config.latent_size, vocab.size,
                                       config.encoder_message_passing_steps,
                                       seed=seeds[Component.ENCODER_WEIGHTS])
        model = MDNRNN(config, vocab.size, max_locations, seed=seeds[Component.MODEL_WEIGHTS])
        learner = WorldModelLearner(model, config, seed=seeds[Component.MODEL_DROPOUT])
        checkpoint = tf.train.Checkpoint(encoder=encoder, model=model,
                                         optimizer=learner.optimizer, steps=learner.steps)
        return cls(vocab, encoder, model, learner, checkpoint)

    def encode(self, rollouts: List[data.Rollout]) -> List[data.Sequences]:
        """The rollouts as latent sequences in the vocabulary's terms."""
        return [data.to_sequences(r, self.encoder.encode(r.states), self.vocab)
                for r in rollouts]

    def build_variables(self, graph, buffer: EpisodeBuffer) -> None:
        """Creates every variable (before a checkpoint is read into them)
        from one real state `graph` and the buffer's first sequence."""
        self.encoder.predict(self.encoder(features.to_tensors(graph)))
        self.learner.build(data.make_batch(buffer.sequences[:1]))

    def start_pool(self, buffer: EpisodeBuffer) -> Optional[StartPool]:
        """Every non-final state of the buffer's episodes with the LSTM's
        state after its real prefix (this world model's); None without
        episodes."""
        if not buffer.sequences:
            return None
        batch = data.make_batch(buffer.sequences)
        state = self.model.recurrent_states(tf.constant(batch.latents),
                                            tf.constant(batch.xfers),
                                            tf.constant(batch.locations))
        rows, steps = np.nonzero(batch.weights > 0)
        return StartPool(batch.latents[rows, steps], state.hidden.numpy()[rows, steps],
                         state.cell.numpy()[rows, steps], steps.astype(np.int64))


def encoder_targets(rollouts: List[data.Rollout], vocab: data.XferVocabulary
                    ) -> latent.EncoderTargets:
    """The latent encoder's targets at every state of `rollouts`: the cost
    relative to the initial graph, which known xfers are valid and their
    location counts."""
    states = [s for r in rollouts for s in r.states]
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
    return latent.EncoderTargets(
        np.array([latent.cost_change_percent(s) for s in states], np.float32), valid, counts)


def model_inputs(config: WorldModelConfig) -> Dict[str, bool]:
    """The input options a saved world model was trained with: a run
    resumed with others would restore a model of another shape, or
    (ranks) read its actions with another meaning."""
    return {"xfer_summaries": config.xfer_summaries, "ranked_locations": config.ranked_locations}
