"""Tests of the calibration's micro-models (built, not timed)."""

from absl.testing import absltest
import numpy as np

from xflowrl.measure import calibration, cost_fit, micro_models

# A few configurations per family: builds in a second or two.
SMALL = micro_models.Budget(copies=2, configs=3, min_ms=1, passes=1, zoo_graphs=())


class MicroModelsTest(absltest.TestCase):

    def test_every_family_and_class_is_covered(self):
        models = micro_models.micro_models(SMALL)
        names = [m.name for m in models]
        self.assertLen(set(names), len(names))
        families = {n.split("/")[1] for n in names}
        self.assertContainsSubset({"matmul", "bmm", "conv", "batchnorm", "concat", "split",
                                   "transpose"}, families)
        self.assertTrue(families & {"maxpool", "avgpool"})
        self.assertTrue(families & set(micro_models.ELEMENTWISE))
        features, _ = calibration.design([m.graph for m in models], {})
        kernels = features[:, :, 0].sum(axis=0)
        for c, cls in enumerate(cost_fit.CLASSES):
            self.assertGreater(kernels[c], 0, cls)

    def test_values_cover_every_weight_and_input(self):
        for model in micro_models.micro_models(SMALL):
            self.assertCountEqual(model.weights, model.graph.weights(), model.name)
            self.assertCountEqual(model.feeds, model.graph.inputs(), model.name)

    def test_budget_is_seeded(self):
        a = [m.name for m in micro_models.micro_models(SMALL, seed=1)]
        b = [m.name for m in micro_models.micro_models(SMALL, seed=1)]
        self.assertEqual(a, b)
        self.assertNotEqual(a, [m.name for m in micro_models.micro_models(SMALL, seed=2)])

    def test_cold_copies(self):
        budget = micro_models.Budget(copies=4, configs=1, min_ms=1, passes=1, zoo_graphs=())
        cache = micro_models.last_level_cache_bytes()
        # 1 MB weights: enough copies to stream twice the cache.
        self.assertEqual(micro_models.cold_copies(budget, 1 << 20, 1e6, 1024),
                         int(np.ceil(2 * cache / (1 << 20))))
        self.assertEqual(micro_models.cold_copies(budget, 1024, 1e3, 64), 64)  # the cap
        self.assertEqual(micro_models.cold_copies(budget, 1024, 1e9, 64), 4)  # FLOPs; the floor


if __name__ == "__main__":
    absltest.main()
