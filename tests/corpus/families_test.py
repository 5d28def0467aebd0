"""Tests of the size-parametrised zoo families."""

from absl.testing import absltest

from xflowrl import zoo
from xflowrl.corpus import families


class FamiliesTest(absltest.TestCase):

    def test_resnet20_has_cifar_layout(self):
        graph = families.resnet(blocks=(3, 3, 3), width=16, image_size=32)
        counts = graph.op_counts()
        # 19 convs + 2 projections; 7 ops a block, 2 more with a projection.
        self.assertEqual(counts["conv2d"], 21)
        self.assertEqual(counts["add"], 9)
        self.assertEqual(graph.num_ops(), 3 + 9 * 7 + 2 * 2 + 3)
        self.assertEqual(graph.output_shapes(), [(1, 10)])

    def test_squeezenet_at_full_size_has_squeezenet11_ops(self):
        ours = families.squeezenet(fires=8, width=16, image_size=224, classes=1000)
        theirs = zoo.squeezenet1_1()
        self.assertEqual(ours.op_counts(), theirs.op_counts())
        self.assertEqual(ours.output_shapes(), theirs.output_shapes())

    def test_inception_block_op_counts(self):
        base = families.inception(a_blocks=1, c_blocks=1).num_ops()
        self.assertEqual(base, 3 + 23 + 14 + 32 + 3)
        self.assertEqual(families.inception(a_blocks=2, c_blocks=1).num_ops(), base + 23)
        self.assertEqual(families.inception(a_blocks=1, c_blocks=2).num_ops(), base + 32)
        self.assertEqual(families.inception(a_blocks=1, c_blocks=1, top=True).num_ops(),
                         base + 20 + 31)

    def test_inception_width_scales_channels(self):
        def widest(graph):
            return max(op.output_shapes[0][1] for op in graph.ops() if op.type == "concat")
        self.assertEqual(widest(families.inception(width=32)),
                         2 * widest(families.inception(width=16)))


if __name__ == "__main__":
    absltest.main()
