"""What the ONNX importer and exporter share: opaque-op records and the
model interface.

An ONNX operator the engine cannot rewrite becomes an `opaque` engine op
whose `opaque_type` parameter carries an `OpaqueRecord`: the original
`NodeProto` (type, domain, name, every attribute, input and output names),
the small constant inputs it reads (embedded, so that they survive any
rewrite) and its output element types. The engine copies the string with the
op, hashes it and never matches it, so the exporter can write the node back
exactly. The string is `"<domain>.<op_type>|<base64 GraphProto>"` (no domain
prefix for the default domain): readable in error messages, self-contained.

The importer returns its weights as an `OnnxWeights` dict, which also carries
the model's `ModelInterface` (input element types, output names, opsets) so
that `save_onnx(graph, weights, path)` reproduces the original interface.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Dict, List, Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

DEFAULT_OPSET = 13
MIN_OPSET = 11
MAX_OPSET = onnx.defs.onnx_opset_version()


def unique_name(base: str, taken: set) -> str:
    """`base`, or `base__1`, `base__2`, ... : the first not in `taken`, which
    it joins (ONNX names must be unique within a graph)."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}__{k}"
    taken.add(name)
    return name


_SEPARATOR = "|"


@dataclasses.dataclass(frozen=True)
class OpaqueRecord:
    """One ONNX node kept verbatim inside an `opaque` engine op.

    Attributes:
      node: the original node; its input names say which slot reads what.
      constants: inputs embedded as values, by input name.
      output_types: ONNX element type of each output (0 for an unused, empty
        output slot).
    """
    node: onnx.NodeProto
    constants: Dict[str, np.ndarray]
    output_types: List[int]

    @property
    def op_type(self) -> str:
        return self.node.op_type

    def engine_inputs(self) -> List[str]:
        """The node's input names that the engine op reads, in slot order:
        every non-empty input that is not an embedded constant."""
        return [n for n in self.node.input if n and n not in self.constants]


def encode_opaque(record: OpaqueRecord) -> str:
    """The `opaque_type` string that carries `record` (see module doc)."""
    graph = helper.make_graph(
        [record.node], "opaque", inputs=[],
        outputs=[helper.make_empty_tensor_value_info(n or f"__unused{i}")
                 for i, n in enumerate(record.node.output)],
        initializer=[numpy_helper.from_array(v, k) for k, v in record.constants.items()])
    for info, elem_type in zip(graph.output, record.output_types):
        info.type.tensor_type.elem_type = elem_type
    payload = base64.b64encode(graph.SerializeToString()).decode("ascii")
    prefix = f"{record.node.domain}.{record.op_type}" if record.node.domain else record.op_type
    return prefix + _SEPARATOR + payload


def decode_opaque(opaque_type: str) -> OpaqueRecord:
    """The record that `encode_opaque` wrote.

    Raises:
      ValueError: the string was not written by `encode_opaque` (an opaque op
        built by hand, without an ONNX node behind it).
    """
    prefix, sep, payload = opaque_type.partition(_SEPARATOR)
    if not sep:
        raise ValueError(f"opaque op {opaque_type!r} carries no ONNX node (it was not "
                         "imported from ONNX), so it cannot be exported")
    graph = onnx.GraphProto()
    try:
        graph.ParseFromString(base64.b64decode(payload.encode("ascii"), validate=True))
    except Exception as e:  # binascii.Error, DecodeError
        raise ValueError(f"opaque op {prefix!r}: corrupt ONNX record ({e})") from None
    if len(graph.node) != 1:
        raise ValueError(f"opaque op {prefix!r}: corrupt ONNX record")
    return OpaqueRecord(node=graph.node[0],
                        constants={t.name: numpy_helper.to_array(t) for t in graph.initializer},
                        output_types=[o.type.tensor_type.elem_type for o in graph.output])


def opaque_op_type(opaque_type: str) -> str:
    """The ONNX op type (domain-qualified outside the default domain) of an
    opaque op, without decoding its record."""
    return opaque_type.partition(_SEPARATOR)[0]


@dataclasses.dataclass
class ModelInterface:
    """What an exporter needs, beyond the graph, to rebuild a model's interface.

    Attributes:
      input_types: ONNX element type by graph input name; missing names are
        FLOAT.
      output_names: the graph outputs' names, in `Graph.outputs()` order.
      opsets: opset version by domain ("" is the default ONNX domain).
    """
    input_types: Dict[str, int] = dataclasses.field(default_factory=dict)
    output_names: List[str] = dataclasses.field(default_factory=list)
    opsets: Dict[str, int] = dataclasses.field(default_factory=lambda: {"": DEFAULT_OPSET})


class OnnxWeights(dict):
    """Weight values by name, as `load_onnx` returns them; `interface` keeps
    the imported model's inputs, outputs and opsets for `save_onnx`."""

    def __init__(self, *args, interface: Optional[ModelInterface] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.interface = interface


def np_dtype(elem_type: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def elem_type(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
