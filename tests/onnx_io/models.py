"""ONNX models for the importer tests, written node by node as real exporters
write them.

`torch_style_cnn` and `torch_style_bert` follow what torch.onnx (opset 11,
eval mode, constant folding on) emits for a torchvision-style CNN and a
Hugging Face style BERT layer: symmetric explicit pads, `count_include_pad`
average pools, Flatten + Gemm(transB) classifiers, `x.view(x.size(0), -1)`
shape arithmetic, int64 token inputs, decomposed LayerNorm, Erf GELU,
softmax attention with an additive mask. `keras_cnn` and `keras_attention`
are real tf2onnx conversions of small `tf.keras` models with random weights.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class OnnxWriter:
    """Accumulates nodes and initializers; names are generated per op type."""

    def __init__(self, seed: int = 0):
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def init(self, base: str, value) -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, base: str, shape: Sequence[int], std: Optional[float] = None) -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        std = np.sqrt(2.0 / fan_in) if std is None else std
        return self.init(base, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def op(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs):
        name = self.name(op_type)
        outs = [f"{name}_out{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value) -> str:
        """A `Constant` node, as torch.onnx writes scalars and shapes."""
        name = self.name("Constant")
        self.nodes.append(helper.make_node("Constant", [], [name], name=name,
                                           value=numpy_helper.from_array(np.asarray(value))))
        return name

    def model(self, inputs, outputs, opset: int = 11) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "test", inputs, outputs, initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name="tests")
        model.ir_version = 7
        onnx.checker.check_model(model, full_check=True)
        return model


def _float_info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _conv_bn_relu(w: OnnxWriter, x, c_in, c_out, k, stride=1, pad=None, relu=True):
    pad = k // 2 if pad is None else pad
    y = w.op("Conv", [x, w.weight("conv.weight", (c_out, c_in, k, k))], kernel_shape=[k, k],
             strides=[stride, stride], pads=[pad] * 4, dilations=[1, 1], group=1)
    y = w.op("BatchNormalization", [y, w.init("bn.weight", w.rng.uniform(0.5, 1.5, c_out).astype(np.float32)),
                                   w.init("bn.bias", 0.1 * w.rng.standard_normal(c_out).astype(np.float32)),
                                   w.init("bn.running_mean", 0.1 * w.rng.standard_normal(c_out).astype(np.float32)),
                                   w.init("bn.running_var", w.rng.uniform(0.5, 1.5, c_out).astype(np.float32))],
             epsilon=1e-5, momentum=0.9)
    return w.op("Relu", [y]) if relu else y


def torch_style_cnn(batch: int = 1, size: int = 32, classes: int = 10) -> onnx.ModelProto:
    """A torchvision-style CNN as torch.onnx (opset 11) writes it."""
    w = OnnxWriter(seed=1)
    x = "input"  # torch.onnx default "input.1": onnx-tf cannot feed dotted input names
    # Stem: 7x7/2 pad 3 conv (bias: BN folded by the exporter), 3x3/2 pad 1 max pool.
    y = w.op("Conv", [x, w.weight("stem.weight", (16, 3, 7, 7)), w.weight("stem.bias", (16,), 0.1)],
             kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3])
    y = w.op("Relu", [y])
    y = w.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
             ceil_mode=0)
    # A basic block with identity, then one with a strided 1x1 projection.
    b = _conv_bn_relu(w, y, 16, 16, 3)
    b = _conv_bn_relu(w, b, 16, 16, 3, relu=False)
    y = w.op("Relu", [w.op("Add", [b, y])])
    b = _conv_bn_relu(w, y, 16, 32, 3, stride=2)
    b = _conv_bn_relu(w, b, 32, 32, 3, relu=False)
    s = _conv_bn_relu(w, y, 16, 32, 1, stride=2, pad=0, relu=False)
    y = w.op("Relu", [w.op("Add", [b, s])])
    # Inception-style branches: 1x1, and 3x3/1 pad 1 average pool counting padding.
    b1 = _conv_bn_relu(w, y, 32, 16, 1)
    b2 = w.op("AveragePool", [y], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
              count_include_pad=1)
    b2 = _conv_bn_relu(w, b2, 32, 16, 1)
    b3 = w.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    b3 = w.op("Resize", [b3, w.init("roi", np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32)), w.init("scales", np.array([1, 1, 2, 2], np.float32))],
              mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    y = w.op("Concat", [b1, b2, w.op("Sigmoid", [b3])], axis=1)
    # x.view(x.size(0), -1) after global pooling, then nn.Linear as Gemm(transB=1).
    y = w.op("GlobalAveragePool", [y])
    n = w.op("Unsqueeze", [w.op("Gather", [w.op("Shape", [y]), w.const(np.array(0, np.int64))],
                                axis=0)], axes=[0])
    shape = w.op("Concat", [n, w.const(np.array([-1], np.int64))], axis=0)
    y = w.op("Reshape", [y, shape])
    y = w.op("Gemm", [y, w.weight("fc.weight", (classes, 64 * 1)), w.weight("fc.bias", (classes,), 0.1)],
             alpha=1.0, beta=1.0, transB=1)
    y = w.op("Flatten", [w.op("Tanh", [y])], axis=1)
    return w.model([_float_info(x, (batch, 3, size, size))], [_float_info(y, (batch, classes))])


def _layer_norm(w: OnnxWriter, x, hidden):
    """LayerNorm decomposed as torch.onnx writes it below opset 17."""
    mean = w.op("ReduceMean", [x], axes=[-1], keepdims=1)
    d = w.op("Sub", [x, mean])
    var = w.op("ReduceMean", [w.op("Pow", [d, w.const(np.array(2.0, np.float32))])], axes=[-1],
               keepdims=1)
    std = w.op("Sqrt", [w.op("Add", [var, w.const(np.array(1e-12, np.float32))])])
    y = w.op("Div", [d, std])
    y = w.op("Mul", [y, w.init("ln.weight", w.rng.uniform(0.5, 1.5, hidden).astype(np.float32))])
    return w.op("Add", [y, w.init("ln.bias", 0.1 * w.rng.standard_normal(hidden).astype(np.float32))])


def _linear(w: OnnxWriter, x, k, n):
    """nn.Linear on a 3-D input: MatMul with the transposed weight, bias Add."""
    y = w.op("MatMul", [x, w.weight("linear.weight", (k, n), 1 / np.sqrt(k))])
    return w.op("Add", [w.init("linear.bias", 0.1 * w.rng.standard_normal(n).astype(np.float32)), y])


def torch_style_bert(seq: int = 8, hidden: int = 32, heads: int = 4, vocab: int = 50,
                     layers: int = 2) -> onnx.ModelProto:
    """A Hugging Face style BERT encoder as torch.onnx (opset 11) writes it."""
    w = OnnxWriter(seed=2)
    d = hidden // heads
    ids, mask = "input_ids", "attention_mask"
    emb = w.op("Gather", [w.weight("word_embeddings", (vocab, hidden), 1.0), ids], axis=0)
    pos = w.op("Gather", [w.weight("position_embeddings", (64, hidden), 0.1),
                          w.init("position_ids", np.arange(seq, dtype=np.int64)[None])], axis=0)
    x = _layer_norm(w, w.op("Add", [emb, pos]), hidden)
    # extended_attention_mask = (1.0 - mask[:, None, None, :]) * -10000.0
    m = w.op("Unsqueeze", [w.op("Unsqueeze", [mask], axes=[1])], axes=[2])
    m = w.op("Cast", [m], to=TensorProto.FLOAT)
    m = w.op("Mul", [w.op("Sub", [w.const(np.array(1.0, np.float32)), m]),
                     w.const(np.array(-10000.0, np.float32))])
    for _ in range(layers):
        def heads_view(t):
            # view(size()[:-1] + (heads, d)) via Shape/Gather/Unsqueeze/Concat.
            shape = w.op("Shape", [t])
            dims = [w.op("Unsqueeze", [w.op("Gather", [shape, w.const(np.array(i, np.int64))],
                                            axis=0)], axes=[0]) for i in (0, 1)]
            target = w.op("Concat", dims + [w.const(np.array([heads], np.int64)),
                                            w.const(np.array([d], np.int64))], axis=0)
            return w.op("Reshape", [t, target])

        q = w.op("Transpose", [heads_view(_linear(w, x, hidden, hidden))], perm=[0, 2, 1, 3])
        k = w.op("Transpose", [heads_view(_linear(w, x, hidden, hidden))], perm=[0, 2, 3, 1])
        v = w.op("Transpose", [heads_view(_linear(w, x, hidden, hidden))], perm=[0, 2, 1, 3])
        scores = w.op("Div", [w.op("MatMul", [q, k]), w.const(np.array(np.sqrt(d), np.float32))])
        probs = w.op("Softmax", [w.op("Add", [scores, m])], axis=3)
        ctx = w.op("Transpose", [w.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = w.op("Reshape", [ctx, w.const(np.array([1, seq, hidden], np.int64))])
        x = _layer_norm(w, w.op("Add", [_linear(w, ctx, hidden, hidden), x]), hidden)
        h = _linear(w, x, hidden, 4 * hidden)
        gelu = w.op("Mul", [w.op("Mul", [h, w.op("Add", [
            w.op("Erf", [w.op("Div", [h, w.const(np.array(1.4142135, np.float32))])]),
            w.const(np.array(1.0, np.float32))])]), w.const(np.array(0.5, np.float32))])
        x = _layer_norm(w, w.op("Add", [_linear(w, gelu, 4 * hidden, hidden), x]), hidden)
    pooled = w.op("Tanh", [w.op("Gemm", [w.op("Squeeze", [w.op("Split", [x], n_out=2, axis=1,
                                                                      split=[1, seq - 1])[0]],
                                                   axes=[1]),
                                         w.weight("pooler.weight", (hidden, hidden)),
                                         w.weight("pooler.bias", (hidden,), 0.1)], transB=1)])
    return w.model([helper.make_tensor_value_info(ids, TensorProto.INT64, (1, seq)),
                    helper.make_tensor_value_info(mask, TensorProto.INT64, (1, seq))],
                   [_float_info(x, (1, seq, hidden)), _float_info(pooled, (1, hidden))])


def bert_feeds(seq: int = 8, vocab: int = 50, seed: int = 0):
    rng = np.random.default_rng(seed)
    mask = np.ones((1, seq), np.int64)
    mask[0, seq - 2:] = 0
    return {"input_ids": rng.integers(0, vocab, (1, seq)).astype(np.int64),
            "attention_mask": mask}


def keras_cnn() -> onnx.ModelProto:
    """tf2onnx (opset 11) over a small Keras CNN with random weights."""
    import tensorflow as tf
    import tf2onnx
    tf.keras.utils.set_random_seed(3)
    layers = tf.keras.layers
    inp = tf.keras.Input((32, 32, 3), batch_size=1)
    x = layers.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(inp)
    x = layers.ReLU()(layers.BatchNormalization()(x))
    y = layers.Conv2D(16, 3, padding="same", activation="relu")(x)
    y = layers.Conv2D(16, 3, padding="same")(y)
    x = layers.ReLU()(layers.Add()([x, y]))
    a = layers.Conv2D(8, 1, activation="relu")(x)
    b = layers.Conv2D(8, (1, 3), padding="same", activation="relu")(x)
    b = layers.Conv2D(8, (3, 1), padding="same", activation="relu")(b)
    c = layers.AveragePooling2D(3, 1, padding="same")(x)
    x = layers.Concatenate()([a, b, c])
    x = layers.MaxPooling2D(2)(x)
    x = layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(10)(layers.Dense(32, activation="tanh")(x))
    model = tf.keras.Model(inp, x)
    proto, _ = tf2onnx.convert.from_keras(
        model, input_signature=[tf.TensorSpec((1, 32, 32, 3), tf.float32, name="image")],
        opset=11)
    return proto


def keras_attention() -> onnx.ModelProto:
    """tf2onnx (opset 11) over a small Keras self-attention block (heads split
    by Reshape/Permute, softmax attention, LayerNormalization, an MLP)."""
    import tensorflow as tf
    import tf2onnx
    tf.keras.utils.set_random_seed(4)
    layers = tf.keras.layers
    seq, hidden, heads = 16, 32, 4
    inp = tf.keras.Input((seq, hidden), batch_size=1)

    def split_heads(t):
        return layers.Permute((2, 1, 3))(layers.Reshape((seq, heads, hidden // heads))(t))

    q, k, v = (split_heads(layers.Dense(hidden)(inp)) for _ in range(3))
    scores = layers.Lambda(lambda t: tf.matmul(t[0], t[1], transpose_b=True) /
                           np.sqrt(hidden // heads))([q, k])
    ctx = layers.Lambda(lambda t: tf.matmul(t[0], t[1]))([layers.Softmax()(scores), v])
    ctx = layers.Reshape((seq, hidden))(layers.Permute((2, 1, 3))(ctx))
    x = layers.LayerNormalization()(layers.Add()([inp, layers.Dense(hidden)(ctx)]))
    h = layers.Dense(2 * hidden, activation="relu")(x)
    x = layers.Add()([x, layers.Dense(hidden)(h)])
    x = layers.Dense(8, activation="sigmoid")(layers.Flatten()(x))
    model = tf.keras.Model(inp, x)
    proto, _ = tf2onnx.convert.from_keras(
        model, input_signature=[tf.TensorSpec((1, seq, hidden), tf.float32, name="tokens")],
        opset=11)
    return proto
