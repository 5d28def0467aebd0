"""A model-based run's own report (`xflowrl.results.model_based`): result.md
from the record alone, training.png, the model-free run beside it."""

import dataclasses
import os
import tempfile

from absl.testing import absltest

from tests.results import fixtures
from xflowrl.results.model_based import (
    figure_model_based_training,
    model_based_markdown,
    model_free_beside,
)
from xflowrl.results.runs import RoundController


class ModelBasedReportTest(absltest.TestCase):

    def test_markdown_tables_from_the_record(self):
        run = fixtures.mb_run(cost=85.0)
        run.selected_round = {"round": 1, "cost_ms": 90.5, "episodes": 64}
        text = model_based_markdown(run, [("one-step greedy", 90.0)])
        self.assertTrue(text.startswith(
            "# Model-based agent on bert (GPU-like profile: analytic/v100 cost)\n"))
        # The costs: the greedy episode, the best of greedy and sampled, the
        # greedy episode on the other masks, then the baselines.
        self.assertIn("| model-based (greedy episode) | 86.0000 | -14.000% |", text)
        self.assertIn("| model-based (best of greedy + 1 sampled) | 85.0000 | -15.000% |", text)
        self.assertIn("| model-based, greedy on the model masks (ablation: the thesis) | "
                      "88.0000 | -12.000% |", text)
        self.assertIn("| one-step greedy | 90.0000 | -10.000% |", text)
        self.assertIn("the deployed agent is round 1's of 1 (its greedy real episode reached "
                      "the cheapest graph, 90.5000 ms)", text)
        # Every evaluation episode, and the controller after each round.
        self.assertIn("| greedy, real masks | 86.0000 | 85.0000 (1) |", text)
        self.assertIn("| sampled 1 | 89.0000 | 88.0000 (1) |", text)
        self.assertIn("| 1 | random | 100 | 1.000 | 0.800 | +0.300 | +0.100 | +0.200 | +0.100 |",
                      text)
        self.assertIn("model-free agent: not run (train_mf.py writes it)", text)
        self.assertTrue(text.endswith("Controller's substitutions (best episode): mb@0\n"))

    def test_the_location_counts_are_reported_where_the_run_recorded_them(self):
        run = fixtures.mb_run()
        self.assertIn("location-mask accuracy 0.800. Controller:", model_based_markdown(run, []))
        run.world_model.rounds[-1].held_out["location_count_accuracy"] = 0.95
        self.assertIn("location-mask accuracy 0.800, location counts right 0.950 (per valid "
                      "xfer). Controller:", model_based_markdown(run, []))

    def test_markdown_other_settings(self):
        run = dataclasses.replace(fixtures.mb_run(), cost_model="fitted/cpu", eval_masks="model")
        run.controller = {"greedy": run.controller["greedy"],
                          "greedy_real_masks": run.controller["greedy_model_masks"]}
        run.world_model.rounds[0].controller = None
        text = model_based_markdown(run, [])
        self.assertIn("(fitted/cpu cost)", text)
        self.assertIn("model-based (greedy episode, the world model's masks: ablation)", text)
        self.assertIn("| model-based, greedy on the real masks | 88.0000 |", text)
        self.assertNotIn("The controller after each round", text)

    def test_figure_and_the_model_free_run_beside(self):
        folder = tempfile.mkdtemp()
        run = fixtures.mb_run()
        run.world_model.rounds[0].controller = RoundController(1, 0.0, 0.0, 0.0, 1.0)
        path = os.path.join(folder, "training.png")
        figure_model_based_training(path, run, [{"episodes": 64, "dream_return": 1.0}])
        self.assertGreater(os.path.getsize(path), 1000)
        mf_path = fixtures.mf_run(cost=95.0).save(os.path.join(folder, "train_mf.json"))
        self.assertEqual(model_free_beside(mf_path),
                         {"interactions": 100, "agent_cost_ms": 95.0, "episodes": 10,
                          "source": mf_path})
        self.assertIsNone(model_free_beside(os.path.join(folder, "missing.json")))
        with open(mf_path, "w") as f:
            f.write('{"schema": "model_based_run"}')
        with self.assertLogs(level="WARNING") as logs:
            self.assertIsNone(model_free_beside(mf_path))
        self.assertIn("not beside the model-free run", logs.output[0])


if __name__ == "__main__":
    absltest.main()
