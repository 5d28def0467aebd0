"""The targets of learning from search, against numbers worked out by hand."""

import math

from absl.testing import absltest
import numpy as np

from xflowrl.planning.search_targets import (
    TargetConfig,
    best_below_value,
    by_head,
    improved_policy,
    n_step_returns,
    normalise,
    visit_policy,
)
from xflowrl.planning.simulator import EVERYWHERE


class ImprovedPolicyTest(absltest.TestCase):

    def test_softmax_of_logits_plus_sigma_of_normalised_values(self):
        # q = [1, 3, 2] -> normalised [0, 1, 0.5]; sigma = (c_visit + 2) * c_scale * q
        # = (1 + 2) * 1 * q = [0, 3, 1.5]; logits [0, 0, ln 2].
        policy = improved_policy(np.array([0.0, 0.0, math.log(2.0)]), np.array([1.0, 3.0, 2.0]),
                                 np.ones(3, bool), max_visits=2, c_visit=1.0, c_scale=1.0)
        scores = np.array([1.0, math.exp(3.0), 2.0 * math.exp(1.5)])
        np.testing.assert_allclose(policy, scores / scores.sum(), rtol=1e-12)

    def test_dead_actions_get_nothing_and_do_not_set_the_range(self):
        # Live values 1 and 3 set the range; the dead action's 100 does not.
        policy = improved_policy(np.zeros(3), np.array([1.0, 3.0, 100.0]),
                                 np.array([True, True, False]), 0, c_visit=2.0, c_scale=1.0)
        self.assertEqual(policy[2], 0.0)
        np.testing.assert_allclose(policy[:2], [1 / (1 + math.exp(2.0)),
                                                math.exp(2.0) / (1 + math.exp(2.0))])

    def test_equal_values_leave_the_prior(self):
        logits = np.log(np.array([0.2, 0.3, 0.5]))
        policy = improved_policy(logits, np.full(3, 7.0), np.ones(3, bool), 5, 50.0, 0.1)
        np.testing.assert_allclose(policy, [0.2, 0.3, 0.5])

    def test_normalise_and_visits(self):
        np.testing.assert_allclose(normalise(np.array([2.0, 4.0, 6.0]), np.ones(3, bool)),
                                   [0.0, 0.5, 1.0])
        np.testing.assert_allclose(visit_policy(np.array([3, 1, 4]),
                                                np.array([True, True, False])), [0.75, 0.25, 0])
        np.testing.assert_allclose(visit_policy(np.zeros(2), np.ones(2, bool)), [0.5, 0.5])


class ByHeadTest(absltest.TestCase):

    def test_marginal_per_xfer_and_location_targets_per_xfer(self):
        # Xfer 0 at locations 0 and 1, xfer 2 at location 3, then "xfer 0
        # everywhere" (N = 3, NO-OP is 3).
        actions = np.array([[0, 0], [0, 1], [2, 3], [0, EVERYWHERE]])
        policy = np.array([0.1, 0.3, 0.4, 0.2])
        head = by_head(actions, 3, policy, num_xfers=3, location_xfers=4)
        np.testing.assert_allclose(head.xfer, [0.6, 0.0, 0.4, 0.0])
        self.assertEqual([t.xfer for t in head.locations], [0, 2])
        self.assertAlmostEqual(head.locations[0].weight, 0.6)
        np.testing.assert_array_equal(head.locations[0].locations, [0, 1])
        np.testing.assert_allclose(head.locations[0].probs, [0.25, 0.75])
        np.testing.assert_array_equal(head.locations[1].locations, [3])
        np.testing.assert_allclose(head.locations[1].probs, [1.0])
        # The largest marginals' location targets only.
        self.assertEqual([t.xfer for t in by_head(actions, 3, policy, 3, 1).locations], [0])


class ValuesTest(absltest.TestCase):

    def test_best_below_is_points_of_the_initial_cost(self):
        self.assertAlmostEqual(best_below_value(cost=8.0, best_cost=6.0, initial_cost=10.0), 20.0)

    def test_n_step_returns(self):
        rewards, values = [1.0, 2.0, 3.0], [10.0, 20.0, 30.0, 40.0]
        # n = 2, gamma = 0.5: G_0 = 1 + 0.5 * 2 + 0.25 * 30 = 9.5;
        # G_1 = 2 + 0.5 * 3 + 0.25 * 40 = 13.5; G_2 = 3 + 0.5 * 40 = 23; G_3 = 40.
        np.testing.assert_allclose(n_step_returns(rewards, values, 0.5, 2),
                                   [9.5, 13.5, 23.0, 40.0])
        with self.assertRaisesRegex(ValueError, "T\\+1 values"):
            n_step_returns(rewards, values[:3], 0.5, 2)

    def test_bad_config(self):
        with self.assertRaisesRegex(ValueError, "policy must be"):
            TargetConfig(policy="mean")
        with self.assertRaisesRegex(ValueError, "states must be"):
            TargetConfig(states="all")


if __name__ == "__main__":
    absltest.main()
