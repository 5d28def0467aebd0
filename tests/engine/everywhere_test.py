"""`XferSet.apply_everywhere` against the loop of single-rule steps it
stands for, on every zoo graph and named rule set: the same graphs, op for
op (the engine finds each step's cheapest candidate costing only those that
may be it, `taso::cheapest_location`)."""

from typing import List, Tuple

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.rules.sets import RULE_SETS


def _loop(xfers: XferSet, graph: Graph, xfer: int, times: int, cost: CostModel,
          cap: int) -> Tuple[Graph, List[int], int]:
    """The rule alone enumerated, every candidate priced, the first
    cheapest built, `times` times or until it has no location."""
    rule = XferSet([xfers.rules[xfer]])
    hashes: List[int] = []
    enumerations = 0
    for _ in range(times):
        locs = rule.locations(graph, 200, cap)
        enumerations += 1
        if not locs.counts[0]:
            break
        costs = locs.active_costs(cost)[0, :locs.counts[0]]
        graph = locs.apply(0, int(np.argmin(costs)))
        hashes.append(graph.hash())
    return graph, hashes, enumerations


def _layout(graph: Graph):
    """Everything the engine's next steps read of a graph: its ops in order
    (guids, types, parameters, inputs, shapes, names) and outputs."""
    return repr((graph.ops(), graph.outputs))


class ApplyEverywhereTest(absltest.TestCase):

    def _compare(self, graph: Graph, xfers: XferSet, cost: CostModel,
                 one_step_too: bool = False) -> int:
        """Every xfer with two or more locations, applied as often as it has
        locations (and, with `one_step_too`, once: a budget of steps)."""
        cap = 2 * graph.num_ops()
        locs = xfers.locations(graph, 200, cap)
        compared = 0
        for xfer in locs.active_xfers():
            count = locs.counts[xfer]
            if count < 2:
                continue
            for times in (count, 1) if one_step_too else (count,):
                want, hashes, enumerations = _loop(xfers, graph, int(xfer), times, cost, cap)
                got, got_hashes, got_enumerations = xfers.apply_everywhere(
                    graph, int(xfer), times, cost, 200, cap)
                self.assertEqual(got_hashes, hashes)
                self.assertEqual(got_enumerations, enumerations)
                self.assertEqual(_layout(got), _layout(want))
                compared += 1
        return compared

    def test_every_reduced_zoo_graph_and_rule_set(self):
        analytic = CostModel("analytic", profile="v100")
        compared = 0
        for name in RULE_SETS:
            xfers = XferSet.from_name(name)
            for graph_name in zoo.GRAPHS:
                graph = zoo.get_graph(graph_name, **zoo.REDUCED.get(graph_name, {}))
                compared += self._compare(graph, xfers, analytic)
        self.assertGreater(compared, 50)

    def test_the_long_runs_of_the_slow_settings(self):
        # The settings whose multi-location actions take most of the
        # planner's time: NASNet-A's grouped-convolution merges (78 steps of
        # 78 candidates), NasRNN's and Inception-v3's runs at batch 16.
        analytic = CostModel("analytic", profile="v100")
        compared = 0
        for graph_name, rules, batch in (("nasnet_a", "tensat", 1), ("nasrnn", "taso", 16),
                                         ("inception_v3", "default", 16)):
            graph = (zoo.get_graph(graph_name, batch_size=batch) if batch != 1
                     else zoo.get_graph(graph_name))
            compared += self._compare(graph, XferSet.from_name(rules), analytic,
                                      one_step_too=True)
        self.assertGreater(compared, 20)

    def test_an_xfer_out_of_range_is_refused(self):
        xfers = XferSet.from_name("taso")
        with self.assertRaisesRegex(ValueError, "out of range"):
            xfers.apply_everywhere(zoo.get_graph("small_cnn"), len(xfers), 1,
                                   CostModel("analytic"))

    def test_a_context_dependent_cost_model(self):
        # The fitted model prices an op by its neighbours: no estimate, every
        # candidate costed, the same answer.
        fitted = CostModel("fitted")
        compared = 0
        for graph_name in ("squeezenet1_1", "nasrnn"):
            compared += self._compare(zoo.get_graph(graph_name, **zoo.REDUCED.get(
                graph_name, {})), XferSet.from_name("default"), fitted)
        self.assertGreater(compared, 2)


if __name__ == "__main__":
    absltest.main()
