"""Transformer models written node by node as today's PyTorch exporters write
them, and a Keras transformer block converted by tf2onnx at opset 18.

- `hf_bert_torchscript`: a Hugging Face `BertModel` (eager attention) as
  `torch.onnx.export(..., opset_version=13, dynamo=False)` writes it. The
  attention-mask chain is the one of transformers' masking utilities:
  `attention_mask` reshaped to [B, 1, 1, S] by a `Concat` of `Shape` values,
  `Cast` to bool, `And` with the all-true bidirectional mask, `Expand` to
  [B, 1, S, S] (the -1 sizes resolved with `ConstantOfShape`, `Equal` and
  `Where`, as the TorchScript exporter writes `expand(b, -1, -1, -1)`), then
  `Where(mask, 0, finfo.min)` added to the scores before `Softmax`. The
  position ids go through `GatherElements` over constants (64 of them: onnx
  1.15's reference `GatherElements` fails beyond 32, which is how this model
  used to fail to import). Opset 13: `Unsqueeze`/`Split` read axes and sizes
  as inputs, LayerNorm is decomposed (`ReduceMean`, `Pow`, `Sqrt`, ...).
- `torch_dynamo_transformer`: what `torch.onnx.export(..., dynamo=True)`
  writes: IR version 10, opset 18, `LayerNormalization`, `ReduceMean` with
  its axes as an input, `GatherND`, `IsNaN` + `Where`, bool and int64
  initializers, static `Reshape` targets as initializers.
- `keras_transformer_block`: tf2onnx (opset 18) over a Keras
  `MultiHeadAttention` + `LayerNormalization` + MLP block.

No torch here: these are the exporters' patterns, reproduced with
`onnx.helper`, small enough to build in milliseconds.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.onnx_io.models import OnnxWriter

FLOAT_MIN = np.finfo(np.float32).min


def _i64(*values) -> np.ndarray:
    return np.array(values, np.int64)


def _unsqueeze13(w: OnnxWriter, x: str, axis: int) -> str:
    return w.op("Unsqueeze", [x, w.const(_i64(axis))])


def _dim(w: OnnxWriter, x: str, axis: int) -> str:
    """`x.size(axis)` as a [1] tensor: Shape -> Gather -> Unsqueeze."""
    return _unsqueeze13(w, w.op("Gather", [w.op("Shape", [x]), w.const(np.array(axis, np.int64))],
                                axis=0), 0)


def _layer_norm13(w: OnnxWriter, x: str, hidden: int) -> str:
    """nn.LayerNorm as the TorchScript exporter writes it below opset 17."""
    mean = w.op("ReduceMean", [x], axes=[-1], keepdims=1)
    d = w.op("Sub", [x, mean])
    var = w.op("ReduceMean", [w.op("Pow", [d, w.const(np.array(2.0, np.float32))])],
               axes=[-1], keepdims=1)
    y = w.op("Div", [d, w.op("Sqrt", [w.op("Add", [var, w.const(np.array(1e-12, np.float32))])])])
    y = w.op("Mul", [y, w.init("LayerNorm.weight",
                               w.rng.uniform(0.5, 1.5, hidden).astype(np.float32))])
    return w.op("Add", [y, w.init("LayerNorm.bias",
                                  0.1 * w.rng.standard_normal(hidden).astype(np.float32))])


def _linear(w: OnnxWriter, x: str, k: int, n: int) -> str:
    y = w.op("MatMul", [x, w.weight("dense.weight", (k, n), 1 / np.sqrt(k))])
    return w.op("Add", [w.init("dense.bias", 0.1 * w.rng.standard_normal(n).astype(np.float32)),
                        y])


def _gelu_erf(w: OnnxWriter, h: str) -> str:
    erf = w.op("Erf", [w.op("Div", [h, w.const(np.array(1.4142135, np.float32))])])
    return w.op("Mul", [w.op("Mul", [h, w.op("Add", [erf, w.const(np.array(1.0, np.float32))])]),
                        w.const(np.array(0.5, np.float32))])


def _hf_mask_chain(w: OnnxWriter, ids: str, mask: str) -> str:
    """[B, 1, S, S] additive mask: 0 where attended, finfo(float32).min
    elsewhere, as transformers' eager masks trace in TorchScript."""
    b, s = _dim(w, ids, 0), _dim(w, ids, 1)
    # padding_mask[:, None, None, :] via view(b, 1, 1, s)
    target = w.op("Concat", [b, w.const(_i64(1)), w.const(_i64(1)), s], axis=0)
    padding = w.op("Cast", [w.op("Reshape", [mask, target])], to=TensorProto.BOOL)
    # The bidirectional mask function is all True: ones(S, S) via
    # ConstantOfShape of a Concat of Shape values, then [None, None].
    ss = w.op("Concat", [s, s], axis=0)
    full = w.op("ConstantOfShape", [ss], value=helper.make_tensor("v", TensorProto.BOOL,
                                                                  [1], [True]))
    full = _unsqueeze13(w, _unsqueeze13(w, full, 0), 0)
    both = w.op("And", [full, padding])
    # .expand(b, -1, -1, -1): the -1 entries replaced by ones at run time.
    size = w.op("Concat", [b, w.const(_i64(-1)), w.const(_i64(-1)), w.const(_i64(-1))], axis=0)
    ones = w.op("ConstantOfShape", [w.op("Shape", [size])],
                value=helper.make_tensor("v", TensorProto.INT64, [1], [1]))
    neg = w.op("Mul", [ones, w.const(np.array(-1, np.int64))])
    size = w.op("Where", [w.op("Equal", [size, neg]), ones, size])
    expanded = w.op("Expand", [both, size])
    return w.op("Where", [expanded, w.const(np.array(0.0, np.float32)),
                          w.const(np.array(FLOAT_MIN, np.float32))])


def hf_bert_torchscript(seq: int = 64, hidden: int = 64, heads: int = 4, layers: int = 2,
                        vocab: int = 100, max_pos: int = 128) -> onnx.ModelProto:
    """Hugging Face BertModel (eager attention) as the TorchScript exporter
    writes it at opset 13; outputs last_hidden_state and pooler_output."""
    w = OnnxWriter(seed=11)
    d = hidden // heads
    ids, mask = "input_ids", "attention_mask"
    # Embeddings: position ids from a buffer (Slice to S, then gathered
    # element-wise), token type ids from a zero buffer expanded to [B, S].
    s = _dim(w, ids, 1)
    pos_buffer = w.init("embeddings.position_ids", np.arange(max_pos, dtype=np.int64)[None])
    pos = w.op("Slice", [pos_buffer, w.const(_i64(0)), s, w.const(_i64(1)), w.const(_i64(1))])
    pos = w.op("GatherElements", [pos, w.op("Expand", [
        _unsqueeze13(w, w.op("Range", [w.const(np.array(0, np.int64)),
                                       w.op("Squeeze", [s, w.const(_i64(0))]),
                                       w.const(np.array(1, np.int64))]), 0),
        w.op("Concat", [_dim(w, ids, 0), s], axis=0)])], axis=1)
    types = w.op("Slice", [w.init("embeddings.token_type_ids", np.zeros((1, max_pos), np.int64)),
                           w.const(_i64(0)), s, w.const(_i64(1)), w.const(_i64(1))])
    types = w.op("Expand", [types, w.op("Concat", [_dim(w, ids, 0), s], axis=0)])
    x = w.op("Gather", [w.weight("word_embeddings.weight", (vocab, hidden), 1.0), ids], axis=0)
    x = w.op("Add", [x, w.op("Gather", [w.weight("token_type_embeddings.weight", (2, hidden), 0.1),
                                        types], axis=0)])
    x = w.op("Add", [x, w.op("Gather", [w.weight("position_embeddings.weight",
                                                 (max_pos, hidden), 0.1), pos], axis=0)])
    x = _layer_norm13(w, x, hidden)
    additive_mask = _hf_mask_chain(w, ids, mask)

    def heads_view(t):
        target = w.op("Concat", [_dim(w, t, 0), _dim(w, t, 1), w.const(_i64(heads)),
                                 w.const(_i64(d))], axis=0)
        return w.op("Reshape", [t, target])

    for _ in range(layers):
        q = w.op("Transpose", [heads_view(_linear(w, x, hidden, hidden))], perm=[0, 2, 1, 3])
        k = w.op("Transpose", [heads_view(_linear(w, x, hidden, hidden))], perm=[0, 2, 1, 3])
        v = w.op("Transpose", [heads_view(_linear(w, x, hidden, hidden))], perm=[0, 2, 1, 3])
        scores = w.op("MatMul", [q, w.op("Transpose", [k], perm=[0, 1, 3, 2])])
        scores = w.op("Div", [scores, w.const(np.array(np.sqrt(d), np.float32))])
        probs = w.op("Softmax", [w.op("Add", [scores, additive_mask])], axis=-1)
        ctx = w.op("Transpose", [w.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = w.op("Reshape", [ctx, w.op("Concat", [_dim(w, ctx, 0), _dim(w, ctx, 1),
                                                    w.const(_i64(hidden))], axis=0)])
        x = _layer_norm13(w, w.op("Add", [_linear(w, ctx, hidden, hidden), x]), hidden)
        h = _gelu_erf(w, _linear(w, x, hidden, 4 * hidden))
        x = _layer_norm13(w, w.op("Add", [_linear(w, h, 4 * hidden, hidden), x]), hidden)
    first = w.op("Gather", [x, w.const(np.array(0, np.int64))], axis=1)
    pooled = w.op("Tanh", [w.op("Gemm", [first, w.weight("pooler.dense.weight", (hidden, hidden)),
                                         w.weight("pooler.dense.bias", (hidden,), 0.1)],
                                transB=1)])
    graph = helper.make_graph(
        w.nodes, "main_graph",
        [helper.make_tensor_value_info(ids, TensorProto.INT64, (1, seq)),
         helper.make_tensor_value_info(mask, TensorProto.INT64, (1, seq))],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, (1, seq, hidden)),
         helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, (1, hidden))],
        initializer=w.inits)
    graph.node.append(helper.make_node("Identity", [x], ["last_hidden_state"],
                                       name="Identity_last_hidden_state"))
    graph.node.append(helper.make_node("Identity", [pooled], ["pooler_output"],
                                       name="Identity_pooler_output"))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="pytorch", producer_version="2.5.0")
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    return model


def bert_feeds(seq: int = 64, vocab: int = 100, seed: int = 0):
    """input_ids and an attention mask with the last quarter padded."""
    rng = np.random.default_rng(seed)
    mask = np.ones((1, seq), np.int64)
    mask[0, seq - seq // 4:] = 0
    return {"input_ids": rng.integers(0, vocab, (1, seq)).astype(np.int64),
            "attention_mask": mask}


def torch_dynamo_transformer(seq: int = 16, hidden: int = 32, heads: int = 4,
                             vocab: int = 50, decomposed_linear: bool = False
                             ) -> onnx.ModelProto:
    """One BERT-style encoder layer as the dynamo exporter writes it: IR 10,
    opset 18, LayerNormalization, ReduceMean with axes as an input, GatherND,
    IsNaN/Where, bool and int64 initializers. Outputs: hidden states, the
    first token (GatherND) and the NaN-guarded mean over tokens.

    `decomposed_linear`: every nn.Linear as ATen's decomposition of a 3-D
    `matmul` traces it (`view` -> `mm` -> `view`, then the bias `add`):
    Reshape [1, S, K] -> [S, K] (its own node per Linear, the target an
    int64 initializer), a 2-D MatMul, Reshape back, Add; instead of a 3-D
    MatMul and Add."""
    w = OnnxWriter(seed=12)
    d = hidden // heads

    def linear(x, k, n):
        if not decomposed_linear:
            return _linear(w, x, k, n)
        flat = w.op("Reshape", [x, w.init("val_flat", _i64(seq, k))])
        y = w.op("MatMul", [flat, w.weight("dense.weight", (k, n), 1 / np.sqrt(k))])
        y = w.op("Reshape", [y, w.init("val_unflat", _i64(1, seq, n))])
        return w.op("Add", [y, w.init("dense.bias",
                                      0.1 * w.rng.standard_normal(n).astype(np.float32))])
    ids, mask = "input_ids", "attention_mask"

    def layer_norm(t):
        return w.op("LayerNormalization", [
            t, w.init("ln.weight", w.rng.uniform(0.5, 1.5, hidden).astype(np.float32)),
            w.init("ln.bias", 0.1 * w.rng.standard_normal(hidden).astype(np.float32))],
            axis=-1, epsilon=1e-12)

    x = w.op("Gather", [w.weight("embeddings.word_embeddings.weight", (vocab, hidden), 1.0),
                        ids], axis=0)
    x = w.op("Add", [x, w.weight("embeddings.position_embeddings", (1, seq, hidden), 0.1)])
    x = layer_norm(x)
    # Mask: a bool initializer (the all-true bidirectional mask, folded by
    # the exporter) and-ed with the padding mask reshaped by an int64 initializer.
    padding = w.op("Cast", [w.op("Reshape", [mask, w.init("val_shape", _i64(1, 1, 1, seq))])],
                   to=TensorProto.BOOL)
    allowed = w.op("And", [w.init("val_full_mask", np.ones((1, 1, seq, seq), bool)), padding])
    additive = w.op("Where", [allowed, w.init("val_zero", np.array(0.0, np.float32)),
                              w.init("val_min", np.array(FLOAT_MIN, np.float32))])
    heads_shape = w.init("val_heads", _i64(1, seq, heads, d))

    def proj(t):
        return w.op("Transpose", [w.op("Reshape", [linear(t, hidden, hidden), heads_shape])],
                    perm=[0, 2, 1, 3])

    q, k, v = proj(x), proj(x), proj(x)
    scale = w.init("val_scale", np.array(1 / np.sqrt(d), np.float32))
    scores = w.op("Mul", [w.op("MatMul", [q, w.op("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
    probs = w.op("Softmax", [w.op("Add", [scores, additive])], axis=-1)
    ctx = w.op("Transpose", [w.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    ctx = w.op("Reshape", [ctx, w.init("val_merge", _i64(1, seq, hidden))])
    x = layer_norm(w.op("Add", [linear(ctx, hidden, hidden), x]))
    h = _gelu_erf(w, linear(x, hidden, 2 * hidden))
    x = layer_norm(w.op("Add", [linear(h, 2 * hidden, hidden), x]))
    first = w.op("GatherND", [x, w.init("val_first", _i64(0, 0)[None])], batch_dims=0)
    mean = w.op("ReduceMean", [x, w.init("val_axes", _i64(1))], keepdims=0)
    mean = w.op("Where", [w.op("IsNaN", [mean]), w.init("val_nan_fill", np.array(0.0, np.float32)),
                          mean])
    graph = helper.make_graph(
        w.nodes, "main_graph",
        [helper.make_tensor_value_info(ids, TensorProto.INT64, (1, seq)),
         helper.make_tensor_value_info(mask, TensorProto.INT64, (1, seq))],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, (1, seq, hidden)),
         helper.make_tensor_value_info(first, TensorProto.FLOAT, (1, hidden)),
         helper.make_tensor_value_info(mean, TensorProto.FLOAT, (1, hidden))],
        initializer=w.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                              producer_name="pytorch", producer_version="2.9.0")
    model.ir_version = 10  # what the dynamo exporter writes; onnx 1.15 knows 9
    return model


def keras_transformer_block(seq: int = 16, hidden: int = 32, heads: int = 4
                            ) -> onnx.ModelProto:
    """tf2onnx (opset 18) over a Keras transformer encoder block:
    MultiHeadAttention, residual + LayerNormalization, a GELU MLP."""
    import tensorflow as tf
    import tf2onnx
    tf.keras.utils.set_random_seed(13)
    layers = tf.keras.layers
    inp = tf.keras.Input((seq, hidden), batch_size=1)
    att = layers.MultiHeadAttention(num_heads=heads, key_dim=hidden // heads)(inp, inp)
    x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([inp, att]))
    h = layers.Dense(2 * hidden, activation="gelu")(x)
    x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x, layers.Dense(hidden)(h)]))
    model = tf.keras.Model(inp, x)
    proto, _ = tf2onnx.convert.from_keras(
        model, input_signature=[tf.TensorSpec((1, seq, hidden), tf.float32, name="tokens")],
        opset=18)
    return proto


def dynamo_with_functions(seq: int = 8, hidden: int = 16) -> onnx.ModelProto:
    """Modules as model-local functions, as the dynamo exporter writes them
    without its optimizer (IR 10, opset 18): an Erf GELU whose body calls a
    nested function, and a LeakyRelu module whose `alpha` is an attribute
    reference (given at one call, the function's default at the other)."""
    domain = "pkg.torch.modules"
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid(domain, 1)]
    half = helper.make_function(
        domain, "Half", ["x"], ["y"],
        [helper.make_node("Constant", [], ["c"], value_float=0.5),
         helper.make_node("Mul", ["x", "c"], ["y"])], opsets)
    gelu = helper.make_function(
        domain, "Gelu", ["x"], ["y"],
        [helper.make_node("Constant", [], ["r2"], value_float=1.4142135),
         helper.make_node("Div", ["x", "r2"], ["t"]),
         helper.make_node("Erf", ["t"], ["e"]),
         helper.make_node("Constant", [], ["one"], value_float=1.0),
         helper.make_node("Add", ["e", "one"], ["s"]),
         helper.make_node("Mul", ["x", "s"], ["p"]),
         helper.make_node("Half", ["p"], ["y"], domain=domain)], opsets)
    leaky = helper.make_function(
        domain, "Leaky", ["x"], ["y"],
        [helper.make_node("LeakyRelu", ["x"], ["y"])], opsets, attributes=[])
    ref = onnx.AttributeProto()
    ref.name, ref.ref_attr_name, ref.type = "alpha", "alpha", onnx.AttributeProto.FLOAT
    leaky.node[0].attribute.append(ref)
    leaky.attribute_proto.append(helper.make_attribute("alpha", 0.01))
    w = OnnxWriter(seed=14)
    x = "x"
    h = w.op("MatMul", [x, w.weight("fc1.weight", (hidden, 2 * hidden), 1 / np.sqrt(hidden))])
    w.nodes.append(helper.make_node("Gelu", [h], ["gelu_out"], name="gelu", domain=domain))
    h = w.op("MatMul", ["gelu_out", w.weight("fc2.weight", (2 * hidden, hidden),
                                             1 / np.sqrt(2 * hidden))])
    w.nodes.append(helper.make_node("Leaky", [h], ["leaky1"], name="leaky1", domain=domain,
                                    alpha=0.2))
    w.nodes.append(helper.make_node("Leaky", ["leaky1"], ["y"], name="leaky2", domain=domain))
    graph = helper.make_graph(
        w.nodes, "main_graph", [helper.make_tensor_value_info(x, TensorProto.FLOAT, (1, seq, hidden))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, seq, hidden))],
        initializer=w.inits)
    model = helper.make_model(graph, opset_imports=opsets, functions=[half, gelu, leaky],
                              producer_name="pytorch", producer_version="2.9.0")
    model.ir_version = 10
    return model
