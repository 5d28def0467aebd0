"""The `escape` and `detour` probes of benchmarks/search_probe.py (their
functions live in benchmarks/landscape.py, which defines no flags) on one
SqueezeNet fire module (its first, at its size in squeezenet1_1) under the
`generated` rules and `analytic/cpu`: the four-step detour that
docs/benchmark.md reports per fire module of the whole network, found
where its peak fits the slack and not where it does not, and a route that
replays to the cost the probe reports."""

import os
import sys

from absl.testing import absltest

from xflowrl.engine import CostModel, XferSet
from xflowrl.engine.graph import GraphBuilder
from xflowrl.zoo.squeezenet import _fire

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import landscape  # noqa: E402  pylint: disable=wrong-import-position

# The route, per module, that the probe finds on the whole network
# (reports/2026-11-29_search_benchmark_cpu_models.md): un-fuse the 3x3
# convolution's ReLU, merge the two expand convolutions (the 1x1 enlarged),
# fuse the ReLU into the merged one, split it again with the ReLU fused
# into both halves.
_ROUTE = ["gen_conv_1466", "gen_conv_1447", "gen_conv_1194", "gen_conv_1542"]


def _fire_module():
    b = GraphBuilder()
    x = b.input(name="data", shape=(1, 64, 55, 55))
    return b.build([_fire(b, x, 16, 64, "fire0")])


class DetourTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.graph = _fire_module()
        cls.land = landscape.Landscape(cls.graph, XferSet.from_name("generated"),
                                       CostModel("analytic", profile="cpu"), 200)

    def test_the_four_step_detour_below_greedy(self):
        out = landscape.probe_detour(self.land, self.graph, depth=4, slack=100.0,
                                        time_limit=120)
        self.assertEqual([step[0] for step in out["route"]], _ROUTE)
        self.assertLess(out["found_ms"], out["greedy_cost_ms"])
        self.assertGreater(out["found_gain_pct"], 0)
        changes = [step[2] for step in out["route"]]
        self.assertGreater(changes[0], 0)  # uphill first
        self.assertGreater(changes[1], 0)
        self.assertAlmostEqual(out["route_peak_pct"], changes[0] + changes[1], places=3)
        self.assertAlmostEqual(sum(changes), -out["found_gain_pct"], places=3)
        # The route, replayed from greedy's graph, ends at the reported cost.
        greedy_graph, greedy_cost, _ = self.land.greedy(self.graph)
        self.assertAlmostEqual(greedy_cost, out["greedy_cost_ms"])
        end = self.land.xfers.replay(greedy_graph, [(name, loc) for name, loc, _ in out["route"]],
                                     max_locations=200, max_ops=self.land.max_ops)
        self.assertAlmostEqual(end.cost(self.land.cost_model), out["found_ms"], places=9)

    def test_a_slack_below_the_peak_finds_nothing(self):
        peak = landscape.probe_detour(self.land, self.graph, depth=4, slack=100.0,
                                         time_limit=120)["route_peak_pct"]
        out = landscape.probe_detour(self.land, self.graph, depth=4, slack=peak - 1,
                                        time_limit=120)
        self.assertIsNone(out["route"])
        self.assertIsNone(out["found_ms"])
        self.assertFalse(out["timed_out"])

    def test_escape_finds_no_end_below_greedy(self):
        # Greedy from any graph one or two steps away takes the merge back:
        # why the detour needs its own probe.
        out = landscape.probe_escape(self.land, self.graph, depth=2, time_limit=120)
        self.assertGreater(out["neighbours_tried"], 0)
        self.assertEqual(out["escapes_below_greedy"], 0)
        self.assertAlmostEqual(out["best_escape_ms"], out["greedy_cost_ms"])


if __name__ == "__main__":
    absltest.main()
