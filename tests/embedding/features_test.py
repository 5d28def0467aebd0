"""Tests of the GraphsTuple featurization."""

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.embedding import features
from xflowrl.engine import CostModel


class FeaturesTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.graph = zoo.get_graph("small_cnn")
        cost = CostModel("analytic")
        self.op_costs = self.graph.op_costs(cost)
        self.tuple = features.featurize(self.graph, self.op_costs, self.graph.cost(cost),
                                        2 * self.graph.cost(cost))

    def test_fields(self):
        ops = self.graph.ops()
        t = self.tuple
        self.assertEqual(t.nodes.shape, (len(ops), features.NODE_SIZE))
        self.assertEqual(t.edges.shape, (sum(len(op.inputs) for op in ops), features.EDGE_SIZE))
        self.assertEqual(t.globals.shape, (1, features.GLOBAL_SIZE))
        self.assertAlmostEqual(t.globals[0, 0], 0.5)
        # One-hot op types.
        one_hot = t.nodes[:, :len(features.OP_TYPES)]
        np.testing.assert_array_equal(one_hot.sum(axis=1), 1)
        self.assertEqual([features.OP_TYPES[i] for i in one_hot.argmax(axis=1)],
                         [op.type for op in ops])
        # Op cost column.
        np.testing.assert_allclose(t.nodes[:, len(features.OP_TYPES)],
                                   np.log1p(1000 * np.array(self.op_costs)), rtol=1e-5)
        # Edges go from producer to consumer.
        index = {op.guid: i for i, op in enumerate(ops)}
        edges = sorted((index[g], i) for i, op in enumerate(ops) for g, _ in op.inputs)
        self.assertEqual(sorted(zip(t.senders, t.receivers)), edges)

    def test_batch_offsets_node_indices(self):
        b = features.batch([self.tuple, self.tuple])
        n = int(self.tuple.n_node[0])
        np.testing.assert_array_equal(b.senders[len(self.tuple.senders):],
                                      self.tuple.senders + n)
        np.testing.assert_array_equal(features.node_offsets([self.tuple, self.tuple]), [0, n])
        self.assertEqual(b.globals.shape, (2, features.GLOBAL_SIZE))


if __name__ == "__main__":
    absltest.main()
