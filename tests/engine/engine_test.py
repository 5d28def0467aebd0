"""Tests of the native engine through its Python API: graphs, hash, xfers."""

import json
import os
import subprocess
import sys
import textwrap

from absl.testing import absltest
import numpy as np

from xflowrl import _engine, zoo
from xflowrl.engine import CostModel, GraphBuilder, XferSet, graph_from_data
from xflowrl.rules.rules_io import PatternOp, PatternTensor, Rule

X, W1, W2 = PatternTensor(-1, 0), PatternTensor(-2, 0), PatternTensor(-3, 0)


def _op(type_name, inputs, **params):
    return PatternOp(type_name, tuple(inputs), tuple(sorted(params.items())))


CONV_RELU = Rule(
    "conv_relu",
    src=(_op("conv2d", [X, W1], activation=0), _op("relu", [PatternTensor(0, 0)])),
    dst=(_op("conv2d", [X, W1], activation=2),),
    mapped_outputs=((PatternTensor(1, 0), PatternTensor(0, 0)),))

MERGE_SIBLINGS = Rule(
    "merge_sibling_convs",
    src=(_op("conv2d", [X, W1], activation=0), _op("conv2d", [X, W2], activation=0)),
    dst=(_op("concat", [W1, W2], axis=0),
         _op("conv2d", [X, PatternTensor(0, 0)], activation=0),
         _op("split", [PatternTensor(1, 0)], axis=1)),
    mapped_outputs=((PatternTensor(0, 0), PatternTensor(2, 0)),
                    (PatternTensor(1, 0), PatternTensor(2, 1))))


def two_branch_graph(order="ab"):
    """x -> conv_a -> relu, x -> conv_b; add. `order` sets creation order."""
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, 8, 12, 12))
    w = {k: b.weight(name=f"w_{k}", shape=(8, 8, 3, 3)) for k in "ab"}
    out = {}
    for k in order:
        out[k] = b.conv2d(input=x, weight=w[k])
    r = b.relu(input=out["a"])
    return b.build([b.add(x=r, y=out["b"])])


class GraphTest(absltest.TestCase):

    def test_builder_infers_shapes(self):
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 3, 17, 17))
        w = b.weight(name="w", shape=(6, 3, 3, 3))
        y = b.conv2d(input=x, weight=w, strides=2, padding="SAME")
        self.assertEqual(y.shape, (1, 6, 9, 9))
        v = b.conv2d(input=x, weight=w, strides=2, padding="VALID")
        self.assertEqual(v.shape, (1, 6, 8, 8))
        p = b.maxpool2d(input=y, kernel=3, strides=2, padding="SAME")
        self.assertEqual(p.shape, (1, 6, 5, 5))
        parts = b.split(input=y, axis=1, sizes=[2, 4])
        self.assertEqual([t.shape for t in parts], [(1, 2, 9, 9), (1, 4, 9, 9)])
        r = b.reshape(input=parts[1], shape=(0, -1))
        self.assertEqual(r.shape, (1, 324))
        t = b.transpose(input=y, perm=(0, 2, 3, 1))
        self.assertEqual(t.shape, (1, 9, 9, 6))
        a = b.input(name="a", shape=(4, 5, 6))
        m = b.matmul(a=a, b=b.weight(name="m", shape=(4, 6, 7)))
        self.assertEqual(m.shape, (4, 5, 7))
        g = b.build()
        self.assertEqual(g.num_ops(), 7)

    def test_bad_shapes_raise_value_errors_naming_the_op(self):
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 8, 4, 4))
        cases = {
            "conv2d": lambda: b.conv2d(input=x, weight=b.weight(name="w1", shape=(8, 3, 3, 3))),
            "concat": lambda: b.concat(inputs=[x, b.input(name="y", shape=(1, 8, 5, 4))], axis=1),
            "split": lambda: b.split(input=x, axis=1, sizes=[3, 3]),
            "reshape": lambda: b.reshape(input=x, shape=(3, -1)),
            "matmul": lambda: b.matmul(a=x, b=b.weight(name="w2", shape=(1, 8, 5, 4))),
            "add": lambda: b.add(x=x, y=b.input(name="z", shape=(2, 8, 4, 3))),
            "transpose": lambda: b.transpose(input=x, perm=(0, 0, 1, 2)),
        }
        for op, make in cases.items():
            with self.subTest(op=op):
                with self.assertRaisesRegex(ValueError, f"^{op}: .*input shapes"):
                    make()
        with self.assertRaisesRegex(ValueError, "padding must be one of"):
            b.conv2d(input=x, weight=b.weight(name="w3", shape=(8, 8, 1, 1)), padding="FULL")
        with self.assertRaisesRegex(ValueError, "already used"):
            b.input(name="x", shape=(1,))

    def test_structure_agrees_with_ops(self):
        graph = two_branch_graph()
        ops = graph.ops()
        s = graph.structure()
        self.assertEqual(list(s["guids"]), [op.guid for op in ops])
        self.assertEqual([_engine.op_type_str(int(t)) for t in s["types"]],
                         [op.type for op in ops])
        index = {op.guid: i for i, op in enumerate(ops)}
        edges = [(index[g], i) for i, op in enumerate(ops) for g, _ in op.inputs]
        self.assertEqual(list(zip(s["senders"], s["receivers"])), edges)
        shapes = {op.guid: op.output_shapes for op in ops}
        flat = [shapes[g][k] for op in ops for g, k in op.inputs]
        for row, shape in zip(s["edge_shapes"], flat):
            self.assertEqual(tuple(row[:len(shape)]), shape[:4])
        conv = next(i for i, op in enumerate(ops) if op.type == "conv2d")
        self.assertEqual(s["params"][conv, 2], ops[conv].params["stride_h"])
        self.assertEqual(tuple(s["out_shapes"][conv]), ops[conv].output_shapes[0])

    def test_memory_estimate(self):
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 4, 8, 8))            # 1 KiB
        w = b.weight(name="w", shape=(4, 4, 1, 1))           # 64 B
        y = b.conv2d(input=x, weight=w)                       # 1 KiB
        z = b.relu(input=y)                                   # 1 KiB
        mem = b.build([z]).memory()
        self.assertEqual(mem.weight_bytes, 64)
        self.assertEqual(mem.activation_bytes, 3 * 1024)
        # x dies once the conv ran, so at most two activations are live.
        self.assertEqual(mem.peak_bytes, 2 * 1024 + 64)


class HashTest(absltest.TestCase):

    def test_graph_data_round_trip(self):
        for name in zoo.GRAPHS:
            graph = zoo.get_graph(name)
            back = graph_from_data(json.loads(json.dumps(graph.to_data())))
            self.assertEqual(back.hash(), graph.hash(), name)
            self.assertEqual([(o.type, o.name) for o in back.ops()],
                             [(o.type, o.name) for o in graph.ops()], name)
        with self.assertRaisesRegex(ValueError, "malformed graph data"):
            graph_from_data({"ops": [["relu", {}, [[3, 0]], "", None]], "outputs": [[0, 0]]})

    def test_hash_ignores_creation_order(self):
        self.assertEqual(two_branch_graph("ab").hash(), two_branch_graph("ba").hash())

    def test_hash_sees_structure(self):
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 8, 12, 12))
        w = b.weight(name="w_a", shape=(8, 8, 3, 3))
        other = b.build([b.relu(input=b.conv2d(input=x, weight=w, strides=2))])
        self.assertNotEqual(two_branch_graph().hash(), other.hash())

    def test_hash_is_stable_across_processes(self):
        code = textwrap.dedent("""
            import sys
            sys.path.insert(0, %r)
            from tests.engine.engine_test import two_branch_graph
            print(two_branch_graph().hash())
        """ % (_repo_root(),))
        out = subprocess.run([sys.executable, "-c", code], check=True,
                             capture_output=True, text=True, cwd=_repo_root())
        self.assertEqual(int(out.stdout.strip()), two_branch_graph().hash())


def _repo_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class LocationsTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.xfers = XferSet([CONV_RELU, MERGE_SIBLINGS])
        self.graph = two_branch_graph()

    def test_locations_and_masks(self):
        locs = self.xfers.locations(self.graph, max_locations=4)
        # conv_a feeds relu once; the two sibling convs merge in two orders.
        self.assertEqual(locs.counts, [1, 2])
        np.testing.assert_array_equal(locs.xfer_mask(), [True, True, True])
        mask = locs.location_mask()
        self.assertEqual(mask.shape, (3, 4))
        np.testing.assert_array_equal(mask[1], [True, True, False, False])
        self.assertFalse(mask[2].any())

    def test_locations_are_deterministic(self):
        def hashes(locs):
            return [[locs.apply(x, l).hash() for l in range(n)]
                    for x, n in enumerate(locs.counts)]
        a = hashes(self.xfers.locations(self.graph))
        self.assertEqual(a, hashes(self.xfers.locations(two_branch_graph())))
        # Another creation order gives the same graph, hence the same
        # candidates; only their order may follow the graph's op order.
        b = hashes(self.xfers.locations(two_branch_graph("ba")))
        self.assertEqual([sorted(h) for h in a], [sorted(h) for h in b])

    def test_matched_ops_name_the_source_pattern(self):
        locs = self.xfers.locations(self.graph)
        types = {op.guid: op.type for op in self.graph.ops()}
        for x, rule in enumerate(self.xfers.rules):
            matched = locs.matched_ops(x)
            self.assertLen(matched, locs.counts[x])
            for guids in matched:
                self.assertEqual([types[g] for g in guids], [op.type for op in rule.src])
        # The two merge locations bind the sibling convs in both orders.
        a, b = locs.matched_ops(1)
        self.assertEqual(a, b[::-1])
        with self.assertRaisesRegex(ValueError, "xfer 5 out of range"):
            locs.matched_ops(5)

    def test_candidate_costs(self):
        cost = CostModel("analytic")
        locs = self.xfers.locations(self.graph, max_locations=3)
        costs = locs.costs(cost)
        self.assertEqual(costs.shape, (2, 3))
        np.testing.assert_array_equal(~np.isnan(costs), locs.location_mask()[:2])
        for x, n in enumerate(locs.counts):
            for l in range(n):
                self.assertAlmostEqual(costs[x, l], locs.apply(x, l).cost(cost))

    def test_cheapest_is_the_first_least_of_every_candidate(self):
        # The argmin of `costs` (xfer, then location, first among equals),
        # with no [N, L] array: the same under an L that keeps everything;
        # None where no xfer has a location.
        cost = CostModel("analytic")
        for max_locations in (3, 2**31 - 1):
            locs = self.xfers.locations(self.graph, max_locations=max_locations)
            costs = locs.costs(cost) if max_locations == 3 else None
            x, l, c = locs.cheapest(cost)
            if costs is not None:
                self.assertEqual((x, l), np.unravel_index(np.nanargmin(costs), costs.shape))
            every = [locs.apply(k, j).cost(cost) for k, n in enumerate(locs.counts)
                     for j in range(n)]
            self.assertAlmostEqual(c, min(every))
            self.assertAlmostEqual(locs.apply(x, l).cost(cost), c)
        fused = self.xfers.apply(self.graph, 0, 0)  # conv_a's one relu fused
        nothing = XferSet(self.xfers.rules[:1]).locations(fused)
        self.assertEqual(nothing.counts, [0])
        self.assertIsNone(nothing.cheapest(cost))

    def test_max_locations_truncates(self):
        self.assertEqual(self.xfers.locations(self.graph, max_locations=1).counts, [1, 1])

    def test_apply_returns_new_graph_and_keeps_the_old(self):
        before = [tuple(op) for op in self.graph.ops()]
        fused = self.xfers.apply(self.graph, 0, 0)
        self.assertEqual(fused.op_counts(), {"conv2d": 2, "add": 1})
        self.assertEqual([tuple(op) for op in self.graph.ops()], before)
        merged = self.xfers.apply(self.graph, 1, 0)
        self.assertEqual(merged.op_counts(),
                         {"concat": 1, "conv2d": 1, "split": 1, "relu": 1, "add": 1})
        self.assertEqual(merged.output_shapes(), self.graph.output_shapes())

    def test_invalid_actions_raise(self):
        locs = self.xfers.locations(self.graph)
        with self.assertRaisesRegex(ValueError, "xfer 2 out of range"):
            locs.apply(2, 0)
        with self.assertRaisesRegex(ValueError, "location 1 is not valid for xfer 0"):
            locs.apply(0, 1)
        with self.assertRaisesRegex(ValueError, "location -1"):
            locs.apply(1, -1)

    def test_size_cap_drops_large_results(self):
        # Merging adds ops (5 > 4): a cap of 4 ops drops those candidates.
        self.assertEqual(self.xfers.locations(self.graph, max_ops=4).counts, [1, 0])

    def test_unmapped_external_use_blocks_the_match(self):
        # The conv output is read by relu and by the add: fusing would drop it.
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 4, 6, 6))
        y = b.conv2d(input=x, weight=b.weight(name="w", shape=(4, 4, 3, 3)))
        g = b.build([b.add(x=b.relu(input=y), y=y)])
        self.assertEqual(XferSet([CONV_RELU]).locations(g).counts, [0])

    def test_float_constraints_are_refused(self):
        rule = Rule("eps", src=(PatternOp("relu", (PatternTensor(-1, 0),)),),
                    dst=(PatternOp("batchnorm", (PatternTensor(-1, 0),) * 5,
                                   (("epsilon", 1e-5),)),),
                    mapped_outputs=((PatternTensor(0, 0), PatternTensor(0, 0)),))
        with self.assertRaisesRegex(ValueError, "epsilon=1e-05 is not an integer"):
            XferSet([rule])

    def test_malformed_rules_raise(self):
        bad_input = Rule("bad_input", src=(_op("relu", [PatternTensor(1, 0)]),),
                         dst=(_op("relu", [X]),),
                         mapped_outputs=((PatternTensor(0, 0), PatternTensor(0, 0)),))
        with self.assertRaisesRegex(ValueError, "rule 'bad_input'.*does not come before"):
            XferSet([bad_input])
        unbound = Rule("unbound", src=(_op("relu", [X]),), dst=(_op("relu", [W1]),),
                       mapped_outputs=((PatternTensor(0, 0), PatternTensor(0, 0)),))
        with self.assertRaisesRegex(ValueError, "rule 'unbound'.*does not bind"):
            XferSet([unbound])
        arity = Rule("arity", src=(_op("conv2d", [X]),), dst=(_op("relu", [X]),),
                     mapped_outputs=((PatternTensor(0, 0), PatternTensor(0, 0)),))
        with self.assertRaisesRegex(ValueError, "rule 'arity'.*expected 2"):
            XferSet([arity])


class SearchTest(absltest.TestCase):

    def test_search_finds_the_fusion(self):
        xfers = XferSet([CONV_RELU, MERGE_SIBLINGS])
        graph = two_branch_graph()
        cost = CostModel("analytic")
        result = xfers.search(graph, cost, alpha=1.05, budget=50)
        self.assertLess(result.best_cost, result.initial_cost)
        self.assertAlmostEqual(result.best_cost, result.graph.cost(cost))
        self.assertAlmostEqual(result.initial_cost, graph.cost(cost))
        self.assertIn("conv_relu", result.applied_names)
        self.assertLessEqual(result.expansions, 50)
        costs = [c for _, _, c in result.trace]
        self.assertEqual(costs, sorted(costs, reverse=True))
        # Replaying the applied xfers reaches a graph of the same cost.
        replay = graph
        for name in result.applied_names:
            x = xfers.names.index(name)
            locs = xfers.locations(replay)
            replay = min((locs.apply(x, l) for l in range(locs.counts[x])),
                         key=lambda g: g.cost(cost))
        self.assertAlmostEqual(replay.cost(cost), result.best_cost)

    def test_bad_search_arguments(self):
        xfers = XferSet([CONV_RELU])
        with self.assertRaisesRegex(ValueError, "alpha must be >= 1"):
            xfers.search(two_branch_graph(), CostModel("analytic"), alpha=0.5)
        with self.assertRaisesRegex(ValueError, "max_queued must be >= 0"):
            xfers.search(two_branch_graph(), CostModel("analytic"), max_queued=-1)
        with self.assertRaisesRegex(ValueError, "max_locations must be >= 1"):
            xfers.search(two_branch_graph(), CostModel("analytic"), max_locations=0)


def _outcome(result):
    """What a search decided: everything but timings and memory figures."""
    return (result.best_cost, result.initial_cost, result.applied, result.expansions,
            result.enqueued, result.graph.hash(), [c for _, _, c in result.trace])


class BoundedSearchTest(absltest.TestCase):
    """The lazy queue (parent + rewrite) and the queue cap against TASO's way
    of holding every queued graph whole."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.xfers = XferSet.default()
        cls.cost = CostModel("analytic")

    def test_lazy_queue_decides_exactly_as_the_eager_one(self):
        for name in ("small_cnn", "resnet18", "bert", "squeezenet1_1"):
            with self.subTest(graph=name):
                graph = zoo.get_graph(name)
                eager = self.xfers.search(graph, self.cost, budget=60, lazy_candidates=False)
                lazy = self.xfers.search(graph, self.cost, budget=60)
                self.assertGreater(eager.enqueued, 0)
                self.assertEqual(_outcome(lazy), _outcome(eager))
                self.assertEqual(lazy.peak_queued, eager.peak_queued)
                self.assertEqual((lazy.dropped, eager.dropped), (0, 0))
                self.assertGreater(lazy.peak_parents, 0)
                self.assertLessEqual(lazy.peak_parents, lazy.expansions)
                self.assertEqual(eager.peak_parents, 0)
                self.assertGreaterEqual(lazy.seen, lazy.enqueued + 1)
                self.assertGreater(lazy.peak_rss_mb, 0)

    def test_a_cap_that_is_not_hit_changes_nothing(self):
        graph = zoo.get_graph("bert")
        free = self.xfers.search(graph, self.cost, budget=60)
        capped = self.xfers.search(graph, self.cost, budget=60,
                                   max_queued=free.peak_queued)
        self.assertEqual(capped.dropped, 0)
        self.assertEqual(_outcome(capped), _outcome(free))

    def test_a_cap_that_is_hit_bounds_the_queue_and_says_so(self):
        graph = zoo.get_graph("bert")
        free = self.xfers.search(graph, self.cost, budget=60)
        cap = free.peak_queued // 4
        for lazy in (True, False):
            with self.subTest(lazy=lazy):
                capped = self.xfers.search(graph, self.cost, budget=60, max_queued=cap,
                                           lazy_candidates=lazy)
                self.assertGreater(capped.dropped, 0)
                self.assertLessEqual(capped.peak_queued, cap)
                self.assertLessEqual(capped.best_cost, capped.initial_cost)
                self.assertAlmostEqual(capped.best_cost, capped.graph.cost(self.cost))


if __name__ == "__main__":
    absltest.main()
