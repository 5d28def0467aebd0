"""Helpers shared by the zoo builders: conv units and TASO-style attention
with named weights."""

from xflowrl.engine.graph import GraphBuilder, Tensor


def conv_bn(b: GraphBuilder, x: Tensor, out_channels: int, kernel, name: str,
            strides=1, padding: str = "SAME", relu: bool = True, groups: int = 1) -> Tensor:
    """conv (no bias) -> batch-norm -> optional ReLU, as torchvision builds them."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    w = b.weight(name=f"{name}.weight", shape=(out_channels, x.shape[1] // groups, kh, kw))
    y = b.conv2d(input=x, weight=w, strides=strides, padding=padding)
    scale, bias, mean, var = (b.weight(name=f"{name}.bn.{k}", shape=(out_channels,))
                              for k in ("scale", "bias", "mean", "var"))
    y = b.batchnorm(input=y, scale=scale, bias=bias, mean=mean, var=var)
    return b.relu(input=y) if relu else y


def classifier(b: GraphBuilder, x: Tensor, classes: int, name: str = "fc") -> Tensor:
    """Global average pool -> flatten -> matmul to `classes` logits."""
    pooled = b.avgpool2d(input=x, kernel=x.shape[2:], strides=1, padding="VALID")
    flat = b.reshape(input=pooled, shape=(x.shape[0], x.shape[1]))
    return b.matmul(a=flat, b=b.weight(name=f"{name}.weight", shape=(x.shape[1], classes)))


def attention(b: GraphBuilder, x: Tensor, heads: int, name: str,
              out_activation: str = "NONE") -> Tensor:
    """TASO's corrected BERT attention (cpp_examples/bert.h) with its residual.

    On x [S, hidden]: Q/K/V matmuls (weights `<name>.query/key/value`),
    heads split by reshape + transpose (q, v perm (1, 0, 2); k perm
    (1, 2, 0)), two batched matmuls (no softmax, as in TASO's example), heads
    merged by transpose + reshape, the output projection (`<name>.output`,
    activation `out_activation`) and the residual add: 15 ops.
    """
    seq_len, hidden = x.shape
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not divisible by heads {heads}")
    d = hidden // heads

    def project(part):
        w = b.weight(name=f"{name}.{part}", shape=(hidden, hidden))
        return b.reshape(input=b.matmul(a=x, b=w), shape=(seq_len, heads, d))

    q = b.transpose(input=project("query"), perm=(1, 0, 2))   # [H, S, d]
    k = b.transpose(input=project("key"), perm=(1, 2, 0))     # [H, d, S]
    v = b.transpose(input=project("value"), perm=(1, 0, 2))   # [H, S, d]
    context = b.matmul(a=b.matmul(a=q, b=k), b=v)             # [H, S, d]
    context = b.reshape(input=b.transpose(input=context, perm=(1, 0, 2)),
                        shape=(seq_len, hidden))
    out = b.matmul(a=context, b=b.weight(name=f"{name}.output", shape=(hidden, hidden)),
                   activation=out_activation)
    return b.add(x=out, y=x)
