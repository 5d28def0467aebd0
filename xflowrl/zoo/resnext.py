"""ResNeXt-50 as TASO's examples/resnext50.py builds it (github.com/jiazhihao/TASO).

3x224x224 input; 7x7/2 conv to 64 channels with fused ReLU, 3x3/2 max pool;
four stages of (width, blocks, first stride) (128, 3, 1), (256, 4, 2),
(512, 6, 2), (1024, 3, 2). A block: 1x1 conv to `width` (ReLU) -> grouped 3x3
conv, 32 groups, weight (width, width/32, 3, 3), the stage's stride (ReLU) ->
1x1 conv to 2*width (no activation); the shortcut is a 1x1 conv to 2*width at
the stride with fused ReLU (as TASO writes it) when the stride is 2 or the
channels differ; then add -> ReLU. SAME padding, no batch-norm, no biases,
no classifier (TASO's example stops at the last block): 86 ops (53 conv2d,
16 add, 16 relu, 1 maxpool); output 1x2048x7x7; analytic cpu cost 150.80 ms
(docs/zoo.md, `benchmarks/zoo_bench.py`).
"""

from typing import Sequence

from xflowrl.engine.graph import Graph, GraphBuilder

RESNEXT50_STAGES = ((128, 3, 1), (256, 4, 2), (512, 6, 2), (1024, 3, 2))


def _block(b: GraphBuilder, x, width: int, stride: int, groups: int, name: str):
    def conv(inp, out, k, s, act, part, group=1):
        w = b.weight(name=f"{name}.{part}.weight", shape=(out, inp.shape[1] // group, k, k))
        return b.conv2d(input=inp, weight=w, strides=s, padding="SAME", activation=act)

    y = conv(x, width, 1, 1, "RELU", "conv1")
    y = conv(y, width, 3, stride, "RELU", "conv2", group=groups)
    y = conv(y, 2 * width, 1, 1, "NONE", "conv3")
    if stride > 1 or x.shape[1] != 2 * width:
        x = conv(x, 2 * width, 1, stride, "RELU", "downsample")
    return b.relu(input=b.add(x=x, y=y))


def resnext50(batch_size: int = 1, image_size: int = 224, groups: int = 32,
              stem_channels: int = 64,
              stages: Sequence[Sequence[int]] = RESNEXT50_STAGES) -> Graph:
    """Builds TASO's ResNeXt-50.

    Args:
      batch_size: images per batch.
      image_size: height and width of the input.
      groups: groups of every 3x3 conv (divides every stage's width).
      stem_channels: output channels of the 7x7 stem conv.
      stages: (width, blocks, first stride) per stage; tests pass fewer,
        narrower stages of the same structure.
    """
    b = GraphBuilder()
    x = b.input(name="data", shape=(batch_size, 3, image_size, image_size))
    w = b.weight(name="conv1.weight", shape=(stem_channels, 3, 7, 7))
    x = b.conv2d(input=x, weight=w, strides=2, padding="SAME", activation="RELU")
    x = b.maxpool2d(input=x, kernel=3, strides=2, padding="SAME")
    for stage, (width, blocks, first_stride) in enumerate(stages):
        if width % groups:
            raise ValueError(f"width {width} is not divisible by groups {groups}")
        for i in range(blocks):
            x = _block(b, x, width, first_stride if i == 0 else 1, groups,
                       f"layer{stage + 1}.{i}")
    return b.build([x])
