"""Helpers shared by the zoo builders: conv units with named weights."""

from xflowrl.graphs.graph import GraphBuilder, Tensor


def conv_bn(b: GraphBuilder, x: Tensor, out_channels: int, kernel, name: str,
            strides=1, padding: str = "SAME", relu: bool = True, groups: int = 1) -> Tensor:
    """conv (no bias) -> batch-norm -> optional ReLU, as torchvision builds them."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    w = b.weight(name=f"{name}.weight", shape=(out_channels, x.shape[1] // groups, kh, kw))
    y = b.conv2d(input=x, weight=w, strides=strides, padding=padding)
    y = b.batchnorm(input=y, **{k: b.weight(name=f"{name}.bn.{k}", shape=(out_channels,))
                                for k in ("scale", "bias", "mean", "var")})
    return b.relu(input=y) if relu else y


def classifier(b: GraphBuilder, x: Tensor, classes: int, name: str = "fc") -> Tensor:
    """Global average pool -> flatten -> matmul to `classes` logits."""
    pooled = b.avgpool2d(input=x, kernel=x.shape[2:], strides=1, padding="VALID")
    flat = b.reshape(input=pooled, shape=(x.shape[0], x.shape[1]))
    return b.matmul(a=flat, b=b.weight(name=f"{name}.weight", shape=(x.shape[1], classes)))
