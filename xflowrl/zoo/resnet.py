"""ResNet-18 and ResNet-50 (torchvision layout) and TASO's ResNet-50 example.

| graph | ops | conv2d | batchnorm | add | relu | analytic cpu cost (ms) |
| --- | --- | --- | --- | --- | --- | --- |
| resnet18 | 69 | 20 | 20 | 8 | 17 | 65.06 |
| resnet50 | 175 | 53 | 53 | 16 | 49 | 157.01 |
| resnet50_taso | 84 | 52 | 0 | 16 | 16 | 141.75 |
"""

from xflowrl.engine.graph import Graph, GraphBuilder
from xflowrl.zoo.common import classifier, conv_bn


def _basic(b, x, width, stride, name):
    y = conv_bn(b, x, width, 3, f"{name}.conv1", strides=stride)
    y = conv_bn(b, y, width, 3, f"{name}.conv2", relu=False)
    if stride != 1 or x.shape[1] != width:
        x = conv_bn(b, x, width, 1, f"{name}.downsample", strides=stride, relu=False)
    return b.relu(input=b.add(x=y, y=x))


def _bottleneck(b, x, width, stride, name):
    y = conv_bn(b, x, width, 1, f"{name}.conv1")
    y = conv_bn(b, y, width, 3, f"{name}.conv2", strides=stride)
    y = conv_bn(b, y, 4 * width, 1, f"{name}.conv3", relu=False)
    if stride != 1 or x.shape[1] != 4 * width:
        x = conv_bn(b, x, 4 * width, 1, f"{name}.downsample", strides=stride, relu=False)
    return b.relu(input=b.add(x=y, y=x))


def _resnet(block, blocks, batch_size, classes) -> Graph:
    b = GraphBuilder()
    x = b.input(name="data", shape=(batch_size, 3, 224, 224))
    y = conv_bn(b, x, 64, 7, "conv1", strides=2)
    y = b.maxpool2d(input=y, kernel=3, strides=2, padding="SAME")
    for stage, (width, count) in enumerate(zip((64, 128, 256, 512), blocks)):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            y = block(b, y, width, stride, f"layer{stage + 1}.{i}")
    return b.build([classifier(b, y, classes)])


def resnet18(batch_size: int = 1, classes: int = 1000) -> Graph:
    return _resnet(_basic, (2, 2, 2, 2), batch_size, classes)


def resnet50(batch_size: int = 1, classes: int = 1000) -> Graph:
    return _resnet(_bottleneck, (3, 4, 6, 3), batch_size, classes)


def resnet50_taso(batch_size: int = 1) -> Graph:
    """TASO's examples/resnet50.py: from 64x56x56, no stem, no batch-norm."""
    b = GraphBuilder()
    x = b.input(name="data", shape=(batch_size, 64, 56, 56))
    for stage, (width, count, first_stride) in enumerate(
            ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))):
        for i in range(count):
            stride = first_stride if i == 0 else 1
            name = f"layer{stage + 1}.{i}"

            def conv(inp, out, k, s, act, part):
                w = b.weight(name=f"{name}.{part}", shape=(out, inp.shape[1], k, k))
                return b.conv2d(input=inp, weight=w, strides=s, activation=act)

            y = conv(x, width, 1, 1, "RELU", "conv1")
            y = conv(y, width, 3, stride, "RELU", "conv2")
            y = conv(y, 4 * width, 1, 1, "NONE", "conv3")
            if stride > 1 or x.shape[1] != 4 * width:
                x = conv(x, 4 * width, 1, stride, "RELU", "downsample")
            x = b.relu(input=b.add(x=x, y=y))
    return b.build([x])
