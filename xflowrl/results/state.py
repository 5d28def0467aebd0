"""The model-based agent's world-model training state: what
`xflowrl.world_model.ModelBasedAgent` keeps in <logdir>/world_model/
state.json beside its checkpoint, and resumes from (`WorldModelState`).

The agent works on the state as a dict (`ModelBasedAgent.state`); it is
written through this record (`WorldModelState.from_state(...).to_json()`,
which refuses a key it does not know) and read back through it
(`WorldModelState.load(path).to_state()`). Its rounds are the
`WorldModelRound`s a model-based run's result holds. A state.json of
another version (or from before the record: no schema) is refused; the
run starts again in a fresh folder.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional

from xflowrl.results.records import OMIT_NONE, Record
from xflowrl.results.runs import WorldModelRound


def _omit() -> Any:
    return dataclasses.field(default=None, metadata=OMIT_NONE)


@dataclasses.dataclass
class BestRound:
    """The round whose controller's greedy real episodes reached the cheapest
    graphs (relative to their initial ones; with one graph, its cost)."""
    round: int
    relative_cost: float
    episodes: int                              # the controller's dream episodes then
    cost_ms: Optional[float] = _omit()         # one graph only


@dataclasses.dataclass
class WorldModelState(Record):
    """The world model's training so far. `vocab`, `reward_scale` and
    `first_loss` are set by the first round; `best_round` by the first
    evaluated controller ("controller" collection); each is left out of the
    JSON (and of `to_state`) until then, as the agent's dict lacks them."""

    SCHEMA = "world_model_state"
    VERSION = 2

    round: int                              # rounds finished
    real_steps: int                         # the rounds' collected real steps
    held_out_steps: int                     # the held-out episodes' real steps
    evaluation_steps: int                   # the per-round controllers' real steps
    rounds: List[WorldModelRound]
    encoder: Dict[str, Any]                 # the latent encoder's first and last losses
    seconds: float                          # wall seconds of the rounds
    vocab: Optional[str] = _omit()          # xflowrl.world_model.data.XferVocabulary.to_json
    reward_scale: Optional[float] = _omit()
    first_loss: Optional[float] = _omit()   # the world model's first training loss
    best_round: Optional[BestRound] = _omit()
    # The world model's input options (WorldModelConfig.xfer_summaries,
    # ranked_locations), set by the first round; absent: both off.
    inputs: Optional[Dict[str, bool]] = _omit()

    @classmethod
    def from_state(cls, state: Dict[str, Any]) -> "WorldModelState":
        """The record of the agent's state dict (strict: every key known,
        every round's too).

        Raises:
          RecordError: a key the record does not know, or one it needs missing.
        """
        return cls._fields_from_json(state, "world-model state")

    def to_state(self) -> Dict[str, Any]:
        """The agent's state dict (plain JSON values, rounds flat)."""
        return self._fields_to_json()
