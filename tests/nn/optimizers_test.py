"""`apply_adam` against Sonnet's `Adam.apply`: the same variables, moments
and step, to the bit, over several updates, eagerly and traced, with dense,
sparse (duplicate rows) and missing updates, two dtypes and a learning rate
held in a variable; `build_adam` changes nothing."""

from absl.testing import absltest
import numpy as np
import sonnet as snt
import tensorflow as tf

from xflowrl.nn import apply_adam, build_adam

_SHAPES = [(3, 4), (4,), (), (5, 2, 3), (6, 2)]

# The shapes of a PPO network's 67 variables (small_cnn, the thesis'
# preset), in its order. The graph optimiser's rewrites depend on the
# graph: a per-variable update with its scalars shared between variables
# matched Sonnet's on the few variables above and, under the optimiser,
# differed on these in the last bit of the [1]-shaped biases.
_NETWORK_SHAPES = [(32,), (81, 32), (32,), (32, 32), (1,), (32, 1), (1679, 16), (1679,),
                   (32, 1679), (32,), (35, 32), (32,), (32, 32), (1,), (32, 1), (32,), (32, 32),
                   (32,), (32, 32), (32,), (256, 32), (32,), (32, 32), (32,), (32,), (32,),
                   (128, 32), (32,), (32, 32), (32,), (32,), (32,), (160, 32), (32,), (32, 32),
                   (32,), (32,), (32,), (5, 32), (32,), (32, 32), (32,), (32,), (32,), (3, 32),
                   (32,), (32, 32), (32,), (32,), (32,), (42, 32), (32,), (32, 32), (32,), (32,),
                   (32,), (32, 32), (32,), (32, 32), (1,), (32, 1), (32,), (48, 32), (32,),
                   (32, 32), (1,), (32, 1)]


def _variables(dtypes):
    rng = np.random.default_rng(0)
    return [tf.Variable(np.asarray(rng.standard_normal(shape)).astype(dtype), name=f"w{i}")
            for i, (shape, dtype) in enumerate(zip(_SHAPES, dtypes))]


def _updates(variables, step):
    """Dense updates, one sparse (rows 0, 3, 3: a duplicate) and one None
    (every third step), of the variables' dtypes."""
    rng = np.random.default_rng(100 + step)
    out = []
    for i, v in enumerate(variables):
        dtype = v.dtype.as_numpy_dtype
        if i == 4:
            rows = (rng.standard_normal((3, 2)) * 10.0 ** (step % 3 - 1)).astype(dtype)
            out.append(tf.IndexedSlices(tf.constant(rows), tf.constant([0, 3, 3], tf.int64),
                                        tf.constant([6, 2], tf.int64)))
        elif i == 1 and step % 3 == 2:
            out.append(None)
        else:
            scale = 10.0 ** (step % 4 - 2)
            out.append(tf.constant((rng.standard_normal(v.shape) * scale).astype(dtype)))
    return out


def _run(apply, dtypes, traced, decayed=False):
    """Five updates; `decayed`: a learning rate in a variable, halved before
    each update."""
    variables = _variables(dtypes)
    learning_rate = tf.Variable(1e-2) if decayed else None
    optimizer = snt.optimizers.Adam(3e-3 if learning_rate is None else learning_rate,
                                    epsilon=1e-7)
    build_adam(optimizer, variables)
    step = tf.function(apply, autograph=False) if traced else apply
    for s in range(5):
        if learning_rate is not None:
            learning_rate.assign(learning_rate * 0.5)
        step(optimizer, _updates(variables, s), variables)
    return ([v.numpy() for v in variables] + [m.numpy() for m in optimizer.m]
            + [v.numpy() for v in optimizer.v] + [optimizer.step.numpy()])


def _run_network(apply):
    """Three traced dense updates of variables of `_NETWORK_SHAPES`."""
    rng = np.random.default_rng(5)
    variables = [tf.Variable(rng.standard_normal(s).astype(np.float32)) for s in _NETWORK_SHAPES]
    optimizer = snt.optimizers.Adam(1e-3)
    build_adam(optimizer, variables)
    step = tf.function(lambda *grads: apply(optimizer, list(grads), variables), autograph=False)
    for _ in range(3):
        step(*[tf.constant(rng.standard_normal(v.shape).astype(np.float32)) for v in variables])
    return [v.numpy() for v in variables + optimizer.m + optimizer.v]


def _sonnet(optimizer, updates, variables):
    optimizer.apply(updates, variables)


class ApplyAdamTest(absltest.TestCase):

    def _assert_same(self, **kwargs):
        want = _run(_sonnet, **kwargs)
        got = _run(apply_adam, **kwargs)
        self.assertEqual(int(got[-1]), 5)
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            self.assertEqual(np.asarray(a).dtype, np.asarray(b).dtype)
            np.testing.assert_array_equal(a, b, err_msg=f"entry {i}")

    def test_same_to_the_bit_eagerly_and_traced(self):
        for traced in (False, True):
            with self.subTest(traced=traced):
                self._assert_same(dtypes=["float32"] * 5, traced=traced)

    def test_same_to_the_bit_with_the_graph_optimiser(self):
        # The suite runs without grappler (tests/conftest.py); users run
        # with it, and its arithmetic rewrites depend on the graph's shape:
        # Sonnet's ops and these must come out the same under it too.
        options = tf.config.optimizer.get_experimental_options()
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})
        self.addCleanup(tf.config.optimizer.set_experimental_options, options)
        self._assert_same(dtypes=["float32", "float64", "float32", "float32", "float32"],
                          traced=True, decayed=True)
        for i, (a, b) in enumerate(zip(_run_network(apply_adam), _run_network(_sonnet),
                                       strict=True)):
            np.testing.assert_array_equal(a, b, err_msg=f"entry {i}")

    def test_two_dtypes_and_a_learning_rate_variable(self):
        dtypes = ["float32", "float64", "float32", "float64", "float32"]
        self._assert_same(dtypes=dtypes, traced=True)
        self._assert_same(dtypes=["float32"] * 5, traced=True, decayed=True)

    def test_the_update_changes_every_updated_entry(self):
        variables = _variables(["float32"] * 5)
        before = [v.numpy() for v in variables]
        optimizer = snt.optimizers.Adam(1e-3)
        apply_adam(optimizer, _updates(variables, 0), variables)  # builds the moments
        after = [v.numpy() for v in variables]
        for i in (0, 1, 2, 3):
            self.assertTrue(np.all(before[i] != after[i]), i)
        # The sparse update touched rows 0 and 3 only.
        changed = np.any(before[4] != after[4], axis=1)
        self.assertEqual(np.flatnonzero(changed).tolist(), [0, 3])

    def test_bad_calls_say_what_is_wrong(self):
        variables = _variables(["float32"] * 5)
        optimizer = snt.optimizers.Adam()
        with self.assertRaisesRegex(ValueError, "4 updates for 5 variables"):
            apply_adam(optimizer, _updates(variables, 0)[:4], variables)
        with self.assertRaisesRegex(ValueError, "no update for any variable"):
            apply_adam(optimizer, [None] * 5, variables)
        with self.assertRaisesRegex(ValueError, "dtype float64 for w0"):
            apply_adam(optimizer, [tf.zeros((3, 4), tf.float64)] + [None] * 4, variables)
        traced = tf.function(apply_adam, autograph=False)
        with self.assertRaisesRegex(ValueError, "call build_adam"):
            traced(optimizer, _updates(variables, 0), variables)


class BuildAdamTest(absltest.TestCase):

    def test_moments_made_and_nothing_changed(self):
        variables = _variables(["float32"] * 5)
        before = [v.numpy() for v in variables]
        optimizer = snt.optimizers.Adam()
        build_adam(optimizer, variables)
        self.assertLen(optimizer.m, 5)
        self.assertEqual(int(optimizer.step.numpy()), 0)
        for a, v, m in zip(before, variables, optimizer.m):
            np.testing.assert_array_equal(v.numpy(), a)
            np.testing.assert_array_equal(m.numpy(), np.zeros_like(a))


if __name__ == "__main__":
    absltest.main()
