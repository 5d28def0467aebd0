"""PPO maths against slow numpy references."""

from absl.testing import absltest, parameterized
import numpy as np
import tensorflow as tf

from xflowrl.agents.ppo import losses


def _gae_reference(rewards, values, dones, last_value, gamma, lam, bootstrap=None):
    """Textbook definition: A_t = sum_k (gamma lam)^k delta_{t+k}, within an
    episode; an episode that ends at k continues from bootstrap[k] (V of the
    state after a step-limit cut, 0 after a real end)."""
    T = len(rewards)
    bootstrap = np.zeros(T) if bootstrap is None else bootstrap
    out = np.zeros(T)
    for t in range(T):
        total, factor = 0.0, 1.0
        for k in range(t, T):
            if dones[k]:
                next_v = bootstrap[k]
            else:
                next_v = values[k + 1] if k + 1 < T else last_value
            total += factor * (rewards[k] + gamma * next_v - values[k])
            if dones[k]:
                break
            factor *= gamma * lam
        out[t] = total
    return out


def _masked_log_softmax(logits, mask):
    z = np.where(mask, logits, -np.inf)
    return z - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)) - z.max(-1, keepdims=True)


class LossesTest(parameterized.TestCase):

    @parameterized.parameters((0.99, 0.97), (0.9, 1.0), (1.0, 0.0))
    def test_gae(self, gamma, lam):
        rng = np.random.default_rng(0)
        rewards, values = rng.normal(size=12), rng.normal(size=12)
        dones = np.zeros(12, bool)
        dones[[4, 11]] = True
        got = losses.gae(rewards, values, dones, 0.0, gamma, lam)
        want = _gae_reference(rewards, values, dones, 0.0, gamma, lam)
        np.testing.assert_allclose(got.advantages, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got.returns, want + values, rtol=1e-5, atol=1e-6)

    @parameterized.parameters((0.99, 0.97), (0.9, 1.0))
    def test_gae_bootstraps_truncated_episodes(self, gamma, lam):
        rng = np.random.default_rng(3)
        rewards, values = rng.normal(size=12), rng.normal(size=12)
        dones = np.zeros(12, bool)
        dones[[4, 11]] = True
        bootstrap = np.zeros(12)
        bootstrap[4] = 3.0  # the first episode was cut by the step limit
        got = losses.gae(rewards, values, dones, 0.0, gamma, lam, bootstrap)
        want = _gae_reference(rewards, values, dones, 0.0, gamma, lam, bootstrap)
        np.testing.assert_allclose(got.advantages, want, rtol=1e-5, atol=1e-6)
        # The cut step's advantage sees V(s_T); the real end's does not.
        self.assertAlmostEqual(got.advantages[4], rewards[4] + gamma * 3.0 - values[4], places=5)
        self.assertAlmostEqual(got.advantages[11], rewards[11] - values[11], places=5)
        untruncated = losses.gae(rewards, values, dones, 0.0, gamma, lam)
        np.testing.assert_allclose(got.advantages[5:], untruncated.advantages[5:], rtol=1e-6)

    def test_gae_bootstraps_an_unfinished_segment(self):
        got = losses.gae(np.array([1.0]), np.array([0.5]), np.array([False]), 2.0, 0.9, 0.8)
        np.testing.assert_allclose(got.advantages, [1.0 + 0.9 * 2.0 - 0.5], rtol=1e-6)

    def test_masked_log_prob_and_entropy(self):
        rng = np.random.default_rng(1)
        logits = rng.normal(size=(4, 6)).astype(np.float32)
        mask = rng.random((4, 6)) < 0.6
        mask[:, 2] = True
        actions = np.array([2, 2, 2, 2])
        for i in range(4):  # pick a valid action per row
            actions[i] = np.flatnonzero(mask[i])[-1]
        ref = _masked_log_softmax(logits, mask)
        got = losses.masked_log_prob(tf.constant(logits), tf.constant(mask), tf.constant(actions))
        np.testing.assert_allclose(got, ref[np.arange(4), actions], rtol=1e-5)
        p = np.where(mask, np.exp(ref), 0)
        ent = -(p * np.where(mask, ref, 0)).sum(-1)
        np.testing.assert_allclose(losses.masked_entropy(tf.constant(logits), tf.constant(mask)),
                                   ent, rtol=1e-5)

    def test_masked_logits_get_no_gradient(self):
        logits = tf.Variable([[1.0, 2.0, 3.0]])
        mask = tf.constant([[True, False, True]])
        with tf.GradientTape() as tape:
            lp = losses.masked_log_prob(logits, mask, tf.constant([0]))
        grad = tape.gradient(lp, logits).numpy()
        self.assertEqual(grad[0, 1], 0.0)
        self.assertNotEqual(grad[0, 0], 0.0)

    def test_clipped_surrogate(self):
        rng = np.random.default_rng(2)
        lp, old = rng.normal(size=8) * 0.3, rng.normal(size=8) * 0.3
        adv, w = rng.normal(size=8), (rng.random(8) < 0.7).astype(np.float64)
        ratio = np.exp(lp - old)
        ref = -(np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv) * w).sum() / w.sum()
        got = losses.clipped_surrogate(*(tf.constant(a, tf.float32) for a in (lp, old, adv)),
                                       0.2, tf.constant(w, tf.float32))
        self.assertAlmostEqual(float(got), ref, places=5)

    def test_value_loss_and_normalize(self):
        v, r, w = np.array([1.0, 2, 3]), np.array([0.0, 2, 5]), np.array([1.0, 1, 0])
        self.assertAlmostEqual(float(losses.value_loss(*(tf.constant(a, tf.float32)
                                                         for a in (v, r, w)))), 0.25)
        n = losses.normalize(tf.constant([1.0, 3.0, 100.0]), tf.constant([1.0, 1.0, 0.0]))
        np.testing.assert_allclose(n.numpy()[:2], [-1.0, 1.0], rtol=1e-5)


if __name__ == "__main__":
    absltest.main()
