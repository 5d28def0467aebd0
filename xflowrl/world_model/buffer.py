"""The world model's episodes: the collected ones it trains on and the
held-out ones it is measured on (`EpisodeBuffer`), each as latent
sequences beside its rollout without graphs (what re-labelling the masks
for a grown vocabulary needs)."""

from __future__ import annotations

import dataclasses
from typing import List

from xflowrl.world_model import data


def without_graphs(rollout: data.Rollout) -> data.Rollout:
    """A rollout without its graphs (what re-labelling masks needs)."""
    return rollout._replace(states=[None] * len(rollout.states))


@dataclasses.dataclass
class EpisodeBuffer:
    """The world model's episodes.

    Attributes:
      sequences: the training episodes' latent sequences (of every round so
        far with `WorldModelConfig.replay`, else of the latest round).
      raw: their rollouts without graphs, in the same order.
      held_out: the held-out episodes' sequences (collected once).
      held_out_raw: their rollouts without graphs.
    """
    sequences: List[data.Sequences] = dataclasses.field(default_factory=list)
    raw: List[data.Rollout] = dataclasses.field(default_factory=list)
    held_out: List[data.Sequences] = dataclasses.field(default_factory=list)
    held_out_raw: List[data.Rollout] = dataclasses.field(default_factory=list)

    def add(self, sequences: List[data.Sequences], rollouts: List[data.Rollout],
            replay: bool) -> None:
        """A round's episodes: beside the earlier ones with `replay`, else
        in their place."""
        raw = [without_graphs(r) for r in rollouts]
        self.sequences = self.sequences + sequences if replay else sequences
        self.raw = self.raw + raw if replay else raw

    def set_held_out(self, sequences: List[data.Sequences],
                     rollouts: List[data.Rollout]) -> None:
        """The held-out episodes."""
        self.held_out_raw = [without_graphs(r) for r in rollouts]
        self.held_out = sequences

    def relabel(self, vocab: data.XferVocabulary) -> None:
        """Every stored sequence's masks and actions in `vocab`'s terms (a
        grown vocabulary), its latents kept."""
        self.sequences = [data.to_sequences(raw, s.latents, vocab)
                          for raw, s in zip(self.raw, self.sequences)]
        self.held_out = [data.to_sequences(raw, s.latents, vocab)
                         for raw, s in zip(self.held_out_raw, self.held_out)]
