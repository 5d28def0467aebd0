"""Where the model-based agent keeps its run under `logdir`, so that a rerun
resumes it:

- `world_model/`: `checkpoint` (the latent encoder, the MDN-RNN, its Adam
  and the learner's step), `buffer.pkl` (the `EpisodeBuffer`, pickled as a
  dict of its four lists) and `state.json` (the `WorldModelState` record),
  written in that order at the end of a round (`WorldModelFiles`).
- `<subdir>/` of each controller (`controller` the default one): its
  `PPOAgent` checkpoints, `history.json` (its update rows) and, for the
  default one, `real.json` (its own real episodes' rows) (`ControllerFiles`).
- `best_round/snapshot`: the default controller's network and the world
  model of the best round so far (`best_round_snapshot`).

JSON files are written atomically (`save_json`).
"""

from __future__ import annotations

import json
import os
import pickle
from typing import Any, Dict, List, Optional

import tensorflow as tf

from xflowrl.results.state import WorldModelState
from xflowrl.world_model.buffer import EpisodeBuffer


def save_json(path: str, obj: Any) -> None:
    """Writes `obj` as JSON to `path`, atomically: an interruption never
    leaves half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


class WorldModelFiles:
    """The world model's files under <logdir>/world_model."""

    def __init__(self, logdir: str):
        self.directory = os.path.join(logdir, "world_model")

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def exists(self) -> bool:
        """Whether a round was saved (a run to resume)."""
        return os.path.exists(self._path("state.json"))

    def save(self, checkpoint: tf.train.Checkpoint, buffer: EpisodeBuffer,
             state: WorldModelState) -> None:
        """The checkpoint, the buffer, then the state."""
        os.makedirs(self.directory, exist_ok=True)
        checkpoint.write(self._path("checkpoint"))
        tmp = self._path("buffer.pkl.tmp")
        with open(tmp, "wb") as f:
            pickle.dump({"buffer": buffer.sequences, "held_out": buffer.held_out,
                         "raw": buffer.raw, "held_out_raw": buffer.held_out_raw}, f)
        os.replace(tmp, self._path("buffer.pkl"))
        self.save_state(state)

    def save_state(self, state: WorldModelState) -> None:
        """The state alone (a key the record does not know is refused here,
        not found on resuming)."""
        os.makedirs(self.directory, exist_ok=True)
        save_json(self._path("state.json"), state.to_json())

    def load_state(self) -> WorldModelState:
        """The saved state.

        Raises:
          FileNotFoundError: no state was saved.
        """
        state = WorldModelState.load(self._path("state.json"))
        if state is None:
            raise FileNotFoundError(f"{self.directory}: no state.json to resume from")
        return state

    def load_buffer(self) -> EpisodeBuffer:
        """The saved episodes.

        Raises:
          ValueError: a buffer of an older layout (sequences without their
            xfers' cost changes), which this code does not read.
        """
        path = self._path("buffer.pkl")
        with open(path, "rb") as f:
            try:
                saved = pickle.load(f)
            except TypeError as e:  # a Sequences of fewer fields than today's
                raise ValueError(f"{path}: a buffer of an older layout ({e}); this code "
                                 "reads the current one only: run again in a fresh folder") from e
        return EpisodeBuffer(sequences=saved["buffer"], raw=saved["raw"],
                             held_out=saved["held_out"], held_out_raw=saved["held_out_raw"])

    def read_checkpoint(self, checkpoint: tf.train.Checkpoint) -> None:
        """Restores `checkpoint` (every variable built) from the saved one."""
        checkpoint.read(self._path("checkpoint")).assert_consumed()


class ControllerFiles:
    """The files of the controller of <logdir>/<subdir>."""

    def __init__(self, logdir: str, subdir: str, checkpoint: tf.train.Checkpoint):
        self.directory = os.path.join(logdir, subdir)
        self.manager = tf.train.CheckpointManager(checkpoint, self.directory, max_to_keep=2)

    def save(self, episodes: int, history: List[Dict[str, float]],
             real_history: Optional[List[Dict[str, float]]] = None) -> None:
        """A checkpoint numbered by the episodes seen, the update rows and
        (the default controller's) rows of its own real episodes."""
        self.manager.save(checkpoint_number=episodes)
        save_json(os.path.join(self.directory, "history.json"), history)
        if real_history is not None:
            save_json(os.path.join(self.directory, "real.json"), real_history)

    def _rows(self, name: str) -> Optional[List[Dict[str, float]]]:
        path = os.path.join(self.directory, name)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    def history(self, episodes: int) -> List[Dict[str, float]]:
        """The saved update rows up to the checkpoint's `episodes`."""
        return [r for r in self._rows("history.json") or [] if r["episodes"] <= episodes]

    def real_history(self, episodes: int) -> Optional[List[Dict[str, float]]]:
        """The saved rows of the controller's own real episodes that precede
        the checkpoint's `episodes` (a round's real episodes precede its
        first imagined ones); None where none were saved."""
        rows = self._rows("real.json")
        return None if rows is None else [r for r in rows if r["episodes"] < episodes]


def best_round_snapshot(network: tf.Module, model: tf.Module) -> tf.train.Checkpoint:
    """The default controller's network and the world model together (the
    controller reads the world model's h_t: one is not used without the
    other)."""
    return tf.train.Checkpoint(network=network, model=model)


def best_round_path(logdir: str) -> str:
    """Where the best round's snapshot is written."""
    return os.path.join(logdir, "best_round", "snapshot")
