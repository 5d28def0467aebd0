"""SqueezeNet 1.1 (torchvision layout, convolution biases omitted)."""

from xflowrl.engine.graph import Graph, GraphBuilder


def _conv_relu(b, x, out_channels, k, name, strides=1, padding="SAME"):
    w = b.weight(name=f"{name}.weight", shape=(out_channels, x.shape[1], k, k))
    return b.relu(input=b.conv2d(input=x, weight=w, strides=strides, padding=padding))


def _fire(b, x, squeeze, expand, name):
    s = _conv_relu(b, x, squeeze, 1, f"{name}.squeeze")
    e1 = _conv_relu(b, s, expand, 1, f"{name}.expand1x1")
    e3 = _conv_relu(b, s, expand, 3, f"{name}.expand3x3")
    return b.concat(inputs=[e1, e3], axis=1)


def squeezenet1_1(batch_size: int = 1, classes: int = 1000) -> Graph:
    b = GraphBuilder()
    x = b.input(name="data", shape=(batch_size, 3, 224, 224))
    y = _conv_relu(b, x, 64, 3, "features.0", strides=2, padding="VALID")
    fires = [(16, 64), (16, 64), None, (32, 128), (32, 128), None,
             (48, 192), (48, 192), (64, 256), (64, 256)]
    y = b.maxpool2d(input=y, kernel=3, strides=2, padding="VALID")
    for i, spec in enumerate(fires):
        if spec is None:
            y = b.maxpool2d(input=y, kernel=3, strides=2, padding="VALID")
        else:
            y = _fire(b, y, *spec, name=f"fire{i}")
    y = _conv_relu(b, y, classes, 1, "classifier.1")
    y = b.avgpool2d(input=y, kernel=y.shape[2:], strides=1, padding="VALID")
    return b.build([b.reshape(input=y, shape=(batch_size, classes))])
