"""xflowrl.reproduction.budgets: the thesis' budgets, and scaling the agents'
training budgets."""

import dataclasses

from absl.testing import absltest

from xflowrl.reproduction import budgets


class BudgetsTest(absltest.TestCase):

    def test_thesis_budget(self):
        thesis = budgets.BUDGETS["thesis"]
        self.assertEqual(thesis.mf_episodes, 2000)
        self.assertEqual(thesis.mb_rounds * thesis.mb_episodes_per_round, 5000)
        self.assertEqual(thesis.mb_dream_episodes, 2200)
        self.assertEqual(thesis.max_steps, budgets.FULL.max_steps)
        self.assertEqual(budgets.BUDGETS["quick"], budgets.QUICK)
        self.assertEqual(budgets.BUDGETS["full"], budgets.FULL)
        self.assertIs(budgets.BUDGETS["thesis"], budgets.THESIS)


class BudgetScaleTest(absltest.TestCase):

    def test_scales_only_the_agents_training(self):
        full, scaled = budgets.FULL, budgets.scaled(budgets.FULL, 4)
        self.assertEqual(scaled.mf_episodes, 4 * full.mf_episodes)
        self.assertEqual(scaled.mb_episodes_per_round, 4 * full.mb_episodes_per_round)
        self.assertEqual(scaled.mb_train_steps, 4 * full.mb_train_steps)
        self.assertEqual(scaled.mb_dream_episodes, 4 * full.mb_dream_episodes)
        trained = {"mf_episodes", "mb_episodes_per_round", "mb_train_steps",
                   "mb_dream_episodes"}
        for field in dataclasses.fields(full):
            if field.name not in trained:
                self.assertEqual(getattr(scaled, field.name), getattr(full, field.name),
                                 field.name)
        self.assertEqual(budgets.scaled(full, 1.0), full)
        self.assertEqual(budgets.scaled(budgets.QUICK, 0.01).mf_episodes, 1)
        with self.assertRaisesRegex(ValueError, "must be positive"):
            budgets.scaled(full, 0)



if __name__ == "__main__":
    absltest.main()
