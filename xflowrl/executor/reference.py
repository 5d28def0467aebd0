"""The reference executor: numpy semantics of every engine operator.

This module is the project's ground truth for "a rewrite preserves
semantics": a graph and each of its rewrites run here on the same inputs and
weights and must agree. Every operator follows docs/engine.md (NCHW layout,
TensorFlow's SAME padding rule, inference batch norm). It favours clarity over
speed, except that convolutions and pools are vectorised (one strided slice
per kernel tap, then one batched matrix product), so that a 64-channel 56x56
3x3 convolution runs in tens of milliseconds.

`execute` works on any object with the graph view of docs/engine.md:
`ops()` (a list of `OpInfo(guid, type, params, inputs, output_shapes, name)` in
topological order) and `outputs()` (a list of `(guid, index)`). Values are
bound to the graph's `input` and `weight` ops by name.

Operator facts (arities, the leaf types) and the SAME/VALID padding rule
(`window`) come from the engine's op table (`xflowrl.ops`); the
semantics are this module's own. tests/executor/reference_test.py checks
convolutions and pools against slow loops with an independent padding rule.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Sequence, Set, Tuple

import numpy as np

from xflowrl.ops import ARITY, LEAF_TYPES, window

TensorId = Tuple[int, int]  # (op guid, output index)

_ACTIVATIONS: Dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "NONE": lambda x: x,
    "RELU": lambda x: np.maximum(x, 0),
    "SIGMOID": lambda x: 1 / (1 + np.exp(-x)),
    "TANH": np.tanh,
}

# Ops whose output is a rearrangement of their inputs: a positive variance
# stays positive through them (random_feeds traces through these).
_REARRANGING_TYPES = ("concat", "split", "reshape", "transpose")


def activate(x: np.ndarray, activation: str) -> np.ndarray:
    """Applies a fused activation ("NONE", "RELU", "SIGMOID" or "TANH").

    Raises:
      ValueError: unknown activation.
    """
    try:
        return _ACTIVATIONS[activation](x)
    except KeyError:
        raise ValueError(f"unknown activation {activation!r}; expected one of "
                         f"{sorted(_ACTIVATIONS)}") from None


# ----------------------------------------------------------------- windows


def _taps(x: np.ndarray, kh: int, kw: int, params: Mapping[str, Any],
          fill: float) -> Iterable[Tuple[int, int, np.ndarray]]:
    """Yields (i, j, x_ij) per kernel tap; x_ij [N, C, OH, OW] is the padded
    input element that tap (i, j) reads at every output position."""
    sh, sw = params["stride_h"], params["stride_w"]
    wh = window(x.shape[2], kh, sh, params["padding"])
    ww = window(x.shape[3], kw, sw, params["padding"])
    padded = np.pad(x, ((0, 0), (0, 0), (wh.pad_before, wh.pad_after),
                        (ww.pad_before, ww.pad_after)), constant_values=fill)
    for i in range(kh):
        for j in range(kw):
            yield i, j, padded[:, :, i:i + sh * (wh.out - 1) + 1:sh,
                               j:j + sw * (ww.out - 1) + 1:sw]


def _check_rank(name: str, x: np.ndarray, rank: int) -> None:
    if x.ndim != rank:
        raise ValueError(f"{name} must have rank {rank}, got shape {x.shape}")


# --------------------------------------------------------------- operators


def conv2d(x: np.ndarray, w: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """Grouped 2-D convolution with fused activation.

    Args:
      x: [N, C, H, W] input.
      w: [O, C / g, kh, kw] weight; the group count is `g = C / w.shape[1]`.
      params: `stride_h`, `stride_w`, `padding` ("SAME"|"VALID"), `activation`.

    Returns:
      [N, O, OH, OW].

    Raises:
      ValueError: inconsistent shapes.
    """
    _check_rank("conv2d input", x, 4)
    _check_rank("conv2d weight", w, 4)
    n, c = x.shape[:2]
    o, cg, kh, kw = w.shape
    if cg < 1 or c % cg:
        raise ValueError(f"conv2d: input channels {c} are not a multiple of the weight's "
                         f"input channels {cg}")
    groups = c // cg
    if o % groups:
        raise ValueError(f"conv2d: output channels {o} are not divisible by the group "
                         f"count {groups}")
    # im2col: columns[n, c, i, j, oh, ow] = padded x[n, c, oh*s + i, ow*s + j].
    columns = None
    for i, j, tap in _taps(x, kh, kw, params, 0.0):
        if columns is None:
            columns = np.empty((n, c, kh, kw) + tap.shape[2:], dtype=np.result_type(x, w))
        columns[:, :, i, j] = tap
    if columns is None:
        raise ValueError(f"conv2d: empty kernel {kh}x{kw}")
    oh, ow = columns.shape[4:]
    columns = columns.reshape(n, groups, cg * kh * kw, oh * ow)     # [N, g, cg*kh*kw, P]
    w_groups = w.reshape(groups, o // groups, cg * kh * kw)        # [g, O/g, cg*kh*kw]
    y = np.matmul(w_groups[np.newaxis], columns)                    # [N, g, O/g, P]
    return activate(y.reshape(n, o, oh, ow), params["activation"])


def maxpool(x: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """Max pooling; padding elements are -inf (never the maximum)."""
    _check_rank("maxpool input", x, 4)
    y = None
    for _, _, tap in _taps(x, params["kernel_h"], params["kernel_w"], params, -np.inf):
        y = tap.copy() if y is None else np.maximum(y, tap)
    if y is None:
        raise ValueError(f"maxpool: empty kernel {params['kernel_h']}x{params['kernel_w']}")
    return activate(y, params["activation"])


def avgpool(x: np.ndarray, params: Mapping[str, Any]) -> np.ndarray:
    """Average pooling over the real (non-padding) elements of each window."""
    _check_rank("avgpool input", x, 4)
    kh, kw = params["kernel_h"], params["kernel_w"]
    total = sum(tap for _, _, tap in _taps(x, kh, kw, params, 0.0))
    ones = np.ones((1, 1) + x.shape[2:], dtype=x.dtype)
    count = sum(tap for _, _, tap in _taps(ones, kh, kw, params, 0.0))
    return activate(np.asarray(total / count), params["activation"])


def matmul(a: np.ndarray, b: np.ndarray, activation: str) -> np.ndarray:
    """Batched matrix product `[..., M, K] x [..., K, N]`, fused activation.

    Raises:
      ValueError: ranks differ, are below 2, batch dims differ or K differs.
    """
    if a.ndim != b.ndim or a.ndim < 2:
        raise ValueError(f"matmul needs operands of equal rank >= 2, got {a.shape} "
                         f"and {b.shape}")
    if a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match "
                         "([..., M, K] x [..., K, N] with equal batch dims)")
    return activate(np.matmul(a, b), activation)


def _per_channel(v: np.ndarray, rank: int) -> np.ndarray:
    """[C] -> [1, C, 1, ...] broadcasting over channel axis 1 of a rank-`rank` x."""
    return v.reshape((1, -1) + (1,) * (rank - 2))


def _check_channel_vectors(what: str, channels: int, **vectors: np.ndarray) -> None:
    for name, v in vectors.items():
        if v.shape != (channels,):
            raise ValueError(f"{what}: {name} must have shape ({channels},), got {v.shape}")


def batchnorm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
              var: np.ndarray, epsilon: float) -> np.ndarray:
    """Inference batch norm over channel axis 1."""
    if x.ndim < 2:
        raise ValueError(f"batchnorm input needs a channel axis, got shape {x.shape}")
    _check_channel_vectors("batchnorm", x.shape[1], scale=scale, bias=bias, mean=mean,
                           var=var)
    r = x.ndim
    return (_per_channel(scale, r) * (x - _per_channel(mean, r))
            / np.sqrt(_per_channel(var, r) + epsilon) + _per_channel(bias, r))


def split(x: np.ndarray, axis: int, sizes: Sequence[int]) -> List[np.ndarray]:
    """Splits `x` along `axis` into pieces of the given sizes.

    Raises:
      ValueError: the sizes do not add up to the axis' length.
    """
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
        raise ValueError(f"split sizes {tuple(sizes)} do not partition axis {axis} of "
                         f"shape {x.shape}")
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def reshape(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Reshapes `x`; 0 keeps the input's dimension there, -1 infers one.

    Raises:
      ValueError: more than one -1, a 0 past the input's rank, or a size
        mismatch.
    """
    if sum(d == -1 for d in shape) > 1:
        raise ValueError(f"reshape to {tuple(shape)}: at most one -1")
    target = []
    for i, d in enumerate(shape):
        if d == 0:
            if i >= x.ndim:
                raise ValueError(f"reshape to {tuple(shape)}: 0 at position {i} but the "
                                 f"input {x.shape} has rank {x.ndim}")
            d = x.shape[i]
        elif d < -1:
            raise ValueError(f"reshape to {tuple(shape)}: bad dimension {d}")
        target.append(d)
    if -1 in target:
        known = int(np.prod([d for d in target if d != -1]))
        if known == 0 or x.size % known:
            raise ValueError(f"reshape of {x.shape} to {tuple(shape)}: cannot infer -1")
        target[target.index(-1)] = x.size // known
    if int(np.prod(target)) != x.size:
        raise ValueError(f"reshape of {x.shape} ({x.size} elements) to {tuple(shape)}")
    return x.reshape(target)


def enlarge(w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """w1 zero-padded, centred, to the kernel size of w2.

    Raises:
      ValueError: w1's kernel is larger than w2's or differs by an odd amount.
    """
    _check_rank("enlarge w1", w1, 4)
    _check_rank("enlarge w2", w2, 4)
    dh, dw = w2.shape[2] - w1.shape[2], w2.shape[3] - w1.shape[3]
    if dh < 0 or dw < 0 or dh % 2 or dw % 2:
        raise ValueError(f"enlarge: kernel {w1.shape[2:]} cannot be centred in "
                         f"{w2.shape[2:]} (needs <= and even differences)")
    return np.pad(w1, ((0, 0), (0, 0), (dh // 2, dh // 2), (dw // 2, dw // 2)))


def merge_gconv(w: np.ndarray, count: int, groups: int) -> np.ndarray:
    """The weight of a `groups`-group conv regrouped into `groups / count` groups.

    Output channel `o` belongs to original group `go = o // (O / groups)`; the
    merged group holding it reads `count` original groups' inputs, of which
    `go`'s occupy slot `go % count`, so its weights move to input channels
    `[(go % count) * I, (go % count + 1) * I)` and the other slots are zero.

    Args:
      w: [O, I, kh, kw].
      count: how many groups merge into one.
      groups: the group count of the conv that reads `w`.

    Returns:
      [O, I * count, kh, kw], block diagonal.

    Raises:
      ValueError: `groups` is not a multiple of `count` or does not divide O.
    """
    _check_rank("merge_gconv weight", w, 4)
    o, i = w.shape[:2]
    if count < 1 or groups < count or groups % count or o % groups:
        raise ValueError(f"merge_gconv: cannot merge {groups} groups of a weight of shape "
                         f"{w.shape} by {count}")
    slot = (np.arange(o) // (o // groups)) % count                   # [O]
    merged = np.zeros((o, i * count) + w.shape[2:], dtype=w.dtype)
    for k in range(count):
        rows = slot == k
        merged[rows, k * i:(k + 1) * i] = w[rows]
    return merged


def fuse_conv_bn_alpha_var(w: np.ndarray, scale: np.ndarray, var: np.ndarray,
                           epsilon: float) -> np.ndarray:
    """`w * scale / sqrt(var + epsilon)` per output channel (axis 0)."""
    _check_channel_vectors("fuse_conv_bn_alpha_var", w.shape[0], scale=scale, var=var)
    alpha = scale / np.sqrt(var + epsilon)
    return w * alpha.reshape((-1,) + (1,) * (w.ndim - 1))


def fuse_conv_bn_bias(scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
                      var: np.ndarray, epsilon: float) -> np.ndarray:
    """`bias - scale * mean / sqrt(var + epsilon)`."""
    _check_rank("fuse_conv_bn_bias scale", scale, 1)
    _check_channel_vectors("fuse_conv_bn_bias", scale.shape[0], bias=bias, mean=mean,
                           var=var)
    return bias - scale * mean / np.sqrt(var + epsilon)


def broadcast_add(x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Adds `b[c]` over channel axis 1 of `x`."""
    if x.ndim < 2:
        raise ValueError(f"broadcast_add input needs a channel axis, got shape {x.shape}")
    _check_channel_vectors("broadcast_add", x.shape[1], b=b)
    return x + _per_channel(b, x.ndim)


_ELEMENTWISE: Dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add, "mul": np.multiply, "sub": np.subtract, "div": np.divide}


def scalar_mul(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """`x * s` for a one-element scale `s` of shape [1]."""
    if s.shape != (1,):
        raise ValueError(f"scalar_mul scale must have shape (1,), got {s.shape}")
    return x * s[0]


def run_op(op_type: str, params: Mapping[str, Any],
           args: Sequence[np.ndarray]) -> List[np.ndarray]:
    """Evaluates one op on its input values.

    Args:
      op_type: an operator type name of docs/engine.md.
      params: the op's parameters, as `OpInfo.params`.
      args: the op's input values, in slot order.

    Returns:
      The op's output values.

    Raises:
      NotImplementedError: an `opaque` op (imported, no semantics here).
      ValueError: an unknown type, a wrong number of inputs or bad shapes.
    """
    t, p = op_type, params
    if t == "opaque":
        raise NotImplementedError(
            "the reference executor cannot run opaque ops (imported type "
            f"{p.get('opaque_type', '?').partition('|')[0]!r}); export the graph "
            "(xflowrl.onnx_io.to_onnx) and run it with an ONNX runtime")
    if t not in ARITY or t in LEAF_TYPES:
        raise ValueError(f"unknown op type {t!r}")
    arity = ARITY[t]
    if arity is not None and len(args) != arity:
        raise ValueError(f"{t} takes {arity} inputs, got {len(args)}")
    if t == "conv2d":
        return [conv2d(args[0], args[1], p)]
    if t == "maxpool":
        return [maxpool(args[0], p)]
    if t == "avgpool":
        return [avgpool(args[0], p)]
    if t in ("relu", "sigmoid", "tanh"):
        return [activate(args[0], t.upper())]
    if t in _ELEMENTWISE:
        return [_ELEMENTWISE[t](args[0], args[1])]
    if t == "scalar_mul":
        return [scalar_mul(args[0], args[1])]
    if t == "matmul":
        return [matmul(args[0], args[1], p["activation"])]
    if t == "batchnorm":
        x, scale, bias, mean, var = args
        return [batchnorm(x, scale, bias, mean, var, epsilon=p["epsilon"])]
    if t == "concat":
        if not args:
            raise ValueError("concat needs at least one input")
        return [np.concatenate(args, axis=p["axis"])]
    if t == "split":
        return split(args[0], p["axis"], p["sizes"])
    if t == "reshape":
        return [reshape(args[0], p["shape"])]
    if t == "transpose":
        return [np.transpose(args[0], p["perm"])]
    if t == "enlarge":
        return [enlarge(args[0], args[1])]
    if t == "merge_gconv":
        return [merge_gconv(args[0], p["count"], p["groups"])]
    if t == "fuse_conv_bn_alpha_var":
        w, scale, var = args
        return [fuse_conv_bn_alpha_var(w, scale, var, epsilon=p["epsilon"])]
    if t == "fuse_conv_bn_bias":
        scale, bias, mean, var = args
        return [fuse_conv_bn_bias(scale, bias, mean, var, epsilon=p["epsilon"])]
    assert t == "broadcast_add", t
    return [activate(broadcast_add(args[0], args[1]), p.get("activation", "NONE"))]


# -------------------------------------------------------------- the graph


def _leaves(graph) -> List[Any]:
    return [op for op in graph.ops() if op.type in LEAF_TYPES]


def execute(graph, feeds: Mapping[str, np.ndarray], dtype=np.float64) -> List[np.ndarray]:
    """Runs `graph` on `feeds` and returns the values of `graph.outputs()`.

    Args:
      graph: any object with the graph view of docs/engine.md (`ops()` in
        topological order and `outputs()`).
      feeds: a value for every `input` and `weight` op, by name. Extra names
        are ignored, so one set of feeds serves a graph and its rewrites (a
        rewrite may drop weights).
      dtype: the dtype every value is computed in.

    Returns:
      The output values, in the order of `graph.outputs()`.

    Raises:
      KeyError: feeds are missing (all missing names are listed).
      ValueError: a feed has the wrong shape, an op reads a tensor that is not
        computed before it, an op's inputs are inconsistent, or the executor
        and the engine disagree about an output shape (each message names the
        op).
      NotImplementedError: the graph holds an `opaque` op.
    """
    ops = graph.ops()
    missing = sorted({op.name for op in ops if op.type in LEAF_TYPES} - set(feeds))
    if missing:
        raise KeyError(f"no value fed for {len(missing)} input/weight name(s): {missing}")

    values: Dict[TensorId, np.ndarray] = {}
    for op in ops:
        what = f"{op.type} op {op.guid}" + (f" ({op.name!r})" if op.name else "")
        if op.type in LEAF_TYPES:
            value = np.asarray(feeds[op.name], dtype=dtype)
            want = tuple(op.output_shapes[0])
            if value.shape != want:
                raise ValueError(f"{what}: fed shape {value.shape}, the graph needs {want}")
            outs = [value]
        else:
            try:
                args = [values[tuple(t)] for t in op.inputs]
            except KeyError as e:
                raise ValueError(f"{what} reads tensor {e.args[0]}, which is not computed "
                                 "before it (ops must be in topological order)") from None
            try:
                outs = run_op(op.type, op.params, args)
            except ValueError as e:
                raise ValueError(f"{what}: {e}") from e
            except NotImplementedError as e:
                raise NotImplementedError(f"{what}: {e}") from e
            outs = [np.asarray(out, dtype=dtype) for out in outs]
        if len(outs) != len(op.output_shapes):
            raise ValueError(f"{what}: the executor made {len(outs)} outputs, the engine "
                             f"declares {len(op.output_shapes)}")
        for k, out in enumerate(outs):
            if out.shape != tuple(op.output_shapes[k]):
                raise ValueError(f"{what}: the executor made output {k} of shape "
                                 f"{out.shape}, the engine inferred "
                                 f"{tuple(op.output_shapes[k])}")
            values[(op.guid, k)] = out
    try:
        return [values[tuple(t)] for t in graph.outputs()]
    except KeyError as e:
        raise ValueError(f"graph output {e.args[0]} is not produced by any op") from None


def _positive_leaves(graph) -> Set[int]:
    """Guids of the leaves a batch-norm variance is made from."""
    by_guid = {op.guid: op for op in graph.ops()}
    variance_tensors = []
    for op in graph.ops():
        if op.type == "batchnorm":
            variance_tensors.append(op.inputs[4])
        elif op.type in ("fuse_conv_bn_alpha_var", "fuse_conv_bn_bias"):
            variance_tensors.append(op.inputs[-1])
    positive: Set[int] = set()
    stack = [t[0] for t in variance_tensors]
    while stack:
        op = by_guid[stack.pop()]
        if op.type in LEAF_TYPES:
            positive.add(op.guid)
        elif op.type in _REARRANGING_TYPES:
            stack.extend(t[0] for t in op.inputs)
    return positive


def random_feeds(graph, seed: int = 0, scale: float = 1.0) -> Dict[str, np.ndarray]:
    """Random float64 values for every input and weight of `graph`, by name.

    Values are `scale * N(0, 1)`, except batch-norm variances (and the leaves
    they are concatenated, split, reshaped or transposed from), which are
    uniform in [0.5, 1.5] so that every graph computes finite values.

    Args:
      graph: the graph view of docs/engine.md.
      seed: seeds numpy's default generator; equal seeds give equal feeds.
      scale: standard deviation of the normal values.

    Returns:
      name -> array of the op's shape.
    """
    rng = np.random.default_rng(seed)
    positive = _positive_leaves(graph)
    feeds: Dict[str, np.ndarray] = {}
    for op in _leaves(graph):
        shape = tuple(op.output_shapes[0])
        if op.guid in positive:
            feeds[op.name] = rng.uniform(0.5, 1.5, size=shape)
        else:
            feeds[op.name] = scale * rng.standard_normal(size=shape)
    return feeds
