"""Tests of the settings list (xflowrl.search.settings): built from benchmark
rows by the gap, saved and read back, refused when foreign, and the list
shipped with the package is consistent."""

import dataclasses
import json
import os
import tempfile

from absl.testing import absltest

from xflowrl import zoo
from xflowrl.rules.sets import RULE_SETS
from xflowrl.search import settings as lookahead


def _row(graph, rules, greedy, taso, eqsat, random, batch=1):
    initial = 2.0
    costs = {"greedy": greedy, "taso": taso, "eqsat": eqsat, "random": random}
    best = min(costs.values())
    row = {"graph": graph, "rules": rules, "cost_model": "analytic/v100",
           "initial_cost_ms": initial,
           "winners": [m for m, c in costs.items() if c == best],
           "gap_pct": 100 * (greedy - best) / initial}
    row.update({f"{m}_change_pct": 100 * (c / initial - 1) for m, c in costs.items()})
    if batch != 1:
        row["batch"] = batch
    return row


class SettingsTest(absltest.TestCase):

    def test_rows_past_the_threshold_become_settings_largest_gap_first(self):
        rows = [_row("a", "taso", 1.8, 1.8, 1.8, 1.9),             # no gap
                _row("b", "generated", 1.8, 1.5, 1.5, 1.8),        # 15 points
                _row("c", "tensat", 1.8, 1.79, 1.78, 1.8),         # 1 point: kept
                _row("d", "tensat", 1.8, 1.8, 1.6, 1.8, batch=16)]  # 10 points
        got = lookahead.settings_from_rows(rows)
        self.assertEqual([s.name for s in got], ["b/generated/analytic-v100",
                                                 "d/tensat/analytic-v100@b16",
                                                 "c/tensat/analytic-v100"])
        self.assertAlmostEqual(got[0].gap_pct, 15.0)
        self.assertEqual(got[0].best_methods, ("taso", "eqsat"))
        self.assertAlmostEqual(got[0].costs_ms["taso"], 1.5)
        self.assertAlmostEqual(got[0].change_pct("greedy"), -10.0)
        self.assertAlmostEqual(got[1].best_ms, 1.6)
        self.assertEqual(lookahead.settings_from_rows(rows, threshold=12.0)[0].graph, "b")

    def test_save_and_load(self):
        settings = lookahead.settings_from_rows([_row("b", "generated", 1.8, 1.5, 1.5, 1.8)])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "list.json")
            lookahead.save_settings(settings, path, {"commit": "abc", "command": "x"})
            self.assertEqual(lookahead.load_settings(path), settings)
            self.assertEqual(lookahead.settings_source(path)["commit"], "abc")
            with open(path) as f:
                data = json.load(f)
            data["version"] = lookahead.SETTINGS_VERSION + 1
            with open(path, "w") as f:
                json.dump(data, f)
            with self.assertRaisesRegex(ValueError, "version"):
                lookahead.load_settings(path)
            with open(path, "w") as f:
                json.dump({"settings": []}, f)
            with self.assertRaisesRegex(ValueError, "not a lookahead settings list"):
                lookahead.load_settings(path)

    def test_greedy_with_merging_is_kept_and_compared_with_the_best(self):
        setting = lookahead.settings_from_rows([_row("b", "generated", 1.8, 1.7, 1.5, 1.8)])[0]
        self.assertIsNone(setting.greedy_merging_pct)
        self.assertIsNone(setting.gap_is_merging)
        merged = dataclasses.replace(setting, greedy_merging_ms=1.5)
        self.assertAlmostEqual(merged.greedy_merging_pct, -25.0)
        self.assertTrue(merged.gap_is_merging)
        self.assertFalse(dataclasses.replace(setting, greedy_merging_ms=1.6).gap_is_merging)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "list.json")
            lookahead.save_settings([merged], path, {"commit": "abc", "command": "x"})
            self.assertEqual(lookahead.load_settings(path), [merged])

    def test_the_shipped_list(self):
        shipped = lookahead.load_settings()
        self.assertNotEmpty(shipped)
        source = lookahead.settings_source()
        self.assertTrue(source["commit"] and source["command"] and source["date"])
        for s in shipped:
            self.assertIn(s.graph, zoo.GRAPHS)
            self.assertIn(s.rules, RULE_SETS)
            self.assertGreaterEqual(s.gap_pct, lookahead.GAP_THRESHOLD)
            self.assertAlmostEqual(s.gap_pct,
                                   100 * (s.costs_ms["greedy"] - s.best_ms) / s.initial_ms,
                                   places=6)
            self.assertEqual(lookahead.get_setting(s.name), s)
            self.assertIsNotNone(s.greedy_merging_ms)
        with self.assertRaisesRegex(ValueError, "no lookahead setting 'nope'"):
            lookahead.get_setting("nope")


if __name__ == "__main__":
    absltest.main()
