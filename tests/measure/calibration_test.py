"""Tests of the calibration's design matrix and micro-models (no timing)."""

import os
import tempfile

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel
from xflowrl.measure import calibration, cost_fit, micro_models

# A few configurations per family: builds in a second or two.
SMALL = micro_models.Budget(copies=2, configs=3, min_ms=1, passes=1, zoo_graphs=())


class DesignTest(absltest.TestCase):

    def test_design_reproduces_the_backend(self):
        # features . coefficients + fixed is the backend's own graph cost,
        # fusions, reorders and separate activations included.
        rng = np.random.default_rng(0)
        coefficients = {cls: [float(v) for v in rng.uniform(0.001, 0.1, 4)] + [2.0]
                        for cls in cost_fit.CLASSES}
        graphs = [zoo.get_graph("small_cnn"), zoo.get_graph("nasrnn")]
        graphs += [m.graph for m in micro_models.micro_models(SMALL)[::2]]
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
        graphs = [m.graph for m in micro_models.micro_models(SMALL)]
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


class CalibrateArgumentsTest(absltest.TestCase):

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "unknown budget 'slow'"):
            calibration.calibrate("/tmp/x.json", budget="slow")
        with self.assertRaisesRegex(ValueError, "is a .json file"):
            calibration.calibrate("/tmp/x.txt")


if __name__ == "__main__":
    absltest.main()
