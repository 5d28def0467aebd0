"""`evaluate.steps_to_reach`: when fine-tuning first reached a per-graph
agent's result, in real steps."""

from absl.testing import absltest

from xflowrl.generalist.evaluate import CHEAPEST_GRAPH_KEYS, steps_to_reach

_HISTORY = [{"interactions": 100, "best_final_cost": 9.0, "cheapest_cost": 8.5},
            {"interactions": 220, "best_final_cost": 8.0, "greedy_cost": 7.5,
             "cheapest_cost": 7.2, "greedy_cheapest_cost": 7.4},
            {"interactions": 300, "best_final_cost": 7.0, "cheapest_cost": 6.5}]


class StepsToReachTest(absltest.TestCase):

    def test_zero_shot_that_reaches_counts_its_own_steps(self):
        self.assertEqual(steps_to_reach(8.0, 8.0, 12, _HISTORY), 12)

    def test_first_update_whose_cheapest_episode_reaches(self):
        self.assertEqual(steps_to_reach(9.0, 10.0, 12, _HISTORY), 12 + 100)

    def test_a_greedy_evaluation_reaches_before_the_training_episodes(self):
        self.assertEqual(steps_to_reach(7.5, 10.0, 12, _HISTORY), 12 + 220)

    def test_never_reached(self):
        self.assertIsNone(steps_to_reach(6.9, 10.0, 12, _HISTORY))

    def test_equal_costs_up_to_rounding_reach(self):
        self.assertEqual(steps_to_reach(7.0 * (1 - 1e-12), 10.0, 12, _HISTORY), 12 + 300)

    def test_counting_the_cheapest_graphs_passed_through(self):
        # Final graphs reach 8.5 only at the second update; a graph an
        # episode passed through already at the first.
        self.assertEqual(steps_to_reach(8.5, 10.0, 12, _HISTORY), 12 + 220)
        self.assertEqual(steps_to_reach(8.5, 10.0, 12, _HISTORY, CHEAPEST_GRAPH_KEYS), 12 + 100)
        self.assertEqual(steps_to_reach(6.5, 10.0, 12, _HISTORY, CHEAPEST_GRAPH_KEYS), 12 + 300)
        self.assertIsNone(steps_to_reach(6.4, 10.0, 12, _HISTORY, CHEAPEST_GRAPH_KEYS))


if __name__ == "__main__":
    absltest.main()
