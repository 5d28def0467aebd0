"""PPO maths against slow numpy references."""

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from xflowrl.agents.ppo import losses


def _gae_reference(rewards, values, dones, last_value, gamma, lam):
    """Textbook definition: A_t = sum_k (gamma lam)^k delta_{t+k}, within an episode."""
    T = len(rewards)
    out = np.zeros(T)
    for t in range(T):
        total, factor = 0.0, 1.0
        for k in range(t, T):
            next_v = 0.0 if dones[k] else (values[k + 1] if k + 1 < T else last_value)
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
