"""Tests of `traced.functions_of`: one set of traced functions per world
model, shared by all of its dreams and latent views, for every batch size,
and freed with the model."""

import gc
import weakref

from absl.testing import absltest
import numpy as np

from tests.world_model import fixtures
from xflowrl.world_model import data
from xflowrl.world_model.config import DreamConfig
from xflowrl.world_model.dream import BatchedDream
from xflowrl.world_model.traced import functions_of

_L = 5


def _model(seed=1):
    vocab = data.XferVocabulary(range(4), 10)
    _, model = fixtures.build_world_model(vocab, _L, seed=seed)
    return model


def _dream(model, seed=0):
    z0 = np.linspace(-0.5, 0.5, model.latent_size).astype(np.float32)
    return BatchedDream(model, z0, DreamConfig(count_margin=0.0, mask_threshold=0.0),
                        max_steps=4, max_locations=_L, seed=seed)


def _tracings(model):
    return sum(f.tracing_count for f in functions_of(model))


def _play(dream, batch_size):
    dream.reset(batch_size)
    dream.step(np.tile([0, 0], (batch_size, 1)))  # known xfer 0 at location 0


class FunctionsOfTest(absltest.TestCase):

    def test_dreams_of_one_model_share_one_trace_for_every_batch_size(self):
        model = _model()
        self.assertIs(functions_of(model), functions_of(model))
        _play(_dream(model), 3)
        after_first = _tracings(model)
        self.assertGreater(after_first, 0)
        for seed, batch_size in [(1, 3), (2, 7), (3, 1), (4, 64)]:
            _play(_dream(model, seed), batch_size)
        self.assertEqual(_tracings(model), after_first)

    def test_the_same_numbers_as_a_fresh_model_of_the_same_seed(self):
        # Sharing changes no result: a dream of a model whose functions were
        # traced by another dream steps as a dream of an identical new model.
        shared, fresh = _model(seed=2), _model(seed=2)
        _play(_dream(shared, seed=9), 2)
        a, b = _dream(shared, seed=5), _dream(fresh, seed=5)
        batch_a, batch_b = a.reset(4), b.reset(4)
        np.testing.assert_array_equal(batch_a.states, batch_b.states)
        actions = np.tile([0, 0], (4, 1))
        out_a, out_b = a.step(actions), b.step(actions)
        np.testing.assert_allclose(out_a.states, out_b.states, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(out_a.rewards, out_b.rewards, rtol=1e-6, atol=1e-6)

    def test_a_model_no_longer_used_is_freed(self):
        model = _model(seed=3)
        _play(_dream(model), 2)
        ref = weakref.ref(model)
        del model
        gc.collect()
        self.assertIsNone(ref())


if __name__ == "__main__":
    absltest.main()
