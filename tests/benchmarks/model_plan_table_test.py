"""Tests of benchmarks/model_plan_table.py: how the world-model planner's
target is counted from model_plan_bench's rows."""

import os
import sys

from absl.testing import absltest

from xflowrl.search.settings import load_settings

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import model_plan_table  # noqa: E402  pylint: disable=wrong-import-position


def _row(setting, seed, change, steps, engine_change, engine_steps):
    return {"setting": setting.name, "seed": seed, "change_pct": change,
            "real_steps_to_best": steps, "engine_change_pct": engine_change,
            "engine_real_steps_to_best": engine_steps}


class TableTest(absltest.TestCase):

    def test_a_setting_counts_where_the_median_seed_does_it(self):
        first, second, third = load_settings()[:3]
        greedy = [s.change_pct("greedy") for s in (first, second, third)]
        rows = [
            # Two of three seeds within a tenth of the engine's real steps.
            _row(first, 0, greedy[0] - 5, 4, greedy[0] - 5, 40),
            _row(first, 1, greedy[0] - 5, 5, greedy[0] - 5, 40),   # 50 > 40
            _row(first, 2, greedy[0] - 5, 3, greedy[0] - 5, 40),
            # At the engine's cost but 0.001 points above it: not reached.
            *[_row(second, k, greedy[1] - 4.999, 1, greedy[1] - 5, 100) for k in range(3)],
            # Both at greedy's cost: counted apart.
            *[_row(third, k, greedy[2], 1, greedy[2], 50) for k in range(3)],
        ]
        text = model_plan_table.table(rows)
        lines = {line.split("`")[1]: line for line in text.splitlines() if line.startswith("| `")}
        self.assertIn("| 2 of 3 | **yes** |", lines[first.name])
        self.assertIn("| 0 of 3 | no |", lines[second.name])
        self.assertIn("| 3 of 3 | only matches greedy |", lines[third.name])
        self.assertIn("(median seed) on 1, and on 1 more where both only match greedy", text)
        self.assertIn("rows above greedy's cost: none", text)
        above = model_plan_table.table([_row(first, k, greedy[0] + 1, 1, greedy[0], 50)
                                        for k in range(3)])
        self.assertIn(f"('{first.name}', 0)", above)


if __name__ == "__main__":
    absltest.main()
