"""Tests of `merge_identical_ops`: identical ops merged, what they compute kept."""

import json
from typing import Dict, List

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, Graph, GraphBuilder, XferSet
from xflowrl.engine.dedupe import identical_ops, merge_identical_ops
from xflowrl.engine.graph import graph_from_data
from xflowrl.search.eqsat import same_outputs


def _merged_by_data(graph: Graph) -> Graph:
    """The merge done on `Graph.to_data` in Python (an op's identity: its
    type, its type's parameters and its inputs by kept position) and
    rebuilt by `graph_from_data`: what the native merge must equal."""
    data = graph.to_data()
    kept: List[list] = []
    position: Dict[int, int] = {}
    first: Dict[str, int] = {}
    for k, (type_name, params, inputs, name, leaf_shape) in enumerate(data["ops"]):
        inputs = [[position[p], i] for p, i in inputs]
        identity = (None if type_name in ("input", "weight")
                    else json.dumps([type_name, params, inputs], sort_keys=True))
        if identity is not None and identity in first:
            position[k] = first[identity]
            continue
        position[k] = len(kept)
        if identity is not None:
            first[identity] = len(kept)
        kept.append([type_name, params, inputs, name, leaf_shape])
    if len(kept) == len(data["ops"]):
        return graph
    return graph_from_data({"ops": kept,
                            "outputs": [[position[p], i] for p, i in data["outputs"]]})


def _assert_same_graph(test: absltest.TestCase, got: Graph, want: Graph) -> None:
    test.assertEqual(got.hash(), want.hash())
    test.assertEqual(got.to_data(), want.to_data())
    test.assertEqual([op.guid for op in got.ops()], [op.guid for op in want.ops()])


def _twice_pooled():
    """Two identical poolings of one input, each read by an identical relu,
    added: merging the poolings makes the relus identical too."""
    b = GraphBuilder()
    x = b.input(shape=(1, 8, 16, 16))
    w = b.weight(shape=(8, 8, 3, 3))
    y = b.conv2d(input=x, weight=w, padding="SAME")
    left = b.relu(input=b.avgpool2d(input=y, kernel=(3, 3), strides=(1, 1)))
    right = b.relu(input=b.avgpool2d(input=y, kernel=(3, 3), strides=(1, 1)))
    other = b.relu(input=b.maxpool2d(input=y, kernel=(3, 3), strides=(1, 1)))
    return b.build([b.add(x=b.add(x=left, y=right), y=other)])


class MergeIdenticalOpsTest(absltest.TestCase):

    def test_merges_repeatedly_and_computes_the_same(self):
        graph = _twice_pooled()
        merged = merge_identical_ops(graph)
        self.assertEqual(graph.num_ops() - merged.num_ops(), 2)  # a pooling and a relu
        self.assertEqual(merged.op_counts()["avgpool"], 1)
        self.assertEqual(merged.op_counts()["relu"], 2)
        self.assertEqual(merged.op_counts()["maxpool"], 1)
        self.assertTrue(same_outputs(graph, merged))
        cost = CostModel("analytic")
        self.assertLess(merged.cost(cost), graph.cost(cost))
        self.assertIs(merge_identical_ops(merged), merged)

    def test_leaves_are_never_merged(self):
        b = GraphBuilder()
        x, y = b.input(shape=(2, 4)), b.input(shape=(2, 4))
        graph = b.build([b.add(x=b.relu(input=x), y=b.relu(input=y))])
        self.assertIs(merge_identical_ops(graph), graph)

    def test_the_zoo(self):
        # NASNet-A repeats 15 average and 3 max poolings of the same tensors;
        # no other zoo graph repeats an op.
        counts = {name: identical_ops(zoo.get_graph(name)) for name in zoo.GRAPHS}
        self.assertEqual({name: n for name, n in counts.items() if n}, {"nasnet_a": 18})
        merged = merge_identical_ops(zoo.get_graph("nasnet_a"))
        original = zoo.get_graph("nasnet_a").op_counts()
        self.assertEqual(original["avgpool"] - merged.op_counts()["avgpool"], 15)
        self.assertEqual(original["maxpool"] - merged.op_counts()["maxpool"], 3)


class NativeMergeTest(absltest.TestCase):
    """The native merge against the merge on the graph's data, graph for
    graph: the same ops in the same order with the same guids."""

    def test_zoo_and_random_walks(self):
        xfers = XferSet.default()
        rng = np.random.default_rng(0)
        merged_somewhere = 0
        for name in ("nasnet_a", "nasrnn", "squeezenet1_1", "small_cnn", "bert"):
            graph = zoo.get_graph(name)
            for _ in range(6):
                want = _merged_by_data(graph)
                got = merge_identical_ops(graph)
                if want is graph:
                    self.assertIs(got, graph)
                else:
                    merged_somewhere += 1
                    _assert_same_graph(self, got, want)
                locs = xfers.locations(graph)
                active = locs.active_xfers()
                if not len(active):
                    break
                xfer = int(rng.choice(active))
                graph = locs.apply(xfer, int(rng.integers(locs.counts[xfer])))
        self.assertGreater(merged_somewhere, 0)

    def test_after_multi_location_actions(self):
        # Every rule of NasRNN with two or more locations applied at all of
        # them: the matmul-concatenation rule leaves identical concatenations
        # whose merging makes matmuls identical too (a merge of a merge).
        xfers = XferSet.default()
        cost = CostModel("analytic", profile="v100")
        graph = zoo.get_graph("nasrnn")
        locs = xfers.locations(graph)
        merged = []
        for xfer in locs.active_xfers():
            if locs.counts[xfer] < 2:
                continue
            after, _, _ = xfers.apply_everywhere(graph, int(xfer), locs.counts[xfer], cost)
            want = _merged_by_data(after)
            got = merge_identical_ops(after)
            if want is after:
                self.assertIs(got, after)
                continue
            _assert_same_graph(self, got, want)
            merged.append(after.num_ops() - got.num_ops())
        self.assertTrue(merged)
        self.assertGreaterEqual(max(merged), 35)  # NasRNN: 40 concatenations -> 5, at least


if __name__ == "__main__":
    absltest.main()
