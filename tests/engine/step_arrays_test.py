"""Tests of the step's one native call (`Locations.step_arrays`) and of the
dedup's deep keys (equal dedup keys told apart before hashing)."""

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.rules.sets import RULE_SETS

_COST = CostModel("analytic", profile="v100")


def _node_of(graph) -> np.ndarray:
    guids = graph.structure()["guids"]
    node_of = np.full(int(guids.max()) + 1, -1, np.int32)
    node_of[guids] = np.arange(len(guids), dtype=np.int32)
    return node_of


class StepArraysTest(absltest.TestCase):

    def test_equals_the_separate_calls(self):
        xfers = XferSet.default()
        width = max(len(r.src) for r in xfers.rules)
        for name in ("inception_v3", "nasrnn", "squeezenet1_1"):
            graph = zoo.get_graph(name)
            for _ in range(3):  # the graph and two rewrites of it
                locs = xfers.locations(graph, 200, 2 * graph.num_ops())
                node_of = _node_of(graph)
                arrays = locs.step_arrays(node_of, width, _COST)
                active = locs.active_xfers()
                self.assertGreater(len(active), 0)
                np.testing.assert_array_equal(arrays.active, active)
                self.assertEqual(arrays.active.dtype, np.int64)
                np.testing.assert_array_equal(arrays.counts, locs.count_array[active])
                np.testing.assert_array_equal(arrays.nodes,
                                              locs.matched_nodes(node_of, width, active))
                self.assertEqual(arrays.nodes.dtype, np.int32)
                assert arrays.costs is not None
                # Bit for bit, NaNs in the same places.
                self.assertEqual(arrays.costs.tobytes(), locs.active_costs(_COST).tobytes())
                bare = locs.step_arrays(None)
                self.assertIsNone(bare.nodes)
                self.assertIsNone(bare.costs)
                np.testing.assert_array_equal(bare.active, active)
                graph = locs.apply(int(active[-1]), int(locs.counts[int(active[-1])]) - 1)

    def test_too_narrow_or_too_short_raises(self):
        graph = zoo.get_graph("squeezenet1_1")
        locs = XferSet.default().locations(graph, 200)
        with self.assertRaises(ValueError):
            locs.step_arrays(_node_of(graph), 0)
        with self.assertRaises(IndexError):
            locs.step_arrays(np.zeros(1, np.int32), 8)
        # An L below some xfer's count cannot hold its rows.
        most = int(locs.count_array.max())
        locs.max_locations = most - 1 if most > 1 else 0
        with self.assertRaises(ValueError):
            locs.step_arrays(None)


class DeepKeyDedupTest(absltest.TestCase):
    """Inception-v3's repeated blocks give ~100 pairs of candidates with
    equal dedup keys per enumeration, none the same graph: their deep keys
    tell them apart without hashing. A deep key computed wrong would keep
    a duplicate (equal graphs with different deep keys) or fail the check
    that every applied candidate makes of its incremental deep key against
    its built graph."""

    def test_candidates_are_distinct_and_apply_checks_their_keys(self):
        xfers = XferSet.default()
        for name in ("inception_v3", "nasrnn"):
            graph = zoo.get_graph(name)
            locs = xfers.locations(graph, 200, 2 * graph.num_ops())
            # Build every candidate before any hash is asked for: an
            # unhashed candidate checks its dedup and deep keys when built.
            built = {(int(x), k): locs.apply(int(x), k)
                     for x in locs.active_xfers() for k in range(locs.counts[int(x)])}
            hashes = locs.hashes()
            flat = [h for row in hashes for h in row]
            self.assertEqual(len(flat), len(built))
            self.assertEqual(len(set(flat)), len(flat), f"{name}: a duplicate was kept")
            self.assertNotIn(graph.hash(), set(flat))
            for (x, k), g in built.items():
                self.assertEqual(g.hash(), hashes[x][k])

    def test_random_walks_keep_no_duplicate(self):
        """Every zoo graph (reduced where `zoo.REDUCED` has a variant) and
        every named rule set, along a random walk of three rewrites: no two
        kept candidates, nor a candidate and the current graph, hash alike,
        and every candidate of a rule with two or more builds (the build
        checks its keys), to the hash the enumeration gives it."""
        rng = np.random.default_rng(0)
        rule_sets = {name: XferSet.from_name(name) for name in RULE_SETS}
        for graph_name in zoo.GRAPHS:
            for set_name, xfers in rule_sets.items():
                graph = zoo.get_graph(graph_name, **zoo.REDUCED.get(graph_name, {}))
                cap = 2 * graph.num_ops()
                for _ in range(4):
                    locs = xfers.locations(graph, 200, cap)
                    active = locs.active_xfers()
                    if len(active) == 0:
                        break
                    several = [int(x) for x in active if locs.counts[int(x)] >= 2]
                    built = {(x, k): locs.apply(x, k).hash()
                             for x in several for k in range(locs.counts[x])}
                    hashes = locs.hashes()
                    flat = [h for row in hashes for h in row]
                    where = f"{graph_name}/{set_name}"
                    self.assertEqual(len(set(flat)), len(flat), f"{where}: a duplicate was kept")
                    self.assertNotIn(graph.hash(), set(flat), where)
                    for (x, k), h in built.items():
                        self.assertEqual(h, hashes[x][k], where)
                    x = int(rng.choice(active))
                    graph = locs.apply(x, int(rng.integers(locs.counts[x])))

    def test_incremental_off_gives_the_same_locations(self):
        xfers = XferSet.default()
        graph = zoo.get_graph("inception_v3")
        lazy = xfers.locations(graph, 200, 2 * graph.num_ops())
        eager = xfers.locations(graph, 200, 2 * graph.num_ops(), incremental=False)
        self.assertEqual(lazy.counts, eager.counts)
        self.assertEqual(lazy.hashes(), eager.hashes())


if __name__ == "__main__":
    absltest.main()
