"""What the model-based agent tells while it trains: TensorBoard summaries
under <logdir>/tensorboard and one progress line per round, controller
update and deployment (`Reporter`)."""

from __future__ import annotations

import os
import sys
import time
from typing import Callable, Dict, Mapping, Optional, Sequence

import tensorflow as tf

from xflowrl.results.runs import WorldModelRound
from xflowrl.world_model.data import XferVocabulary

# The controller's per-round figures written to TensorBoard (rounds/<name>).
_ROUND_SCALARS = ("real_return", "predicted_return", "imagined_return", "relative_cost",
                  "cost_ms")


def format_seconds(s: float) -> str:
    """`s` seconds as H:MM:SS (negative as 0)."""
    s = int(max(s, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Reporter:
    """The agent's TensorBoard writer and progress lines.

    Args:
      logdir: the agent's folder (summaries go to its `tensorboard`).
      progress: receives every progress line (default: standard error).
    """

    def __init__(self, logdir: str, progress: Optional[Callable[[str], None]] = None):
        self.progress = progress or _stderr
        self.writer = tf.summary.create_file_writer(os.path.join(logdir, "tensorboard"))
        self._clock = (time.time(), 0)

    def say(self, line: str) -> None:
        """One progress line."""
        self.progress(line)

    # -- the world model ------------------------------------------------------------
    def start_rounds(self, done: int) -> None:
        """Starts the rate's clock at `done` rounds finished."""
        self._clock = (time.time(), done)

    def encoder(self, history: Sequence[Mapping[str, float]]) -> None:
        """The latent encoder's training rows."""
        with self.writer.as_default():
            for i, row in enumerate(history):
                for k, v in row.items():
                    tf.summary.scalar(f"encoder/{k}", v, step=i)

    def world_model_step(self, step: int, metrics: Mapping[str, float]) -> None:
        """One training step of the MDN-RNN."""
        with self.writer.as_default(step=step):
            for k, v in metrics.items():
                tf.summary.scalar(f"world_model/{k}", v)

    def world_model_round(self, row: WorldModelRound, rounds: int,
                          vocab: XferVocabulary) -> None:
        """A finished round of the world model (of `rounds`): its held-out
        figures, then its progress line with the rate and the time left."""
        with self.writer.as_default(step=row.round):
            for k, v in row.held_out.items():
                tf.summary.scalar(f"world_model_held_out/{k}", v)
        began, first = self._clock
        rate = (row.round - first) / max(time.time() - began, 1e-9)
        left = (rounds - row.round) / max(rate, 1e-9)
        held_out = row.held_out
        self.say(
            f"world model round {row.round}/{rounds}  {rate * 60:.1f} rounds/min  left "
            f"{format_seconds(left)}  real steps {row.real_steps}  collected return "
            f"{row.collected_return:+.3f}  loss {row.train_total:.3f}  held-out NLL "
            f"{held_out['latent_nll']:.3f}  reward MSE {held_out['reward_mse']:.2e}  "
            f"mask acc {held_out['xfer_mask_accuracy']:.3f}  counts acc "
            f"{held_out.get('location_count_accuracy', float('nan')):.3f}  vocabulary {vocab.known}/"
            f"{vocab.size}")

    # -- the controller ---------------------------------------------------------------
    def controller_update(self, metrics: Mapping[str, float], episodes: int, until: int,
                          rate: float) -> None:
        """One update of a controller in the dream: its metrics row, the
        imagined episodes it trains on in all (`episodes`) and until the end
        of this stretch (`until`), at `rate` episodes a second."""
        n = int(metrics["episodes"])
        with self.writer.as_default(step=n):
            for k, v in metrics.items():
                tf.summary.scalar(f"dream/{k}", v)
        self.say(
            f"dream episode {n}/{episodes}  {rate:.0f} ep/s  left "
            f"{format_seconds((until - n) / max(rate, 1e-9))} (this stretch)  imagined "
            f"return {metrics['dream_return']:+.4f} (all starts "
            f"{metrics['dream_return_all']:+.4f})  length {metrics['dream_length']:.1f}  "
            f"loss {metrics['loss']:.3f}")

    def controller_round(self, row: WorldModelRound, rounds: int, where: str) -> None:
        """The controller after a round: its figures and its line (`where`:
        where its greedy real episodes ended)."""
        controller = row.controller
        assert controller is not None, "a round whose controller was not evaluated"
        with self.writer.as_default(step=row.round):
            for name in _ROUND_SCALARS:
                value = getattr(controller, name)
                if value is not None:
                    tf.summary.scalar(f"rounds/{name}", value)
        self.say(
            f"controller after round {row.round}/{rounds}: real return "
            f"{controller.real_return:+.3f} ({where}), predicted "
            f"{controller.predicted_return:+.3f}, imagined "
            f"{controller.imagined_return:+.3f}")

    def learned_from_real(self, row: Dict[str, float]) -> None:
        """The controller's own real episodes of a round, learned from."""
        with self.writer.as_default(step=int(row["round"])):
            tf.summary.scalar("rounds/learned_real_return", row["real_return"])
        self.say(f"controller before round {row['round']}'s dream: learned from "
                 f"{row['real_episodes']} real episodes ({row['real_steps']} steps, mean "
                 f"return {row['real_return']:+.3f}) in {row['seconds']:.0f} s")

