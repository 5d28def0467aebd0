"""Tests of the calibration's design matrix and micro-models (no timing)."""

import os
import tempfile

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel
from xflowrl.measure import calibration, cost_fit

# A few configurations per family: builds in a second or two.
SMALL = calibration.Budget(copies=2, configs=3, min_ms=1, passes=1, zoo_graphs=())


class DesignTest(absltest.TestCase):

    def test_design_reproduces_the_backend(self):
        # features . coefficients + fixed is the backend's own graph cost,
        # fusions, reorders and separate activations included.
        rng = np.random.default_rng(0)
        coefficients = {cls: [float(v) for v in rng.uniform(0.001, 0.1, 4)] + [2.0]
                        for cls in cost_fit.CLASSES}
        graphs = [zoo.get_graph("small_cnn"), zoo.get_graph("nasrnn")]
        graphs += [m.graph for m in calibration.micro_models(SMALL)[::2]]
        features, fixed = calibration.design(graphs, {cls: 2.0 for cls in cost_fit.CLASSES})
        table = np.array([coefficients[cls][:4] for cls in cost_fit.CLASSES])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "p.json")
            cost_fit.write_profile(path, {"coefficients": coefficients})
            model = CostModel("fitted", profile=path)
            expected = np.array([g.cost(model) for g in graphs])
        np.testing.assert_allclose(np.einsum("gck,ck->g", features, table) + fixed, expected,
                                   rtol=1e-9)


class FitProfileTest(absltest.TestCase):

    def test_recovers_a_profile_from_its_own_prices(self):
        # "Measurements" made by a known profile (plus a per-inference
        # constant) are fitted back: no hinge, the same predictions.
        rng = np.random.default_rng(1)
        truth = {cls: [float(v) for v in rng.uniform(0.001, 0.05, 3)] + [0.0, 0.0]
                 for cls in cost_fit.CLASSES}
        graphs = [m.graph for m in calibration.micro_models(SMALL)]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "truth.json")
            cost_fit.write_profile(path, {"coefficients": truth})
            model = CostModel("fitted", profile=path)
            measured = np.array([g.cost(model) for g in graphs]) + 0.004
        fit, design = calibration.fit_profile(graphs, measured)
        self.assertEqual(design.shape, (len(graphs), len(cost_fit.CLASSES), 4))
        np.testing.assert_allclose(fit.predicted_ms, measured, rtol=1e-6)
        self.assertAlmostEqual(fit.intercept_ms, 0.004, places=6)
        for cls in cost_fit.CLASSES:
            self.assertEqual(fit.coefficients[cls][3:], [0.0, 0.0], cls)


class MicroModelsTest(absltest.TestCase):

    def test_every_family_and_class_is_covered(self):
        models = calibration.micro_models(SMALL)
        names = [m.name for m in models]
        self.assertLen(set(names), len(names))
        families = {n.split("/")[1] for n in names}
        self.assertContainsSubset({"matmul", "bmm", "conv", "batchnorm", "concat", "split",
                                   "transpose"}, families)
        self.assertTrue(families & {"maxpool", "avgpool"})
        self.assertTrue(families & set(calibration.ELEMENTWISE))
        features, _ = calibration.design([m.graph for m in models], {})
        kernels = features[:, :, 0].sum(axis=0)
        for c, cls in enumerate(cost_fit.CLASSES):
            self.assertGreater(kernels[c], 0, cls)

    def test_values_cover_every_weight_and_input(self):
        for model in calibration.micro_models(SMALL):
            self.assertCountEqual(model.weights, model.graph.weights(), model.name)
            self.assertCountEqual(model.feeds, model.graph.inputs(), model.name)

    def test_budget_is_seeded(self):
        a = [m.name for m in calibration.micro_models(SMALL, seed=1)]
        b = [m.name for m in calibration.micro_models(SMALL, seed=1)]
        self.assertEqual(a, b)
        self.assertNotEqual(a, [m.name for m in calibration.micro_models(SMALL, seed=2)])

    def test_cold_copies(self):
        budget = calibration.Budget(copies=4, configs=1, min_ms=1, passes=1, zoo_graphs=())
        cache = calibration.last_level_cache_bytes()
        # 1 MB weights: enough copies to stream twice the cache.
        self.assertEqual(calibration.cold_copies(budget, 1 << 20, 1e6, 1024),
                         int(np.ceil(2 * cache / (1 << 20))))
        self.assertEqual(calibration.cold_copies(budget, 1024, 1e3, 64), 64)  # the cap
        self.assertEqual(calibration.cold_copies(budget, 1024, 1e9, 64), 4)  # FLOPs; the floor


class CalibrateArgumentsTest(absltest.TestCase):

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "unknown budget 'slow'"):
            calibration.calibrate("/tmp/x.json", budget="slow")
        with self.assertRaisesRegex(ValueError, "is a .json file"):
            calibration.calibrate("/tmp/x.txt")


if __name__ == "__main__":
    absltest.main()
