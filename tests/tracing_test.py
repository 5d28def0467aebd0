"""Tests of xflowrl.tracing: one trace for any leading dimensions."""

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from xflowrl.tracing import (
    REPRODUCIBLE_GRAPPLER,
    grappler_defaults,
    relaxed_spec,
    sequence_spec,
    traced_once,
)


class ReproducibleGrapplerTest(absltest.TestCase):

    def test_importing_the_module_turns_the_arithmetic_optimiser_off(self):
        # benchmarks/repro_bench.py measures what this buys: the same
        # results in every process.
        options = tf.config.optimizer.get_experimental_options()
        self.assertIs(options.get("arithmetic_optimization"), False)
        for name, value in REPRODUCIBLE_GRAPPLER.items():
            self.assertEqual(options.get(name), value, name)

    def test_runtime_measurements_get_tensorflow_s_defaults_inside_only(self):
        with grappler_defaults():
            inside = tf.config.optimizer.get_experimental_options()
        self.assertNotIn("arithmetic_optimization", inside)
        self.assertIs(tf.config.optimizer.get_experimental_options()["arithmetic_optimization"],
                      False)
        with self.assertRaises(KeyError), grappler_defaults():
            raise KeyError("left through an exception")
        self.assertIs(tf.config.optimizer.get_experimental_options()["arithmetic_optimization"],
                      False)


class RelaxedSpecTest(absltest.TestCase):

    def test_float_features_keep_their_width_everything_else_is_open(self):
        self.assertEqual(relaxed_spec(np.zeros((4, 7), np.float32)).shape.as_list(), [None, 7])
        self.assertEqual(relaxed_spec(np.zeros((4, 5, 7), np.float32)).shape.as_list(),
                         [None, None, 7])
        self.assertEqual(relaxed_spec(np.zeros((4,), np.float32)).shape.as_list(), [None])
        self.assertEqual(relaxed_spec(np.zeros((4, 7), np.int32)).shape.as_list(), [None, None])
        self.assertEqual(relaxed_spec(np.zeros((4, 7), bool)).dtype, tf.bool)
        self.assertIsNone(relaxed_spec(None))
        self.assertEqual(relaxed_spec(3), 3)


    def test_sequences_keep_only_the_feature_width(self):
        self.assertEqual(sequence_spec(np.zeros((4, 9, 7), np.float32)).shape.as_list(),
                         [None, None, 7])
        self.assertEqual(sequence_spec(np.zeros((4, 9), np.float32)).shape.as_list(),
                         [None, None])


class TracedOnceTest(absltest.TestCase):

    def test_one_trace_for_any_batch_and_rows(self):
        f = traced_once(lambda x, rows, scale: tf.reduce_sum(x, -1) * scale
                        + tf.cast(tf.shape(rows)[1], tf.float32))
        for batch, width in [(1, 2), (3, 5), (8, 1)]:
            out = f(np.ones((batch, 4), np.float32), np.zeros((batch, width), np.int32), 2.0)
            np.testing.assert_allclose(out.numpy(), np.full(batch, 8.0 + width))
        self.assertEqual(f.tracing_count, 1)

    def test_new_sizes_take_the_fast_path(self):
        # Only the first call of a structure goes through tf.function's own
        # call; later calls with other batch, edge and row counts call the
        # trace directly (and give the same results as a fresh trace).
        def g(nodes, senders, rows):
            return (tf.reduce_sum(nodes, -1) + tf.cast(tf.size(senders), tf.float32),
                    tf.reduce_sum(rows, -1))
        f = traced_once(g)
        sizes = [(2, 3, 1), (5, 7, 4), (1, 1, 2), (6, 2, 9)]
        for nodes, edges, rows in sizes:
            args = (np.ones((nodes, 4), np.float32), np.zeros(edges, np.int32),
                    np.ones((nodes, rows), np.int32))
            got = f(*args)
            want = g(*args)
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a.numpy(), b.numpy())
        self.assertEqual(f.tracing_count, 1)
        self.assertEqual(f.slow_calls, 1)
        # A sequence spec fixes less: [batch, time] floats stay open too.
        h = traced_once(lambda x, w: tf.reduce_sum(x, -1) * w, sequence_spec)
        for length in (3, 8, 5):
            h(np.ones((2, length, 4), np.float32), np.ones((2, length), np.float32))
        self.assertEqual(h.slow_calls, 1)

    def test_another_structure_or_constant_traces_again(self):
        def g(x, y):
            return x if y is None else x + y
        f = traced_once(g)
        x = np.ones((2, 3), np.float32)
        np.testing.assert_allclose(f(x, None).numpy(), x)
        np.testing.assert_allclose(f(x, x).numpy(), 2 * x)
        np.testing.assert_allclose(f(np.ones((5, 3), np.float32), None).numpy(), np.ones((5, 3)))
        self.assertEqual(f.tracing_count, 2)
        # A new float width is a new layer input: traced again.
        f(np.ones((2, 4), np.float32), None)
        self.assertEqual(f.tracing_count, 3)


    def test_padded_sequences_of_any_length_share_a_trace(self):
        f = traced_once(lambda x, w: tf.reduce_sum(x, -1) * w, sequence_spec)
        for length in (3, 8, 5):
            out = f(np.ones((2, length, 4), np.float32), np.ones((2, length), np.float32))
            self.assertEqual(out.shape, (2, length))
        self.assertEqual(f.tracing_count, 1)


if __name__ == "__main__":
    absltest.main()
