"""End-to-end inference time of an engine graph on a CUDA GPU, in PyTorch.

The GPU counterpart of `xflowrl.measure.ort_runtime`: where the cudnn cost
backend *estimates* a graph's runtime as the sum of its ops' measured
kernels, this module *runs* the whole graph on the GPU and times it, so that
an estimated gain on a GPU can be checked against a measured one
(benchmarks/cudnn_bench.py `--runtime`) and `xflowrl optimize --device=cuda`
can check and time a user's model on the GPU. PyTorch is an optional extra
(`pip install xflowrl[gpu]`): it is imported when a `TorchProgram` is built.

Devices and precisions: `device="cuda"` (the default) needs PyTorch with a
CUDA GPU; `device="cpu"` runs the same program in PyTorch on the CPU, the
GPU path's stand-in where there is no GPU (tests, dry runs): same ops,
same checks, eager timing only, wall clock. `dtype` is one of `DTYPES`:
inputs, weights (the weight-side ops still computed in float64, then cast)
and every op run in that precision.

How a graph runs (`TorchProgram`):

- **Weight-side ops run once, offline.** An op whose inputs all derive from
  weights (the fused-weight ops of the rewrite rules, a concat or
  transpose of weights) is what the cost model charges nothing for, as
  TASO does; it is evaluated once by the numpy reference executor
  (`xflowrl.executor.reference`) and uploaded as a constant.
- **Every other op is one PyTorch call** on tensors of `dtype` (a
  convolution with a fused ReLU is one cuDNN call,
  `torch.cudnn_convolution_relu`, as in the engine and the cudnn backend,
  unless `fuse_conv_relu=False` or on the CPU; other fused activations are a second
  kernel), with the semantics of docs/engine.md: TensorFlow's SAME padding (an explicit pad
  where it is asymmetric), max pooling that pads with -inf, average pooling
  over the real elements only, inference batch norm, fused activations.
  `check` compares the outputs against the reference executor.
- **Two timings**, each the median of `repeats` runs after `warmup` untimed
  ones, timed with CUDA events: `eager` (one Python call per op, what a
  framework's eager mode pays, launch overhead included) and `graph` (the
  same calls captured once in a CUDA graph and replayed: the kernels alone,
  closest to what the cudnn backend adds up). On the CPU only `eager`, by
  the wall clock. `interleaved_times` times several programs in rounds of
  a fresh random order, as `xflowrl.measure.compare` does on the CPU.

cuDNN autotuning (`torch.backends.cudnn.benchmark`) and TF32 tensor cores
are on for timing, as the cudnn backend allows them; `check` turns TF32 off
so that float32 results compare tightly.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from xflowrl.executor import reference
from xflowrl.ops import LEAF_TYPES, window

TensorId = Tuple[int, int]  # (op guid, output index)

# The precisions a program runs in.
DTYPES = ("float32", "bfloat16", "float16")
DEVICES = ("cuda", "cpu")
# The timing modes each device has.
MODES: Dict[str, Tuple[str, ...]] = {"cuda": ("graph", "eager"), "cpu": ("eager",)}


def _torch(device: str = "cuda"):
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise RuntimeError("xflowrl.measure.torch_runtime needs PyTorch (not installed; "
                           "pip install xflowrl[gpu])") from e
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("xflowrl.measure.torch_runtime: no CUDA device is visible")
    return torch


def unsupported_ops(graph) -> List[str]:
    """The ops of `graph` that `TorchProgram` has no PyTorch form for, as
    "type op GUID (name)", in graph order; empty when it can run the graph.
    Needs no PyTorch."""
    side = weight_side(graph)
    return [_describe(op) for op in graph.ops()
            if op.type not in LEAF_TYPES and op.guid not in side
            and op.type not in SUPPORTED_TYPES]


def _describe(op) -> str:
    """"type op GUID (name)"; an opaque op by its ONNX operator type."""
    name = getattr(op, "name", "")
    kind = op.type
    if op.type == "opaque":
        onnx_type = str(op.params.get("opaque_type", "")).split("|", 1)[0]
        kind = f"opaque op (ONNX {onnx_type})" if onnx_type else "opaque op"
    else:
        kind = f"{kind} op"
    return f"{kind} {op.guid}" + (f" ({name})" if name else "")


def weight_side(graph) -> Set[int]:
    """Guids of the ops computed from weights alone (weights included)."""
    side: Set[int] = set()
    for op in graph.ops():
        if op.type == "weight" or (op.type not in LEAF_TYPES and op.inputs
                                   and all(t[0] in side for t in op.inputs)):
            side.add(op.guid)
    return side


# The op types `TorchProgram` runs on non-weight inputs (`TorchProgram._op`).
SUPPORTED_TYPES = frozenset((
    "conv2d", "maxpool", "avgpool", "relu", "sigmoid", "tanh", "add", "mul", "sub", "div",
    "scalar_mul", "matmul", "batchnorm", "concat", "split", "reshape", "transpose",
    "broadcast_add"))


class TorchProgram:
    """A graph bound to feeds, ready to run on the GPU (module docstring).

    Raises (at construction):
      RuntimeError: no PyTorch, or no CUDA device for `device="cuda"`.
      ValueError: an unknown `dtype` or `device`.
      NotImplementedError: an op with no PyTorch form here (`opaque`, or a
        weight-preprocessing op applied to a non-weight input).
      KeyError: a feed is missing.
    """

    def __init__(self, graph, feeds: Mapping[str, np.ndarray], fuse_conv_relu: bool = True,
                 dtype: str = "float32", device: str = "cuda"):
        """Binds `graph` to `feeds` (a value for every input and weight, by
        name). `fuse_conv_relu`: run a convolution with a fused ReLU as one
        cuDNN call (default on a GPU; the engine's op, as the cudnn backend
        times it) rather than a convolution and a ReLU kernel. `dtype`: one of
        `DTYPES`; `device`: one of `DEVICES` (module docstring)."""
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        torch = self._torch = _torch(device)
        self.dtype_name, self.device_name = dtype, device
        self.dtype = getattr(torch, dtype)
        self.fuse_conv_relu = (fuse_conv_relu and device == "cuda"
                               and hasattr(torch, "cudnn_convolution_relu"))
        self._f = torch.nn.functional
        self.device = torch.device(device)
        # Fused convolution + ReLU calls that cuDNN refused (first call, before
        # any CUDA-graph capture) and that run as two kernels instead.
        self.unfused_conv_relu = 0
        lacking = unsupported_ops(graph)
        if lacking:
            raise NotImplementedError(f"{lacking[0]}: no PyTorch form for this op on "
                                      f"non-weight inputs"
                                      + (f" (and {len(lacking) - 1} more ops)"
                                         if len(lacking) > 1 else ""))
        ops = graph.ops()
        side = weight_side(graph)
        self._shapes = {(op.guid, k): tuple(shape) for op in ops
                        for k, shape in enumerate(op.output_shapes)}
        # Weight-side values by the reference executor (float64, then float32).
        offline: Dict[TensorId, np.ndarray] = {}
        for op in ops:
            if op.guid not in side:
                continue
            if op.type == "weight":
                outs = [np.asarray(feeds[op.name], np.float64)]
            else:
                outs = reference.run_op(op.type, op.params, [offline[tuple(t)]
                                                             for t in op.inputs])
            for k, out in enumerate(outs):
                offline[(op.guid, k)] = np.asarray(out)
        used = {tuple(t) for op in ops if op.guid not in side for t in op.inputs}
        used |= {tuple(t) for t in graph.outputs()}
        self._constants = {tid: torch.tensor(value, dtype=self.dtype, device=self.device)
                           for tid, value in offline.items() if tid in used}
        self._inputs = {}
        for op in ops:
            if op.type == "input":
                if op.name not in feeds:
                    raise KeyError(f"no value fed for input {op.name!r}")
                self._inputs[(op.guid, 0)] = torch.tensor(
                    np.asarray(feeds[op.name]), dtype=self.dtype, device=self.device)
        self._steps: List[Tuple[Callable[..., Any], List[TensorId], List[TensorId]]] = []
        for op in ops:
            if op.type in LEAF_TYPES or op.guid in side:
                continue
            produced = [(op.guid, k) for k in range(len(op.output_shapes))]
            self._steps.append((self._op(op), [tuple(t) for t in op.inputs], produced))
        self._outputs = [tuple(t) for t in graph.outputs()]
        self._graph: Any = None  # the CUDA graph of `run`, captured on first use
        self._captured: Any = None  # its output tensors, alive as long as it is

    # ------------------------------------------------------------ operators

    def _act(self, name: str) -> Callable[[Any], Any]:
        torch = self._torch
        return {"NONE": lambda x: x, "RELU": torch.relu, "SIGMOID": torch.sigmoid,
                "TANH": torch.tanh}[name]

    @staticmethod
    def _pads(in_shape: Sequence[int], kh: int, kw: int, p: Mapping[str, Any]):
        wh = window(in_shape[2], kh, p["stride_h"], p["padding"])
        ww = window(in_shape[3], kw, p["stride_w"], p["padding"])
        return (ww.pad_before, ww.pad_after, wh.pad_before, wh.pad_after)

    def _op(self, op) -> Callable[..., Any]:
        torch, F, t, p = self._torch, self._f, op.type, op.params
        if t == "conv2d":
            act = self._act(p["activation"])
            stride = (p["stride_h"], p["stride_w"])
            in_shape = self._in_shape(op, 0)
            w_shape = self._in_shape(op, 1)
            groups = in_shape[1] // w_shape[1]
            pads = self._pads(in_shape, w_shape[2], w_shape[3], p)
            if p["activation"] == "RELU" and self.fuse_conv_relu:
                # One cuDNN call, as the engine's fused op and the cudnn backend's
                # cudnnConvolutionBiasActivationForward: no separate ReLU kernel.
                symmetric = pads[0] == pads[1] and pads[2] == pads[3]
                padding = [pads[2], pads[0]] if symmetric else [0, 0]
                fused = [True]

                def conv_relu(x, w):
                    if fused[0]:
                        try:
                            return torch.cudnn_convolution_relu(
                                x if symmetric else F.pad(x, pads), w, None, list(stride),
                                padding, [1, 1], groups)
                        except RuntimeError:  # no fused kernel for this precision or shape:
                            fused[0] = False  # a convolution, then a ReLU kernel, from now on
                            self.unfused_conv_relu += 1
                    return torch.relu(F.conv2d(F.pad(x, pads), w, None, stride, 0, 1, groups))
                return conv_relu
            if pads[0] == pads[1] and pads[2] == pads[3]:
                return lambda x, w: act(F.conv2d(x, w, None, stride, (pads[2], pads[0]), 1,
                                                 groups))
            return lambda x, w: act(F.conv2d(F.pad(x, pads), w, None, stride, 0, 1, groups))
        if t in ("maxpool", "avgpool"):
            act = self._act(p["activation"])
            kernel, stride = (p["kernel_h"], p["kernel_w"]), (p["stride_h"], p["stride_w"])
            in_shape = self._in_shape(op, 0)
            pads = self._pads(in_shape, kernel[0], kernel[1], p)
            if t == "maxpool":
                return lambda x: act(F.max_pool2d(F.pad(x, pads, value=-float("inf")),
                                                  kernel, stride))
            ones = torch.ones((1, 1) + tuple(in_shape[2:]), device=self.device,
                              dtype=self.dtype)
            count = F.avg_pool2d(F.pad(ones, pads), kernel, stride)
            return lambda x: act(F.avg_pool2d(F.pad(x, pads), kernel, stride) / count)
        if t in ("relu", "sigmoid", "tanh"):
            return self._act(t.upper())
        if t in ("add", "mul", "sub", "div"):
            return {"add": torch.add, "mul": torch.mul, "sub": torch.sub,
                    "div": torch.div}[t]
        if t == "scalar_mul":
            return lambda x, s: x * s
        if t == "matmul":
            act = self._act(p["activation"])
            return lambda a, b: act(torch.matmul(a, b))
        if t == "batchnorm":
            eps = p["epsilon"]
            return lambda x, scale, bias, mean, var: F.batch_norm(
                x, mean, var, scale, bias, False, 0.0, eps)
        if t == "concat":
            axis = p["axis"]
            return lambda *xs: torch.cat(xs, axis)
        if t == "split":
            axis, sizes = p["axis"], list(p["sizes"])
            return lambda x: torch.split(x, sizes, axis)
        if t == "reshape":
            shape = tuple(op.output_shapes[0])
            return lambda x: x.reshape(shape)
        if t == "transpose":
            perm = tuple(p["perm"])
            return lambda x: x.permute(perm)
        if t == "broadcast_add":
            act = self._act(p.get("activation", "NONE"))
            rank = len(op.output_shapes[0])
            return lambda x, b: act(x + b.reshape((1, -1) + (1,) * (rank - 2)))
        raise NotImplementedError(f"{_describe(op)}: no PyTorch form for this op on "
                                  "non-weight inputs")

    def _in_shape(self, op, slot: int) -> Tuple[int, ...]:
        return tuple(self._shapes[tuple(op.inputs[slot])])

    # -------------------------------------------------------------- running

    def run(self) -> List[Any]:
        """The graph's outputs, as CUDA tensors (asynchronous)."""
        values: Dict[TensorId, Any] = {**self._constants, **self._inputs}
        for fn, ins, outs in self._steps:
            result = fn(*[values[t] for t in ins])
            if len(outs) == 1 and not isinstance(result, (tuple, list)):
                result = (result,)
            for tid, value in zip(outs, result):
                values[tid] = value
        return [values[t] for t in self._outputs]

    def outputs(self) -> List[np.ndarray]:
        """The graph's outputs as float64 NumPy arrays, computed with TF32 off
        (so that a float32 program computes in float32) and cuDNN's default
        algorithms (not the autotuned ones `time` turns on, which may trade
        precision for speed: FFT, Winograd)."""
        torch = self._torch
        saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
                 torch.backends.cudnn.benchmark)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
        try:
            with torch.no_grad():
                return [out.double().cpu().numpy() for out in self.run()]
        finally:
            (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.backends.cudnn.benchmark) = saved

    def check(self, expected: Sequence[np.ndarray]) -> float:
        """The largest error of the outputs (TF32 off) against `expected`
        (e.g. the reference executor's), relative to each output's largest
        magnitude (`relative_error`)."""
        return relative_error(self.outputs(), expected)

    def time(self, mode: str = "graph", warmup: int = 10, repeats: int = 50) -> Dict:
        """Median and range of `repeats` timed runs, in ms (module docstring).

        Args:
          mode: "eager" or "graph" (CUDA-graph replay; on a GPU only).
        """
        torch = self._torch
        if mode not in MODES[self.device_name]:
            raise ValueError(f"mode must be one of {MODES[self.device_name]} on "
                             f"{self.device_name}, got {mode!r}")
        samples = []
        if self.device_name == "cpu":
            with torch.no_grad():
                for _ in range(warmup):
                    self.run()
                for _ in range(repeats):
                    start = time.perf_counter()
                    self.run()
                    samples.append(1e3 * (time.perf_counter() - start))
            return {"median_ms": statistics.median(samples), "min_ms": min(samples),
                    "max_ms": max(samples), "repeats": repeats}
        torch.backends.cudnn.benchmark = True
        # TF32 tensor cores where the program is float32 (as the cudnn backend
        # allows them); no effect on bfloat16 and float16.
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        step = self.run
        if mode == "graph":
            step = self._replay()
        with torch.no_grad():
            for _ in range(warmup):
                step()
            torch.cuda.synchronize()
            for _ in range(repeats):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                step()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
        return {"median_ms": statistics.median(samples), "min_ms": min(samples),
                "max_ms": max(samples), "repeats": repeats}

    def _replay(self) -> Callable[[], Any]:
        if self._graph is None:
            torch = self._torch
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.no_grad(), torch.cuda.stream(side):  # warm up (autotuning)
                for _ in range(3):
                    self.run()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(graph):
                self._captured = self.run()
            self._graph = graph
        return self._graph.replay


def relative_error(got: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> float:
    """The largest absolute difference between `got` and `expected`, output
    by output, relative to that output's largest expected magnitude.

    Raises:
      ValueError: the output counts or shapes differ, or an output is not
        finite (NaN compares false: without this it would pass).
    """
    if len(got) != len(expected):
        raise ValueError(f"{len(got)} outputs, expected {len(expected)}")
    worst = 0.0
    for k, (g, e) in enumerate(zip(got, expected)):
        g, e = np.asarray(g, np.float64), np.asarray(e, np.float64)
        if g.shape != e.shape:
            raise ValueError(f"output {k}: shape {g.shape}, expected {e.shape}")
        if not (np.all(np.isfinite(e)) and np.all(np.isfinite(g))):
            raise ValueError(f"output {k} is not finite (expected finite: "
                             f"{bool(np.all(np.isfinite(e)))}); draw smaller feeds "
                             "(xflowrl.executor.weights.random_weights, zoo.weight_gain)")
        if e.size:
            worst = max(worst, float(np.max(np.abs(g - e)) / max(np.max(np.abs(e)), 1e-30)))
    return worst


def interleaved_times(programs: Mapping[str, TorchProgram], mode: str, rounds: int,
                      warmup: int, repeats: int,
                      rng: Optional[np.random.Generator] = None) -> Dict[str, List[float]]:
    """Per program, the median (ms) of `repeats` timed runs in each of
    `rounds` rounds; every round runs the programs in a fresh random order
    (after `warmup` untimed runs each), so that a change of clock or load
    falls on all of them alike."""
    rng = rng if rng is not None else np.random.default_rng(0)
    names = list(programs)
    out: Dict[str, List[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for i in rng.permutation(len(names)):
            timing = programs[names[i]].time(mode, warmup=warmup, repeats=repeats)
            out[names[i]].append(float(timing["median_ms"]))
    return out


def environment(device: str = "cuda") -> Dict[str, Any]:
    """What a timing ran on: the PyTorch version, the device and, on a GPU,
    the card, its CUDA and cuDNN versions."""
    torch = _torch(device)
    env: Dict[str, Any] = {"torch": torch.__version__, "device": device}
    if device == "cuda":
        env.update(card=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version())
    else:
        env["threads"] = torch.get_num_threads()
    return env
