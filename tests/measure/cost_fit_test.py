"""Tests of the fitted backend's fitting maths on synthetic data (no timing)."""

import itertools
import json
import os
import tempfile

from absl.testing import absltest
import numpy as np

from xflowrl.engine.cost import FITTED_CLASSES
from xflowrl.measure import cost_fit


def _brute_nnls(a, b):
    """Slow reference: the best unconstrained fit over every column subset
    whose solution is non-negative."""
    best, best_err = np.zeros(a.shape[1]), float(b @ b)
    for k in range(1, a.shape[1] + 1):
        for cols in itertools.combinations(range(a.shape[1]), k):
            coef = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
            if (coef < 0).any():
                continue
            x = np.zeros(a.shape[1])
            x[list(cols)] = coef
            err = float(np.sum((a @ x - b) ** 2))
            if err < best_err:
                best, best_err = x, err
    return best


class NnlsTest(absltest.TestCase):

    def test_classes_match_the_engine(self):
        self.assertEqual(cost_fit.CLASSES, FITTED_CLASSES)

    def test_active_set_matches_brute_force(self):
        rng = np.random.default_rng(0)
        for trial in range(20):
            a = rng.standard_normal((30, 5))
            b = rng.standard_normal(30)
            np.testing.assert_allclose(cost_fit.nnls_active_set(a, b), _brute_nnls(a, b),
                                       atol=1e-8, err_msg=f"trial {trial}")

    def test_active_set_recovers_positive_solution(self):
        rng = np.random.default_rng(1)
        a = rng.uniform(0, 1, (50, 6))
        truth = np.array([0.5, 0.0, 2.0, 1.0, 0.0, 3.0])
        np.testing.assert_allclose(cost_fit.nnls_active_set(a, a @ truth), truth, atol=1e-9)

    def test_enumerating_nnls_is_weighted(self):
        x = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
        y = np.array([1.0, 2.0, 10.0])
        # Almost all weight on the first two rows: the line through them.
        coef = cost_fit.nnls(x, y, np.array([1e3, 1e3, 1e-3]))
        np.testing.assert_allclose(coef, [0.0, 1.0], atol=1e-3)


class FitClassTest(absltest.TestCase):

    def test_recovers_linear_model(self):
        rng = np.random.default_rng(2)
        flops = rng.uniform(1e6, 1e9, 200)
        mbytes = rng.uniform(0.01, 5.0, 200)
        truth = [0.01, 5.0, 0.02, 0.0, 0.0]
        coef = cost_fit.fit_class(flops, mbytes, cost_fit.predict(truth, flops, mbytes))
        np.testing.assert_allclose(coef, truth, rtol=1e-6, atol=1e-9)

    def test_finds_hinge_threshold(self):
        mbytes = np.linspace(0.1, 20.0, 300)
        flops = np.zeros_like(mbytes)
        truth = [0.005, 0.0, 0.01, 0.05, 8.0]
        coef = cost_fit.fit_class(flops, mbytes, cost_fit.predict(truth, flops, mbytes))
        self.assertEqual(coef[4], 8.0)
        np.testing.assert_allclose(coef[:4], truth[:4], rtol=1e-6, atol=1e-9)

    def test_no_hinge_when_linear(self):
        mbytes = np.linspace(0.1, 20.0, 50)
        coef = cost_fit.fit_class(np.zeros(50), mbytes, 0.001 + 0.01 * mbytes)
        self.assertEqual(coef[3:], [0.0, 0.0])

    def test_fit_reports_every_class(self):
        rows = [cost_fit.Row("micro/a", 1, "conv", 1e9 * k, 1e6 * k, 0.1 + 2.0 * k)
                for k in range(1, 6)]
        coefficients, stats = cost_fit.fit(rows)
        self.assertCountEqual(coefficients, cost_fit.CLASSES)
        self.assertEqual(stats["matmul"], {"rows": 0})
        self.assertEqual(coefficients["matmul"], [0.0] * 5)
        self.assertEqual(stats["conv"]["rows"], 5)
        self.assertAlmostEqual(stats["conv"]["median_rel_error"], 0.0, places=6)


class OverheadTest(absltest.TestCase):

    def test_overhead_scale(self):
        graphs = [{"kernel_ms": k, "kernels": n, "e2e_ms": 1.05 * k + 0.002 * n}
                  for k, n in ((10.0, 50), (40.0, 60), (5.0, 200), (80.0, 120))]
        scale, per_kernel = cost_fit.overhead_scale(graphs)
        self.assertAlmostEqual(scale, 1.05, places=9)
        self.assertAlmostEqual(per_kernel, 0.002, places=9)

    def test_fold_overhead(self):
        folded = cost_fit.fold_overhead({"conv": [1.0, 2.0, 3.0, 4.0, 8.0]}, 2.0, 0.5)
        self.assertEqual(folded, {"conv": [2.5, 4.0, 6.0, 8.0, 8.0]})


class JointFitTest(absltest.TestCase):

    def _synthetic(self, rng, graphs=80):
        classes, basis = len(cost_fit.CLASSES), len(cost_fit.BASIS)
        features = rng.uniform(0, 1, (graphs, classes, basis)) * (rng.uniform(0, 1, (
            graphs, classes, 1)) < 0.4)
        features[:, :, 3] = 0.0
        truth = rng.uniform(0.1, 1.0, (classes, basis))
        truth[:, 3] = 0.0
        fixed = rng.uniform(0, 0.1, graphs)
        return features, truth, fixed

    def test_recovers_coefficients_and_intercept(self):
        rng = np.random.default_rng(3)
        features, truth, fixed = self._synthetic(rng)
        measured = 0.02 + fixed + np.einsum("gck,ck->g", features, truth)
        result = cost_fit.fit_joint(features, fixed, measured)
        np.testing.assert_allclose(result.coefficients, truth, rtol=1e-6, atol=1e-8)
        self.assertAlmostEqual(result.intercept_ms, 0.02, places=7)
        np.testing.assert_allclose(result.predicted_ms, measured, rtol=1e-7)

    def test_coefficients_stay_non_negative(self):
        rng = np.random.default_rng(4)
        features, truth, fixed = self._synthetic(rng)
        truth[0, 1] = -0.5  # unreachable: the fit clips at zero
        measured = np.maximum(fixed + np.einsum("gck,ck->g", features, truth), 0.01)
        result = cost_fit.fit_joint(features, fixed, measured, intercept=False)
        self.assertTrue((result.coefficients >= 0).all())
        self.assertEqual(result.intercept_ms, 0.0)

    def test_errors_are_relative(self):
        # Two graphs that disagree: a tiny and a large one, one coefficient.
        features = np.zeros((2, len(cost_fit.CLASSES), 4))
        features[0, 0, 0], features[1, 0, 0] = 1.0, 100.0
        measured = np.array([2.0, 100.0])
        result = cost_fit.fit_joint(features, np.zeros(2), measured, intercept=False)
        # Relative least squares: argmin (c/2 - 1)^2 + (c - 1)^2 = 1.2 (an
        # absolute fit would give ~1.0002, driven by the large graph).
        self.assertAlmostEqual(result.coefficients[0, 0], 1.2, places=9)


class WriteProfileTest(absltest.TestCase):

    def _profile(self, **override):
        coefficients = {cls: [0.001, 1.0, 0.01, 0.0, 0.0] for cls in cost_fit.CLASSES}
        coefficients.update(override)
        return {"coefficients": coefficients, "rows": []}

    def test_writes_and_loads(self):
        from xflowrl.engine import CostModel  # pylint: disable=import-outside-toplevel
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "sub", "fitted_test.json")
            cost_fit.write_profile(path, self._profile())
            self.assertEqual(os.listdir(os.path.dirname(path)), ["fitted_test.json"])
            with open(path) as f:
                self.assertIn("coefficients", json.load(f))
            self.assertEqual(CostModel("fitted", profile=path).name, "fitted/fitted_test")

    def test_refuses_bad_coefficients_and_leaves_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "p.json")
            with self.assertRaisesRegex(ValueError, "'conv' has a negative"):
                cost_fit.write_profile(path, self._profile(conv=[-1.0, 0, 0, 0, 0]))
            with self.assertRaisesRegex(ValueError, "'copy' needs 5 coefficients"):
                cost_fit.write_profile(path, self._profile(copy=[0.0, 0.0, 0.0]))
            with self.assertRaisesRegex(ValueError, "needs a 'coefficients' table"):
                cost_fit.write_profile(path, {})
            self.assertEqual(os.listdir(tmp), [])

    def test_failed_write_keeps_the_old_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "p.json")
            cost_fit.write_profile(path, self._profile())
            bad = self._profile()
            bad["rows"] = [object()]  # not JSON-serializable: fails mid-write
            with self.assertRaises(TypeError):
                cost_fit.write_profile(path, bad)
            self.assertEqual(os.listdir(tmp), ["p.json"])
            with open(path) as f:
                self.assertEqual(json.load(f)["rows"], [])


if __name__ == "__main__":
    absltest.main()
