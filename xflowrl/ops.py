"""Operator facts: the engine's one operator table, as Python sees it.

Every fact about an operator type (its name and number, how many inputs and
outputs it has, which parameters apply, whether it is free, transforms
weights only or may appear in a rule, its kind of computation, its FLOPs per
output element and the activation it applies) is written once, in the C++
table `kOpTypes` of third_party/taso/src/ops_table.cc, and reaches Python here
through `xflowrl._engine.op_table()`. So are the names of the padding,
activation and op kind enums and the parameter keys of rule files. Every
other module (graphs, rules, executor, features, TASO's rule reader) takes
them from this one; none keeps a copy. To add an operator, add a row to
`kOpTypes` (and its shape inference, semantics and docs; the compiler then
names each cost backend that must decide how it runs it: docs/engine.md,
"The operator table"); the Python lists follow.

The table's order is the order of `OP_TYPES`, which fixes the one-hot slots
of `xflowrl.embedding.features`.

`window` is the one SAME/VALID padding rule (`taso::conv_window`): shape
inference, the cost backends, the numpy executor and ONNX import and export
all compute padding with it.

`python -m xflowrl.ops` prints the table as the Markdown table of
docs/engine.md.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

from xflowrl import _engine


class OpSpec(NamedTuple):
    """One operator type (OpTypeInfo in taso/ops.h)."""
    type_id: int                 # the engine's number (TASO's OpType)
    name: str                    # as Python, rule files and the docs spell it
    arity: Optional[int]         # inputs; None: any number (concat, opaque)
    num_outputs: Optional[int]   # None: set by the parameters (split, opaque)
    params: Tuple[str, ...]      # the parameters that apply (OpInfo.params keys)
    free: bool                   # costs nothing at inference in every backend
    weight_only: bool            # transforms weights only (precomputed offline)
    pattern: bool                # may appear in a rule pattern
    kind: str                    # what it computes, as the cost models see it (KINDS)
    flops_per_element: int       # per output element (eltwise, batchnorm, concat); else 0
    activation: str              # the activation function it is (ACTIVATIONS); else "NONE"


class ParamKey(NamedTuple):
    """A pattern parameter a rule file may name (ParamKeyInfo in taso/ops.h)."""
    key: int        # the engine's key (TASO's PMParameter)
    name: str
    is_float: bool  # a float (epsilon), which a rule can only copy ("src:K")


class Window(NamedTuple):
    """How a kernel slides over one spatial dimension."""
    out: int          # output size
    pad_before: int   # padding elements before the first input element
    pad_after: int    # padding elements after the last input element


def _spec(record: dict) -> OpSpec:
    arity = record["arity"] if record["arity"] >= 0 else None
    outputs = record["num_outputs"] if record["num_outputs"] >= 0 else None
    return OpSpec(record["type_id"], record["name"], arity, outputs, record["params"],
                  record["free"], record["weight_only"], record["pattern"],
                  KINDS[record["kind"]], record["flops_per_element"],
                  ACTIVATIONS[record["activation"]])


def _names_in_value_order(table, what: str) -> Tuple[str, ...]:
    """Enum names indexed by value; the engine's enums count from 0."""
    values = [value for value, _ in table]
    if values != list(range(len(values))):
        raise ImportError(f"the engine's {what} values {values} are not 0, 1, ...")
    return tuple(name for _, name in table)


# Read once from the engine's static tables (no I/O, no state).
PADDINGS: Tuple[str, ...] = _names_in_value_order(_engine.padding_table(), "padding")
ACTIVATIONS: Tuple[str, ...] = _names_in_value_order(_engine.activation_table(),
                                                     "activation")
KINDS: Tuple[str, ...] = _names_in_value_order(_engine.op_kind_table(), "op kind")

SPECS: Tuple[OpSpec, ...] = tuple(_spec(r) for r in _engine.op_table())
BY_NAME: Dict[str, OpSpec] = {s.name: s for s in SPECS}

# Derived views, each for one kind of reader.
OP_TYPES: Tuple[str, ...] = tuple(s.name for s in SPECS)
LEAF_TYPES: Tuple[str, ...] = tuple(s.name for s in SPECS if s.arity == 0)
PATTERN_TYPES: Tuple[str, ...] = tuple(s.name for s in SPECS if s.pattern)
ARITY: Dict[str, Optional[int]] = {s.name: s.arity for s in SPECS}
PARAMS_OF_TYPE: Dict[str, Tuple[str, ...]] = {s.name: s.params for s in SPECS if s.params}

RULE_PARAMS: Tuple[ParamKey, ...] = tuple(ParamKey(*k) for k in _engine.rule_param_table())
PARAM_KEYS: Dict[str, int] = {p.name: p.key for p in RULE_PARAMS}
FLOAT_PARAMS: Tuple[str, ...] = tuple(p.name for p in RULE_PARAMS if p.is_float)


def spec(name: str) -> OpSpec:
    """The spec of an operator type by name; ValueError for an unknown name."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown op type {name!r}") from None


def window(size: int, kernel: int, stride: int, padding: str) -> Window:
    """Output size and padding of one spatial dimension (the engine's rule).

    SAME follows TensorFlow: `out = ceil(size / stride)`, total padding
    `max((out - 1) * stride + kernel - size, 0)`, the smaller half before.
    VALID: `out = (size - kernel) // stride + 1`, no padding.

    Args:
      size, kernel, stride: the input size, kernel size and stride.
      padding: "SAME" or "VALID".

    Raises:
      ValueError: a bad padding mode or stride, or a VALID kernel larger than
        the input.
    """
    if padding not in PADDINGS:
        raise ValueError(f"unknown padding {padding!r}; expected "
                         f"{' or '.join(repr(p) for p in PADDINGS)}")
    return Window(*_engine.window(int(size), int(kernel), int(stride),
                                  PADDINGS.index(padding)))


def markdown_table() -> str:
    """The operator table as Markdown (the one in docs/engine.md)."""
    def count(n: Optional[int]) -> str:
        return "any" if n is None else str(n)
    rows = ["| type | id | inputs | outputs | parameters | free | weight only | in rules "
            "| kind | FLOPs per element |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in SPECS:
        flags = ["yes" if f else "" for f in (s.free, s.weight_only, s.pattern)]
        flops = str(s.flops_per_element) if s.flops_per_element else ""
        rows.append(f"| `{s.name}` | {s.type_id} | {count(s.arity)} | "
                    f"{count(s.num_outputs)} | {' '.join(s.params)} | " + " | ".join(flags)
                    + f" | {s.kind} | {flops} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
