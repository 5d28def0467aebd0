"""ONNX export of any engine graph: `to_onnx` and `save_onnx`.

Weights are bound by the weight ops' names (`weights[name]`). Every op that
reads only weights (`Graph.weight_side()`: the folding ops
`fuse_conv_bn_alpha_var`, `fuse_conv_bn_bias`, `enlarge`, `merge_gconv`, and
any reshape, concat, split, ... of weights) is evaluated at export time with
the reference executor (`xflowrl.executor.reference.run_op`, in float64, cast
back to the weight's dtype) and written as a precomputed initializer: the
exported model is what an inference runtime would run after TASO's weight
preprocessing, and it costs what the cost model says (weight-side ops are
free there). Every other op becomes ONNX nodes:

| engine op | ONNX |
| --- | --- |
| conv2d | Conv (explicit pads, group = C / weight's C) [+ Relu/Sigmoid/Tanh] |
| maxpool, avgpool | MaxPool, AveragePool (count_include_pad=0) [+ activation] |
| matmul | MatMul [+ activation] |
| relu sigmoid tanh add sub mul div | same |
| batchnorm | BatchNormalization (inference) |
| concat split reshape transpose | same (Split sizes as attribute below opset 13) |
| broadcast_add | Add of the bias reshaped to [C, 1, ...] |
| enlarge, fuse_conv_bn_* on run-time values | Pad; Mul/Div/Sqrt/Sub chains |
| opaque | the original ONNX node, attributes and embedded constants intact |

Names: inputs and weights keep theirs; computed tensors are
`<type>_<guid>[_<output>]`; graph outputs take the imported model's output
names (`ModelInterface.output_names`) or `output_<k>`.
"""

from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from xflowrl.engine.graph import Graph, OpInfo
from xflowrl.executor import reference as executor
from xflowrl.onnx_io.common import (
    DEFAULT_OPSET,
    MIN_OPSET,
    ModelInterface,
    decode_opaque,
    elem_type,
    unique_name,
)
from xflowrl.ops import window

TensorId = Tuple[int, ...]  # (guid, output index)

_ONNX_TYPE = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "add": "Add",
              "sub": "Sub", "mul": "Mul", "scalar_mul": "Mul", "div": "Div", "matmul": "MatMul",
              "maxpool": "MaxPool", "avgpool": "AveragePool", "conv2d": "Conv",
              "concat": "Concat", "transpose": "Transpose"}
_ACTIVATION_TYPE = {"RELU": "Relu", "SIGMOID": "Sigmoid", "TANH": "Tanh"}


def save_onnx(graph: Graph, weights: Mapping[str, np.ndarray], path: str,
              **kwargs) -> onnx.ModelProto:
    """Exports `graph` (see `to_onnx`) and writes it to `path`."""
    model = to_onnx(graph, weights, **kwargs)
    onnx.save(model, os.fspath(path))
    return model


def to_onnx(graph: Graph, weights: Mapping[str, np.ndarray], *,
            interface: Optional[ModelInterface] = None, opset: Optional[int] = None,
            name: str = "xflowrl", check: bool = True) -> onnx.ModelProto:
    """Exports an engine graph as an ONNX model.

    Args:
      graph: any graph the engine produces.
      weights: a value for every weight op, by name (extra names ignored);
        an `OnnxWeights` from `load_onnx` also supplies the interface.
      interface: input element types, output names and opsets; defaults to
        `weights.interface` when present, else float inputs, outputs
        `output_<k>` and opset `DEFAULT_OPSET`.
      opset: overrides the default-domain opset.
      name: the ONNX graph's name.
      check: run `onnx.checker.check_model(full_check=True)` (checker and
        strict shape inference) on the result.

    Returns:
      The model.

    Raises:
      ValueError: weights missing or of the wrong shape, an opaque op that
        was not imported from ONNX, an opset below MIN_OPSET, or a model that
        fails the check.
    """
    interface = interface or getattr(weights, "interface", None) or ModelInterface()
    opsets = dict(interface.opsets)
    if opset is not None:
        opsets[""] = opset
    opsets.setdefault("", DEFAULT_OPSET)
    if opsets[""] < MIN_OPSET:
        raise ValueError(f"export needs opset >= {MIN_OPSET}, got {opsets['']}")
    model = _Exporter(graph, weights, interface, opsets).run(name)
    if check:
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as e:
            raise ValueError(f"the exported model fails onnx.checker: {e}") from e
    return model


class _Exporter:
    """One export: names, known (weight-side) values, nodes, initializers."""

    def __init__(self, graph: Graph, weights: Mapping[str, np.ndarray],
                 interface: ModelInterface, opsets: Dict[str, int]):
        self.graph = graph
        self.weights = weights
        self.interface = interface
        self.opsets = opsets
        self.opset = opsets[""]
        self.nodes: List[onnx.NodeProto] = []
        self.initializers: Dict[str, onnx.TensorProto] = {}
        self.names: Dict[TensorId, str] = {}        # computed tensors and leaves
        self.known: Dict[TensorId, np.ndarray] = {}  # weight-side values
        self.types: Dict[TensorId, int] = {}
        self.taken: Set[str] = set()

    # -- names -------------------------------------------------------------
    def fresh(self, base: str) -> str:
        return unique_name(base, self.taken)

    def ref(self, tid: TensorId) -> str:
        """The ONNX name of a tensor; a known value becomes an initializer."""
        tid = tuple(tid)
        if tid in self.names:
            return self.names[tid]
        op = self.by_guid[tid[0]]
        base = op.name if op.type == "weight" else f"{op.type}_{op.guid}" + (
            f"_{tid[1]}" if len(op.output_shapes) > 1 else "")
        name = self.fresh(base) if op.type != "weight" else base
        return self.constant(tid, name)

    def constant(self, tid: TensorId, name: str) -> str:
        self.initializers[name] = numpy_helper.from_array(np.ascontiguousarray(self.known[tid]),
                                                          name)
        self.names[tid] = name
        return name

    def const(self, base: str, value: np.ndarray) -> str:
        name = self.fresh(base)
        self.initializers[name] = numpy_helper.from_array(np.asarray(value), name)
        return name

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], name: str,
             **attrs) -> None:
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs),
                                           name=self.fresh(name), **attrs))

    # -- driver ------------------------------------------------------------
    def run(self, graph_name: str) -> onnx.ModelProto:
        ops = self.graph.ops()
        self.by_guid = {op.guid: op for op in ops}
        weight_side = self.graph.weight_side()
        # Leaf names are fixed; reserve them before generating others.
        self.taken.update(op.name for op in ops if op.type in ("input", "weight"))
        self._name_outputs({op.guid for op, w in zip(ops, weight_side) if w})
        self.consumers: Dict[int, List[OpInfo]] = {}
        for op in ops:
            for guid, _ in op.inputs:
                self.consumers.setdefault(guid, []).append(op)
        inputs = []
        for op, folded in zip(ops, weight_side):
            tid = (op.guid, 0)
            if op.type == "input":
                etype = self.interface.input_types.get(op.name, TensorProto.FLOAT)
                self.names[tid], self.types[tid] = op.name, etype
                inputs.append(helper.make_tensor_value_info(op.name, etype,
                                                            op.output_shapes[0]))
            elif op.type == "weight":
                self.known[tid] = self._weight(op)
                self.types[tid] = elem_type(self.known[tid].dtype)
            elif (folded and op.type != "opaque"
                  and all(tuple(t) in self.known for t in op.inputs)):
                # (A weight-side op reading an opaque op's output, as a
                # split of an opaque op over weights, is emitted instead.)
                self._fold(op)
            else:
                self._emit(op)
        outputs = []
        for k, output in enumerate(self.graph.outputs()):
            out_tid = tuple(output)
            want = self.output_names[k]
            have = self.ref(out_tid)
            if have != want:
                self.node("Identity", [have], [want], f"output_{k}")
            outputs.append(helper.make_tensor_value_info(
                want, self.types[out_tid], self.by_guid[out_tid[0]].output_shapes[out_tid[1]]))
        graph = helper.make_graph(self.nodes, graph_name, inputs, outputs,
                                  initializer=list(self.initializers.values()))
        return helper.make_model(
            graph, producer_name="xflowrl",
            opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(self.opsets.items())])

    def _name_outputs(self, folded: set) -> None:
        """Graph outputs get their interface names where the producer is a
        computed op (leaves, folded values and duplicates go through an
        Identity)."""
        outs = [tuple(t) for t in self.graph.outputs()]
        names = list(self.interface.output_names)
        if len(names) != len(outs):
            names = ["output"] if len(outs) == 1 else [f"output_{k}" for k in range(len(outs))]
        self.output_names = []
        for tid, name in zip(outs, names):
            name = self.fresh(name)
            self.output_names.append(name)
            op = self.by_guid[tid[0]]
            if op.type != "input" and op.guid not in folded and tid not in self.names:
                self.names[tid] = name

    def _weight(self, op: OpInfo) -> np.ndarray:
        if op.name not in self.weights:
            raise ValueError(f"no value for weight {op.name!r}")
        value = np.asarray(self.weights[op.name])
        if value.shape != tuple(op.output_shapes[0]):
            raise ValueError(f"weight {op.name!r} has shape {value.shape}, the graph needs "
                             f"{tuple(op.output_shapes[0])}")
        return value

    def _fold(self, op: OpInfo) -> None:
        args = [self.known[tuple(t)] for t in op.inputs]
        outs = executor.run_op(op.type, op.params, [a.astype(np.float64) if a.dtype.kind == "f"
                                                    else a for a in args])
        for k, out in enumerate(outs):
            self.known[(op.guid, k)] = np.asarray(out).astype(args[0].dtype)
            self.types[(op.guid, k)] = self.types[tuple(op.inputs[0])]

    # -- emission ----------------------------------------------------------
    def out_name(self, op: OpInfo, k: int = 0) -> str:
        tid = (op.guid, k)
        if tid not in self.names:
            suffix = f"_{k}" if len(op.output_shapes) > 1 else ""
            self.names[tid] = self.fresh(f"{op.type}_{op.guid}{suffix}")
        return self.names[tid]

    def _emit(self, op: OpInfo) -> None:
        p, t = op.params, op.type
        label = f"{t}_{op.guid}"
        absorbed = None
        if t in ("conv2d", "maxpool", "avgpool"):
            producer = self.by_guid[op.inputs[0][0]]
            absorbed = self._absorbable_pad(producer)
            if absorbed is not None and not self._absorbs(op, producer, absorbed[1]):
                absorbed = None
        if t == "broadcast_add" and tuple(op.inputs[1]) in self.known:
            # A known bias is written once, already shaped [C, 1, ...]
            # (`_broadcast_add` reads no input name for it).
            ins = [self.ref(op.inputs[0])]
        elif absorbed is not None:
            # An explicit Pad (torch-style padding) goes back into the op.
            ins = [self.ref(producer.inputs[0])] + [self.ref(i) for i in op.inputs[1:]]
        else:
            ins = [self.ref(i) for i in op.inputs]
        if t != "opaque":
            for k in range(len(op.output_shapes)):
                self.types[(op.guid, k)] = self.types[tuple(op.inputs[0])]
        act = p.get("activation", "NONE")
        out = self.out_name(op)
        # The main node writes `y`; a fused activation then writes `out`.
        y = out if act == "NONE" else self.fresh(f"{label}_pre")
        if t in ("conv2d", "maxpool", "avgpool"):
            x_shape = self._shape(op.inputs[0])
            if t == "conv2d":
                w_shape = self._shape(op.inputs[1])
                kernel = w_shape[2:]
                attrs = {"group": x_shape[1] // w_shape[1]}
            else:
                kernel = (p["kernel_h"], p["kernel_w"])
                attrs = {"count_include_pad": 0} if t == "avgpool" else {}
            pads = self._pads(x_shape, kernel, p)
            if absorbed is not None:
                pads = absorbed[0]
                if t == "avgpool":
                    attrs["count_include_pad"] = 1
            self.node(_ONNX_TYPE[t], ins, [y], label, kernel_shape=list(kernel),
                      strides=[p["stride_h"], p["stride_w"]], pads=pads, **attrs)
        elif t == "matmul":
            self.node("MatMul", ins, [y], label)
        elif t in ("relu", "sigmoid", "tanh", "add", "sub", "mul", "scalar_mul", "div"):
            self.node(_ONNX_TYPE[t], ins, [y], label)
        elif t == "batchnorm":
            self.node("BatchNormalization", ins, [y], label, epsilon=float(p["epsilon"]))
        elif t == "concat":
            self.node("Concat", ins, [y], label, axis=p["axis"])
        elif t == "split":
            outs = [self.out_name(op, k) for k in range(len(op.output_shapes))]
            sizes = [int(s) for s in p["sizes"]]
            if self.opset >= 13:
                self.node("Split", ins + [self.const(f"{label}_sizes", np.array(sizes, np.int64))],
                          outs, label, axis=p["axis"])
            else:
                self.node("Split", ins, outs, label, axis=p["axis"], split=sizes)
        elif t == "reshape":
            shape = np.array(op.output_shapes[0], np.int64)
            self.node("Reshape", ins + [self.const(f"{label}_shape", shape)], [y], label)
        elif t == "transpose":
            self.node("Transpose", ins, [y], label, perm=list(p["perm"]))
        elif t == "broadcast_add":
            self._broadcast_add(op, ins, y, label)
        elif t == "opaque":
            pad = self._absorbable_pad(op)
            outputs = {tuple(o) for o in self.graph.outputs()}
            if pad is None or (op.guid, 0) in outputs or not all(
                    self._absorbs(c, op, pad[1]) for c in self.consumers.get(op.guid, [])):
                self._opaque(op, ins)
            else:  # every consumer takes the padding as its own pads
                self.types[(op.guid, 0)] = self.types[tuple(op.inputs[0])]
        elif t in ("enlarge", "fuse_conv_bn_alpha_var", "fuse_conv_bn_bias"):
            self._weight_op(op, ins, y, label)
        else:
            raise ValueError(f"{label}: cannot export {t} on run-time (non-weight) inputs")
        if act != "NONE":
            self.node(_ACTIVATION_TYPE[act], [y], [out], f"{label}_act")

    def _absorbable_pad(self, op: OpInfo) -> Optional[Tuple[List[int], float]]:
        """For an opaque constant-mode ONNX Pad of the two spatial dims of a
        4-D tensor: its ONNX `pads` attribute for a conv/pool ([top, left,
        bottom, right]) and its fill value; else None."""
        if op.type != "opaque" or not op.params["opaque_type"].startswith("Pad|"):
            return None
        record = decode_opaque(op.params["opaque_type"])
        node = record.node
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if attrs.get("mode", b"constant") not in (b"constant", "constant") or len(
                node.input) not in (2, 3) or len(self._shape(op.inputs[0])) != 4:
            return None
        pads = record.constants.get(node.input[1])
        fill = record.constants.get(node.input[2], np.zeros(())) if len(node.input) == 3 \
            else np.zeros(())
        if pads is None or fill is None or pads.shape != (8,) or fill.size != 1:
            return None
        if pads.min() < 0 or any(pads[[0, 1, 4, 5]]):
            return None
        return [int(pads[2]), int(pads[3]), int(pads[6]), int(pads[7])], float(fill.reshape(()))

    def _absorbs(self, consumer: OpInfo, pad_op: OpInfo, fill: float) -> bool:
        """Whether `consumer` can take `pad_op`'s padding as its own pads."""
        if consumer.params.get("padding") != "VALID" or tuple(consumer.inputs[0]) != (
                pad_op.guid, 0) or any(tuple(t) == (pad_op.guid, 0) for t in consumer.inputs[1:]):
            return False
        if consumer.type == "conv2d":
            return fill == 0.0
        if consumer.type in ("maxpool", "avgpool"):
            absorbable = self._absorbable_pad(pad_op)
            if absorbable is None:
                return False
            pads = absorbable[0]
            kernel = (consumer.params["kernel_h"], consumer.params["kernel_w"]) * 2
            if any(p >= k for p, k in zip(pads, kernel)):
                return False
            return fill == (-np.inf if consumer.type == "maxpool" else 0.0)
        return False

    def _shape(self, tid) -> Tuple[int, ...]:
        return tuple(self.by_guid[tid[0]].output_shapes[tid[1]])

    @staticmethod
    def _pads(x_shape, kernel, p) -> List[int]:
        wh = window(x_shape[2], kernel[0], p["stride_h"], p["padding"])
        ww = window(x_shape[3], kernel[1], p["stride_w"], p["padding"])
        return [wh.pad_before, ww.pad_before, wh.pad_after, ww.pad_after]

    def _broadcast_add(self, op: OpInfo, ins: List[str], y: str, label: str) -> None:
        rank = len(self._shape(op.inputs[0]))
        bias_id = tuple(op.inputs[1])
        shape = (-1,) + (1,) * (rank - 2)
        if bias_id in self.known:
            value = self.known[bias_id]
            bias = self.const(f"{label}_bias", value.reshape((value.shape[0],) + shape[1:]))
        else:
            bias = self.fresh(f"{label}_bias")
            self.node("Reshape", [ins[1], self.const(f"{label}_bias_shape",
                                                     np.array(shape, np.int64))],
                      [bias], f"{label}_bias_reshape")
        self.node("Add", [ins[0], bias], [y], label)

    def _weight_op(self, op: OpInfo, ins: List[str], y: str, label: str) -> None:
        """Folding ops on values only known at run time, as ONNX arithmetic."""
        eps = float(op.params.get("epsilon", 0.0))
        if op.type == "enlarge":
            (_, _, h1, w1), (_, _, h2, w2) = self._shape(op.inputs[0]), self._shape(op.inputs[1])
            dh, dw = (h2 - h1) // 2, (w2 - w1) // 2
            pads = np.array([0, 0, dh, dw, 0, 0, dh, dw], np.int64)
            self.node("Pad", [ins[0], self.const(f"{label}_pads", pads)], [y], label)
            return
        eps_name = self.const(f"{label}_eps", np.array(eps, np.float32))
        var_eps, std = self.fresh(f"{label}_var_eps"), self.fresh(f"{label}_std")
        self.node("Add", [ins[-1], eps_name], [var_eps], f"{label}_add_eps")
        self.node("Sqrt", [var_eps], [std], f"{label}_sqrt")
        if op.type == "fuse_conv_bn_alpha_var":
            rank = len(self._shape(op.inputs[0]))
            alpha, flat = self.fresh(f"{label}_alpha"), self.fresh(f"{label}_alpha_flat")
            self.node("Div", [ins[1], std], [flat], f"{label}_div")
            self.node("Reshape", [flat, self.const(
                f"{label}_alpha_shape", np.array((-1,) + (1,) * (rank - 1), np.int64))],
                [alpha], f"{label}_reshape")
            self.node("Mul", [ins[0], alpha], [y], label)
        else:  # bias - scale * mean / std
            scale, bias, mean = ins[0], ins[1], ins[2]
            sm, smd = self.fresh(f"{label}_scale_mean"), self.fresh(f"{label}_shift")
            self.node("Mul", [scale, mean], [sm], f"{label}_mul")
            self.node("Div", [sm, std], [smd], f"{label}_div")
            self.node("Sub", [bias, smd], [y], label)

    def _opaque(self, op: OpInfo, ins: List[str]) -> None:
        record = decode_opaque(op.params["opaque_type"])
        node = onnx.NodeProto()
        node.CopyFrom(record.node)
        slots = iter(ins)
        consts: Dict[str, str] = {}
        for i, name in enumerate(node.input):
            if not name:
                continue
            if name in record.constants:
                if name not in consts:
                    consts[name] = self.const(f"{node.name or node.op_type}_{name}",
                                              record.constants[name])
                node.input[i] = consts[name]
            else:
                node.input[i] = next(slots)
        for k, name in enumerate(node.output):
            if name:
                node.output[k] = self.out_name(op, k)
                self.types[(op.guid, k)] = record.output_types[k]
        node.name = self.fresh(node.name or f"opaque_{op.guid}")
        self.nodes.append(node)
