"""The reference executor: numpy semantics of every engine operator.

This is the project's ground truth for "a rewrite preserves semantics": a
graph and each of its rewrites are run here on the same inputs and weights and
must agree. It favours clarity over speed, but convolutions are vectorised
(patches + einsum) so that small networks run in milliseconds. Semantics
follow docs/engine.md (NCHW; TF-style SAME padding).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping

import numpy as np

_ACTIVATIONS: Dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "NONE": lambda x: x,
    "RELU": lambda x: np.maximum(x, 0),
    "SIGMOID": lambda x: 1 / (1 + np.exp(-x)),
    "TANH": np.tanh,
}


def _same_or_valid(size: int, k: int, s: int, padding: str):
    """(out, pad_before, pad_after) for one spatial dim (TF's rule)."""
    if padding == "SAME":
        out = -(-size // s)
        total = max((out - 1) * s + k - size, 0)
        return out, total // 2, total - total // 2
    return (size - k) // s + 1, 0, 0


def _patches(x: np.ndarray, kh: int, kw: int, params, fill: float) -> np.ndarray:
    """[N, C, OH, OW, kh, kw] windows of the padded input."""
    sh, sw, padding = params["stride_h"], params["stride_w"], params["padding"]
    oh, pt, pb = _same_or_valid(x.shape[2], kh, sh, padding)
    ow, pl, pr = _same_or_valid(x.shape[3], kw, sw, padding)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=fill)
    windows = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    return windows[:, :, ::sh, ::sw][:, :, :oh, :ow]


def conv2d(x, w, params):
    n, c = x.shape[:2]
    o, cg, kh, kw = w.shape
    groups = c // cg
    patches = _patches(x, kh, kw, params, 0.0)           # [N, C, OH, OW, kh, kw]
    oh, ow = patches.shape[2:4]
    patches = patches.reshape(n, groups, cg, oh, ow, kh, kw)
    wg = w.reshape(groups, o // groups, cg, kh, kw)
    y = np.einsum("ngchwij,gocij->ngohw", patches, wg, optimize=True)
    return _ACTIVATIONS[params["activation"]](y.reshape(n, o, oh, ow))


def pool(x, params, kind: str):
    kh, kw = params["kernel_h"], params["kernel_w"]
    if kind == "max":
        y = _patches(x, kh, kw, params, -np.inf).max(axis=(4, 5))
    else:
        # Average over real elements only (padding excluded, as cuDNN/oneDNN).
        total = _patches(x, kh, kw, params, 0.0).sum(axis=(4, 5))
        ones = np.ones((1, 1) + x.shape[2:], dtype=x.dtype)
        count = _patches(ones, kh, kw, params, 0.0).sum(axis=(4, 5))
        y = total / count
    return _ACTIVATIONS[params["activation"]](y)


def enlarge(w1, w2):
    dh, dw = w2.shape[2] - w1.shape[2], w2.shape[3] - w1.shape[3]
    return np.pad(w1, ((0, 0), (0, 0), (dh // 2, dh - dh // 2), (dw // 2, dw - dw // 2)))


def merge_gconv(w, count: int, groups: int):
    """Block-diagonal weight for groups // count groups (docs/engine.md)."""
    o, i, kh, kw = w.shape
    out = np.zeros((o, i * count, kh, kw), dtype=w.dtype)
    per_group = o // groups
    for oc in range(o):
        slot = (oc // per_group) % count
        out[oc, slot * i:(slot + 1) * i] = w[oc]
    return out


def _channel(v, rank):
    return v.reshape((1, -1) + (1,) * (rank - 2))


def _run_op(op, args: List[np.ndarray]) -> List[np.ndarray]:
    t, p = op.type, op.params
    if t == "conv2d":
        return [conv2d(args[0], args[1], p)]
    if t == "maxpool":
        return [pool(args[0], p, "max")]
    if t == "avgpool":
        return [pool(args[0], p, "avg")]
    if t in ("relu", "sigmoid", "tanh"):
        return [_ACTIVATIONS[t.upper()](args[0])]
    if t in ("add", "mul", "sub", "div"):
        fn = {"add": np.add, "mul": np.multiply, "sub": np.subtract, "div": np.divide}[t]
        return [fn(args[0], args[1])]
    if t == "matmul":
        return [_ACTIVATIONS[p["activation"]](np.matmul(args[0], args[1]))]
    if t == "batchnorm":
        x, scale, bias, mean, var = args
        r = x.ndim
        return [_channel(scale, r) * (x - _channel(mean, r))
                / np.sqrt(_channel(var, r) + p["epsilon"]) + _channel(bias, r)]
    if t == "concat":
        return [np.concatenate(args, axis=p["axis"])]
    if t == "split":
        cuts = np.cumsum(p["sizes"])[:-1]
        return list(np.split(args[0], cuts, axis=p["axis"]))
    if t == "reshape":
        shape = [args[0].shape[i] if d == 0 else d for i, d in enumerate(p["shape"])]
        return [args[0].reshape(shape)]
    if t == "transpose":
        return [np.transpose(args[0], p["perm"])]
    if t == "enlarge":
        return [enlarge(args[0], args[1])]
    if t == "merge_gconv":
        return [merge_gconv(args[0], p["count"], p["groups"])]
    if t == "fuse_conv_bn_alpha_var":
        w, scale, var = args
        alpha = scale / np.sqrt(var + p["epsilon"])
        return [w * alpha.reshape((-1,) + (1,) * (w.ndim - 1))]
    if t == "fuse_conv_bn_bias":
        scale, bias, mean, var = args
        return [bias - scale * mean / np.sqrt(var + p["epsilon"])]
    if t == "broadcast_add":
        return [args[0] + _channel(args[1], args[0].ndim)]
    raise NotImplementedError(f"the reference executor cannot run {t} ops")


def execute(graph, feeds: Mapping[str, np.ndarray], dtype=np.float64) -> List[np.ndarray]:
    """Runs `graph` on `feeds` (a value for every input and weight, by name).

    Returns:
      The values of `graph.outputs()`, in order.

    Raises:
      KeyError: a feed is missing.
      ValueError: a feed has the wrong shape.
    """
    values: Dict[tuple, np.ndarray] = {}
    for op in graph.ops():
        if op.type in ("input", "weight"):
            if op.name not in feeds:
                raise KeyError(f"no value fed for {op.type} {op.name!r}")
            value = np.asarray(feeds[op.name], dtype=dtype)
            if value.shape != tuple(op.output_shapes[0]):
                raise ValueError(f"{op.type} {op.name!r} needs shape "
                                 f"{tuple(op.output_shapes[0])}, got {value.shape}")
            outs = [value]
        else:
            outs = _run_op(op, [values[t] for t in op.inputs])
        for k, out in enumerate(outs):
            if out.shape != tuple(op.output_shapes[k]):
                raise AssertionError(f"{op.type} op {op.guid}: executor made {out.shape}, "
                                     f"engine inferred {tuple(op.output_shapes[k])}")
            values[(op.guid, k)] = out
    return [values[tuple(t)] for t in graph.outputs()]


def random_feeds(graph, seed: int = 0, scale: float = 1.0) -> Dict[str, np.ndarray]:
    """Random values for every input and weight of `graph`, by name.

    Batch-norm variances are drawn positive so that every graph is finite.
    """
    rng = np.random.default_rng(seed)
    positive = set()
    for op in graph.ops():
        if op.type == "batchnorm":
            positive.add(op.inputs[4][0])
        elif op.type in ("fuse_conv_bn_alpha_var", "fuse_conv_bn_bias"):
            positive.add(op.inputs[-1][0])
    feeds = {}
    for op in graph.ops():
        if op.type not in ("input", "weight"):
            continue
        shape = tuple(op.output_shapes[0])
        if op.guid in positive:
            feeds[op.name] = rng.uniform(0.5, 1.5, size=shape)
        else:
            feeds[op.name] = scale * rng.standard_normal(size=shape)
    return feeds
