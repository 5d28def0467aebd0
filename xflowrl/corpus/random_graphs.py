"""Randomly generated architectures, seeded: NAS-style cells, transformer
blocks and MLP blocks.

Each generator takes a seed (or a `numpy.random.Generator`) and returns a
`Graph`; the same seed gives the same graph, hash for hash (the generators
draw from nothing else). `large=True` draws from bigger ranges (more cells,
layers or nodes): the held-out sizes of `xflowrl.corpus`.

The draws aim at the motifs the xfers act on, in random arrangements:
convs and matmuls with a separate activation op (fusion), conv-BN (BN
folding), sibling convs and matmuls reading one tensor (enlarge-and-merge,
the Q/K/V merge), sums of pools (pool-add rewrites), concats of branches.
"""

from typing import List, Sequence, Tuple, Union

import numpy as np

from xflowrl.engine.graph import Graph, GraphBuilder, Tensor
from xflowrl.zoo.common import attention, classifier

Seed = Union[int, np.random.Generator]


def _rng(seed: Seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def _choice(rng: np.random.Generator, options: Sequence):
    """One of `options`, drawn uniformly (keeps Python types, unlike rng.choice)."""
    return options[int(rng.integers(len(options)))]


# --------------------------------------------------------------------------
# NAS-style cells
# --------------------------------------------------------------------------

class _CellBuilder:
    """Random NAS-style cells on one GraphBuilder; names weights by node."""

    # How a conv's activation is built: fused into the conv, a separate ReLU
    # op, batch-norm then ReLU (both separate), or none.
    ACTIVATIONS = ("fused", "relu", "bn_relu", "none")

    def __init__(self, b: GraphBuilder, rng: np.random.Generator):
        self.b = b
        self.rng = rng

    def conv(self, x: Tensor, out: int, k: int, name: str, stride: int = 1,
             padding: str = "SAME") -> Tensor:
        style = _choice(self.rng, self.ACTIVATIONS)
        w = self.b.weight(name=f"{name}.weight", shape=(out, x.shape[1], k, k))
        y = self.b.conv2d(input=x, weight=w, strides=stride, padding=padding,
                          activation="RELU" if style == "fused" else "NONE")
        if style == "bn_relu":
            scale, bias, mean, var = (self.b.weight(name=f"{name}.bn.{part}", shape=(out,))
                                      for part in ("scale", "bias", "mean", "var"))
            y = self.b.batchnorm(input=y, scale=scale, bias=bias, mean=mean, var=var)
        if style in ("relu", "bn_relu"):
            y = self.b.relu(input=y)
        return y

    def edge(self, x: Tensor, out: int, name: str, allow_identity: bool) -> Tensor:
        """A random op from `x` to `out` channels (pools and the identity
        only where `x` has `out` channels)."""
        ops = ["conv1", "conv3", "conv5", "sep3", "sep5"]
        if x.shape[1] == out:
            ops += ["maxpool", "avgpool", "avgpool"] + (["identity"] if allow_identity else [])
        op = _choice(self.rng, ops)
        if op.startswith("conv"):
            return self.conv(x, out, int(op[-1]), name)
        if op.startswith("sep"):
            return self.separable(x, out, int(op[-1]), name)
        if op in ("maxpool", "avgpool"):
            return self.pool(x, op)
        return x

    def pool(self, x: Tensor, kind: str) -> Tensor:
        pool = self.b.maxpool2d if kind == "maxpool" else self.b.avgpool2d
        return pool(input=x, kernel=3, strides=1, padding="SAME")

    def separable(self, x: Tensor, out: int, k: int, name: str) -> Tensor:
        """NASNet's separable conv: a depthwise kxk conv (one group per
        channel), then a 1x1 conv to `out` with a random activation."""
        channels = x.shape[1]
        w = self.b.weight(name=f"{name}.depthwise.weight", shape=(channels, 1, k, k))
        y = self.b.conv2d(input=x, weight=w, strides=1, padding="SAME")
        return self.conv(y, out, 1, f"{name}.pointwise")

    def fit(self, x: Tensor, out: int, name: str) -> Tensor:
        """`x` itself if it has `out` channels, else a 1x1 conv to `out`."""
        return x if x.shape[1] == out else self.conv(x, out, 1, f"{name}.fit")

    def cell(self, inputs: List[Tensor], channels: int, nodes: int, name: str) -> Tensor:
        """A random DAG of `nodes` nodes over `inputs` (same spatial size).

        Each node reads one or two earlier tensors (cell inputs or nodes),
        applies a random op to each (a kxk conv, a separable conv, a 3x3
        pool, the identity) and, for two, adds them (or concatenates them,
        one time in four); one two-input node in four is instead a sum of
        two pools of one kind (NASNet's). The nodes no other node reads are
        concatenated on channels into the cell output, as in NASNet.
        """
        states = list(inputs)
        read = [False] * len(states)
        for i in range(nodes):
            arity = 1 if len(states) == 1 else int(self.rng.integers(1, 3))
            picks = self.rng.choice(len(states), size=arity, replace=False)
            out = _choice(self.rng, (channels, channels, channels // 2, 2 * channels))
            if arity == 2 and self.rng.random() < 0.25:
                # Two pools of one kind, summed (NASNet's avgpool(a) + avgpool(b)).
                kind = _choice(self.rng, ("avgpool", "avgpool", "maxpool"))
                parts = [self.pool(self.fit(states[p], out, f"{name}.node{i}.in{j}"), kind)
                         for j, p in enumerate(picks)]
            else:
                parts = [self.edge(states[p], out, f"{name}.node{i}.in{j}",
                                   allow_identity=arity == 2) for j, p in enumerate(picks)]
            for p in picks:
                read[p] = True
            if arity == 1:
                y = parts[0]
            elif self.rng.random() >= 0.25:
                y = self.b.add(x=parts[0], y=parts[1])
            else:
                y = self.b.concat(inputs=parts, axis=1)
            states.append(y)
            read.append(False)
        loose = [s for s, r in zip(states[len(inputs):], read[len(inputs):]) if not r]
        return loose[0] if len(loose) == 1 else self.b.concat(inputs=loose, axis=1)


def random_nas_cell(seed: Seed, large: bool = False) -> Graph:
    """A random NAS-style convolutional network: stem, cells, head.

    Draws an input size (8-32 pixels; 16-32 when `large`), a width (8-32
    channels), 1-2 cells of 4-7 nodes (large: 3-4 cells of 5-8 nodes) and,
    between cells, a reduction (3x3/2 max pool or a strided 3x3 conv,
    SAME or VALID, to twice the width). A cell reads the previous two cell
    outputs where their spatial sizes agree (NASNet's prev/cur), else the last one. The
    stem is a 3x3 conv, the head global average pool and a linear layer to
    10 logits. Every conv and pool in a cell is SAME-padded at stride 1.

    Args:
      seed: an int seed or a numpy Generator (consumed).
      large: draw from the held-out, larger ranges.
    """
    rng = _rng(seed)
    image = _choice(rng, (16, 32) if large else (8, 16, 32))
    width = _choice(rng, (8, 16, 32))
    cells = int(rng.integers(3, 5) if large else rng.integers(1, 3))
    b = GraphBuilder()
    builder = _CellBuilder(b, rng)
    x = b.input(name="data", shape=(1, 3, image, image))
    prev = cur = builder.conv(x, width, 3, "stem")
    for c in range(cells):
        nodes = int(rng.integers(5, 9) if large else rng.integers(4, 8))
        inputs = [cur] if prev is cur or prev.shape[2:] != cur.shape[2:] else [prev, cur]
        out = builder.cell(inputs, width, nodes, f"cell{c}")
        if c < cells - 1 and rng.random() < 0.5 and out.shape[2] >= 8:
            if rng.random() < 0.5:
                out = b.maxpool2d(input=out, kernel=3, strides=2, padding="SAME")
            else:
                width *= 2
                out = builder.conv(out, width, 3, f"cell{c}.reduce", stride=2,
                                   padding=_choice(rng, ("SAME", "VALID")))
        prev, cur = cur, out
    return b.build([classifier(b, cur, 10)])


# --------------------------------------------------------------------------
# Transformer blocks
# --------------------------------------------------------------------------

def _activation(b: GraphBuilder, x: Tensor, kind: str) -> Tensor:
    if kind == "relu":
        return b.relu(input=x)
    if kind == "sigmoid":
        return b.sigmoid(input=x)
    if kind == "tanh":
        return b.tanh(input=x)
    return x


def _dense(b: GraphBuilder, x: Tensor, out: int, name: str, style: str) -> Tensor:
    """x @ W with activation `style`: "fused" (ReLU in the matmul), "none",
    or the name of a separate activation op."""
    w = b.weight(name=name, shape=(x.shape[1], out))
    y = b.matmul(a=x, b=w, activation="RELU" if style == "fused" else "NONE")
    return _activation(b, y, style)


def _transformer_shape(rng: np.random.Generator) -> Tuple[int, int, int, int]:
    seq = _choice(rng, (16, 32, 64, 128))
    hidden = _choice(rng, (32, 64, 128, 256))
    heads = _choice(rng, [h for h in (1, 2, 4, 8) if hidden // h >= 8])
    mlp_ratio = _choice(rng, (1, 2, 4))
    return seq, hidden, heads, mlp_ratio


def random_transformer(seed: Seed, large: bool = False) -> Graph:
    """A random stack of transformer blocks in the style of `zoo.bert`/`zoo.vit`.

    Draws the sequence length (16-128), width (32-256), heads (width/heads
    >= 8), MLP ratio (1, 2, 4) and 1-2 layers (large: 3-4). An input of
    width `hidden` goes through a ReLU (as zoo.bert), another width through
    an embedding matmul. A layer is zoo.common's TASO-style attention (Q/K/V
    matmuls reading one tensor, so their merge can fire; no softmax) with a
    random output activation, then, with probability 3/4, an MLP block
    (hidden -> ratio*hidden -> hidden; the inner activation fused, a
    separate ReLU, sigmoid or tanh op) with a residual add. The head is
    drawn too: none (half the time), zoo.vit's mean over tokens and a linear
    layer to 10 logits, or a token-wise linear layer.

    Args:
      seed: an int seed or a numpy Generator (consumed).
      large: draw from the held-out, larger ranges.
    """
    rng = _rng(seed)
    seq, hidden, heads, mlp_ratio = _transformer_shape(rng)
    layers = int(rng.integers(3, 5) if large else rng.integers(1, 3))
    in_dim = _choice(rng, (hidden, hidden, 2 * hidden, 48))
    b = GraphBuilder()
    x = b.input(name="data", shape=(seq, in_dim))
    if in_dim == hidden:
        x = b.relu(input=x)
    else:
        x = _dense(b, x, hidden, "embedding", "none")
    for layer in range(layers):
        x = attention(b, x, heads, f"layer{layer}.attention",
                      out_activation=_choice(rng, ("NONE", "RELU")))
        if rng.random() < 0.75:
            style = _choice(rng, ("fused", "relu", "sigmoid", "tanh"))
            h = _dense(b, x, mlp_ratio * hidden, f"layer{layer}.mlp.fc1", style)
            x = b.add(x=_dense(b, h, hidden, f"layer{layer}.mlp.fc2", "none"), y=x)
    head = _choice(rng, ("none", "none", "mean", "linear"))
    if head == "mean":  # zoo.vit's: mean over tokens, then 10 logits
        pooled = b.reshape(input=b.transpose(input=x, perm=(1, 0)), shape=(1, hidden, seq, 1))
        pooled = b.avgpool2d(input=pooled, kernel=(seq, 1), strides=1, padding="VALID")
        x = _dense(b, b.reshape(input=pooled, shape=(1, hidden)), 10, "head", "none")
    elif head == "linear":
        x = _dense(b, x, hidden, "head", _choice(rng, ("fused", "relu", "none")))
    return b.build([x])


# --------------------------------------------------------------------------
# MLP blocks
# --------------------------------------------------------------------------

def random_mlp(seed: Seed, large: bool = False) -> Graph:
    """A random multi-layer perceptron with branches and residuals.

    Draws the batch (1-64 rows), input width (32-512) and 3-6 blocks
    (large: 8-12). A block is one of: a dense layer to a random width
    (32-512); 2-3 parallel dense layers reading one tensor, summed (equal
    widths) or concatenated (mixed widths) -- the shape of a merge; a
    residual dense layer at the same width plus an add. Activations are
    drawn per layer: fused ReLU, a separate ReLU, sigmoid or tanh op, or
    none. The output is the last block's.

    Args:
      seed: an int seed or a numpy Generator (consumed).
      large: draw from the held-out, larger ranges.
    """
    rng = _rng(seed)
    widths = (32, 64, 128, 256, 512)
    styles = ("fused", "relu", "relu", "sigmoid", "tanh", "none")
    batch = _choice(rng, (1, 8, 32, 64))
    blocks = int(rng.integers(8, 13) if large else rng.integers(3, 7))
    b = GraphBuilder()
    x = b.input(name="data", shape=(batch, _choice(rng, widths)))
    for i in range(blocks):
        kind = _choice(rng, ("dense", "branches", "residual"))
        name = f"block{i}"
        if kind == "dense":
            x = _dense(b, x, _choice(rng, widths), f"{name}.fc", _choice(rng, styles))
        elif kind == "residual":
            y = _dense(b, x, x.shape[1], f"{name}.fc", _choice(rng, styles))
            x = b.add(x=y, y=x)
        else:
            count = int(rng.integers(2, 4))
            if rng.random() < 0.5:
                out = _choice(rng, widths)
                parts = [_dense(b, x, out, f"{name}.branch{j}", _choice(rng, styles))
                         for j in range(count)]
                y = parts[0]
                for part in parts[1:]:
                    y = b.add(x=y, y=part)
            else:
                parts = [_dense(b, x, _choice(rng, widths), f"{name}.branch{j}",
                                _choice(rng, styles)) for j in range(count)]
                y = b.concat(inputs=parts, axis=1)
            x = y
    return b.build([x])
