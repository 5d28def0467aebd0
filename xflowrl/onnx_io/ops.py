"""ONNX operators with an engine form: one import handler per op type.

A handler takes the importer and a node whose inputs are not all constants
(those are folded before) and returns one `Value` per node output, or raises
`NotEngineOp` when this instance has no engine form (the node then becomes
an opaque op). Semantics follow the ONNX operator specification for opsets
11 and later; docs/onnx.md lists the mapping.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import helper

from xflowrl.engine.graph import Tensor
from xflowrl.onnx_io.common import OpaqueRecord, encode_opaque
from xflowrl.ops import window

Shape = Tuple[int, ...]
_LOWEST = np.float32(-np.inf)


class Value(NamedTuple):
    """What one ONNX tensor name is bound to during import."""
    const: Optional[np.ndarray]   # a constant's value, else None
    tensor: Optional[Tensor]      # an engine tensor, else None (until requested)
    elem_type: int                # ONNX element type
    shape: Shape

    @property
    def is_const(self) -> bool:
        return self.const is not None


class NotEngineOp(Exception):
    """Raised by an op handler: this node has no engine form; keep it opaque."""


def _attrs(node: onnx.NodeProto) -> Dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _out(imp, tensor: Tensor, like: Value) -> Value:
    return Value(None, tensor, like.elem_type, tensor.shape)


def _not_engine() -> NotEngineOp:
    return NotEngineOp()


def _check_float_tensor(v) -> None:
    if v is None or v.is_const or len(v.shape) == 0 or 0 in v.shape:
        raise _not_engine()


def _int_vector(value, what: str) -> List[int]:
    """A constant that must be a 1-D integer tensor (a 0-d one is read as
    one element), as Python ints; ValueError otherwise."""
    value = np.asarray(value)
    if value.dtype.kind not in "iu" or value.ndim > 1:
        raise ValueError(f"{what} must be a 1-D integer tensor, got {value.dtype}"
                         f"{list(value.shape)}")
    return [int(v) for v in value.reshape(-1)]


def _window_attrs(kernel: Sequence[int], strides: Sequence[int], pads=None) -> None:
    """2-D window attributes: two positive kernel sizes and strides, four
    non-negative pads; ValueError otherwise (a zero stride would divide by
    zero)."""
    if len(kernel) != 2 or any(int(k) < 1 for k in kernel):
        raise ValueError(f"kernel_shape {list(kernel)} must be two positive sizes")
    if len(strides) != 2 or any(int(v) < 1 for v in strides):
        raise ValueError(f"strides {list(strides)} must be two positive ints")
    if pads is not None and (len(pads) != 4 or any(int(v) < 0 for v in pads)):
        raise ValueError(f"pads {list(pads)} must be four non-negative ints")


def _norm_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis % rank


# ------------------------------------------------------------- padding


def _pads_2d(attrs, in_hw: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
             ceil_mode: bool = False) -> Tuple[List[Tuple[int, int]], List[int]]:
    """Per spatial dim the (before, after) padding actually used and the
    output size, from ONNX's auto_pad/pads/ceil_mode."""
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode(errors="replace") if isinstance(auto_pad, bytes) else auto_pad
    pads = list(attrs.get("pads", [0] * 4))
    _window_attrs(kernel, strides, pads if auto_pad == "NOTSET" else None)
    result, outs = [], []
    for d, (size, k, s) in enumerate(zip(in_hw, kernel, strides)):
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            # The engine's SAME (SAME_UPPER); SAME_LOWER puts the larger half first.
            out, before, after = window(size, k, s, "SAME")
            if auto_pad == "SAME_LOWER":
                before, after = after, before
        elif auto_pad == "VALID":
            before = after = 0
            out = None
        elif auto_pad == "NOTSET":
            before, after = pads[d], pads[d + 2]
            out = None
        else:
            raise ValueError(f"unknown auto_pad {auto_pad!r}")
        if out is None:
            span = size + before + after - k
            if span < 0:
                raise ValueError(f"kernel {k} larger than the padded input {size}")
            out = (-(-span // s) if ceil_mode else span // s) + 1
            if ceil_mode and (out - 1) * s >= size + before:
                out -= 1  # the last window would start in the end padding
        used_after = max((out - 1) * s + k - size - before, 0)
        result.append((before, used_after))
        outs.append(out)
    return result, outs


def _engine_padding(pads, in_hw, kernel, strides) -> Optional[str]:
    """"SAME" or "VALID" if the engine's rule gives exactly `pads`, else None.
    SAME wins ties (the zoo's 1x1 convs are SAME)."""
    for mode in ("SAME", "VALID"):
        try:
            geo = [window(size, k, s, mode) for size, k, s in zip(in_hw, kernel, strides)]
        except ValueError:
            continue
        if all((g.pad_before, g.pad_after) == p for g, p in zip(geo, pads)):
            return mode
    return None


def _pad_op(imp, node, x, pads, fill: float):
    """An explicit ONNX Pad (opaque op) of the spatial dims of `x`."""
    (pt, pb), (pl, pr) = pads
    name = imp.fresh_name(f"{node.name or node.op_type}__pad")
    pads_name, fill_name = f"{name}.pads", f"{name}.value"
    pad_node = helper.make_node("Pad", [name + ".x", pads_name, fill_name], [name],
                                name=name, mode="constant")
    record = OpaqueRecord(pad_node, {pads_name: np.array([0, 0, pt, pl, 0, 0, pb, pr], np.int64),
                                     fill_name: np.array(fill, np.float32)},
                          [onnx.TensorProto.FLOAT])
    n, c, h, w = x.shape
    shape = (n, c, h + pt + pb, w + pl + pr)
    return imp.builder.opaque(op_type=encode_opaque(record), inputs=[x],
                              output_shapes=[shape], flops=int(np.prod(shape)))[0]


def _spatial(imp, node, x, kernel, strides, attrs, fill, ceil_mode=False):
    """(input, engine padding) for a conv/pool: an explicit Pad op first when
    the ONNX padding is neither SAME nor VALID."""
    pads, _ = _pads_2d(attrs, x.shape[2:], kernel, strides, ceil_mode)
    mode = _engine_padding(pads, x.shape[2:], kernel, strides)
    if mode is not None:
        return x, mode
    if fill is None:
        raise _not_engine()
    return _pad_op(imp, node, x, pads, fill), "VALID"


def _check_2d_window(attrs, x_rank) -> None:
    if x_rank != 4 or any(d != 1 for d in attrs.get("dilations", [1, 1])):
        raise _not_engine()


# ------------------------------------------------------------- handlers


def conv(imp, node):
    x, w = imp.value(node, 0), imp.value(node, 1)
    _check_float_tensor(x)
    attrs = _attrs(node)
    _check_2d_window(attrs, len(x.shape))
    if len(w.shape) != 4:
        raise _not_engine()
    groups = attrs.get("group", 1)
    if x.shape[1] != w.shape[1] * groups:
        raise ValueError(f"input channels {x.shape[1]} != weight's {w.shape[1]} x group "
                         f"{groups}")
    strides = attrs.get("strides", [1, 1])
    xt, padding = _spatial(imp, node, imp.tensor(node.input[0]), w.shape[2:], strides,
                           attrs, 0.0)
    y = imp.builder.conv2d(input=xt, weight=imp.tensor(node.input[1]), strides=strides,
                           padding=padding)
    if imp.value(node, 2) is not None:
        y = imp.builder.broadcast_add(input=y, bias=imp.tensor(node.input[2]))
    return [_out(imp, y, x)]


def _pool(imp, node, kind: str):
    x = imp.value(node, 0)
    _check_float_tensor(x)
    attrs = _attrs(node)
    _check_2d_window(attrs, len(x.shape))
    if len([o for o in node.output if o]) > 1:  # MaxPool's Indices
        raise _not_engine()
    if "kernel_shape" not in attrs:
        raise ValueError("kernel_shape is required")
    kernel, strides = attrs["kernel_shape"], attrs.get("strides", [1, 1])
    _window_attrs(kernel, strides)
    ceil_mode = bool(attrs.get("ceil_mode", 0))
    xt = imp.tensor(node.input[0])
    if kind == "max":
        # Padding is -inf: never the maximum, as ONNX ignores it.
        xt, padding = _spatial(imp, node, xt, kernel, strides, attrs, float(_LOWEST),
                               ceil_mode)
    elif attrs.get("count_include_pad", 0):
        # Padding counts in the divisor: pad with zeros, then a VALID average.
        pads, outs = _pads_2d(attrs, x.shape[2:], kernel, strides, ceil_mode)
        if ceil_mode and outs != _pads_2d(attrs, x.shape[2:], kernel, strides)[1]:
            raise _not_engine()  # windows past the padding: a smaller divisor
        if any(p != (0, 0) for p in pads):
            xt = _pad_op(imp, node, xt, pads, 0.0)
        padding = "VALID"
    else:
        # Padding excluded from the divisor: only the engine's SAME and VALID.
        xt, padding = _spatial(imp, node, xt, kernel, strides, attrs, None, ceil_mode)
    build = imp.builder.maxpool2d if kind == "max" else imp.builder.avgpool2d
    return [_out(imp, build(input=xt, kernel=kernel, strides=strides, padding=padding), x)]


def _global_pool(imp, node, kind: str):
    x = imp.value(node, 0)
    _check_float_tensor(x)
    if len(x.shape) != 4:
        raise _not_engine()
    build = imp.builder.maxpool2d if kind == "max" else imp.builder.avgpool2d
    y = build(input=imp.tensor(node.input[0]), kernel=x.shape[2:], strides=1,
              padding="VALID")
    return [_out(imp, y, x)]


def batch_norm(imp, node):
    x = imp.value(node, 0)
    _check_float_tensor(x)
    attrs = _attrs(node)
    if len(x.shape) != 4 or attrs.get("training_mode", 0) or len(
            [o for o in node.output if o]) > 1:
        raise _not_engine()
    args = {k: imp.tensor(node.input[i]) for i, k in
            enumerate(("input", "scale", "bias", "mean", "var"))}
    y = imp.builder.batchnorm(epsilon=attrs.get("epsilon", 1e-5), **args)
    return [_out(imp, y, x)]


def _unary(kind: str):
    def handler(imp, node):
        x = imp.value(node, 0)
        _check_float_tensor(x)
        return [_out(imp, getattr(imp.builder, kind)(input=imp.tensor(node.input[0])), x)]
    return handler


def _binary(kind: str):
    def handler(imp, node):
        a, b = imp.value(node, 0), imp.value(node, 1)
        tensor = a if not a.is_const else b
        if any(len(v.shape) == 0 and not v.is_const for v in (a, b)) or 0 in tensor.shape:
            raise _not_engine()
        if a.elem_type != b.elem_type:
            raise _not_engine()
        if kind == "mul":
            scaled = _scalar_mul(imp, node, a, b)
            if scaled is not None:
                return [_out(imp, scaled, tensor)]
        y = getattr(imp.builder, kind)(x=imp.tensor(node.input[0], as_vector=True),
                                       y=imp.tensor(node.input[1], as_vector=True))
        if y.shape != tuple(np.broadcast_shapes(a.shape, b.shape)):
            raise ValueError("broadcast shape mismatch")  # rank-0 operand of a rank-0 op
        return [_out(imp, y, tensor)]
    return handler


def _scalar_mul(imp, node, a: Value, b: Value) -> Optional[Tensor]:
    """`scalar_mul` for a product by a one-element constant that does not
    change the other operand's shape, else None."""
    for x, s, slot in ((a, b, 1), (b, a, 0)):
        if (s.const is not None and s.const.size == 1 and not x.is_const
                and tuple(np.broadcast_shapes(x.shape, s.shape)) == tuple(x.shape)):
            scale = imp.new_weight(node.input[slot], s.const.reshape(1))
            return imp.builder.scalar_mul(x=imp.tensor(node.input[1 - slot]), scale=scale)
    return None


def mat_mul(imp, node):
    a, b = imp.value(node, 0), imp.value(node, 1)
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise _not_engine()
    at, bt = imp.tensor(node.input[0]), imp.tensor(node.input[1])
    ref = a if not a.is_const else b
    if len(a.shape) == len(b.shape) and a.shape[:-2] == b.shape[:-2]:
        return [_out(imp, imp.builder.matmul(a=at, b=bt), ref)]
    if len(b.shape) == 2 and len(a.shape) > 2:
        # [..., M, K] x [K, N]: one 2-D product over the flattened rows.
        rows = int(np.prod(a.shape[:-1]))
        flat = imp.reshape(at, (rows, a.shape[-1]))
        y = imp.builder.matmul(a=flat, b=bt)
        return [_out(imp, imp.reshape(y, a.shape[:-1] + (b.shape[1],)), ref)]
    raise _not_engine()


def gemm(imp, node):
    a, b = imp.value(node, 0), imp.value(node, 1)
    attrs = _attrs(node)
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise _not_engine()
    at = imp.tensor(node.input[0])
    if attrs.get("transA", 0):
        at = imp.transpose(at, (1, 0))
    if b.is_const and attrs.get("transB", 0):
        bt = imp.new_weight(node.input[1] + "__T", np.ascontiguousarray(b.const.T))
    else:
        bt = imp.tensor(node.input[1])
        if attrs.get("transB", 0):
            bt = imp.transpose(bt, (1, 0))
    y = imp.builder.matmul(a=at, b=bt)
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if alpha != 1.0:
        y = imp.builder.scalar_mul(x=y, scale=imp.new_weight(f"{node.name or 'gemm'}__alpha",
                                                             np.array([alpha], np.float32)))
    c = imp.value(node, 2)
    if c is not None and beta != 0.0:
        if c.is_const:
            value = c.const if beta == 1.0 else (c.const * beta).astype(c.const.dtype)
            ct = (imp.tensor(node.input[2], as_vector=True) if beta == 1.0 else
                  imp.new_weight(node.input[2] + "__beta", value.reshape(value.shape or (1,))))
        else:
            ct = imp.tensor(node.input[2])
            if beta != 1.0:
                ct = imp.builder.scalar_mul(
                    x=ct, scale=imp.new_weight(f"{node.name or 'gemm'}__beta",
                                               np.array([beta], np.float32)))
        y = imp.builder.add(x=y, y=ct)
    return [_out(imp, y, a if not a.is_const else b)]


def concat(imp, node):
    vals = [imp.value(node, i) for i in range(len(node.input))]
    ref = next(v for v in vals if not v.is_const)
    if "axis" not in _attrs(node):
        raise ValueError("the axis attribute is required")
    axis = _norm_axis(_attrs(node)["axis"], len(ref.shape))
    if len(vals) == 1:
        return [ref]
    if any(len(v.shape) == 0 or 0 in v.shape for v in vals):
        raise _not_engine()
    y = imp.builder.concat(inputs=[imp.tensor(n) for n in node.input], axis=axis)
    return [_out(imp, y, ref)]


def split(imp, node):
    x = imp.value(node, 0)
    _check_float_tensor(x)
    attrs = _attrs(node)
    axis = _norm_axis(attrs.get("axis", 0), len(x.shape))
    n_out = len(node.output)
    sizes = imp.const_input(node, 1, "split sizes") if imp.opset >= 13 else None
    if sizes is None:
        sizes = attrs.get("split")
    if sizes is None:
        length = x.shape[axis]
        n = attrs.get("num_outputs", n_out)
        chunk = -(-length // n)
        sizes = [chunk] * (length // chunk) + ([length % chunk] if length % chunk else [])
    sizes = _int_vector(sizes, "split sizes")
    if len(sizes) != n_out:
        raise ValueError(f"{len(sizes)} split sizes for {n_out} outputs")
    if n_out == 1:
        return [x]
    if min(sizes) < 1:
        raise _not_engine()
    outs = imp.builder.split(input=imp.tensor(node.input[0]), axis=axis, sizes=sizes)
    return [_out(imp, t, x) for t in outs]


def _reshape_to(imp, node, shape: Sequence[int]):
    x = imp.value(node, 0)
    if len(x.shape) == 0 or len(shape) == 0 or 0 in shape or x.is_const:
        raise _not_engine()
    shape = tuple(int(d) for d in shape)
    if shape == x.shape:
        return [x]
    return [_out(imp, imp.reshape(imp.tensor(node.input[0]), shape), x)]


def reshape(imp, node):
    x = imp.value(node, 0)
    target = _int_vector(imp.const_input(node, 1, "the target shape"), "the target shape")
    if len(target) > len(x.shape) and any(d == 0 for d in target[len(x.shape):]):
        raise ValueError(f"target shape {target}: 0 copies a dimension {x.shape} lacks")
    allow_zero = _attrs(node).get("allowzero", 0)
    out = [x.shape[i] if d == 0 and not allow_zero else d for i, d in enumerate(target)]
    if out.count(-1) > 1:
        raise ValueError(f"target shape {target} has more than one -1")
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        if known == 0:
            raise _not_engine()
        out[out.index(-1)] = int(np.prod(x.shape)) // known
    if int(np.prod(out)) != int(np.prod(x.shape)):
        raise ValueError(f"cannot reshape {x.shape} to {target}")
    return _reshape_to(imp, node, out)


def flatten(imp, node):
    x = imp.value(node, 0)
    axis = _attrs(node).get("axis", 1)
    axis = axis + len(x.shape) if axis < 0 else axis
    return _reshape_to(imp, node, (int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))))


def _axes(imp, node):
    axes = imp.const_input(node, 1, "axes") if imp.opset >= 13 else None
    axes = _attrs(node).get("axes") if axes is None else axes
    return None if axes is None else _int_vector(axes, "axes")


def squeeze(imp, node):
    x = imp.value(node, 0)
    axes = _axes(imp, node)
    rank = len(x.shape)
    axes = {d for d in range(rank) if x.shape[d] == 1} if axes is None else {
        _norm_axis(a, rank) for a in axes}
    if any(x.shape[a] != 1 for a in axes):
        raise ValueError(f"cannot squeeze axes {sorted(axes)} of shape {x.shape}")
    return _reshape_to(imp, node, [d for i, d in enumerate(x.shape) if i not in axes])


def unsqueeze(imp, node):
    x = imp.value(node, 0)
    axes = _axes(imp, node)
    if axes is None:
        raise ValueError("axes are required")
    rank = len(x.shape) + len(axes)
    normed = {_norm_axis(a, rank) for a in axes}
    if len(normed) != len(axes):
        raise ValueError(f"axes {axes} repeat an axis")
    axes = normed
    dims = iter(x.shape)
    return _reshape_to(imp, node, [1 if i in axes else next(dims) for i in range(rank)])


def transpose(imp, node):
    x = imp.value(node, 0)
    _check_float_tensor(x)
    perm = _attrs(node).get("perm", list(range(len(x.shape)))[::-1])
    if sorted(perm) != list(range(len(x.shape))):
        raise ValueError(f"perm {list(perm)} is not a permutation of the {len(x.shape)} axes")
    if list(perm) == list(range(len(x.shape))):
        return [x]
    y = imp.transpose(imp.tensor(node.input[0]), perm)
    return [_out(imp, y, x)]


def identity(imp, node):
    if len([o for o in node.output if o]) > 1:  # Dropout's mask
        raise _not_engine()
    return [imp.value(node, 0)]


def shape(imp, node):
    x = imp.value(node, 0)
    attrs = _attrs(node)
    dims = np.array(x.shape, dtype=np.int64)[attrs.get("start", 0):attrs.get("end", None)]
    return [imp.bind(node.output[0], const=dims)]


def size(imp, node):
    return [imp.bind(node.output[0], const=np.array(np.prod(imp.value(node, 0).shape),
                                                     dtype=np.int64))]


def cast(imp, node):
    x = imp.value(node, 0)
    if _attrs(node)["to"] != x.elem_type:
        raise _not_engine()
    return [x]


HANDLERS: Dict[str, Callable] = {
    "Conv": conv,
    "MaxPool": lambda imp, node: _pool(imp, node, "max"),
    "AveragePool": lambda imp, node: _pool(imp, node, "avg"),
    "GlobalAveragePool": lambda imp, node: _global_pool(imp, node, "avg"),
    "GlobalMaxPool": lambda imp, node: _global_pool(imp, node, "max"),
    "BatchNormalization": batch_norm,
    "Relu": _unary("relu"),
    "Sigmoid": _unary("sigmoid"),
    "Tanh": _unary("tanh"),
    "Add": _binary("add"),
    "Sub": _binary("sub"),
    "Mul": _binary("mul"),
    "Div": _binary("div"),
    "MatMul": mat_mul,
    "Gemm": gemm,
    "Concat": concat,
    "Split": split,
    "Reshape": reshape,
    "Flatten": flatten,
    "Squeeze": squeeze,
    "Unsqueeze": unsqueeze,
    "Transpose": transpose,
    "Identity": identity,
    "Dropout": identity,
    "Shape": shape,
    "Size": size,
    "Cast": cast,
}
