"""InceptionV3 (torchvision layout) at 299x299.

Average pools exclude padding (the engine's convention, docs/engine.md);
torchvision's count it. Everything else, shapes included, matches.
"""

from xflowrl.engine.graph import Graph, GraphBuilder
from xflowrl.zoo.common import classifier, conv_bn


def _avg_branch(b, x, out_channels, name):
    p = b.avgpool2d(input=x, kernel=3, strides=1, padding="SAME")
    return conv_bn(b, p, out_channels, 1, name)


def _block_a(b, x, pool_features, name):
    b1 = conv_bn(b, x, 64, 1, f"{name}.branch1x1")
    b5 = conv_bn(b, x, 48, 1, f"{name}.branch5x5_1")
    b5 = conv_bn(b, b5, 64, 5, f"{name}.branch5x5_2")
    b3 = conv_bn(b, x, 64, 1, f"{name}.branch3x3dbl_1")
    b3 = conv_bn(b, b3, 96, 3, f"{name}.branch3x3dbl_2")
    b3 = conv_bn(b, b3, 96, 3, f"{name}.branch3x3dbl_3")
    bp = _avg_branch(b, x, pool_features, f"{name}.branch_pool")
    return b.concat(inputs=[b1, b5, b3, bp], axis=1)


def _block_b(b, x, name):
    b3 = conv_bn(b, x, 384, 3, f"{name}.branch3x3", strides=2, padding="VALID")
    bd = conv_bn(b, x, 64, 1, f"{name}.branch3x3dbl_1")
    bd = conv_bn(b, bd, 96, 3, f"{name}.branch3x3dbl_2")
    bd = conv_bn(b, bd, 96, 3, f"{name}.branch3x3dbl_3", strides=2, padding="VALID")
    bp = b.maxpool2d(input=x, kernel=3, strides=2, padding="VALID")
    return b.concat(inputs=[b3, bd, bp], axis=1)


def _block_c(b, x, c7, name):
    b1 = conv_bn(b, x, 192, 1, f"{name}.branch1x1")
    b7 = conv_bn(b, x, c7, 1, f"{name}.branch7x7_1")
    b7 = conv_bn(b, b7, c7, (1, 7), f"{name}.branch7x7_2")
    b7 = conv_bn(b, b7, 192, (7, 1), f"{name}.branch7x7_3")
    bd = conv_bn(b, x, c7, 1, f"{name}.branch7x7dbl_1")
    for i, (k, out) in enumerate((((7, 1), c7), ((1, 7), c7), ((7, 1), c7), ((1, 7), 192))):
        bd = conv_bn(b, bd, out, k, f"{name}.branch7x7dbl_{i + 2}")
    bp = _avg_branch(b, x, 192, f"{name}.branch_pool")
    return b.concat(inputs=[b1, b7, bd, bp], axis=1)


def _block_d(b, x, name):
    b3 = conv_bn(b, x, 192, 1, f"{name}.branch3x3_1")
    b3 = conv_bn(b, b3, 320, 3, f"{name}.branch3x3_2", strides=2, padding="VALID")
    b7 = conv_bn(b, x, 192, 1, f"{name}.branch7x7x3_1")
    b7 = conv_bn(b, b7, 192, (1, 7), f"{name}.branch7x7x3_2")
    b7 = conv_bn(b, b7, 192, (7, 1), f"{name}.branch7x7x3_3")
    b7 = conv_bn(b, b7, 192, 3, f"{name}.branch7x7x3_4", strides=2, padding="VALID")
    bp = b.maxpool2d(input=x, kernel=3, strides=2, padding="VALID")
    return b.concat(inputs=[b3, b7, bp], axis=1)


def _block_e(b, x, name):
    b1 = conv_bn(b, x, 320, 1, f"{name}.branch1x1")
    b3 = conv_bn(b, x, 384, 1, f"{name}.branch3x3_1")
    b3 = b.concat(inputs=[conv_bn(b, b3, 384, (1, 3), f"{name}.branch3x3_2a"),
                          conv_bn(b, b3, 384, (3, 1), f"{name}.branch3x3_2b")], axis=1)
    bd = conv_bn(b, x, 448, 1, f"{name}.branch3x3dbl_1")
    bd = conv_bn(b, bd, 384, 3, f"{name}.branch3x3dbl_2")
    bd = b.concat(inputs=[conv_bn(b, bd, 384, (1, 3), f"{name}.branch3x3dbl_3a"),
                          conv_bn(b, bd, 384, (3, 1), f"{name}.branch3x3dbl_3b")], axis=1)
    bp = _avg_branch(b, x, 192, f"{name}.branch_pool")
    return b.concat(inputs=[b1, b3, bd, bp], axis=1)


def inception_v3(batch_size: int = 1, classes: int = 1000) -> Graph:
    b = GraphBuilder()
    x = b.input(name="data", shape=(batch_size, 3, 299, 299))
    y = conv_bn(b, x, 32, 3, "Conv2d_1a_3x3", strides=2, padding="VALID")
    y = conv_bn(b, y, 32, 3, "Conv2d_2a_3x3", padding="VALID")
    y = conv_bn(b, y, 64, 3, "Conv2d_2b_3x3")
    y = b.maxpool2d(input=y, kernel=3, strides=2, padding="VALID")
    y = conv_bn(b, y, 80, 1, "Conv2d_3b_1x1")
    y = conv_bn(b, y, 192, 3, "Conv2d_4a_3x3", padding="VALID")
    y = b.maxpool2d(input=y, kernel=3, strides=2, padding="VALID")
    for name, pool_features in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
        y = _block_a(b, y, pool_features, name)
    y = _block_b(b, y, "Mixed_6a")
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        y = _block_c(b, y, c7, name)
    y = _block_d(b, y, "Mixed_7a")
    y = _block_e(b, y, "Mixed_7b")
    y = _block_e(b, y, "Mixed_7c")
    return b.build([classifier(b, y, classes)])
