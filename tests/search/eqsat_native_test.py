"""Tests of equality saturation's native matcher (xflowrl.search.eqsat.native,
third_party/taso/include/taso/ematch.h): on real e-graphs, grown by
saturation and then scrambled by random unions, it returns exactly the
matches of the Python reference matcher (`Rewrite.matches`), in the same
order, for every rule of every shipped rule set, under limits, applied
matches left out and incremental root restrictions; saturation with it
ends in the same e-graph; bad arguments are Python exceptions."""

import random
from unittest import mock

from absl.testing import absltest, parameterized

from xflowrl import _engine, zoo
from xflowrl.engine import XferSet
from xflowrl.rules.sets import RULE_SETS
from xflowrl.search.eqsat import EqsatConfig, compile_rules, graph_to_egraph, saturate
from xflowrl.search.eqsat import native as native_module
from xflowrl.search.eqsat.egraph import EGraph
from xflowrl.search.eqsat.native import NativeMatcher
from xflowrl.search.eqsat.saturation import _above, _parents, _readers

_UNLIMITED = 10**9


def _grown(graph_name: str, rules: str, iterations: int, new_nodes: int):
    """A zoo graph's e-graph after `iterations` of saturation adding at most
    about `new_nodes` e-nodes, and the rule set's rewrites."""
    rewrites, _ = compile_rules(XferSet.from_name(rules))
    eg, _ = graph_to_egraph(zoo.get_graph(graph_name))
    saturate(eg, rewrites, EqsatConfig(iteration_limit=iterations,
                                       node_limit=eg.num_nodes() + new_nodes,
                                       time_limit_s=600))
    return eg, rewrites


def _scramble(eg: EGraph, unions: int, seed: int) -> None:
    """Merges random pairs of classes of equal shapes (unsound, but an
    e-graph all the same: cycles, classes of many e-nodes), then rebuilds."""
    rng = random.Random(seed)
    by_shape = {}
    for c in eg.classes():
        shape = eg.shape(c)
        if not isinstance(shape, list):
            by_shape.setdefault(shape, []).append(c)
    groups = [cs for cs in by_shape.values() if len(cs) > 1]
    for _ in range(unions):
        a, b = rng.sample(rng.choice(groups), 2)
        eg.union(a, b)
    eg.rebuild()


def _as_tuples(found):
    return [(m.rewrite.xfer, m.nodes, sorted(m.var_class.items())) for m in found]


class NativeMatcherTest(parameterized.TestCase):

    def _compare(self, eg: EGraph, rewrites, limit: int) -> int:
        """Asserts both matchers agree on every rule; returns the matches."""
        native = NativeMatcher(rewrites)
        native.sync(eg)
        parents = _parents(eg)
        param_memo: dict = {}
        step_memo: dict = {}
        total = 0
        for rw in rewrites:
            want = rw.matches(eg, parents, param_memo, limit, step_memo=step_memo)
            got = native.matches(rw, limit)
            self.assertEqual(_as_tuples(got), _as_tuples(want), rw.name)
            # Variables in the same (binding) order, not only the same map.
            self.assertEqual([list(m.var_class) for m in got],
                             [list(m.var_class) for m in want], rw.name)
            total += len(want)
        return total

    @parameterized.parameters(*sorted(RULE_SETS))
    def test_same_matches_as_python_on_a_grown_e_graph(self, rules):
        eg, rewrites = _grown("squeezenet1_1", rules, 2, new_nodes=500)
        total = self._compare(eg, rewrites, _UNLIMITED)
        self.assertGreater(total, 0)
        # A limit stops both at the same matches.
        self._compare(eg, rewrites, 2)

    @parameterized.parameters(("nasrnn", "taso", 1), ("bert", "tensat", 2),
                              ("inception_v3", "tensat_full", 3), ("resnet18", "primitive", 4))
    def test_same_matches_on_scrambled_e_graphs(self, graph, rules, seed):
        # Random unions give classes of many e-nodes, cycles and split
        # outputs read in many ways: what the planned steps rarely meet on
        # a sound e-graph.
        eg, rewrites = _grown(graph, rules, 1, new_nodes=300)
        _scramble(eg, 40, seed)
        self.assertGreaterEqual(max(len(eg.live_nodes(c)) for c in eg.classes()), 3)
        self.assertGreater(self._compare(eg, rewrites, _UNLIMITED), 0)

    def test_rewrites_registered_before_are_replayed_with_the_same_patterns(self):
        eg, rewrites = _grown("squeezenet1_1", "default", 1, new_nodes=300)
        native_module._REGISTERED.clear()
        fresh = NativeMatcher(rewrites)
        with mock.patch.object(NativeMatcher, "_register",
                               side_effect=AssertionError("registered again")):
            again = NativeMatcher(list(rewrites))   # another list of the same rewrites
        fresh.sync(eg)
        again.sync(eg)
        total = 0
        for rw in rewrites:
            want = fresh.matches(rw, _UNLIMITED)
            self.assertEqual(_as_tuples(again.matches(rw, _UNLIMITED)), _as_tuples(want))
            total += len(want)
        self.assertGreater(total, 0)
        # Other lists are registered afresh, and only the last few are kept.
        for k in range(1, native_module._REMEMBERED + 2):
            NativeMatcher(rewrites[:k])
        self.assertLen(native_module._REGISTERED, native_module._REMEMBERED)
        self.assertNotIn(tuple(map(id, rewrites)), native_module._REGISTERED)

    def test_applied_matches_are_left_out_and_not_counted(self):
        eg, rewrites = _grown("squeezenet1_1", "taso", 1, new_nodes=500)
        rewrites = [rw for rw in rewrites if not rw.multi_pattern]
        native = NativeMatcher(rewrites)
        native.sync(eg)
        parents = _parents(eg)
        memo: dict = {}
        rw = max(rewrites, key=lambda r: len(r.matches(eg, parents, memo, _UNLIMITED)))
        every = rw.matches(eg, parents, memo, _UNLIMITED)
        self.assertGreater(len(every), 4)
        skipped = {every[0].nodes, every[2].nodes}
        for m in every:
            if m.nodes in skipped:
                native.add_applied(rw, m.nodes)
        want = rw.matches(eg, parents, {}, 3, skip=lambda x, nodes: nodes in skipped)
        got = native.matches(rw, 3)
        self.assertEqual(_as_tuples(got), _as_tuples(want))
        self.assertEqual([m.nodes for m in got],
                         [m.nodes for m in every if m.nodes not in skipped][:3])

    def test_root_restriction_as_incremental_matching_makes_it(self):
        eg, rewrites = _grown("resnet18", "default", 1, new_nodes=300)
        native = NativeMatcher(rewrites)
        native.sync(eg)
        parents = _parents(eg)
        readers = _readers(eg, parents)
        rng = random.Random(0)
        changed = set(rng.sample(sorted(eg.classes()), 40))
        compared = 0
        memo: dict = {}
        for rw in rewrites:
            if rw.multi_pattern:
                continue
            key = ("changed", rw.height)
            within = native.within_id(key)
            if within is None:
                within = native.set_within(key, changed, rw.height)
            near = _above(changed, readers, rw.height)
            want = rw.matches(eg, parents, memo, _UNLIMITED, (key, near))
            got = native.matches(rw, _UNLIMITED, within)
            self.assertEqual(_as_tuples(got), _as_tuples(want), rw.name)
            compared += len(want)
        self.assertGreater(compared, 0)

    @parameterized.parameters(("resnet18", "default"), ("squeezenet1_1", "tensat"),
                              ("nasnet_a", "taso"))
    def test_saturation_ends_in_the_same_e_graph(self, graph, rules):
        rewrites, _ = compile_rules(XferSet.from_name(rules))
        ends = {}
        for matcher in ("python", "native"):
            eg, _ = graph_to_egraph(zoo.get_graph(graph))
            stop, trace = saturate(eg, rewrites, EqsatConfig(matcher=matcher, node_limit=3_000,
                                                             time_limit_s=600))
            ends[matcher] = (stop, [(t.matches, t.e_nodes, t.e_classes) for t in trace],
                             list(eg.nodes), list(eg.alive), list(eg.node_class),
                             [eg.find(c) for c in range(len(eg.class_shape))],
                             {c: list(ns) for c, ns in eg.class_nodes.items()})
        self.assertGreater(len(ends["native"][1]), 1)
        self.assertEqual(ends["native"], ends["python"])

    def test_bad_arguments_raise(self):
        m = _engine.EMatcherHandle()
        with self.assertRaisesRegex(ValueError, "pattern id"):
            m.match(0, 5)
        with self.assertRaisesRegex(ValueError, "lengths"):
            m.set_graph(1, 0, [1, 2], [0], b"\x01", [-1], [0, 0], [], [0], [0, 0], [])
        with self.assertRaisesRegex(ValueError, "out of range"):
            m.set_graph(1, 0, [1], [3], b"\x01", [-1], [0, 0], [], [0], [0, 1], [0])
        with self.assertRaisesRegex(ValueError, "variable"):
            m.add_pattern([(1, 0, False, [(-3, 0)])], [(0, 0, -1, -1, 0, 0)], 1, [0])
        with self.assertRaisesRegex(ValueError, "step kind"):
            m.add_pattern([(1, 0, False, [(-1, 0)])], [(7, 0, -1, -1, 0, 0)], 1, [0])
        with self.assertRaisesRegex(ValueError, "twice"):
            m.add_pattern([(1, 0, False, [(-1, 0)]), (1, 0, False, [(0, 0)])],
                          [(0, 0, -1, -1, 0, 0)] * 2, 1, [0])
        self.assertEqual(m.num_patterns(), 0)
        p = m.add_pattern([(1, 0, False, [(-1, 0)])], [(0, 0, -1, -1, 0, 0)], 1, [0])
        with self.assertRaisesRegex(ValueError, "within"):
            m.match(p, 5, 3)
        with self.assertRaises(OverflowError):
            m.match(p, -1)


if __name__ == "__main__":
    absltest.main()
