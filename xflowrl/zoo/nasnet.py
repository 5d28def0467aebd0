"""NasNet-A as TASO's examples/nasnet_a.py builds it (github.com/jiazhihao/TASO).

3x224x224 input; 7x7/2 conv to 64 channels with fused ReLU and a 3x3/2 max
pool (56x56), then 3 stages of 5 normal cells and one reduction cell; the
cells' width starts at 128 and doubles before each reduction cell. Every
conv, pool and add uses SAME padding; no batch-norm, no biases, no
classifier (TASO's example stops at the last cell).

- separable conv (k, stride): a grouped kxk conv with weight
  (width, in/width, k, k) at the stride (depthwise when in == width), then a
  1x1 conv to `width`; no activation (2 ops).
- both cells first squeeze `cur` with a 1x1 conv + ReLU to `width` and fit
  `prev` to it (1x1 conv + ReLU; a 3x3/2 conv + ReLU when the spatial sizes
  differ, which this wiring never needs).
- normal cell: sep3x3(cur) + cur, sep3x3(prev) + sep3x3(cur),
  avgpool3x3(cur) + prev, avgpool3x3(prev) + avgpool3x3(prev),
  sep3x3(prev) + sep3x3(prev); the 5 sums concatenated on channels
  (21 ops, 5*width channels).
- reduction cell: o0 = sep7x7/2(prev) + sep5x5/2(cur),
  o1 = maxpool3x3/2(cur) + sep7x7/2(prev), o2 = avgpool3x3/2(cur) + sep5x5/2(prev),
  o3 = maxpool3x3/2(cur) + sep3x3(o0), o4 = avgpool3x3(o0) + o1; concatenated
  (22 ops).

Inside a stage, a cell's `prev` is the cell before the last (the stage input
for the first two cells); each stage restarts with prev = cur = its input.
The full graph has 2 + 3 * (5 * 21 + 22) = 383 ops (217 conv2d, 90 add,
51 avgpool, 18 concat, 7 maxpool) and output 1x5120x7x7; analytic cpu cost
551.55 ms (docs/zoo.md, `benchmarks/zoo_bench.py`). Its sibling depthwise
convs are what showed the enlarge-and-merge built-ins unsound on grouped
convs; they now require one group (docs/rules.md).
Builder arguments shrink it for tests with the same structure.
"""

from xflowrl.engine.graph import Graph, GraphBuilder


class _Cells:
    """Builds the cells of one graph, naming weights by cell."""

    def __init__(self, b: GraphBuilder):
        self.b = b

    def conv(self, x, out, k, stride, act, name, groups=1):
        w = self.b.weight(name=f"{name}.weight", shape=(out, x.shape[1] // groups, k, k))
        return self.b.conv2d(input=x, weight=w, strides=stride, padding="SAME", activation=act)

    def sep(self, x, width, k, stride, name):
        if x.shape[1] % width:
            raise ValueError(f"{name}: {x.shape[1]} channels, width {width}")
        # weight (width, in/width, k, k): `width` groups
        y = self.conv(x, width, k, stride, "NONE", f"{name}.depthwise", groups=width)
        return self.conv(y, width, 1, 1, "NONE", f"{name}.pointwise")

    def avgpool(self, x, stride=1):
        return self.b.avgpool2d(input=x, kernel=3, strides=stride, padding="SAME")

    def maxpool(self, x, stride=2):
        return self.b.maxpool2d(input=x, kernel=3, strides=stride, padding="SAME")

    def squeeze_fit(self, prev, cur, width, name):
        cur = self.conv(cur, width, 1, 1, "RELU", f"{name}.squeeze")
        if prev.shape[2] == cur.shape[2]:
            prev = self.conv(prev, width, 1, 1, "RELU", f"{name}.fit")
        else:
            prev = self.conv(prev, width, 3, 2, "RELU", f"{name}.fit")
        return prev, cur

    def add(self, x, y):
        return self.b.add(x=x, y=y)

    def normal(self, prev, cur, width, name):
        prev, cur = self.squeeze_fit(prev, cur, width, name)

        def sep3(x, branch):
            return self.sep(x, width, 3, 1, f"{name}.b{branch}")

        sums = [
            self.add(sep3(cur, 0), cur),
            self.add(sep3(prev, 1), sep3(cur, 2)),
            self.add(self.avgpool(cur), prev),
            self.add(self.avgpool(prev), self.avgpool(prev)),
            self.add(sep3(prev, 3), sep3(prev, 4)),
        ]
        return self.b.concat(inputs=sums, axis=1)

    def reduction(self, prev, cur, width, name):
        prev, cur = self.squeeze_fit(prev, cur, width, name)

        def sep(x, k, stride, branch):
            return self.sep(x, width, k, stride, f"{name}.b{branch}")

        o0 = self.add(sep(prev, 7, 2, 0), sep(cur, 5, 2, 1))
        o1 = self.add(self.maxpool(cur), sep(prev, 7, 2, 2))
        o2 = self.add(self.avgpool(cur, 2), sep(prev, 5, 2, 3))
        o3 = self.add(self.maxpool(cur), sep(o0, 3, 1, 4))
        o4 = self.add(self.avgpool(o0), o1)
        return self.b.concat(inputs=[o0, o1, o2, o3, o4], axis=1)


def nasnet_a(batch_size: int = 1, image_size: int = 224, stem_channels: int = 64,
             width: int = 128, stages: int = 3, normal_cells: int = 5) -> Graph:
    """Builds TASO's NasNet-A.

    Args:
      batch_size: images per batch.
      image_size: height and width of the input.
      stem_channels: output channels of the 7x7 stem conv.
      width: the first stage's cell width (doubled before each reduction).
      stages: stages of `normal_cells` normal cells and one reduction cell.
      normal_cells: normal cells per stage.
    """
    b = GraphBuilder()
    cells = _Cells(b)
    x = b.input(name="data", shape=(batch_size, 3, image_size, image_size))
    x = cells.conv(x, stem_channels, 7, 2, "RELU", "stem")
    x = cells.maxpool(x)
    for stage in range(stages):
        prev = cur = x
        for i in range(normal_cells):
            prev, cur = cur, cells.normal(prev, cur, width, f"stage{stage}.normal{i}")
        width *= 2
        x = cells.reduction(prev, cur, width, f"stage{stage}.reduction")
    return b.build([x])
