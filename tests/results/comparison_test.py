"""xflowrl.results.comparison: compare_agents.py's result.json as a record,
its rows built from the agents' runs, and its result.md."""

import dataclasses
import json
import os
import re
import shutil
import tempfile

from absl.testing import absltest

from tests.results import fixtures
from xflowrl.results import AgentComparison, ComparisonRow, RecordError


def _versus(cost, greedy):
    return "is better than one-step greedy" if cost < greedy else "is worse than one-step greedy"


# compare_agents.py's rows in the order of their keys; a plain list of them
# was its result.json before the record.
LEGACY = [{"graph": "small_cnn", "initial_ms": 4.0, "max_steps": 20, "mb_ms": 3.5,
           "mb_cheapest_ms": 2.5, "mf_ms": 3.0, "greedy_ms": 0.09, "taso_ms": 0.09,
           "random_ms": 0.15, "mb_vs_greedy": "is worse than one-step greedy",
           "mf_vs_greedy": "is worse than one-step greedy", "greedy_steps": 13,
           "mb_real_steps": 110, "mf_steps_to_final": 30, "mf_real_steps": 120,
           "steps_ratio_mf_over_mb": 0.2727272727272727, "equal_final_cost": False,
           "mb_seconds": 20.0, "mf_seconds": 7.0, "mb_change": -12.5, "mf_change": -25.0,
           "greedy_change": -97.75, "taso_change": -97.75, "random_change": -96.25}]


def _row(**fields) -> ComparisonRow:
    mf = dataclasses.replace(fixtures.mf_run(0, 3.0, "small_cnn"), initial_cost_ms=4.0,
                             steps_to_final_cost=30, interactions=120, train_seconds=7.0)
    mb = dataclasses.replace(fixtures.mb_run(0, 2.5, "small_cnn"), initial_cost_ms=4.0)
    values = dict(greedy_ms=2.0, greedy_steps=13, taso_ms=1.0, random_ms=5.0)
    values.update(fields)
    return ComparisonRow.of("small_cnn", 20, mf, mb, versus_greedy=_versus, **values)


class ComparisonRowTest(absltest.TestCase):

    def test_the_row_from_the_runs_and_the_baselines(self):
        row = _row()
        self.assertEqual((row.initial_ms, row.max_steps), (4.0, 20))
        self.assertEqual((row.mb_ms, row.mb_cheapest_ms, row.mf_ms), (3.5, 2.5, 3.0))
        self.assertEqual(row.mb_vs_greedy, "is worse than one-step greedy")
        # The model-based agent's rollouts (world model and held out), not
        # its evaluation steps.
        self.assertEqual(row.mb_real_steps, 100 + 10)
        self.assertEqual((row.mf_steps_to_final, row.mf_real_steps), (30, 120))
        self.assertAlmostEqual(row.steps_ratio_mf_over_mb, 30 / 110)
        self.assertFalse(row.equal_final_cost)
        self.assertEqual((row.mb_seconds, row.mf_seconds), (20.0, 7.0))
        self.assertEqual(row.changes, (-12.5, -25.0, -50.0, -75.0, 25.0))
        self.assertEqual(_row(greedy_ms=3.0).mf_vs_greedy, "is worse than one-step greedy")
        self.assertEqual(_row(greedy_ms=3.5).mf_vs_greedy, "is better than one-step greedy")

    def test_equal_final_costs_are_flagged(self):
        mf = dataclasses.replace(fixtures.mf_run(0, 2.5), initial_cost_ms=4.0)
        mb = dataclasses.replace(fixtures.mb_run(0, 2.5), initial_cost_ms=4.0)
        row = ComparisonRow.of("bert", 20, mf, mb, 2.0, 13, 1.0, 5.0, _versus)
        self.assertTrue(row.equal_final_cost)


class AgentComparisonTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="comparison_test_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.result = AgentComparison(cost_model="analytic/v100", max_steps=3,
                                      equal_budget_factor=1.5, rows=[_row()])

    def test_round_trip_with_the_rows_keys_of_before(self):
        path = self.result.save(os.path.join(self.tmp, "compare_agents", "result.json"))
        self.assertEqual(AgentComparison.load(path), self.result)
        with open(path) as f:
            value = json.load(f)
        self.assertEqual(list(value), ["schema", "schema_version", "cost_model", "max_steps",
                                       "equal_budget_factor", "rows"])
        self.assertEqual((value["schema"], value["schema_version"]), ("compare_agents", 2))
        self.assertEqual(list(value["rows"][0]), list(LEGACY[0]))

    def test_a_file_from_before_the_record_is_refused(self):
        path = os.path.join(self.tmp, "result.json")
        fixtures.write_json(path, LEGACY)
        with self.assertRaisesRegex(RecordError, f"^{re.escape(path)}: a list of rows "
                                    r"\(version 0, written before versioned records\); this "
                                    "code reads compare_agents version 2 only: run again to "
                                    "write it anew$"):
            AgentComparison.load(path)

    def test_rows_of_that_file_read_in_a_record(self):
        old = AgentComparison.from_json({"schema": "compare_agents", "schema_version": 2,
                                         "cost_model": "analytic/v100", "max_steps": 20,
                                         "equal_budget_factor": 1.5, "rows": LEGACY})
        self.assertEqual(old.rows[0].mb_real_steps, 110)
        self.assertEqual(old.rows[0].changes, (-12.5, -25.0, -97.75, -97.75, -96.25))
        self.assertEqual(old.to_json()["rows"], LEGACY)

    def test_another_schema_a_newer_version_and_unknown_keys_are_refused(self):
        value = self.result.to_json()
        fixtures.assert_refuses_other_schema_and_newer_version(self, AgentComparison, value,
                                                               "model_free_run")
        with self.assertRaisesRegex(RecordError, r"rows\[0\]: ComparisonRow has no fields "
                                    r"\['extra'\]"):
            AgentComparison.from_json(dict(value, rows=[dict(value["rows"][0], extra=1)]))
        with self.assertRaisesRegex(RecordError, r"AgentComparison lacks \['rows'\]"):
            AgentComparison.from_json({k: v for k, v in value.items() if k != "rows"})
        with self.assertRaisesRegex(RecordError, r"lacks \['mb_change'\]"):
            AgentComparison.from_json(dict(value, rows=[{k: v for k, v in LEGACY[0].items()
                                                         if k != "mb_change"}]))

    def test_markdown(self):
        text = self.result.markdown()
        self.assertTrue(text.startswith("# Model-based vs model-free vs baselines "
                                        "(analytic/v100 estimated cost, ms)\n\n"))
        self.assertIn("\n| small_cnn | 4.000 | 20 | 3.500 (-12.50%) | 2.500 | 3.000 (-25.00%) | "
                      "2.000 (-50.00%, 13 steps) | 1.000 (-75.00%) | 5.000 (+25.00%) |\n", text)
        self.assertIn("The agents' step limit is --max_steps (3) or 1.5 x one-step greedy's "
                      "steps, whichever is more.", text)
        self.assertIn("- small_cnn: the model-based agent is worse than one-step greedy; the "
                      "model-free agent is worse than one-step greedy.", text)
        self.assertTrue(text.endswith("\n| small_cnn | 110 | 30 (120 in all) | 0.27x | no | "
                                      "20 / 7 |\n"))


if __name__ == "__main__":
    absltest.main()
