"""VGG-19 (torchvision `vgg19` layout; TENSAT's VGG-19 benchmark).

3x224x224 input; 16 3x3 convolutions (SAME padding, which is torchvision's
padding 1 for a 3x3 kernel at stride 1), each followed by a ReLU op of its own
(as torchvision's `nn.ReLU` modules; the conv+ReLU fusion is left to the
xfers, as in squeezenet1_1), 5 2x2/2 max pools, then the classifier
25088 -> 4096 -> ReLU -> 4096 -> ReLU -> 1000.

Convolution and linear biases are omitted, like every torchvision graph of
the zoo (squeezenet1_1, the `common.classifier` head): the engine has no
bias-add for a 4-D activation, and TASO's example builders carry none.
torchvision's AdaptiveAvgPool2d((7, 7)) is the identity on the 7x7 map of a
224x224 image and its Dropouts are identities at inference; neither is
built. 43 ops (16 conv2d, 18 relu, 5 maxpool, 1 reshape, 3 matmul); analytic
cpu cost 704.05 ms (docs/zoo.md, `benchmarks/zoo_bench.py`).
"""

from typing import Sequence, Union

from xflowrl.engine.graph import Graph, GraphBuilder

# torchvision's configuration "E": output channels, "M" = 2x2/2 max pool.
VGG19_LAYERS = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M",
                512, 512, 512, 512, "M", 512, 512, 512, 512, "M")


def vgg19(batch_size: int = 1, image_size: int = 224, classes: int = 1000,
          hidden: int = 4096, layers: Sequence[Union[int, str]] = VGG19_LAYERS,
          channel_divisor: int = 1) -> Graph:
    """Builds VGG-19.

    Args:
      batch_size: images per batch.
      image_size: height and width of the input (224 in torchvision).
      classes: logits of the last linear layer.
      hidden: width of the two hidden linear layers.
      layers: the feature extractor, channels or "M" for a max pool.
      channel_divisor: divides every conv's output channels (tests build a
        narrow VGG of the same structure with it).
    """
    b = GraphBuilder()
    x = b.input(name="data", shape=(batch_size, 3, image_size, image_size))
    index = 0  # torchvision's index in `features`
    for spec in layers:
        if spec == "M":
            x = b.maxpool2d(input=x, kernel=2, strides=2, padding="VALID")
            index += 1
            continue
        out = int(spec) // channel_divisor
        w = b.weight(name=f"features.{index}.weight", shape=(out, x.shape[1], 3, 3))
        x = b.relu(input=b.conv2d(input=x, weight=w, strides=1, padding="SAME"))
        index += 2
    n, c, h, w_ = x.shape
    y = b.reshape(input=x, shape=(n, c * h * w_))
    for i, width in ((0, hidden), (3, hidden), (6, classes)):
        y = b.matmul(a=y, b=b.weight(name=f"classifier.{i}.weight", shape=(y.shape[1], width)))
        if i < 6:
            y = b.relu(input=y)
    return b.build([y])
