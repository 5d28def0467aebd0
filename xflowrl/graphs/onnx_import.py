"""ONNX import: `load_onnx(path_or_model) -> (Graph, weights)`.

The importer walks the model's nodes in topological order and binds every
ONNX tensor name to either a constant (a numpy value) or an engine tensor:

- Nodes whose inputs are all constants are folded at import with ONNX's
  reference evaluator (`onnx.reference`); `Shape`/`Size` of a tensor fold to
  its static shape. This removes the shape arithmetic exporters emit
  (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ...).
- Operators with an engine equivalent become engine ops (`onnx_ops.py`); a
  constant read by one becomes a `weight` op named after the ONNX tensor.
- Any other operator whose output shapes ONNX shape inference can resolve
  statically becomes an `opaque` op that keeps the original node
  (`onnx_common.OpaqueRecord`): costed, never rewritten, exported verbatim.
- Everything else is refused with a `ValueError` naming the node and its op
  type (never a silently truncated graph): a shape that stays dynamic, a
  control-flow node, an operator from a domain shape inference does not know,
  a malformed or truncated file.

Values are not held by the engine: the returned `OnnxWeights` maps each
weight op's name to its value and records the model interface for export.
docs/onnx.md lists what maps to what.
"""

from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import onnx
from onnx import helper, numpy_helper

from xflowrl.graphs import onnx_ops
from xflowrl.graphs.onnx_ops import NotEngineOp, Value
from xflowrl.graphs.graph import Graph, GraphBuilder, Tensor
from xflowrl.graphs.onnx_common import (MAX_OPSET, MIN_OPSET, ModelInterface, OnnxWeights,
                                        OpaqueRecord, elem_type, encode_opaque)

Shape = Tuple[int, ...]

# Constants up to this many elements that an opaque node reads are embedded in
# its record; larger ones become weights (so that the weights dict holds them).
_EMBED_MAX_ELEMENTS = 64
# Constant inputs up to this size are given to per-node shape inference as
# values (data-dependent shapes: Reshape, Expand, Slice, ...).
_INFER_VALUE_MAX_ELEMENTS = 4096
# Never folded: their value is not a function of their inputs.
_NONDETERMINISTIC = ("RandomNormal", "RandomNormalLike", "RandomUniform",
                     "RandomUniformLike", "Multinomial", "Bernoulli")
# Rough FLOPs per output element of opaque ops, for the cost model.
_OPAQUE_FLOPS_PER_ELEMENT = {"Softmax": 5, "LayerNormalization": 8, "Erf": 8, "Gelu": 8,
                             "Exp": 4, "Log": 4, "Pow": 4, "Sqrt": 2, "Reciprocal": 2}


def load_onnx(path_or_model: Union[str, os.PathLike, bytes, onnx.ModelProto],
              input_shapes: Optional[Mapping[str, Sequence[int]]] = None
              ) -> Tuple[Graph, OnnxWeights]:
    """Imports an ONNX model as an engine graph and its weight values.

    Args:
      path_or_model: a file path, the serialised bytes or a `ModelProto`.
      input_shapes: static shapes for graph inputs whose declared shape has
        dynamic (symbolic or unknown) dimensions, by input name.

    Returns:
      `(graph, weights)`: `weights` maps every weight op's name to its value
      and carries the model interface (`OnnxWeights.interface`).

    Raises:
      ValueError: a malformed or truncated model, an opset outside
        [MIN_OPSET, MAX_OPSET], a dynamic shape that cannot be resolved or an
        unsupported construct; node errors name the node and its op type.
    """
    model = read_model(path_or_model)
    return _Importer(model, dict(input_shapes or {})).run()


def read_model(path_or_model) -> onnx.ModelProto:
    """Parses and validates a model (`onnx.checker`, no full shape check).

    Raises:
      ValueError: unreadable, truncated or invalid.
    """
    where = "the model"
    try:
        if isinstance(path_or_model, onnx.ModelProto):
            model = path_or_model
        elif isinstance(path_or_model, (bytes, bytearray)):
            model = onnx.load_model_from_string(bytes(path_or_model))
        else:
            where = os.fspath(path_or_model)
            model = onnx.load(where)
    except OSError as e:
        raise ValueError(f"cannot read ONNX model {where}: {e}") from e
    except Exception as e:  # google.protobuf.message.DecodeError and kin
        raise ValueError(f"cannot parse ONNX model {where} (malformed or truncated "
                         f"file): {e}") from e
    try:
        ordered = _topological(model.graph)
    except ValueError:
        ordered = None  # the checker says what is wrong
    if ordered is not None and any(a is not b for a, b in zip(ordered, model.graph.node)):
        # Unsorted (ONNX requires sorted graphs; some exporters disagree):
        # sort a copy, leaving the caller's model as it is.
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        del copy.graph.node[:]
        copy.graph.node.extend(ordered)
        model = copy
    try:
        onnx.checker.check_model(model)
    except Exception as e:  # onnx.checker.ValidationError
        raise ValueError(f"{where} is not a valid ONNX model (malformed or truncated "
                         f"file?): {e}") from e
    if not model.graph.output:
        raise ValueError(f"{where} declares no graph outputs (truncated file?)")
    return model


def _node_label(node: onnx.NodeProto) -> str:
    return f"node {node.name or '<unnamed>'!r} ({node.op_type})"


class _Importer:
    """One import: the builder, the name bindings and the weights."""

    def __init__(self, model: onnx.ModelProto, input_shapes: Dict[str, Sequence[int]]):
        self.model = model
        self.opsets = {o.domain or "": o.version for o in model.opset_import}
        if "ai.onnx" in self.opsets:
            self.opsets.setdefault("", self.opsets.pop("ai.onnx"))
        self.opset = self.opsets.get("", 0)
        if not MIN_OPSET <= self.opset <= MAX_OPSET:
            raise ValueError(f"the model uses ONNX opset {self.opset}; the importer takes "
                             f"opsets {MIN_OPSET} to {MAX_OPSET}")
        self.input_shapes = input_shapes
        self.builder = GraphBuilder()
        self.values: Dict[str, Value] = {}
        self.weights = OnnxWeights()
        self.used_names: set = set()
        self.interface = ModelInterface(opsets=dict(self.opsets))

    # -- driver ------------------------------------------------------------
    def run(self) -> Tuple[Graph, OnnxWeights]:
        graph = self.model.graph
        for init in graph.initializer:
            self.bind(init.name, const=numpy_helper.to_array(init))
        for init in graph.sparse_initializer:
            raise ValueError(f"sparse initializer {init.values.name!r} is not supported")
        for info in graph.input:
            if info.name not in self.values:
                self._graph_input(info)
        for node in graph.node:
            try:
                self._node(node)
            except NotImplementedError as e:  # from onnx.reference
                raise ValueError(f"{_node_label(node)}: cannot fold: {e}") from e
        outputs = []
        for info in graph.output:
            if info.name not in self.values:
                raise ValueError(f"graph output {info.name!r} is produced by no node")
            try:
                outputs.append(self.tensor(info.name))
            except NotEngineOp:
                raise ValueError(f"graph output {info.name!r} is a scalar constant; "
                                 "not supported") from None
            self.interface.output_names.append(info.name)
        self.weights.interface = self.interface
        return self.builder.build(outputs), self.weights

    def _graph_input(self, info: onnx.ValueInfoProto) -> None:
        if not info.type.HasField("tensor_type"):
            raise ValueError(f"graph input {info.name!r}: only tensor inputs are supported")
        tt = info.type.tensor_type
        if info.name in self.input_shapes:
            shape = tuple(int(d) for d in self.input_shapes[info.name])
        else:
            if not tt.HasField("shape"):
                raise ValueError(f"graph input {info.name!r} has no declared shape; pass "
                                 "input_shapes")
            shape = []
            for axis, dim in enumerate(tt.shape.dim):
                if dim.HasField("dim_value") and dim.dim_value > 0:
                    shape.append(dim.dim_value)
                else:
                    what = dim.dim_param or "unknown"
                    raise ValueError(f"graph input {info.name!r} has a dynamic dimension "
                                     f"({what!r}) at axis {axis}; pass input_shapes="
                                     f"{{{info.name!r}: (...)}} to fix it")
            shape = tuple(shape)
        tensor = self.builder.input(name=info.name, shape=shape)
        self.used_names.add(info.name)
        if tt.elem_type != onnx.TensorProto.FLOAT:
            self.interface.input_types[info.name] = tt.elem_type
        self.values[info.name] = Value(None, tensor, tt.elem_type, tensor.shape)

    def _node(self, node: onnx.NodeProto) -> None:
        for name in node.input:
            if name and name not in self.values:
                raise ValueError(f"{_node_label(node)} reads {name!r}, which no node, "
                                 "input or initializer produces")
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for a in node.attribute):
            raise ValueError(f"{_node_label(node)}: control flow (subgraph attributes) is "
                             "not supported")
        default_domain = node.domain in ("", "ai.onnx")
        present = [n for n in node.input if n]
        if default_domain and node.op_type == "Constant" or (
                default_domain and present and node.op_type not in _NONDETERMINISTIC
                and all(self.values[n].is_const for n in present)):
            self._fold(node)
            return
        handler = onnx_ops.HANDLERS.get(node.op_type) if default_domain else None
        if handler is not None:
            try:
                outs = handler(self, node)
            except NotEngineOp:
                outs = None
            except ValueError as e:
                raise ValueError(f"{_node_label(node)}: {e}") from e
            if outs is not None:
                for name, value in zip(node.output, outs):
                    if name:
                        self.values[name] = value
                return
        self._opaque(node)

    # -- bindings ----------------------------------------------------------
    def bind(self, name: str, *, const: Optional[np.ndarray] = None,
             tensor: Optional[Tensor] = None, etype: Optional[int] = None) -> Value:
        if const is not None:
            const = np.asarray(const)
            value = Value(const, None, elem_type(const.dtype), tuple(const.shape))
        else:
            value = Value(None, tensor, etype, tensor.shape)
        self.values[name] = value
        return value

    def value(self, node: onnx.NodeProto, slot: int) -> Optional[Value]:
        """Input `slot` of `node`, or None where it is absent or empty."""
        if slot >= len(node.input) or not node.input[slot]:
            return None
        return self.values[node.input[slot]]

    def const_input(self, node: onnx.NodeProto, slot: int, what: str) -> Optional[np.ndarray]:
        """A constant input (None if absent); a ValueError if it is computed."""
        v = self.value(node, slot)
        if v is None:
            return None
        if not v.is_const:
            raise ValueError(f"{what} (input {slot}, {node.input[slot]!r}) is computed at "
                             "run time; only static values are supported")
        return v.const

    def tensor(self, name: str, as_vector: bool = False) -> Tensor:
        """The engine tensor bound to `name`; a constant becomes a weight op
        (a scalar one of shape (1,) when `as_vector`)."""
        v = self.values[name]
        if v.tensor is not None:
            return v.tensor
        value = v.const.reshape(1) if (as_vector and v.const.ndim == 0) else v.const
        if value.ndim == 0:
            raise NotEngineOp()
        weight_name = self.fresh_name(name)
        tensor = self.builder.weight(name=weight_name, shape=value.shape)
        self.weights[weight_name] = value
        self.values[name] = v._replace(tensor=tensor)
        return tensor

    def new_weight(self, base: str, value: np.ndarray) -> Tensor:
        """A weight op for a value derived at import (e.g. a transposed B)."""
        name = self.fresh_name(base)
        self.weights[name] = value
        return self.builder.weight(name=name, shape=value.shape)

    def fresh_name(self, base: str) -> str:
        name, k = base, 0
        while name in self.used_names:
            k += 1
            name = f"{base}__{k}"
        self.used_names.add(name)
        return name

    # -- folding -----------------------------------------------------------
    def _fold(self, node: onnx.NodeProto) -> None:
        from onnx.reference import ReferenceEvaluator  # heavy; only when folding
        names = list(dict.fromkeys(n for n in node.input if n))
        graph = helper.make_graph(
            [node], "fold",
            [helper.make_tensor_value_info(n, self.values[n].elem_type, self.values[n].shape)
             for n in names],
            [helper.make_empty_tensor_value_info(n) for n in node.output if n])
        model = helper.make_model(graph, opset_imports=self.model.opset_import,
                                  ir_version=self.model.ir_version)
        results = ReferenceEvaluator(model).run(None, {n: self.values[n].const for n in names})
        for name, value in zip([n for n in node.output if n], results):
            self.bind(name, const=np.asarray(value))

    # -- opaque ops --------------------------------------------------------
    def _opaque(self, node: onnx.NodeProto) -> None:
        shapes, types = self._infer(node)
        constants = {}
        for name in node.input:
            v = self.values[name] if name else None
            if v is not None and v.is_const and (v.const.size <= _EMBED_MAX_ELEMENTS
                                                 or v.const.dtype.kind not in "fc"):
                constants[name] = v.const
        record = OpaqueRecord(node=node, constants=constants, output_types=types)
        inputs = [self.tensor(n) for n in record.engine_inputs()]
        flops = _OPAQUE_FLOPS_PER_ELEMENT.get(node.op_type, 1) * max(
            [int(np.prod(s)) for s in shapes] + [int(np.prod(t.shape)) for t in inputs])
        try:
            outs = self.builder.opaque(op_type=encode_opaque(record), inputs=inputs,
                                       output_shapes=shapes, flops=flops)
        except ValueError as e:
            raise ValueError(f"{_node_label(node)}: {e}") from e
        for name, tensor, etype in zip(node.output, outs, types):
            if name:
                self.values[name] = Value(None, tensor, etype, tensor.shape)

    def _infer(self, node: onnx.NodeProto) -> Tuple[List[Shape], List[int]]:
        """Static output shapes and element types by ONNX shape inference on
        the node alone (empty output slots get a placeholder (1,) FLOAT)."""
        inputs, inits = [], []
        for name in dict.fromkeys(n for n in node.input if n):
            v = self.values[name]
            if v.is_const and v.const.size <= _INFER_VALUE_MAX_ELEMENTS:
                inits.append(numpy_helper.from_array(v.const, name))
            else:
                inputs.append(helper.make_tensor_value_info(name, v.elem_type, v.shape))
        graph = helper.make_graph([node], "infer", inputs, [], initializer=inits)
        model = helper.make_model(graph, opset_imports=self.model.opset_import,
                                  ir_version=self.model.ir_version)
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True,
                                                         data_prop=True)
        except Exception as e:  # InferenceError
            raise ValueError(f"{_node_label(node)}: shape inference failed: {e}") from e
        infos = {vi.name: vi for vi in inferred.graph.value_info}
        shapes, types = [], []
        for name in node.output:
            if not name:
                shapes.append((1,))
                types.append(0)
                continue
            info = infos.get(name)
            tt = info.type.tensor_type if info is not None else None
            if tt is None or not info.type.HasField("tensor_type") or not tt.HasField("shape"):
                raise ValueError(f"{_node_label(node)}: the shape of output {name!r} cannot "
                                 "be inferred statically (unknown operator or dynamic shape)")
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                    for d in tt.shape.dim]
            if not all(isinstance(d, int) for d in dims):
                raise ValueError(f"{_node_label(node)}: output {name!r} has a dynamic shape "
                                 f"{dims}; only static shapes are supported")
            shapes.append(tuple(dims))
            types.append(tt.elem_type)
        return shapes, types


def _topological(graph: onnx.GraphProto) -> List[onnx.NodeProto]:
    """The nodes in an order where each runs after its producers (ONNX
    requires sorted graphs; some exporters still write unsorted ones)."""
    available = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    pending = list(graph.node)
    ordered: List[onnx.NodeProto] = []
    while pending:
        rest = []
        for node in pending:
            if all(n in available for n in node.input):
                ordered.append(node)
                available.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(pending):
            node = rest[0]
            missing = [n for n in node.input if n not in available]
            raise ValueError(f"{_node_label(node)} reads {missing[0]!r}, which no node, "
                             "input or initializer produces (or the graph has a cycle)")
        pending = rest
    return ordered
