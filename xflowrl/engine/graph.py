"""Immutable computation graphs and the keyword-argument graph builder.

A `Graph` wraps one native, immutable engine graph; `GraphBuilder` creates
graphs op by op, checking shapes as it goes. Numerical data never lives in the
engine: inputs and weights are named, and executors and exporters bind values
to those names (see docs/engine.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from xflowrl import _engine
from xflowrl.ops import ACTIVATIONS, LEAF_TYPES, PADDINGS, PARAMS_OF_TYPE

Shape = Tuple[int, ...]
TensorId = Tuple[int, int]  # (op guid, output index)


class OpInfo(NamedTuple):
    """One op of a graph, as the Python side sees it."""
    guid: int
    type: str
    params: Dict[str, Any]
    inputs: List[TensorId]
    output_shapes: List[Shape]
    name: str


class MemoryEstimate(NamedTuple):
    weight_bytes: int       # weights read at inference (after folding)
    activation_bytes: int   # every activation materialised, no reuse
    peak_bytes: int         # weights + live activations at the peak


def _public_params(type_name: str, raw: Dict[str, Any]) -> Dict[str, Any]:
    """The parameters that apply to the type (the op table's), with enums by name."""
    params = {k: raw[k] for k in PARAMS_OF_TYPE.get(type_name, ())}
    if "padding" in params:
        params["padding"] = PADDINGS[params["padding"]]
    if "activation" in params:
        params["activation"] = ACTIVATIONS[params["activation"]]
    for key in ("perm", "shape", "sizes"):
        if key in params:
            params[key] = tuple(params[key])
    return params


class Graph:
    """An immutable computation graph held by the native engine."""

    def __init__(self, handle: "_engine.GraphHandle"):
        self._handle = handle
        self._ops: Optional[List[OpInfo]] = None

    @property
    def handle(self) -> "_engine.GraphHandle":
        return self._handle

    def ops(self) -> List[OpInfo]:
        """All ops in topological order (inputs and weights included)."""
        if self._ops is None:
            ops = []
            for guid, type_id, raw, inputs, shapes, name in self._handle.ops():
                type_name = _engine.op_type_str(type_id)
                ops.append(OpInfo(guid, type_name, _public_params(type_name, raw),
                                  inputs, shapes, name))
            self._ops = ops
        return self._ops

    def structure(self) -> Dict[str, Any]:
        """The graph as flat numpy arrays (node types, parameters, edges and
        shapes), built natively in microseconds; see
        `xflowrl.embedding.features` and `_engine.GraphHandle.structure`."""
        return self._handle.structure()

    def outputs(self) -> List[TensorId]:
        return self._handle.outputs()

    def output_shapes(self) -> List[Shape]:
        by_guid = {op.guid: op for op in self.ops()}
        return [by_guid[g].output_shapes[i] for g, i in self.outputs()]

    def num_ops(self) -> int:
        """Ops that compute: inputs and weights excluded."""
        return self._handle.num_ops()

    def hash(self) -> int:
        """Canonical structural hash, equal across processes and op orders."""
        return self._handle.hash()

    def cost(self, cost_model) -> float:
        """Estimated runtime in ms: the sum of `op_costs(cost_model)`."""
        return self._handle.cost(cost_model.handle)

    def op_costs(self, cost_model) -> List[float]:
        """Per-op costs in ms, aligned with `ops()`: each op's own cost, except
        under a backend that prices ops in graph context (the fitted backend:
        an op onnxruntime fuses into its producer costs 0, a split or
        transpose it materialises costs a copy)."""
        return self._handle.op_costs(cost_model.handle)

    def weight_side(self) -> List[bool]:
        """Per op: computed from weights only (folded offline, free)."""
        return self._handle.weight_side()

    def memory(self) -> MemoryEstimate:
        return MemoryEstimate(*self._handle.memory())

    def op_counts(self) -> Dict[str, int]:
        counts: Dict[str, int] = {}
        for op in self.ops():
            if op.type not in LEAF_TYPES:
                counts[op.type] = counts.get(op.type, 0) + 1
        return counts

    def inputs(self) -> Dict[str, Shape]:
        return {op.name: op.output_shapes[0] for op in self.ops() if op.type == "input"}

    def weights(self) -> Dict[str, Shape]:
        return {op.name: op.output_shapes[0] for op in self.ops() if op.type == "weight"}

    def to_data(self) -> Dict[str, Any]:
        """The graph as JSON-able data (`graph_from_data` builds it again):
        its ops in topological order, each [type, parameters (those of its
        type, enums as numbers), inputs as [op position, output], name,
        output shape for a leaf], and its outputs as [op position, output].
        For results that hold a graph no steps replay (equality
        saturation's extracted graph)."""
        position: Dict[int, int] = {}
        ops_data = []
        for k, (guid, type_id, raw, inputs, shapes, name) in enumerate(self._handle.ops()):
            position[guid] = k
            type_name = _engine.op_type_str(type_id)
            params = {key: (list(raw[key]) if isinstance(raw[key], (list, tuple)) else raw[key])
                      for key in PARAMS_OF_TYPE.get(type_name, ())}
            leaf_shape = list(shapes[0]) if type_name in LEAF_TYPES else None
            ops_data.append([type_name, params, [[position[g], i] for g, i in inputs],
                             name, leaf_shape])
        return {"ops": ops_data,
                "outputs": [[position[g], i] for g, i in self.outputs()]}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Graph) and self.hash() == other.hash()

    def __hash__(self) -> int:
        return self.hash()

    def __repr__(self) -> str:
        return f"Graph(ops={self.num_ops()}, hash={self.hash():016x})"


def graph_from_data(data: Dict[str, Any]) -> Graph:
    """The graph `Graph.to_data` described.

    Raises:
      ValueError: the data is malformed or the engine rejects an op.
    """
    builder = GraphBuilder()
    tensors: List[List["Tensor"]] = []
    try:
        for type_name, params, inputs, name, leaf_shape in data["ops"]:
            if type_name == "input":
                tensors.append([builder.input(name=name, shape=leaf_shape)])
            elif type_name == "weight":
                tensors.append([builder.weight(name=name, shape=leaf_shape)])
            else:
                tensors.append(builder.add_op(type_name, [tensors[k][i] for k, i in inputs],
                                              params))
        outputs = [tensors[k][i] for k, i in data["outputs"]]
    except (KeyError, IndexError, TypeError) as e:
        raise ValueError(f"malformed graph data: {e!r}") from None
    return builder.build(outputs=outputs)


@dataclasses.dataclass(frozen=True)
class Tensor:
    """A tensor of a graph under construction: output `index` of op `guid`."""
    guid: int
    index: int
    shape: Shape

    @property
    def id(self) -> TensorId:
        return (self.guid, self.index)


def _pair(value, what: str) -> Tuple[int, int]:
    if isinstance(value, int):
        return value, value
    value = tuple(value)
    if len(value) != 2:
        raise ValueError(f"{what} must be an int or a pair, got {value!r}")
    return int(value[0]), int(value[1])


def _enum(value: str, options: Sequence[str], what: str) -> int:
    key = str(value).upper()
    if key not in options:
        raise ValueError(f"{what} must be one of {list(options)}, got {value!r}")
    return options.index(key)


class GraphBuilder:
    """Builds a graph op by op with keyword arguments; shapes checked at once.

    Example:
        b = GraphBuilder()
        x = b.input(name="data", shape=(1, 3, 32, 32))
        w = b.weight(name="conv1", shape=(16, 3, 3, 3))
        y = b.conv2d(input=x, weight=w, strides=(1, 1), padding="SAME",
                     activation="RELU")
        graph = b.build(outputs=[y])
    """

    def __init__(self):
        self._native = _engine.BuilderHandle()
        self._auto_names = 0

    # -- leaves ------------------------------------------------------------
    def input(self, *, shape: Sequence[int], name: Optional[str] = None) -> Tensor:
        name = name or self._auto_name("input")
        return self._tensor(self._native.input(name, tuple(shape)))

    def weight(self, *, shape: Sequence[int], name: Optional[str] = None) -> Tensor:
        name = name or self._auto_name("weight")
        return self._tensor(self._native.weight(name, tuple(shape)))

    # -- compute ops ---------------------------------------------------------
    def conv2d(self, *, input: Tensor, weight: Tensor, strides=(1, 1),
               padding: str = "SAME", activation: str = "NONE") -> Tensor:
        sh, sw = _pair(strides, "strides")
        return self._op("conv2d", [input, weight], stride_h=sh, stride_w=sw,
                        padding=_enum(padding, PADDINGS, "padding"),
                        activation=_enum(activation, ACTIVATIONS, "activation"))

    def maxpool2d(self, *, input: Tensor, kernel, strides, padding: str = "SAME",
                  activation: str = "NONE") -> Tensor:
        return self._pool("maxpool", input, kernel, strides, padding, activation)

    def avgpool2d(self, *, input: Tensor, kernel, strides, padding: str = "SAME",
                  activation: str = "NONE") -> Tensor:
        return self._pool("avgpool", input, kernel, strides, padding, activation)

    def matmul(self, *, a: Tensor, b: Tensor, activation: str = "NONE") -> Tensor:
        return self._op("matmul", [a, b],
                        activation=_enum(activation, ACTIVATIONS, "activation"))

    def add(self, *, x: Tensor, y: Tensor) -> Tensor:
        return self._op("add", [x, y])

    def mul(self, *, x: Tensor, y: Tensor) -> Tensor:
        return self._op("mul", [x, y])

    def scalar_mul(self, *, x: Tensor, scale: Tensor) -> Tensor:
        """`x * scale` for a one-element `scale` of shape [1]."""
        return self._op("scalar_mul", [x, scale])

    def sub(self, *, x: Tensor, y: Tensor) -> Tensor:
        return self._op("sub", [x, y])

    def div(self, *, x: Tensor, y: Tensor) -> Tensor:
        return self._op("div", [x, y])

    def relu(self, *, input: Tensor) -> Tensor:
        return self._op("relu", [input])

    def sigmoid(self, *, input: Tensor) -> Tensor:
        return self._op("sigmoid", [input])

    def tanh(self, *, input: Tensor) -> Tensor:
        return self._op("tanh", [input])

    def batchnorm(self, *, input: Tensor, scale: Tensor, bias: Tensor, mean: Tensor,
                  var: Tensor, epsilon: float = 1e-5) -> Tensor:
        return self._op("batchnorm", [input, scale, bias, mean, var], epsilon=epsilon)

    def concat(self, *, inputs: Sequence[Tensor], axis: int) -> Tensor:
        return self._op("concat", list(inputs), axis=axis)

    def split(self, *, input: Tensor, axis: int, sizes: Sequence[int]) -> List[Tensor]:
        return self._op_multi("split", [input], axis=axis, sizes=list(sizes))

    def reshape(self, *, input: Tensor, shape: Sequence[int]) -> Tensor:
        return self._op("reshape", [input], shape=list(shape))

    def transpose(self, *, input: Tensor, perm: Sequence[int]) -> Tensor:
        return self._op("transpose", [input], perm=list(perm))

    def enlarge(self, *, weight: Tensor, like: Tensor) -> Tensor:
        return self._op("enlarge", [weight, like])

    def merge_gconv(self, *, weight: Tensor, count: int, groups: int) -> Tensor:
        """Weight of a `groups`-group conv, regrouped into groups // count."""
        return self._op("merge_gconv", [weight], count=count, groups=groups)

    def broadcast_add(self, *, input: Tensor, bias: Tensor, activation: str = "NONE") -> Tensor:
        return self._op("broadcast_add", [input, bias],
                        activation=_enum(activation, ACTIVATIONS, "activation"))

    def fuse_conv_bn_alpha_var(self, *, weight: Tensor, scale: Tensor, var: Tensor,
                               epsilon: float = 1e-5) -> Tensor:
        return self._op("fuse_conv_bn_alpha_var", [weight, scale, var], epsilon=epsilon)

    def fuse_conv_bn_bias(self, *, scale: Tensor, bias: Tensor, mean: Tensor,
                          var: Tensor, epsilon: float = 1e-5) -> Tensor:
        return self._op("fuse_conv_bn_bias", [scale, bias, mean, var], epsilon=epsilon)

    def opaque(self, *, op_type: str, inputs: Sequence[Tensor],
               output_shapes: Sequence[Sequence[int]], flops: int = 0) -> List[Tensor]:
        """An op the engine keeps as is: costed, never rewritten."""
        return self._op_multi("opaque", list(inputs), opaque_type=op_type,
                              opaque_shapes=[tuple(s) for s in output_shapes],
                              opaque_flops=int(flops))

    def add_op(self, op_type: str, inputs: Sequence[Tensor],
               params: Dict[str, Any]) -> List[Tensor]:
        """Any compute op by its type name and raw parameters (the engine's
        field names, enums as numbers: what `Graph.handle.ops()` reports);
        its outputs. For code that rebuilds graphs it holds as data (e.g.
        the e-graph extraction of `xflowrl.search.eqsat`)."""
        return self._op_multi(op_type, list(inputs), **params)

    def build(self, outputs: Optional[Sequence[Tensor]] = None) -> Graph:
        """Freezes the graph; outputs default to every unconsumed op output."""
        ids = [t.id for t in outputs] if outputs else []
        return Graph(self._native.build(ids))

    # -- helpers -------------------------------------------------------------
    def _pool(self, type_name, input, kernel, strides, padding, activation):
        kh, kw = _pair(kernel, "kernel")
        sh, sw = _pair(strides, "strides")
        return self._op(type_name, [input], kernel_h=kh, kernel_w=kw, stride_h=sh,
                        stride_w=sw, padding=_enum(padding, PADDINGS, "padding"),
                        activation=_enum(activation, ACTIVATIONS, "activation"))

    def _op(self, type_name: str, inputs: List[Tensor], **params) -> Tensor:
        return self._op_multi(type_name, inputs, **params)[0]

    def _op_multi(self, type_name: str, inputs: List[Tensor], **params) -> List[Tensor]:
        for t in inputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"{type_name}: inputs must be Tensors, got {t!r}")
        guid = self._native.add(_engine.op_type_id(type_name), params,
                                [t.id for t in inputs])
        return [self._tensor((guid, i)) for i in range(self._native.num_outputs(guid))]

    def _tensor(self, tensor_id: TensorId) -> Tensor:
        return Tensor(tensor_id[0], tensor_id[1], self._native.shape(tensor_id))

    def _auto_name(self, prefix: str) -> str:
        self._auto_names += 1
        return f"{prefix}{self._auto_names}"
