"""Tests of experiments/lookahead_settings.py: greedy with identical ops
merged after every step, and the table that shows where the gap is merging
alone."""

import os
import sys

from absl.testing import absltest

from xflowrl.engine import XferSet
from xflowrl.entry_points import cost_model_from_spec, zoo_source
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.search import greedy_walk
from xflowrl.search.settings import LookaheadSetting

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "experiments"))

import lookahead_settings  # noqa: E402  pylint: disable=wrong-import-position


def _setting(graph: str, rules: str, best_ms: float) -> LookaheadSetting:
    """A setting whose greedy cost is the real greedy walk's."""
    env = GraphEnv(zoo_source(graph, 1).graph, XferSet.from_name(rules),
                   cost_model_from_spec("analytic/v100", None),
                   EnvConfig(max_steps=NO_STEP_LIMIT))
    greedy = greedy_walk(env).cost
    return LookaheadSetting(
        graph=graph, rules=rules, cost_model="analytic/v100", batch=1,
        initial_ms=env.initial_cost, costs_ms={"greedy": greedy, "eqsat": best_ms},
        best_methods=("eqsat",), gap_pct=100 * (greedy - best_ms) / env.initial_cost)


class GreedyMergingTest(absltest.TestCase):

    def test_merging_reaches_below_greedy_on_nasnet_a(self):
        # NASNet-A's zoo graph has duplicated poolings that no rule of `taso`
        # merges; merged, greedy goes more than 2 points further.
        setting = _setting("nasnet_a", "taso", best_ms=0.0)
        merged = lookahead_settings.greedy_merging_cost(setting)
        self.assertLess(100 * (merged - setting.costs_ms["greedy"]) / setting.initial_ms, -2.0)
        marked = LookaheadSetting(**{**setting.__dict__, "greedy_merging_ms": merged,
                                     "costs_ms": {**setting.costs_ms, "eqsat": merged}})
        self.assertTrue(marked.gap_is_merging)
        self.assertIn(f"**{marked.greedy_merging_pct:+.2f}%**",
                      lookahead_settings.markdown([marked]))
        self.assertFalse(LookaheadSetting(**{**marked.__dict__,
                                             "costs_ms": {**marked.costs_ms,
                                                          "eqsat": 0.9 * merged}}).gap_is_merging)

    def test_without_identical_ops_it_is_greedy(self):
        setting = _setting("squeezenet1_1", "tensat", best_ms=0.0)
        self.assertAlmostEqual(lookahead_settings.greedy_merging_cost(setting),
                               setting.costs_ms["greedy"], places=9)
        self.assertIn("| — |", lookahead_settings.markdown([setting]))


class JoinRowsTest(absltest.TestCase):

    def test_a_setting_repeated_in_a_later_file_keeps_the_first_row(self):
        def row(graph, rules, batch, gap):
            return {"graph": graph, "rules": rules, "cost_model": "analytic/v100",
                    "batch": batch, "gap_pct": gap}
        first = [row("nasrnn", "tensat", 16, 4.0), row("nasrnn", "tensat", 1, 0.5)]
        later = [row("nasrnn", "tensat", 16, 9.0), row("nasrnn", "tensat_full", 16, 4.2),
                 row("nasrnn", "tensat", 1, 3.0)]
        joined = lookahead_settings.join_rows([first, later], ["a.json", "b.json"])
        self.assertEqual([(r["rules"], r["batch"], r["gap_pct"]) for r in joined],
                         [("tensat", 16, 4.0), ("tensat", 1, 0.5), ("tensat_full", 16, 4.2)])
        # A row without a batch is batch 1: the same setting as one with it.
        unbatched = {k: v for k, v in row("vgg19", "taso", 1, 5.0).items() if k != "batch"}
        joined = lookahead_settings.join_rows([[row("vgg19", "taso", 1, 2.0)], [unbatched]],
                                              ["a.json", "b.json"])
        self.assertEqual([r["gap_pct"] for r in joined], [2.0])

    def test_a_list_that_extends_another_keeps_its_order(self):
        def setting(graph, gap):
            return LookaheadSetting(graph=graph, rules="taso", cost_model="analytic/v100",
                                    batch=1, initial_ms=1.0, costs_ms={"greedy": 1.0},
                                    best_methods=("taso",), gap_pct=gap)
        earlier = [setting("vgg19", 2.0), setting("bert", 5.0)]
        by_gap = [setting("nasrnn", 9.0), setting("bert", 5.0), setting("resnet18", 3.0),
                  setting("vgg19", 2.0)]
        self.assertEqual([s.graph for s in lookahead_settings.in_order_of(by_gap, earlier)],
                         ["vgg19", "bert", "nasrnn", "resnet18"])


if __name__ == "__main__":
    absltest.main()
