"""Tests of `xflowrl.generalist.measured`: the graphs the agents handed over,
rebuilt and timed beside the initial and greedy's graphs."""

from absl.testing import absltest

from xflowrl import corpus
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.env.environment import NO_STEP_LIMIT
from xflowrl.generalist import measured
from xflowrl.results.generalist import ZeroShotRow
from xflowrl.search import greedy_search

_GRAPH = "mlp/s0"


def _row(applied):
    """A zero-shot row of `_GRAPH` whose policy handed over `applied`
    (only the graph and the substitutions matter here)."""
    return ZeroShotRow(graph=_GRAPH, ops=0, initial_ms=1.0, policy_ms=1.0, greedy_ms=1.0,
                       taso_ms=None, random_ms=None, policy_seconds=0.0, greedy_seconds=0.0,
                       taso_seconds=None, steps=0, policy_applied=[list(a) for a in applied])


class MeasuredTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.xfers = XferSet.default()
        cls.cost_model = CostModel("analytic")
        graph = corpus.get(_GRAPH)
        env = GraphEnv(graph, cls.xfers, cls.cost_model, EnvConfig(max_steps=NO_STEP_LIMIT))
        cls.greedy = greedy_search(env)
        assert cls.greedy.applied, "the test needs a graph greedy rewrites"
        # Seed 0 handed over greedy's graph, seed 1 the initial graph (no
        # rewrite), seed 2 the graph after greedy's first step; as JSON has them.
        runs = {"policy": [
            measured.HandedOver(s, [_row(p)])
            for s, p in ((0, cls.greedy.applied), (1, []), (2, cls.greedy.applied[:1]))]}
        cls.row = measured.measure_held_out(runs, {_GRAPH: lambda: corpus.get(_GRAPH)},
                                            cls.xfers, cls.cost_model, rounds=2)[0]

    def test_each_variant_is_the_graph_its_agent_handed_over(self):
        v = self.row.variants
        self.assertEqual(set(v), {"initial", "greedy", "policy/0", "policy/1", "policy/2"})
        self.assertEqual(v["policy/0"].graph_key, v["greedy"].graph_key)
        self.assertEqual(v["policy/1"].graph_key, v["initial"].graph_key)
        self.assertNotIn(v["policy/2"].graph_key,
                         (v["initial"].graph_key, v["greedy"].graph_key))
        self.assertAlmostEqual(v["greedy"].estimated_ms, self.greedy.final_cost, places=9)
        self.assertEqual(v["initial"].estimated_change, 0.0)

    def test_measured_changes_are_against_the_measured_initial_graph(self):
        v = self.row.variants
        self.assertEqual(v["initial"].measured_change, 0.0)
        for variant in v.values():
            self.assertGreater(variant.measured_ms, 0.0)
            self.assertLessEqual(variant.measured_min_ms, variant.measured_ms)
            self.assertLessEqual(variant.measured_ms, variant.measured_max_ms)
            self.assertAlmostEqual(
                variant.measured_change,
                100.0 * (variant.measured_ms / v["initial"].measured_ms - 1.0))
        # Equal graphs are timed once: the same figures.
        self.assertEqual(v["policy/0"].measured_ms, v["greedy"].measured_ms)

    def test_the_table_sets_estimated_beside_measured(self):
        text = measured.markdown([self.row])
        line = next(x for x in text.splitlines() if x.startswith(f"| {_GRAPH} |"))
        self.assertEqual(line.count(" / "), 2)  # greedy's and the policy's pairs
        self.assertNotIn("model-based", text)  # no such runs: no column
        self.assertIn("ort/cpu", text)


if __name__ == "__main__":
    absltest.main()
