"""ONNX import: `load_onnx(path_or_model) -> (Graph, weights)`.

The importer walks the model's nodes in topological order and binds every
ONNX tensor name to either a constant (a numpy value) or an engine tensor:

- Nodes whose inputs are all constants are folded at import with ONNX's
  reference evaluator (`onnx.reference`); `Shape`/`Size` of a tensor fold to
  its static shape. This removes the shape arithmetic exporters emit
  (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ...).
- Operators with an engine equivalent become engine ops (`onnx_io/ops.py`); a
  constant read by one becomes a `weight` op named after the ONNX tensor.
- Any other operator whose output shapes ONNX shape inference can resolve
  statically becomes an `opaque` op that keeps the original node
  (`onnx_common.OpaqueRecord`): costed, never rewritten, exported verbatim.
- Calls of model-local functions (`model.functions`) are inlined first.
- Everything else is refused with a `ValueError` naming the node and its op
  type (never a silently truncated graph): a shape that stays dynamic, a
  control-flow node, an operator from a domain shape inference does not know,
  a malformed or truncated file.

`ValueError` is the only exception `load_onnx` raises for a bad model: any
other exception met while importing a node (a numpy error in a folded op, an
attribute of an impossible type, ...) is re-raised as a `ValueError` that
names the node, its op type and the original exception's type.

Files of a newer IR version than the installed `onnx` knows (PyTorch's
dynamo exporter writes IR 10 at opset 18) are read (protobuf is forward
compatible) and checked by the installed checker as if they declared its
IR version; what the installed onnx does not know in them is still refused
(an element type added later, by `_check_element_types`; an opset beyond
the installed one).

Values are not held by the engine: the returned `OnnxWeights` maps each
weight op's name to its value and records the model interface for export.
docs/onnx.md lists what maps to what.
"""

from __future__ import annotations

import math
import os
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import onnx
from onnx import helper, numpy_helper

from xflowrl.engine.graph import Graph, GraphBuilder, Tensor
from xflowrl.onnx_io import ops as onnx_ops
from xflowrl.onnx_io.common import (
    MAX_OPSET,
    MIN_OPSET,
    ModelInterface,
    OnnxWeights,
    OpaqueRecord,
    elem_type,
    encode_opaque,
    unique_name,
)
from xflowrl.onnx_io.ops import NotEngineOp, Value

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
# Opaque FLOP estimates are clamped here (the engine's field is an int64).
_MAX_FLOPS = 2 ** 62
# Folding never materialises a constant larger than this many elements (a
# mutated ConstantOfShape/Expand/Tile/Range could ask for terabytes).
_FOLD_MAX_ELEMENTS = 1 << 24
# Ops that onnx.reference evaluates element by element in Python (or close
# to it; a Resize of 8k elements takes over 20 s): never folded, kept opaque
# (their constant inputs become weights) however small.
_SLOW_FOLD = ("Resize", "Upsample", "Conv", "ConvTranspose", "ConvInteger", "QLinearConv",
              "MaxPool", "AveragePool", "LpPool", "GridSample", "RoiAlign", "MaxRoiPool",
              "DeformConv", "Col2Im", "NonMaxSuppression", "LRN", "DFT", "STFT",
              "MaxUnpool", "Einsum", "Unique", "TfIdfVectorizer", "StringNormalizer")
# Elementwise ops: their folded output has the inputs' broadcast shape.
_BROADCASTING = ("Mul", "Add", "Sub", "Div", "Where", "And", "Or", "Xor", "Equal", "Less",
                 "Greater", "LessOrEqual", "GreaterOrEqual", "Pow", "Max", "Min", "Sum",
                 "Mean", "BitShift", "Mod", "PRelu")


def load_onnx(path_or_model: Union[str, os.PathLike, bytes, onnx.ModelProto],
              input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
              share_views: bool = True) -> Tuple[Graph, OnnxWeights]:
    """Imports an ONNX model as an engine graph and its weight values.

    Args:
      path_or_model: a file path, the serialised bytes or a `ModelProto`.
      input_shapes: static shapes for graph inputs whose declared shape has
        dynamic (symbolic or unknown) dimensions, by input name.
      share_views: build one engine reshape (transpose) per distinct input
        tensor and target shape (perm), however many ONNX nodes or MatMul
        flattenings ask for it (default). False builds one per request, as
        the importer did before; kept to compare against (the Q/K/V merges
        of real exporters' transformers need the shared form, docs/onnx.md).

    Returns:
      `(graph, weights)`: `weights` maps every weight op's name to its value
      and carries the model interface (`OnnxWeights.interface`).

    Raises:
      ValueError: a malformed or truncated model, an opset outside
        [MIN_OPSET, MAX_OPSET], a dynamic shape that cannot be resolved or an
        unsupported construct; node errors name the node and its op type.
    """
    model = read_model(path_or_model)
    shapes = _input_shapes(input_shapes)
    return _Importer(model, shapes, share_views).run()


def _input_shapes(input_shapes) -> Dict[str, Tuple[int, ...]]:
    """`input_shapes` as a dict of int tuples (a ValueError if it is not)."""
    try:
        return {str(k): tuple(int(d) for d in v) for k, v in dict(input_shapes or {}).items()}
    except (TypeError, ValueError) as e:
        raise ValueError(f"input_shapes must map input names to sequences of ints: "
                         f"{e}") from None


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
        onnx.checker.check_model(_checkable(model))
    except Exception as e:  # onnx.checker.ValidationError
        raise ValueError(f"{where} is not a valid ONNX model (malformed or truncated "
                         f"file?): {e}") from e
    if not model.graph.output:
        raise ValueError(f"{where} declares no graph outputs (truncated file?)")
    _check_element_types(model.graph, where)
    return _inline_functions(model)


# Nested model-local function calls deeper than this are refused (a function
# that calls itself would never finish expanding).
_MAX_FUNCTION_DEPTH = 16


def _inline_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model`, or a copy whose calls of model-local functions (the
    `FunctionProto`s in `model.functions`, as exporters write for modules)
    are replaced by the functions' bodies: internal names get a unique
    prefix, attribute references take the call's attributes or the
    function's defaults. onnx 1.15 has no inliner of its own.

    Raises:
      ValueError: a function nests deeper than `_MAX_FUNCTION_DEPTH`, or it
        imports the default domain at another opset than the model.
    """
    if not model.functions:
        return model
    funcs = {(f.domain, f.name): f for f in model.functions}
    model_opset = {o.domain or "": o.version for o in model.opset_import}.get("")
    for f in model.functions:
        for o in f.opset_import:
            if (o.domain or "") == "" and o.version != model_opset:
                raise ValueError(f"function {f.domain}.{f.name} uses opset {o.version} of the "
                                 f"default domain, the model {model_opset}; not supported")
    count = [0]

    def expand(node: onnx.NodeProto, depth: int) -> List[onnx.NodeProto]:
        f = funcs.get((node.domain, node.op_type))
        if f is None:
            return [node]
        if depth >= _MAX_FUNCTION_DEPTH:
            raise ValueError(f"{_node_label(node)}: model-local functions nest deeper than "
                             f"{_MAX_FUNCTION_DEPTH} (recursive?)")
        count[0] += 1
        prefix = f"{node.name or f.name}__f{count[0]}/"
        names = {formal: actual for formal, actual in zip(f.input, node.input)}
        names.update({formal: "" for formal in f.input[len(node.input):]})
        names.update({formal: actual for formal, actual in zip(f.output, node.output)})
        attrs = {a.name: a for a in f.attribute_proto}
        attrs.update({a.name: a for a in node.attribute})
        body = []
        for inner in f.node:
            n = onnx.NodeProto()
            n.CopyFrom(inner)
            n.name = prefix + (inner.name or inner.op_type)
            n.input[:] = [names.get(x, prefix + x) if x else "" for x in inner.input]
            n.output[:] = [names.get(x, prefix + x) if x else "" for x in inner.output]
            resolved = []
            for a in n.attribute:
                if not a.ref_attr_name:
                    resolved.append(a)
                elif a.ref_attr_name in attrs:  # else: an optional attribute left out
                    value = onnx.AttributeProto()
                    value.CopyFrom(attrs[a.ref_attr_name])
                    value.name = a.name
                    resolved.append(value)
            del n.attribute[:]
            n.attribute.extend(resolved)
            body.extend(expand(n, depth + 1))
        return body

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.node[:]
    for node in model.graph.node:
        copy.graph.node.extend(expand(node, 0))
    del copy.functions[:]
    return copy


_KNOWN_TYPES = frozenset(onnx.TensorProto.DataType.values()) - {onnx.TensorProto.UNDEFINED}


def _check_element_types(graph: onnx.GraphProto, where: str) -> None:
    """Refuses element types the installed onnx does not know (int4, uint4
    and later additions of newer IR versions), wherever the top-level graph
    declares one: inputs, outputs, value infos, initializers, tensor
    attributes and the `to`/`dtype` attributes of casts and generators."""
    def check(elem_type: int, what: str) -> None:
        if elem_type not in _KNOWN_TYPES:
            raise ValueError(f"{where}: {what} has element type {elem_type}, unknown to the "
                             f"installed onnx {onnx.__version__}")
    for info in list(graph.input) + list(graph.output) + list(graph.value_info):
        if info.type.HasField("tensor_type"):
            check(info.type.tensor_type.elem_type, f"tensor {info.name!r}")
    for init in graph.initializer:
        check(init.data_type, f"initializer {init.name!r}")
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                check(attr.t.data_type, f"{_node_label(node)} attribute {attr.name!r}")
            elif attr.type == onnx.AttributeProto.INT and attr.name in ("to", "dtype"):
                check(attr.i, f"{_node_label(node)} attribute {attr.name!r}")


def _check_variadic_inputs(node: onnx.NodeProto, opset: int) -> None:
    """A ValueError for an empty name (`""`) among a node's variadic inputs
    (Concat, Sum, Max, ...): the checker lets it through, and there is no
    tensor to read there."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except Exception:  # SchemaError: the checker has refused unknown ops already
        return
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    for slot, formal in enumerate(schema.inputs):
        if formal.option == variadic and not all(node.input[slot:]):
            raise ValueError(f"{_node_label(node)}: an input of the variadic "
                             f"{formal.name!r} is empty")


def _checkable(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model`, or a copy declaring the installed onnx's IR version when the
    model's is newer: the pinned checker refuses newer IR versions outright,
    while everything it does know (nodes, opsets, types, topology) is checked
    all the same. Element types added after the installed onnx are refused
    by `_check_element_types`."""
    if model.ir_version <= onnx.IR_VERSION:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.ir_version = onnx.IR_VERSION
    return copy


def _node_label(node: onnx.NodeProto) -> str:
    return f"node {node.name or '<unnamed>'!r} ({node.op_type})"


class _Importer:
    """One import: the builder, the name bindings and the weights."""

    def __init__(self, model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]],
                 share_views: bool = True):
        self.model = model
        # Per-node models (folding, shape inference) use an IR version the
        # installed onnx knows.
        self.ir_version = min(model.ir_version, onnx.IR_VERSION)
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
        # (op type, input tensor id, shape or perm) -> the view already built.
        self.share_views = share_views
        self._views: Dict[Tuple[str, Tuple[int, int], Tuple[int, ...]], Tensor] = {}

    # -- driver ------------------------------------------------------------
    def run(self) -> Tuple[Graph, OnnxWeights]:
        graph = self.model.graph
        for init in graph.initializer:
            try:
                value = numpy_helper.to_array(init)
            except Exception as e:  # data and dims disagree, unknown type, ...
                raise ValueError(f"initializer {init.name!r} cannot be read "
                                 f"({type(e).__name__}: {e})") from e
            self.bind(init.name, const=value)
        for init in graph.sparse_initializer:
            raise ValueError(f"sparse initializer {init.values.name!r} is not supported")
        for info in graph.input:
            if info.name not in self.values:
                self._graph_input(info)
        for node in graph.node:
            try:
                self._node(node)
            except ValueError:
                raise
            except NotImplementedError as e:  # from onnx.reference
                raise ValueError(f"{_node_label(node)}: cannot fold: {e}") from e
            except Exception as e:  # anything else is a bad model, never a crash
                raise ValueError(f"{_node_label(node)}: cannot import "
                                 f"({type(e).__name__}: {e})") from e
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
            shape = self.input_shapes[info.name]
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
        if default_domain:
            _check_variadic_inputs(node, self.opset)
        present = [n for n in node.input if n]
        if default_domain and node.op_type == "Constant" or (
                default_domain and present and node.op_type not in _NONDETERMINISTIC
                and all(self.values[n].is_const for n in present)):
            if not self._fold(node):
                self._opaque(node)
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
                if len(outs) < len([o for o in node.output if o]):
                    raise ValueError(f"{_node_label(node)}: {len(node.output)} outputs "
                                     f"declared, the operator has {len(outs)}")
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
        elif tensor is not None and etype is not None:
            value = Value(None, tensor, etype, tensor.shape)
        else:
            raise TypeError(f"bind({name!r}): give a constant, or a tensor and its element type")
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
        const = v.const
        assert const is not None, f"{name!r} is bound to neither a constant nor a tensor"
        value = const.reshape(1) if (as_vector and const.ndim == 0) else const
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
        return unique_name(base, self.used_names)

    # -- shared views --------------------------------------------------------
    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        """`reshape(x, shape)`, built once per (x, shape) in a model."""
        return self._view("reshape", x, tuple(int(d) for d in shape))

    def transpose(self, x: Tensor, perm: Sequence[int]) -> Tensor:
        """`transpose(x, perm)`, built once per (x, perm) in a model."""
        return self._view("transpose", x, tuple(int(p) for p in perm))

    def _view(self, kind: str, x: Tensor, param: Tuple[int, ...]) -> Tensor:
        # Common-subexpression elimination of views: exporters write one
        # Reshape (or the importer one flattening) per reader, e.g. the Q, K
        # and V projections of a [1, S, H] activation each flatten it to
        # [S, H]. Three identical reshapes hide from the rules that the three
        # matmuls read one tensor (the Q/K/V merge needs a shared operand);
        # one reshape read three times shows it. Views are pure, so sharing
        # them changes no value.
        key = (kind, x.id, param)
        view = self._views.get(key) if self.share_views else None
        if view is None:
            if kind == "reshape":
                view = self.builder.reshape(input=x, shape=param)
            else:
                view = self.builder.transpose(input=x, perm=param)
            self._views[key] = view
        return view

    # -- folding -----------------------------------------------------------
    def _fold(self, node: onnx.NodeProto) -> bool:
        """Evaluates a node whose inputs are all constants; False (nothing
        done) for an op too slow to evaluate (`_SLOW_FOLD`: kept opaque).

        The node is first checked by ONNX shape inference (strict): the
        reference evaluator trusts attributes (a Concat axis of 2^31 builds
        a tuple of 2^31 ones).

        Raises:
          ValueError: the node is invalid, its evaluation fails (the message
            names the node) or its output would exceed `_FOLD_MAX_ELEMENTS`
            elements.
        """
        from onnx.reference import ReferenceEvaluator  # heavy; only when folding
        shapes, _ = self._infer(node, static=False)
        size = self._fold_size(node, shapes)
        if size is not None and size > _FOLD_MAX_ELEMENTS:
            raise ValueError(f"{_node_label(node)}: folding it would build a constant of "
                             f"{size} elements (more than {_FOLD_MAX_ELEMENTS})")
        if node.op_type in _SLOW_FOLD:
            return False
        names = list(dict.fromkeys(n for n in node.input if n))
        override = _FOLD_OVERRIDES.get(node.op_type)
        try:
            if override is not None:
                results = override(node, [self.values[n].const if n else None
                                          for n in node.input])
            else:
                graph = helper.make_graph(
                    [node], "fold",
                    [helper.make_tensor_value_info(n, self.values[n].elem_type,
                                                   self.values[n].shape) for n in names],
                    [helper.make_empty_tensor_value_info(n) for n in node.output if n])
                model = helper.make_model(graph, opset_imports=self.model.opset_import,
                                          ir_version=self.ir_version)
                results = ReferenceEvaluator(model).run(
                    None, {n: self.values[n].const for n in names})
        except NotImplementedError as e:
            raise ValueError(f"{_node_label(node)}: cannot fold: {e}") from e
        except Exception as e:  # the reference evaluator's errors on bad values
            raise ValueError(f"{_node_label(node)}: folding its constant inputs failed "
                             f"({type(e).__name__}: {e})") from e
        outputs = [n for n in node.output if n]
        if len(results) < len(outputs):
            raise ValueError(f"{_node_label(node)}: {len(outputs)} outputs declared, "
                             f"folding gave {len(results)}")
        for name, value in zip(outputs, results):
            value = np.asarray(value)
            if value.size > _FOLD_MAX_ELEMENTS:
                raise ValueError(f"{_node_label(node)}: folding gave a constant of "
                                 f"shape {list(value.shape)}; too large")
            self.bind(name, const=value)
        return True

    def _fold_size(self, node: onnx.NodeProto, shapes) -> Optional[int]:
        """The largest output's element count of a node about to be folded,
        where it can be told beforehand (`shapes`: inferred output shapes,
        None where not static); else None."""
        if shapes and all(s is not None for s in shapes):
            return max(math.prod(s) for s in shapes)
        consts = [self._const(node, n) for n in node.input if n]
        if node.op_type in _BROADCASTING:
            return math.prod(np.broadcast_shapes(*[c.shape for c in consts]))
        if node.op_type == "Range" and len(consts) == 3:
            start, limit, delta = (float(np.asarray(c).reshape(-1)[0]) if c.size else 0.0
                                   for c in consts)
            if delta == 0 or not all(map(math.isfinite, (start, limit, delta))):
                raise ValueError(f"{_node_label(node)}: Range with delta {delta}, start "
                                 f"{start}, limit {limit}")
            return max(math.ceil((limit - start) / delta), 0)
        return None

    def _const(self, node: onnx.NodeProto, name: str) -> np.ndarray:
        """The constant bound to `name`, an input of `node` (one being folded
        reads only constants)."""
        const = self.values[name].const
        if const is None:
            raise ValueError(f"{_node_label(node)}: input {name!r} is computed at run time, "
                             "not a constant")
        return const

    # -- opaque ops --------------------------------------------------------
    def _opaque(self, node: onnx.NodeProto) -> None:
        shapes, types = self._infer_static(node)
        constants: Dict[str, np.ndarray] = {}
        for name in node.input:
            c = self.values[name].const if name else None
            if c is not None and (c.size <= _EMBED_MAX_ELEMENTS or c.dtype.kind not in "fc"):
                constants[name] = c
        record = OpaqueRecord(node=node, constants=constants, output_types=types)
        try:
            inputs = [self.tensor(n) for n in record.engine_inputs()]
        except NotEngineOp:  # a scalar computed value has no engine tensor
            raise ValueError(f"{_node_label(node)}: reads a rank-0 value computed at run "
                             "time; not supported") from None
        flops = min(_MAX_FLOPS, _OPAQUE_FLOPS_PER_ELEMENT.get(node.op_type, 1) * max(
            [math.prod(s) for s in shapes] + [math.prod(t.shape) for t in inputs]))
        try:
            outs = self.builder.opaque(op_type=encode_opaque(record), inputs=inputs,
                                       output_shapes=shapes, flops=flops)
        except ValueError as e:
            raise ValueError(f"{_node_label(node)}: {e}") from e
        for name, tensor, etype in zip(node.output, outs, types):
            if name:
                self.values[name] = Value(None, tensor, etype, tensor.shape)

    def _infer_static(self, node: onnx.NodeProto) -> Tuple[List[Shape], List[int]]:
        """`_infer(node, static=True)`: every output shape static, or a ValueError."""
        shapes, types = self._infer(node, static=True)
        static = [s for s in shapes if s is not None]
        if len(static) != len(shapes):  # _infer raises first
            raise ValueError(f"{_node_label(node)}: an output shape is not static")
        return static, types

    def _infer(self, node: onnx.NodeProto, static: bool = True
               ) -> Tuple[List[Optional[Shape]], List[int]]:
        """Static output shapes and element types by ONNX shape inference on
        the node alone (empty output slots get a placeholder (1,) FLOAT).

        Raises:
          ValueError: shape inference rejects the node, or (when `static`)
            an output shape is not static. With `static=False`, such shapes
            are None instead.
        """
        inputs, inits = [], []
        for name in dict.fromkeys(n for n in node.input if n):
            v = self.values[name]
            if v.const is not None and v.const.size <= _INFER_VALUE_MAX_ELEMENTS:
                inits.append(numpy_helper.from_array(v.const, name))
            else:
                inputs.append(helper.make_tensor_value_info(name, v.elem_type, v.shape))
        graph = helper.make_graph([node], "infer", inputs, [], initializer=inits)
        model = helper.make_model(graph, opset_imports=self.model.opset_import,
                                  ir_version=self.ir_version)
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True,
                                                         data_prop=True)
        except Exception as e:  # InferenceError
            raise ValueError(f"{_node_label(node)}: shape inference failed: {e}") from e
        infos = {vi.name: vi for vi in inferred.graph.value_info}
        shapes: List[Optional[Shape]] = []
        types: List[int] = []
        for name in node.output:
            if not name:
                shapes.append((1,))
                types.append(0)
                continue
            info = infos.get(name)
            if (info is None or not info.type.HasField("tensor_type")
                    or not info.type.tensor_type.HasField("shape")):
                if not static:
                    shapes.append(None)
                    types.append(0)
                    continue
                raise ValueError(f"{_node_label(node)}: the shape of output {name!r} cannot "
                                 "be inferred statically (unknown operator or dynamic shape)")
            tt = info.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                    for d in tt.shape.dim]
            if not all(isinstance(d, int) for d in dims):
                if not static:
                    shapes.append(None)
                    types.append(tt.elem_type)
                    continue
                raise ValueError(f"{_node_label(node)}: output {name!r} has a dynamic shape "
                                 f"{dims}; only static shapes are supported")
            shapes.append(tuple(int(d) for d in dims))
            types.append(tt.elem_type)
        return shapes, types


def _gather_elements(node: onnx.NodeProto, inputs: List[Optional[np.ndarray]]
                     ) -> List[np.ndarray]:
    """GatherElements by `np.take_along_axis`. onnx 1.15's reference
    implementation falls back to `np.choose`, limited to 32 choices, and
    then returns a wrongly shaped result (`cannot reshape array of size 1
    into shape (1,64)` on Hugging Face BERT's position ids)."""
    data, indices = inputs[0], inputs[1]
    if data is None or indices is None:
        raise ValueError("GatherElements needs its data and indices")
    axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
    if data.ndim != indices.ndim:
        raise ValueError(f"data rank {data.ndim} != indices rank {indices.ndim}")
    axis = onnx_ops._norm_axis(int(axis), data.ndim)
    size = data.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        raise ValueError(f"an index is out of range for axis {axis} of size {size}")
    indices = np.where(indices < 0, indices + size, indices).astype(np.int64)
    for d in range(data.ndim):
        if d != axis and indices.shape[d] > data.shape[d]:
            raise ValueError(f"indices shape {indices.shape} exceeds data shape "
                             f"{data.shape} off the axis")
    data = data[tuple(slice(0, indices.shape[d]) if d != axis else slice(None)
                      for d in range(data.ndim))]
    return [np.take_along_axis(data, indices, axis=axis)]


# Folding implementations that replace onnx.reference's where it is wrong.
_FOLD_OVERRIDES = {"GatherElements": _gather_elements}


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
