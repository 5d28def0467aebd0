"""Tests of the graph_nets encoder."""

from absl.testing import absltest
import numpy as np
import tensorflow as tf

from xflowrl import zoo
from xflowrl.embedding import features
from xflowrl.embedding.encoder import GraphEncoder
from xflowrl.engine import CostModel
from xflowrl.nn import SeededInitializers


def _batch():
    cost = CostModel("analytic")
    tuples = [features.featurize(g, g.op_costs(cost), g.cost(cost), g.cost(cost))
              for g in (zoo.get_graph("small_cnn"), zoo.get_graph("small_cnn", width=16))]
    return features.to_tensors(features.batch(tuples)), tuples


class EncoderTest(absltest.TestCase):

    def test_shapes(self):
        graph, tuples = _batch()
        out = GraphEncoder(latent_size=8, message_passing_steps=2)(graph)
        self.assertEqual(out.nodes.shape, (sum(int(t.n_node[0]) for t in tuples), 8))
        self.assertEqual(out.globals.shape, (2, 8))

    def test_message_passing_steps_really_run(self):
        # Information travels one hop per step: with more steps, a node's
        # embedding depends on farther nodes. Perturb the input node only and
        # count how many node embeddings change.
        graph, _ = _batch()
        changed = []
        for steps in (1, 3):
            enc = GraphEncoder(latent_size=8, message_passing_steps=steps,
                               w_init_fn=SeededInitializers(0).fan_in)
            base = enc(graph).nodes.numpy()
            nodes = graph.nodes.numpy().copy()
            nodes[0, -4:] += 1.0  # node 0 is the input "data"
            moved = enc(graph.replace(nodes=tf.constant(nodes))).nodes.numpy()
            changed.append(int((np.abs(moved - base).max(axis=1) > 1e-6).sum()))
        self.assertGreater(changed[1], changed[0])

    def test_rejects_zero_steps(self):
        with self.assertRaisesRegex(ValueError, "message_passing_steps must be >= 1"):
            GraphEncoder(message_passing_steps=0)


if __name__ == "__main__":
    absltest.main()
