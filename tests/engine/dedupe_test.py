"""Tests of `merge_identical_ops`: identical ops merged, what they compute kept."""

from absl.testing import absltest

from xflowrl import zoo
from xflowrl.engine import CostModel, GraphBuilder
from xflowrl.engine.dedupe import identical_ops, merge_identical_ops
from xflowrl.search.eqsat import same_outputs


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


if __name__ == "__main__":
    absltest.main()
