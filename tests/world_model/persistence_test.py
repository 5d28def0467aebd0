"""Tests of the model-based agent's files: state, episodes, controller rows."""

import os
import pickle
import tempfile

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from tests.world_model import fixtures
from xflowrl.results.runs import WorldModelRound
from xflowrl.results.state import BestRound
from xflowrl.world_model import data
from xflowrl.world_model.buffer import EpisodeBuffer
from xflowrl.world_model.model_learning import fresh_state
from xflowrl.world_model.persistence import ControllerFiles, WorldModelFiles


class WorldModelFilesTest(absltest.TestCase):

    def test_state_buffer_and_checkpoint_come_back(self):
        files = WorldModelFiles(tempfile.mkdtemp())
        self.assertFalse(files.exists())
        with self.assertRaisesRegex(FileNotFoundError, "no state.json"):
            files.load_state()
        state = fresh_state()
        state.rounds.append(WorldModelRound(
            round=1, real_steps=10, collection="random", collected_return=0.5,
            vocabulary_known=3, vocabulary_full=0, train_total=1.0, train_latent_nll=0.5,
            held_out={"latent_nll": 0.25}))
        state.round, state.real_steps = 1, 10
        state.best_round = BestRound(round=1, relative_cost=0.9, episodes=4)
        buffer = EpisodeBuffer()
        rollouts = fixtures.rollouts(3)
        buffer.add([], rollouts, replay=True)
        variable = tf.Variable(3.0)
        files.save(tf.train.Checkpoint(v=variable), buffer, state)
        self.assertTrue(files.exists())
        self.assertEqual(files.load_state(), state)
        back = files.load_buffer()
        self.assertLen(back.raw, 3)
        for got, want in zip(back.raw, rollouts):
            np.testing.assert_array_equal(got.actions, want.actions)
            self.assertEqual(set(got.states), {None})  # kept without graphs
        variable.assign(0.0)
        files.read_checkpoint(tf.train.Checkpoint(v=variable))
        self.assertEqual(float(variable.numpy()), 3.0)

    def test_a_buffer_of_an_older_layout_is_refused(self):
        files = WorldModelFiles(tempfile.mkdtemp())
        os.makedirs(files.directory)
        path = os.path.join(files.directory, "buffer.pkl")
        with open(path, "wb") as f:  # sequences of before the xfers' cost changes
            pickle.dump({"buffer": [_OlderSequences()], "held_out": [], "raw": [],
                         "held_out_raw": []}, f)
        with self.assertRaisesRegex(ValueError, f"^{path}: a buffer of an older layout "
                                                r"\(.*'gains'\); this code reads the current "
                                                "one only: run again in a fresh folder$"):
            files.load_buffer()


class _OlderSequences:
    """Pickles as a `Sequences` of the seven fields it had before `gains`."""

    def __reduce__(self):
        z = np.zeros(1)
        return data.Sequences, (z, z, z, z, z, z, z)


class ControllerFilesTest(absltest.TestCase):

    def test_rows_past_the_checkpoint_are_left_out(self):
        logdir = tempfile.mkdtemp()
        files = ControllerFiles(logdir, "controller", tf.train.Checkpoint(v=tf.Variable(1)))
        self.assertIsNone(files.real_history(8))
        history = [{"episodes": 4.0}, {"episodes": 8.0}, {"episodes": 12.0}]
        real = [{"episodes": 0.0, "real_steps": 3.0}, {"episodes": 8.0, "real_steps": 4.0}]
        files.save(12, history, real)
        self.assertTrue(os.path.exists(os.path.join(logdir, "controller", "ckpt-12.index")))
        self.assertEqual(files.history(8), history[:2])
        # A round's real episodes precede its first imagined ones.
        self.assertEqual(files.real_history(8), real[:1])


if __name__ == "__main__":
    absltest.main()
