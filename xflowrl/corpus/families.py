"""Size-parametrised members of zoo families whose zoo builders have no size
knobs (ResNet, SqueezeNet, InceptionV3 build one fixed size each).

The zoo's other families (bert, vit, nasnet_a, resnext50, nasrnn, vgg19)
take size arguments and are built through `xflowrl.zoo` directly
(`xflowrl.corpus.registry`). These builders keep the zoo family's blocks
and op kinds (conv-BN-ReLU units, fire modules, inception's factorised
branches) at CIFAR-like sizes, so that an environment step stays cheap.
Batch 1, NCHW; weights named as in the zoo.
"""

from typing import Sequence

from xflowrl.engine.graph import Graph, GraphBuilder, Tensor
from xflowrl.zoo.common import classifier, conv_bn


def resnet(blocks: Sequence[int] = (1, 1, 1), width: int = 16, image_size: int = 32,
           classes: int = 10) -> Graph:
    """A ResNet of basic blocks (torchvision's `BasicBlock`, as `zoo.resnet18`).

    CIFAR layout (He et al. 2016, §4.2): a 3x3 conv-BN-ReLU stem at full
    resolution (no 7x7 stem, no max pool), then one stage per entry of
    `blocks`, the width doubling and the resolution halving from the
    second stage on, then global average pool and a linear head. A block is
    conv-BN-ReLU, conv-BN, the shortcut (a 1x1 conv-BN projection where the
    shape changes), add, ReLU: 7 ops, 9 with the projection.
    Depth (conv layers + head) is `2 * sum(blocks) + 2`: (3, 3, 3) is ResNet-20.

    Args:
      blocks: basic blocks per stage.
      width: channels of the stem and the first stage.
      image_size: height and width of the 3-channel input.
      classes: logits of the head.
    """
    b = GraphBuilder()
    x = b.input(name="data", shape=(1, 3, image_size, image_size))
    y = conv_bn(b, x, width, 3, "conv1")
    for stage, count in enumerate(blocks):
        stage_width = width * 2 ** stage
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            name = f"layer{stage + 1}.{i}"
            r = conv_bn(b, y, stage_width, 3, f"{name}.conv1", strides=stride)
            r = conv_bn(b, r, stage_width, 3, f"{name}.conv2", relu=False)
            if stride != 1 or y.shape[1] != stage_width:
                y = conv_bn(b, y, stage_width, 1, f"{name}.downsample", strides=stride,
                            relu=False)
            y = b.relu(input=b.add(x=r, y=y))
    return b.build([classifier(b, y, classes)])


def _conv_relu(b: GraphBuilder, x: Tensor, out_channels: int, k: int, name: str,
               strides: int = 1, padding: str = "SAME") -> Tensor:
    w = b.weight(name=f"{name}.weight", shape=(out_channels, x.shape[1], k, k))
    return b.relu(input=b.conv2d(input=x, weight=w, strides=strides, padding=padding))


def squeezenet(fires: int = 4, width: int = 16, image_size: int = 64,
               classes: int = 10) -> Graph:
    """SqueezeNet 1.1's layout (`zoo.squeezenet1_1`) with `fires` fire modules.

    3x3/2 conv-ReLU stem to `4 * width` channels, a 3x3/2 max pool, then
    fire modules in pairs (squeeze s, expand 4s + 4s; s starts at `width`
    and grows by `width` every pair, as 16, 32, 48, 64 in torchvision) with a
    3x3/2 max pool after the first two pairs, a 1x1 conv-ReLU to `classes`
    and a global average pool. A fire module is 7 ops (3 conv, 3 ReLU,
    concat); `fires=8, width=16` at 224x224 is squeezenet1_1's structure.
    Pools are SAME-padded (torchvision's are VALID) so small images keep a
    spatial extent.
    """
    b = GraphBuilder()
    x = b.input(name="data", shape=(1, 3, image_size, image_size))
    y = _conv_relu(b, x, 4 * width, 3, "features.0", strides=2)
    y = b.maxpool2d(input=y, kernel=3, strides=2, padding="SAME")
    for i in range(fires):
        squeeze = width * (i // 2 + 1)
        s = _conv_relu(b, y, squeeze, 1, f"fire{i}.squeeze")
        y = b.concat(inputs=[_conv_relu(b, s, 4 * squeeze, 1, f"fire{i}.expand1x1"),
                             _conv_relu(b, s, 4 * squeeze, 3, f"fire{i}.expand3x3")], axis=1)
        if i % 2 == 1 and i < 4:
            y = b.maxpool2d(input=y, kernel=3, strides=2, padding="SAME")
    y = _conv_relu(b, y, classes, 1, "classifier.1")
    y = b.avgpool2d(input=y, kernel=y.shape[2:], strides=1, padding="VALID")
    return b.build([b.reshape(input=y, shape=(1, classes))])


def inception(a_blocks: int = 1, c_blocks: int = 1, top: bool = False, width: int = 16,
              image_size: int = 32, classes: int = 10) -> Graph:
    """InceptionV3's blocks (`zoo.inception_v3`) at `width / 64` of its channels.

    A 3x3 conv-BN-ReLU stem to `2 * width`, `a_blocks` Inception-A blocks
    (1x1; 1x1 -> 5x5; 1x1 -> 3x3 -> 3x3; avg pool -> 1x1; concatenated), the
    Inception-B reduction (3x3/2; 1x1 -> 3x3 -> 3x3/2; max pool/2),
    `c_blocks` Inception-C blocks (factorised 1x7/7x1 branches), and with
    `top` the Inception-D reduction and one Inception-E block (split 1x3/3x1
    branches, concatenated); global average pool and a linear head.
    Ops: stem 3, A 23, B 14, C 32, D 20, E 31, head 3. Every conv is
    conv-BN-ReLU; VALID-padded strided convs as in torchvision.
    """
    def ch(full: int) -> int:  # torchvision's channel count, scaled
        return max(1, full * width // 64)

    b = GraphBuilder()
    x = b.input(name="data", shape=(1, 3, image_size, image_size))
    y = conv_bn(b, x, 2 * width, 3, "stem")

    def avg_branch(t, out, name):
        p = b.avgpool2d(input=t, kernel=3, strides=1, padding="SAME")
        return conv_bn(b, p, out, 1, name)

    for i in range(a_blocks):
        n = f"mixed_a{i}"
        b1 = conv_bn(b, y, ch(64), 1, f"{n}.branch1x1")
        b5 = conv_bn(b, conv_bn(b, y, ch(48), 1, f"{n}.branch5x5_1"), ch(64), 5,
                     f"{n}.branch5x5_2")
        b3 = conv_bn(b, y, ch(64), 1, f"{n}.branch3x3dbl_1")
        b3 = conv_bn(b, b3, ch(96), 3, f"{n}.branch3x3dbl_2")
        b3 = conv_bn(b, b3, ch(96), 3, f"{n}.branch3x3dbl_3")
        y = b.concat(inputs=[b1, b5, b3, avg_branch(y, ch(64), f"{n}.branch_pool")], axis=1)

    n = "mixed_b"
    b3 = conv_bn(b, y, ch(384), 3, f"{n}.branch3x3", strides=2, padding="VALID")
    bd = conv_bn(b, y, ch(64), 1, f"{n}.branch3x3dbl_1")
    bd = conv_bn(b, bd, ch(96), 3, f"{n}.branch3x3dbl_2")
    bd = conv_bn(b, bd, ch(96), 3, f"{n}.branch3x3dbl_3", strides=2, padding="VALID")
    bp = b.maxpool2d(input=y, kernel=3, strides=2, padding="VALID")
    y = b.concat(inputs=[b3, bd, bp], axis=1)

    for i in range(c_blocks):
        n, c7 = f"mixed_c{i}", ch(128)
        b1 = conv_bn(b, y, ch(192), 1, f"{n}.branch1x1")
        b7 = conv_bn(b, y, c7, 1, f"{n}.branch7x7_1")
        b7 = conv_bn(b, b7, c7, (1, 7), f"{n}.branch7x7_2")
        b7 = conv_bn(b, b7, ch(192), (7, 1), f"{n}.branch7x7_3")
        bd = conv_bn(b, y, c7, 1, f"{n}.branch7x7dbl_1")
        for j, (k, out) in enumerate((((7, 1), c7), ((1, 7), c7), ((7, 1), c7),
                                      ((1, 7), ch(192)))):
            bd = conv_bn(b, bd, out, k, f"{n}.branch7x7dbl_{j + 2}")
        y = b.concat(inputs=[b1, b7, bd, avg_branch(y, ch(192), f"{n}.branch_pool")], axis=1)

    if top:
        n = "mixed_d"
        b3 = conv_bn(b, y, ch(192), 1, f"{n}.branch3x3_1")
        b3 = conv_bn(b, b3, ch(320), 3, f"{n}.branch3x3_2", strides=2, padding="VALID")
        b7 = conv_bn(b, y, ch(192), 1, f"{n}.branch7x7x3_1")
        b7 = conv_bn(b, b7, ch(192), (1, 7), f"{n}.branch7x7x3_2")
        b7 = conv_bn(b, b7, ch(192), (7, 1), f"{n}.branch7x7x3_3")
        b7 = conv_bn(b, b7, ch(192), 3, f"{n}.branch7x7x3_4", strides=2, padding="VALID")
        bp = b.maxpool2d(input=y, kernel=3, strides=2, padding="VALID")
        y = b.concat(inputs=[b3, b7, bp], axis=1)

        n = "mixed_e"
        b1 = conv_bn(b, y, ch(320), 1, f"{n}.branch1x1")
        b3 = conv_bn(b, y, ch(384), 1, f"{n}.branch3x3_1")
        b3 = b.concat(inputs=[conv_bn(b, b3, ch(384), (1, 3), f"{n}.branch3x3_2a"),
                              conv_bn(b, b3, ch(384), (3, 1), f"{n}.branch3x3_2b")], axis=1)
        bd = conv_bn(b, y, ch(448), 1, f"{n}.branch3x3dbl_1")
        bd = conv_bn(b, bd, ch(384), 3, f"{n}.branch3x3dbl_2")
        bd = b.concat(inputs=[conv_bn(b, bd, ch(384), (1, 3), f"{n}.branch3x3dbl_3a"),
                              conv_bn(b, bd, ch(384), (3, 1), f"{n}.branch3x3dbl_3b")], axis=1)
        y = b.concat(inputs=[b1, b3, bd, avg_branch(y, ch(192), f"{n}.branch_pool")], axis=1)
    return b.build([classifier(b, y, classes)])
