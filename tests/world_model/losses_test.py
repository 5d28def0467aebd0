"""World-model maths against slow numpy references (no TFP in the references)."""

import math

from absl.testing import absltest, parameterized
import numpy as np
import tensorflow as tf

from xflowrl.world_model import losses

_LOG_2PI = math.log(2.0 * math.pi)


# ---------------------------------------------------------------------------
# Slow numpy references.
# ---------------------------------------------------------------------------

def _logsumexp(xs):
    m = max(xs)
    if m == -math.inf:
        return -math.inf
    return m + math.log(sum(math.exp(x - m) for x in xs))


def _mixture_log_prob_reference(logits, mu, log_sigma, target, tau=1.0):
    """log sum_k softmax(logits/tau)_k prod_z N(x_z; mu_kz, (sigma_kz sqrt(tau))^2)."""
    logits, mu, log_sigma, target = (np.asarray(a, np.float64)
                                     for a in (logits, mu, log_sigma, target))
    batch_shape = logits.shape[:-1]
    num_components, latent_dim = mu.shape[-2:]
    out = np.zeros(batch_shape)
    for index in np.ndindex(*batch_shape):
        scaled = [logits[index][k] / tau for k in range(num_components)]
        log_norm = _logsumexp(scaled)
        terms = []
        for k in range(num_components):
            log_density = 0.0
            for z in range(latent_dim):
                ls = min(max(log_sigma[index][k, z], losses.LOG_SIGMA_MIN),
                         losses.LOG_SIGMA_MAX) + 0.5 * math.log(tau)
                sigma = math.exp(ls)
                diff = (target[index][z] - mu[index][k, z]) / sigma
                log_density += -0.5 * diff * diff - ls - 0.5 * _LOG_2PI
            terms.append(scaled[k] - log_norm + log_density)
        out[index] = _logsumexp(terms)
    return out


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _masked_mean_reference(values, weights):
    values, weights = np.asarray(values, np.float64), np.asarray(weights, np.float64)
    total, count = 0.0, 0.0
    for index in np.ndindex(*values.shape):
        w = weights[index[:weights.ndim]]
        if w != 0:
            total += values[index] * w
        count += w
    return total / max(count, 1.0)


def _bce_reference(logits, labels):
    logits, labels = np.asarray(logits, np.float64), np.asarray(labels, np.float64)
    out = np.zeros(logits.shape)
    for index in np.ndindex(*logits.shape):
        x, y = logits[index], labels[index]
        p = 1.0 / (1.0 + math.exp(-x))
        out[index] = -(y * math.log(p) + (1.0 - y) * math.log(1.0 - p))
    return out


def _world_model_losses_reference(inputs, terminal_weight=1.0, mask_weight=1.0,
                                  count_weight=1.0, reward_weight=1.0):
    """Explicit loops over (b, t, m) with running sums and counts (and over
    the reward ensemble's members e, if `inputs` holds "reward_members")."""
    w = np.asarray(inputs["step_weights"], np.float64)
    batch, steps = w.shape
    members = inputs.get("reward_members")
    num_members = 0 if members is None else members.shape[-1]
    num_xfers = inputs["xfer_logits"].shape[-1]
    latent_dim = inputs["mu"].shape[-1]
    nll = -_mixture_log_prob_reference(inputs["logits"], inputs["mu"], inputs["log_sigma"],
                                       inputs["next_latent"])
    bce_done = _bce_reference(inputs["done_logit"], inputs["done"])
    bce_xfer = _bce_reference(inputs["xfer_logits"], inputs["xfer_valid"])
    sums = dict(latent=0.0, reward=0.0, terminal=0.0, xfer=0.0, count=0.0, ensemble=0.0)
    n_steps, n_xfer_entries, n_count_entries = 0.0, 0.0, 0.0
    for b in range(batch):
        for t in range(steps):
            if w[b, t] == 0:
                continue
            n_steps += 1
            sums["latent"] += nll[b, t]
            sums["reward"] += (inputs["reward_pred"][b, t] - inputs["reward"][b, t]) ** 2
            sums["terminal"] += bce_done[b, t]
            if num_members:
                member_sum = 0.0
                for e in range(num_members):
                    member_sum += (float(members[b, t, e]) - float(inputs["reward"][b, t])) ** 2
                sums["ensemble"] += member_sum / num_members
            for m in range(num_xfers):
                n_xfer_entries += 1
                sums["xfer"] += bce_xfer[b, t, m]
                if inputs["xfer_valid"][b, t, m] == 1:
                    n_count_entries += 1
                    target = math.log(1.0 + inputs["count"][b, t, m])
                    sums["count"] += (inputs["count_pred"][b, t, m] - target) ** 2
    latent = sums["latent"] / max(n_steps, 1) / (latent_dim + 2)
    reward = sums["reward"] / max(n_steps, 1)
    terminal = sums["terminal"] / max(n_steps, 1)
    xfer = sums["xfer"] / max(n_xfer_entries, 1)
    count = sums["count"] / max(n_count_entries, 1)
    ensemble = sums["ensemble"] / max(n_steps, 1)
    total = (latent + reward_weight * (reward + ensemble) + terminal_weight * terminal
             + mask_weight * xfer + count_weight * count)
    return dict(latent_nll=latent, reward=reward, terminal=terminal, xfer_mask=xfer,
                location_count=count, total=total, reward_ensemble=ensemble)


# ---------------------------------------------------------------------------
# Random inputs.
# ---------------------------------------------------------------------------

def _random_mixture(rng, batch_shape, num_components, latent_dim, dtype=np.float32):
    logits = rng.normal(size=batch_shape + (num_components,))
    mu = rng.normal(size=batch_shape + (num_components, latent_dim))
    log_sigma = rng.uniform(-1.5, 0.8, size=batch_shape + (num_components, latent_dim))
    target = rng.normal(size=batch_shape + (latent_dim,))
    return tuple(a.astype(dtype) for a in (logits, mu, log_sigma, target))


def _random_world_model_inputs(rng, batch=3, steps=5, num_components=3, latent_dim=4,
                               num_xfers=6):
    logits, mu, log_sigma, next_latent = _random_mixture(
        rng, (batch, steps), num_components, latent_dim)
    lengths = rng.integers(1, steps + 1, size=batch)
    lengths[0] = steps  # one full-length sequence
    step_weights = (np.arange(steps)[None, :] < lengths[:, None]).astype(np.float32)
    xfer_valid = (rng.random((batch, steps, num_xfers)) < 0.5).astype(np.float32)
    xfer_valid[:, :, 0] = 1.0
    count = rng.integers(0, 20, size=(batch, steps, num_xfers)).astype(np.float32)
    return dict(
        logits=logits, mu=mu, log_sigma=log_sigma, next_latent=next_latent,
        reward_pred=rng.normal(size=(batch, steps)).astype(np.float32),
        reward=rng.normal(size=(batch, steps)).astype(np.float32),
        done_logit=rng.normal(size=(batch, steps)).astype(np.float32) * 2,
        done=(rng.random((batch, steps)) < 0.3).astype(np.float32),
        xfer_logits=rng.normal(size=(batch, steps, num_xfers)).astype(np.float32) * 2,
        xfer_valid=xfer_valid,
        count_pred=rng.normal(size=(batch, steps, num_xfers)).astype(np.float32) + 1.0,
        count=count,
        step_weights=step_weights)


def _as_numpy(result):
    return {name: float(value) for name, value in result._asdict().items()}


# ---------------------------------------------------------------------------
# Tests.
# ---------------------------------------------------------------------------

class MixtureTest(parameterized.TestCase):

    @parameterized.parameters(
        ((), 1, 1), ((), 3, 2), ((4,), 2, 3), ((2, 3), 5, 4), ((2, 1, 3), 3, 1))
    def test_nll_matches_reference(self, batch_shape, num_components, latent_dim):
        rng = np.random.default_rng(len(batch_shape) * 10 + num_components)
        logits, mu, log_sigma, target = _random_mixture(rng, batch_shape, num_components,
                                                        latent_dim)
        got = losses.mixture_nll(logits, mu, log_sigma, target)
        self.assertEqual(got.shape, batch_shape)
        self.assertEqual(got.dtype, tf.float32)
        want = -_mixture_log_prob_reference(logits, mu, log_sigma, target)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)

    @parameterized.parameters(0.3, 1.0, 2.5)
    def test_tempered_log_prob_matches_reference(self, tau):
        rng = np.random.default_rng(7)
        logits, mu, log_sigma, target = _random_mixture(rng, (3, 2), 4, 3, np.float64)
        got = losses.mixture(logits, mu, log_sigma, temperature=tau).log_prob(target)
        want = _mixture_log_prob_reference(logits, mu, log_sigma, target, tau=tau)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-10)

    def test_temperature_scales_weights_and_std(self):
        rng = np.random.default_rng(3)
        logits, mu, log_sigma, _ = _random_mixture(rng, (5,), 4, 2, np.float64)
        for tau in (0.5, 1.0, 2.0):
            dist = losses.mixture(logits, mu, log_sigma, temperature=tau)
            np.testing.assert_allclose(dist.mixture_distribution.probs_parameter().numpy(),
                                       _softmax(logits / tau), rtol=1e-10)
            np.testing.assert_allclose(dist.components_distribution.stddev().numpy(),
                                       np.exp(log_sigma) * np.sqrt(tau), rtol=1e-10)

    def test_small_temperature_concentrates_on_argmax_component(self):
        logits = np.array([[0.2, 1.1, -0.5], [2.0, 1.9, 0.0]], np.float32)
        mu = np.zeros((2, 3, 2), np.float32)
        log_sigma = np.zeros((2, 3, 2), np.float32)
        at_one = losses.mixture(logits, mu, log_sigma, temperature=1.0)
        self.assertLess(at_one.mixture_distribution.probs_parameter().numpy().max(), 0.7)
        cold = losses.mixture(logits, mu, log_sigma, temperature=1e-3)
        probs = cold.mixture_distribution.probs_parameter().numpy()
        np.testing.assert_allclose(probs, np.eye(3)[logits.argmax(-1)], atol=1e-6)
        np.testing.assert_allclose(cold.components_distribution.stddev().numpy(),
                                   np.full((2, 3, 2), np.sqrt(1e-3)), rtol=1e-5)

    def test_temperature_as_tensor(self):
        rng = np.random.default_rng(4)
        logits, mu, log_sigma, target = _random_mixture(rng, (3,), 2, 2)
        got = losses.mixture(logits, mu, log_sigma, tf.constant(0.5)).log_prob(target)
        want = _mixture_log_prob_reference(logits, mu, log_sigma, target, tau=0.5)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)

    @parameterized.parameters(0.0, -1.0)
    def test_nonpositive_temperature_raises(self, tau):
        logits, mu, log_sigma, _ = _random_mixture(np.random.default_rng(0), (), 2, 1)
        with self.assertRaisesRegex(ValueError, f"temperature must be > 0, got {tau}"):
            losses.mixture(logits, mu, log_sigma, temperature=tau)
        with self.assertRaisesRegex(ValueError, f"temperature must be > 0, got {tau}"):
            losses.sample_mixture(logits, mu, log_sigma, tau, seed=tf.constant([1, 2]))

    @parameterized.parameters((50.0, losses.LOG_SIGMA_MAX), (-50.0, losses.LOG_SIGMA_MIN))
    def test_log_sigma_is_clipped(self, extreme, bound):
        logits = np.array([0.3, -0.1], np.float32)
        mu = np.array([[0.0], [0.001]], np.float32)
        target = np.array([0.0005], np.float32)
        got = losses.mixture_nll(logits, mu, np.full((2, 1), extreme, np.float32), target)
        at_bound = losses.mixture_nll(logits, mu, np.full((2, 1), bound, np.float32), target)
        self.assertTrue(np.isfinite(got.numpy()))
        np.testing.assert_allclose(got.numpy(), at_bound.numpy(), rtol=1e-6)
        want = -_mixture_log_prob_reference(logits, mu, np.full((2, 1), extreme), target)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4)


class SampleMixtureTest(parameterized.TestCase):

    def test_shape_and_same_seed_same_samples(self):
        rng = np.random.default_rng(0)
        logits, mu, log_sigma, _ = _random_mixture(rng, (4, 3), 5, 2)
        seed = tf.constant([3, 7], tf.int32)
        first = losses.sample_mixture(logits, mu, log_sigma, 1.0, seed)
        second = losses.sample_mixture(logits, mu, log_sigma, 1.0, seed)
        other = losses.sample_mixture(logits, mu, log_sigma, 1.0, tf.constant([3, 8]))
        self.assertEqual(first.shape, (4, 3, 2))
        np.testing.assert_array_equal(first.numpy(), second.numpy())
        self.assertFalse(np.allclose(first.numpy(), other.numpy()))
        seed64 = losses.sample_mixture(logits, mu, log_sigma, 1.0, tf.constant([3, 7], tf.int64))
        self.assertEqual(seed64.shape, (4, 3, 2))

    def test_unbatched_sample(self):
        logits, mu, log_sigma, _ = _random_mixture(np.random.default_rng(1), (), 3, 4)
        sample = losses.sample_mixture(logits, mu, log_sigma, 1.0, tf.constant([0, 1]))
        self.assertEqual(sample.shape, (4,))

    @parameterized.parameters(1.0, 0.5, 2.0)
    def test_moments_match_analytic(self, tau):
        """Two 1-D components: mean = sum pi mu; var = sum pi (s^2 + mu^2) - mean^2."""
        n = 20000
        logits = np.array([0.4, -0.3], np.float32)
        mu = np.array([[-2.0], [3.0]], np.float32)
        log_sigma = np.log(np.array([[0.5], [1.0]], np.float32))
        pi = _softmax(logits.astype(np.float64) / tau)
        sigma2 = np.exp(2 * log_sigma[:, 0].astype(np.float64)) * tau
        mean = float((pi * mu[:, 0]).sum())
        var = float((pi * (sigma2 + mu[:, 0] ** 2)).sum() - mean ** 2)
        samples = losses.sample_mixture(np.tile(logits, (n, 1)), np.tile(mu, (n, 1, 1)),
                                        np.tile(log_sigma, (n, 1, 1)), tau,
                                        tf.constant([11, 5])).numpy()[:, 0]
        # Standard errors are ~0.02 (mean) and ~0.06 (variance) here.
        self.assertAlmostEqual(samples.mean(), mean, delta=0.1)
        self.assertAlmostEqual(samples.var(), var, delta=0.05 * var + 0.1)

    def test_component_frequencies_follow_tempered_weights(self):
        n, tau = 20000, 2.0
        logits = np.array([0.0, 1.0, 2.5], np.float32)
        mu = np.array([[-10.0], [0.0], [10.0]], np.float32)
        log_sigma = np.full((3, 1), losses.LOG_SIGMA_MIN, np.float32)
        samples = losses.sample_mixture(np.tile(logits, (n, 1)), np.tile(mu, (n, 1, 1)),
                                        np.tile(log_sigma, (n, 1, 1)), tau,
                                        tf.constant([2, 9])).numpy()[:, 0]
        nearest = np.abs(samples[:, None] - mu[None, :, 0]).argmin(-1)
        np.testing.assert_allclose(np.abs(samples - mu[nearest, 0]).max(), 0.0, atol=0.02)
        frequencies = np.bincount(nearest, minlength=3) / n
        np.testing.assert_allclose(frequencies, _softmax(logits / tau), atol=0.015)

    def test_tiny_temperature_samples_argmax_mean(self):
        rng = np.random.default_rng(5)
        logits, mu, log_sigma, _ = _random_mixture(rng, (50,), 4, 3)
        samples = losses.sample_mixture(logits, mu, log_sigma, 1e-6, tf.constant([4, 4]))
        want = mu[np.arange(50), logits.argmax(-1)]
        np.testing.assert_allclose(samples.numpy(), want, atol=0.01)

    def test_inside_tf_function_is_reproducible(self):
        logits, mu, log_sigma, _ = _random_mixture(np.random.default_rng(6), (3, 2), 3, 2)
        seed = tf.constant([5, 6])
        sample_fn = tf.function(lambda s: losses.sample_mixture(logits, mu, log_sigma, 0.7, s))
        np.testing.assert_array_equal(
            sample_fn(seed).numpy(),
            losses.sample_mixture(logits, mu, log_sigma, 0.7, seed).numpy())
        np.testing.assert_array_equal(sample_fn(seed).numpy(), sample_fn(seed).numpy())


class MaskedMeanAndCrossEntropyTest(parameterized.TestCase):

    @parameterized.parameters(((4,), (4,)), ((3, 5), (3, 5)), ((3, 5, 2), (3, 5)),
                              ((2, 3, 4), (2,)), ((2, 3, 4), (2, 3, 4)))
    def test_masked_mean_matches_reference(self, values_shape, weights_shape):
        rng = np.random.default_rng(sum(values_shape))
        values = rng.normal(size=values_shape).astype(np.float32)
        weights = (rng.random(weights_shape) < 0.6).astype(np.float32)
        got = losses.masked_mean(values, weights)
        np.testing.assert_allclose(got.numpy(), _masked_mean_reference(values, weights),
                                   rtol=1e-5, atol=1e-6)
        fractional = rng.random(weights_shape).astype(np.float32) * 3
        np.testing.assert_allclose(losses.masked_mean(values, fractional).numpy(),
                                   _masked_mean_reference(values, fractional),
                                   rtol=1e-5, atol=1e-6)

    def test_masked_mean_zero_weights_give_zero_and_ignore_nan(self):
        values = np.array([[1.0, np.nan], [np.inf, 2.0]], np.float32)
        self.assertEqual(losses.masked_mean(values, np.zeros((2, 2), np.float32)).numpy(), 0.0)
        weights = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
        self.assertEqual(losses.masked_mean(values, weights).numpy(), 1.5)

    def test_masked_mean_denominator_is_at_least_one(self):
        values = np.array([2.0, 4.0], np.float32)
        weights = np.array([0.25, 0.25], np.float32)
        want = _masked_mean_reference(values, weights)
        self.assertAlmostEqual(want, 1.5)
        self.assertAlmostEqual(float(losses.masked_mean(values, weights)), want, places=6)

    def test_masked_mean_rejects_higher_rank_weights(self):
        with self.assertRaisesRegex(ValueError, "higher rank than values"):
            losses.masked_mean(np.zeros(3, np.float32), np.zeros((3, 1), np.float32))

    @parameterized.parameters(((),), ((7,),), ((2, 5),))
    def test_sigmoid_cross_entropy_matches_reference(self, shape):
        rng = np.random.default_rng(len(shape))
        logits = (rng.normal(size=shape) * 4).astype(np.float32)
        labels = (rng.random(shape) < 0.5).astype(np.float32)
        got = losses.sigmoid_cross_entropy(logits, labels)
        self.assertEqual(got.shape, shape)
        np.testing.assert_allclose(got.numpy(), _bce_reference(logits, labels),
                                   rtol=1e-5, atol=1e-6)

    def test_sigmoid_cross_entropy_is_stable(self):
        got = losses.sigmoid_cross_entropy(np.array([100.0, -100.0, 100.0, -100.0], np.float32),
                                           np.array([0.0, 1.0, 1.0, 0.0], np.float32))
        np.testing.assert_allclose(got.numpy(), [100.0, 100.0, 0.0, 0.0], atol=1e-6)


class WorldModelLossesTest(parameterized.TestCase):

    @parameterized.parameters((1, 1, 1, 1, 1), (2, 6, 3, 4, 5), (4, 3, 1, 2, 8))
    def test_matches_reference(self, batch, steps, num_components, latent_dim, num_xfers):
        rng = np.random.default_rng(batch * 100 + steps)
        inputs = _random_world_model_inputs(rng, batch, steps, num_components, latent_dim,
                                            num_xfers)
        got = _as_numpy(losses.world_model_losses(**inputs))
        want = _world_model_losses_reference(inputs)
        for name, value in want.items():
            self.assertAlmostEqual(got[name], value, delta=1e-4 * max(1.0, abs(value)),
                                   msg=name)

    def test_total_is_weighted_sum(self):
        rng = np.random.default_rng(1)
        inputs = _random_world_model_inputs(rng)
        weights = dict(terminal_weight=0.5, mask_weight=2.0, count_weight=0.25,
                       reward_weight=3.0)
        got = _as_numpy(losses.world_model_losses(**inputs, **weights))
        self.assertAlmostEqual(
            got["total"],
            got["latent_nll"] + 3.0 * got["reward"] + 0.5 * got["terminal"]
            + 2.0 * got["xfer_mask"] + 0.25 * got["location_count"], places=5)
        want = _world_model_losses_reference(inputs, **weights)
        self.assertAlmostEqual(got["total"], want["total"],
                               delta=1e-4 * max(1.0, abs(want["total"])))
        unweighted = _as_numpy(losses.world_model_losses(**inputs))
        self.assertNotAlmostEqual(got["total"], unweighted["total"], places=3)

    def test_padded_steps_do_not_change_any_loss(self):
        rng = np.random.default_rng(2)
        inputs = _random_world_model_inputs(rng)
        self.assertLess(inputs["step_weights"].sum(), inputs["step_weights"].size)
        before = _as_numpy(losses.world_model_losses(**inputs))
        padded = inputs["step_weights"] == 0
        changed = dict(inputs)
        for name, value in inputs.items():
            if name == "step_weights":
                continue
            noise = rng.normal(size=value.shape).astype(np.float32) * 100
            if name in ("done", "xfer_valid"):
                noise = (noise > 0).astype(np.float32)
            if name == "count":
                noise = np.abs(noise).round()
            changed[name] = np.where(padded.reshape(padded.shape + (1,) * (value.ndim - 2)),
                                     noise, value).astype(np.float32)
        changed["reward"] = np.where(padded, np.nan, changed["reward"]).astype(np.float32)
        after = _as_numpy(losses.world_model_losses(**changed))
        for name in before:
            self.assertAlmostEqual(before[name], after[name], places=5, msg=name)

    def test_all_zero_weights_give_zero(self):
        inputs = _random_world_model_inputs(np.random.default_rng(3))
        inputs["step_weights"] = np.zeros_like(inputs["step_weights"])
        for name, value in _as_numpy(losses.world_model_losses(**inputs)).items():
            self.assertEqual(value, 0.0, msg=name)

    def test_count_term_ignores_invalid_xfers(self):
        rng = np.random.default_rng(4)
        inputs = _random_world_model_inputs(rng)
        before = _as_numpy(losses.world_model_losses(**inputs))
        invalid = inputs["xfer_valid"] == 0
        self.assertTrue(invalid.any())
        changed = dict(inputs)
        changed["count_pred"] = np.where(invalid, 1e3, inputs["count_pred"]).astype(np.float32)
        changed["count"] = np.where(invalid, 1e6, inputs["count"]).astype(np.float32)
        after = _as_numpy(losses.world_model_losses(**changed))
        self.assertAlmostEqual(before["location_count"], after["location_count"], places=6)
        # ...whereas a valid entry at a real step does move it.
        valid_real = (inputs["xfer_valid"] == 1) & (inputs["step_weights"][..., None] == 1)
        moved = dict(inputs)
        moved["count_pred"] = np.where(valid_real, 10.0, inputs["count_pred"]).astype(np.float32)
        self.assertGreater(_as_numpy(losses.world_model_losses(**moved))["location_count"],
                           before["location_count"] + 1.0)

    def test_count_term_uses_log1p_targets(self):
        inputs = _random_world_model_inputs(np.random.default_rng(5), batch=1, steps=1,
                                            num_xfers=2)
        inputs["xfer_valid"] = np.ones((1, 1, 2), np.float32)
        inputs["count"] = np.array([[[0.0, 9.0]]], np.float32)
        inputs["count_pred"] = np.log1p(inputs["count"]).astype(np.float32)
        self.assertAlmostEqual(
            float(losses.world_model_losses(**inputs).location_count), 0.0, places=6)

    def test_inside_tf_function(self):
        inputs = _random_world_model_inputs(np.random.default_rng(6))
        compiled = tf.function(lambda kwargs: losses.world_model_losses(**kwargs))
        tensors = {name: tf.constant(value) for name, value in inputs.items()}
        got = _as_numpy(compiled(tensors))
        eager = _as_numpy(losses.world_model_losses(**inputs))
        for name in eager:
            self.assertAlmostEqual(got[name], eager[name], places=5, msg=name)

    def test_gradients_are_finite(self):
        inputs = _random_world_model_inputs(np.random.default_rng(7))
        tensors = {name: tf.constant(value) for name, value in inputs.items()}
        with tf.GradientTape() as tape:
            tape.watch([tensors["logits"], tensors["mu"], tensors["log_sigma"]])
            total = losses.world_model_losses(**tensors).total
        for gradient in tape.gradient(total, [tensors["logits"], tensors["mu"],
                                              tensors["log_sigma"]]):
            self.assertTrue(np.all(np.isfinite(gradient.numpy())))
            self.assertGreater(np.abs(gradient.numpy()).sum(), 0.0)


class RewardEnsembleLossTest(parameterized.TestCase):

    def _inputs(self, seed, members, batch=3, steps=5):
        rng = np.random.default_rng(seed)
        inputs = _random_world_model_inputs(rng, batch, steps)
        inputs["reward_members"] = (inputs["reward"][..., None]
                                    + rng.normal(size=(batch, steps, members))
                                    ).astype(np.float32)
        return inputs

    @parameterized.parameters((1, 1, 1), (3, 5, 2), (4, 3, 5))
    def test_matches_reference(self, batch, steps, members):
        inputs = self._inputs(batch * 10 + members, members, batch, steps)
        got = _as_numpy(losses.world_model_losses(**inputs))
        want = _world_model_losses_reference(inputs)
        self.assertGreater(want["reward_ensemble"], 0.0)
        for name, value in want.items():
            self.assertAlmostEqual(got[name], value, delta=1e-4 * max(1.0, abs(value)),
                                   msg=name)

    def test_total_includes_the_term_with_the_reward_weight(self):
        inputs = self._inputs(11, 4)
        weights = dict(terminal_weight=0.5, mask_weight=2.0, count_weight=0.25,
                       reward_weight=3.0)
        got = _as_numpy(losses.world_model_losses(**inputs, **weights))
        self.assertGreater(got["reward_ensemble"], 0.1)
        self.assertAlmostEqual(
            got["total"],
            got["latent_nll"] + 3.0 * (got["reward"] + got["reward_ensemble"])
            + 0.5 * got["terminal"] + 2.0 * got["xfer_mask"] + 0.25 * got["location_count"],
            places=4)
        want = _world_model_losses_reference(inputs, **weights)
        self.assertAlmostEqual(got["total"], want["total"],
                               delta=1e-4 * max(1.0, abs(want["total"])))
        without = dict(inputs, reward_members=None)
        plain = _as_numpy(losses.world_model_losses(**without, **weights))
        self.assertAlmostEqual(got["total"] - plain["total"], 3.0 * got["reward_ensemble"],
                               places=4)

    def test_none_or_no_members_give_zero(self):
        inputs = self._inputs(12, 3)
        with_members = _as_numpy(losses.world_model_losses(**inputs))
        for members in (None, np.zeros((3, 5, 0), np.float32)):
            got = _as_numpy(losses.world_model_losses(**dict(inputs, reward_members=members)))
            self.assertEqual(got["reward_ensemble"], 0.0)
            for name in ("latent_nll", "reward", "terminal", "xfer_mask", "location_count"):
                self.assertAlmostEqual(got[name], with_members[name], places=6, msg=name)
            self.assertAlmostEqual(got["total"],
                                   with_members["total"] - with_members["reward_ensemble"],
                                   places=4)
        del inputs["reward_members"]  # the default
        self.assertEqual(float(losses.world_model_losses(**inputs).reward_ensemble), 0.0)

    def test_exact_members_give_zero_and_one_member_is_the_reward_term(self):
        inputs = self._inputs(13, 3)
        inputs["reward_members"] = np.repeat(inputs["reward"][..., None], 3, -1)
        self.assertAlmostEqual(float(losses.world_model_losses(**inputs).reward_ensemble), 0.0,
                               places=7)
        inputs["reward_members"] = inputs["reward_pred"][..., None]
        got = losses.world_model_losses(**inputs)
        self.assertAlmostEqual(float(got.reward_ensemble), float(got.reward), places=6)

    def test_padded_steps_do_not_count(self):
        inputs = self._inputs(14, 4)
        padded = inputs["step_weights"] == 0
        self.assertTrue(padded.any())
        before = float(losses.world_model_losses(**inputs).reward_ensemble)
        changed = dict(inputs)
        changed["reward_members"] = np.where(padded[..., None], np.nan,
                                             inputs["reward_members"]).astype(np.float32)
        changed["reward"] = np.where(padded, 1e3, inputs["reward"]).astype(np.float32)
        self.assertAlmostEqual(float(losses.world_model_losses(**changed).reward_ensemble),
                               before, places=5)

    def test_inside_tf_function_with_gradients(self):
        inputs = self._inputs(15, 3)
        tensors = {name: tf.constant(value) for name, value in inputs.items()}
        compiled = tf.function(lambda kwargs: losses.world_model_losses(**kwargs))
        self.assertAlmostEqual(float(compiled(tensors).reward_ensemble),
                               float(losses.world_model_losses(**inputs).reward_ensemble),
                               places=5)
        with tf.GradientTape() as tape:
            tape.watch(tensors["reward_members"])
            total = losses.world_model_losses(**tensors).total
        gradient = tape.gradient(total, tensors["reward_members"]).numpy()
        # d/dm of the masked mean of mean_e (m - r)^2: 2 (m - r) / (E * real steps).
        w = inputs["step_weights"]
        expected = (2 * (inputs["reward_members"] - inputs["reward"][..., None])
                    / (3 * w.sum()) * w[..., None])
        np.testing.assert_allclose(gradient, expected, rtol=1e-4, atol=1e-6)


class PolynomialDecayTest(parameterized.TestCase):

    def _reference(self, step, initial, final, decay_steps, power):
        fraction = min(step, decay_steps) / decay_steps
        return (initial - final) * (1 - fraction) ** power + final

    def test_thesis_schedule(self):
        self.assertAlmostEqual(losses.polynomial_decay(0, 8e-3, 2e-4, 200), 8e-3, places=12)
        self.assertAlmostEqual(losses.polynomial_decay(200, 8e-3, 2e-4, 200), 2e-4, places=12)
        self.assertAlmostEqual(losses.polynomial_decay(100, 8e-3, 2e-4, 200),
                               (8e-3 - 2e-4) * 0.25 + 2e-4, places=12)
        self.assertAlmostEqual(losses.polynomial_decay(500, 8e-3, 2e-4, 200), 2e-4, places=12)
        self.assertIsInstance(losses.polynomial_decay(3, 8e-3, 2e-4, 200), float)

    @parameterized.parameters(1.0, 2.0, 3.0)
    def test_matches_reference_and_is_monotone(self, power):
        values = [losses.polynomial_decay(step, 1.0, 0.1, 10, power) for step in range(15)]
        for step, value in enumerate(values):
            self.assertAlmostEqual(value, self._reference(step, 1.0, 0.1, 10, power), places=12)
        self.assertTrue(all(a >= b for a, b in zip(values, values[1:])))

    def test_bad_decay_steps_raises(self):
        with self.assertRaisesRegex(ValueError, "decay_steps must be >= 1, got 0"):
            losses.polynomial_decay(0, 1.0, 0.1, 0)


if __name__ == "__main__":
    absltest.main()
