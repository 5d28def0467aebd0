"""A small CNN for quick runs and tests (not one of the thesis' graphs).

`small_cnn()` has the motifs the xfers act on, at a size that trains in about
a minute: conv+BN+ReLU units (fusion and BN folding), two SqueezeNet-style
fire modules (sibling 1x1/3x3 convs: enlarge-and-merge), a residual block and
a classifier. 32x32 input, 3 channels, batch 1.
"""

from xflowrl.engine.graph import Graph, GraphBuilder
from xflowrl.zoo.common import classifier, conv_bn


def _fire(b: GraphBuilder, x, squeeze: int, expand: int, name: str):
    def conv_relu(t, out, k, suffix):
        w = b.weight(name=f"{name}.{suffix}.weight", shape=(out, t.shape[1], k, k))
        return b.relu(input=b.conv2d(input=t, weight=w))
    s = conv_relu(x, squeeze, 1, "squeeze")
    return b.concat(inputs=[conv_relu(s, expand, 1, "expand1x1"),
                            conv_relu(s, expand, 3, "expand3x3")], axis=1)


def small_cnn(batch_size: int = 1, image_size: int = 32, width: int = 32,
              classes: int = 10) -> Graph:
    b = GraphBuilder()
    x = b.input(name="data", shape=(batch_size, 3, image_size, image_size))
    y = conv_bn(b, x, width, 3, "stem")
    y = _fire(b, y, width // 2, width, "fire1")
    y = _fire(b, y, width // 2, width, "fire2")
    r = conv_bn(b, y, 2 * width, 3, "block.conv1")
    r = conv_bn(b, r, 2 * width, 3, "block.conv2", relu=False)
    y = b.relu(input=b.add(x=r, y=y))
    return b.build([classifier(b, y, classes)])
