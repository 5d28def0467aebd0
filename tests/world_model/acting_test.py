"""Tests of the choice of a round's evaluation graphs and of the best round."""

from absl.testing import absltest
import numpy as np

from xflowrl.results.runs import Evaluation, RoundController
from xflowrl.results.state import BestRound
from xflowrl.world_model import acting


def _episode(final_cost, cheapest_cost, steps=3):
    return Evaluation(final_cost=final_cost, real_return=0.0, predicted_return=0.0,
                      invalid_actions=0, steps=steps, applied=[], cheapest_cost=cheapest_cost,
                      cheapest_prefix_length=1)


def _controller(relative_cost):
    return RoundController(episodes=16, real_return=0.0, predicted_return=0.0,
                           imagined_return=0.0, relative_cost=relative_cost)


class EvaluationGraphsTest(absltest.TestCase):

    def test_every_graph_up_to_the_limit_then_spread_evenly(self):
        few = list(range(acting.EVALUATION_GRAPHS))
        self.assertEqual(acting.evaluation_envs(few), few)
        many = list(range(20))
        picked = acting.evaluation_envs(many)
        self.assertLen(picked, acting.EVALUATION_GRAPHS)
        self.assertEqual((picked[0], picked[-1]), (0, 19))
        self.assertEqual(picked, sorted(set(picked)))
        # Evenly: no gap more than one wider than another.
        gaps = np.diff(picked)
        self.assertLessEqual(gaps.max() - gaps.min(), 1)


class BestRoundTest(absltest.TestCase):

    def test_the_first_round_and_the_later_of_equal_rounds_win(self):
        self.assertTrue(acting.better_round(0.9, None))
        best = BestRound(round=1, relative_cost=0.8, episodes=8)
        self.assertTrue(acting.better_round(0.8 * (1 + 1e-12), best))  # equal: later
        self.assertTrue(acting.better_round(0.7, best))
        self.assertFalse(acting.better_round(0.8 * (1 + 1e-6), best))

    def test_the_record_of_a_best_round(self):
        one = acting.RoundEvaluation(_controller(0.5), [_episode(6.0, 5.0)], ["g"], 0.5)
        self.assertEqual(one.best_round(2), BestRound(round=3, relative_cost=0.5, episodes=16,
                                                      cost_ms=5.0))
        self.assertEqual(one.where(), "cost 6.0000 ms, 3 steps")
        several = acting.RoundEvaluation(_controller(0.9), [_episode(6.0, 5.0)] * 2,
                                         ["g", "h"], 0.9)
        self.assertIsNone(several.best_round(0).cost_ms)
        self.assertEqual(several.where(), "2 graphs, cheapest -10.00% on average")


if __name__ == "__main__":
    absltest.main()
