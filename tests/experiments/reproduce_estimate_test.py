"""experiments/reproduce_estimate.py: marginal rates between a quick and a
full run, the jobs of a budget, and their schedule on N slots."""

import os
import sys

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "experiments"))

import reproduce_estimate as estimate  # pylint: disable=wrong-import-position

from xflowrl.reproduction.budgets import THESIS  # pylint: disable=wrong-import-position


class EstimateTest(absltest.TestCase):

    def test_marginal_rates_cancel_the_fixed_costs(self):
        # 30 s fixed and 2 s per episode; the world model 40 s + 3 s per
        # episode, the dream 10 s + 0.05 s per imagined episode.
        quick = estimate.Times(mf_job=30 + 2 * 10 + 5, mf_train=2 * 10 + 5, mf_episodes=10,
                               mb_job=100 + 40 + 3 * 8 + 10 + 0.05 * 64,
                               mb_world_model=40 + 3 * 8, mb_dream=10 + 0.05 * 64,
                               mb_episodes=8, mb_dream_episodes=64)
        full = estimate.Times(mf_job=30 + 2 * 50 + 5, mf_train=2 * 50 + 5, mf_episodes=50,
                              mb_job=100 + 40 + 3 * 60 + 10 + 0.05 * 1000,
                              mb_world_model=40 + 3 * 60, mb_dream=10 + 0.05 * 1000,
                              mb_episodes=60, mb_dream_episodes=1000)
        r = estimate.rates(quick, full)
        self.assertAlmostEqual(r.mf_per_episode, 2.0)
        self.assertAlmostEqual(r.mf_fixed, 35.0)
        self.assertAlmostEqual(r.wm_per_episode, 3.0)
        self.assertAlmostEqual(r.dream_per_episode, 0.05)
        self.assertAlmostEqual(r.mb_fixed, 150.0)
        # Noise that makes a marginal rate negative falls back to the mean.
        noisy = estimate.rates(full._replace(mf_train=200.0), full)
        self.assertAlmostEqual(noisy.mf_per_episode, 105.0 / 50)

    def test_budget_jobs(self):
        r = estimate.Rates(mf_per_episode=2.0, mf_fixed=30.0, wm_per_episode=3.0,
                           dream_per_episode=0.05, mb_fixed=100.0)
        jobs = estimate.budget_jobs(
            {("gpu", "bert"): r}, {"graph_properties": 50.0, "gpu/baselines": 20.0,
                                   "gpu/bert/measure": 9.0, "gpu/bert/train_mf": 1.0},
            THESIS, separate_graphs=["bert"], sweep_graph="bert", sweep_settings=["gpu"])
        self.assertEqual(jobs["graph_properties"], 50.0)
        self.assertEqual(jobs["gpu/baselines"], 20.0)
        self.assertNotIn("gpu/bert/measure", jobs)
        self.assertAlmostEqual(jobs["gpu/bert/train_mf"], 30.0 + 2.0 * 2000)
        mb = 100.0 + 3.0 * 5000 + 0.05 * 2200
        self.assertAlmostEqual(jobs["gpu/bert/train_mb"], mb)
        self.assertAlmostEqual(jobs["gpu/bert/train_mb separate"], mb)
        # Five seeds of the sweep, each one world model and ten controllers.
        sweep = [n for n in jobs if n.startswith("temperature_sweep")]
        self.assertLen(sweep, 5)
        self.assertAlmostEqual(jobs[sweep[0]], 100.0 + 3.0 * 5000 + 0.05 * 2200 * 10)

    def test_makespan_longest_first(self):
        # Longest first: one slot runs 5 and 3, the other 4, 3 and 3.
        self.assertEqual(estimate.makespan([5, 4, 3, 3, 3], 2), 10)
        self.assertEqual(estimate.makespan([10, 1, 1], 8), 10)
        self.assertEqual(estimate.makespan([2, 2, 2, 2], 1), 8)


if __name__ == "__main__":
    absltest.main()
