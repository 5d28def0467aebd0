"""Rule data model and file formats: the project's JSON and TASO's protobuf.

A rule (xfer) rewrites a source pattern into a target pattern over shared
external variables (docs/rules.md). This module only reads, writes and
validates rules; the engine (xflowrl.graphs.xfers) matches and applies them.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Dict, List, Sequence, Tuple, Union

ParamValue = Union[int, str]  # str: "src:K" copies the value of source op K

OP_TYPES = ("conv2d", "maxpool", "avgpool", "relu", "sigmoid", "tanh", "batchnorm",
            "concat", "split", "reshape", "transpose", "add", "mul", "sub", "div",
            "matmul", "enlarge", "merge_gconv", "fuse_conv_bn_alpha_var",
            "fuse_conv_bn_bias", "broadcast_add")
PARAM_NAMES = ("num_inputs", "num_outputs", "group", "kernel_h", "kernel_w", "stride_h",
               "stride_w", "padding", "activation", "numdim", "axis", "perm", "count",
               "epsilon")
FORMAT = "xflowrl-rules"
VERSION = 1


@dataclasses.dataclass(frozen=True)
class PatternTensor:
    """Output `index` of pattern op `op`; `op < 0` is external variable `op`."""
    op: int
    index: int = 0


@dataclasses.dataclass(frozen=True)
class PatternOp:
    """One op of a pattern.

    In a source pattern `params` are equality constraints; in a target
    pattern they are the values to set (`"src:K"` copies from source op K).
    """
    type: str
    inputs: Tuple[PatternTensor, ...]
    params: Tuple[Tuple[str, ParamValue], ...] = ()


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str
    src: Tuple[PatternOp, ...]
    dst: Tuple[PatternOp, ...]
    mapped_outputs: Tuple[Tuple[PatternTensor, PatternTensor], ...]


# ----------------------------------------------------------------- JSON format

def _tensor_str(t: PatternTensor) -> str:
    return f"v{-t.op}" if t.op < 0 else f"op{t.op}.{t.index}"


def _parse_tensor(text: str, where: str) -> PatternTensor:
    try:
        if text.startswith("v"):
            var = int(text[1:])
            if var >= 1:
                return PatternTensor(-var, 0)
        elif text.startswith("op"):
            op, _, index = text[2:].partition(".")
            return PatternTensor(int(op), int(index or 0))
    except ValueError:
        pass
    raise ValueError(f"{where}: bad tensor reference {text!r} (use 'vK' for variable K "
                     "or 'opJ.I' for output I of op J)")


def _op_to_json(op: PatternOp) -> dict:
    entry = {"type": op.type, "inputs": [_tensor_str(t) for t in op.inputs]}
    if op.params:
        entry["params"] = dict(op.params)
    return entry


def _op_from_json(entry, where: str, num_ops: int, is_src: bool) -> PatternOp:
    if not isinstance(entry, dict) or "type" not in entry or "inputs" not in entry:
        raise ValueError(f"{where}: an op needs 'type' and 'inputs'")
    if entry["type"] not in OP_TYPES:
        raise ValueError(f"{where}: unknown op type {entry['type']!r}")
    inputs = tuple(_parse_tensor(t, where) for t in entry["inputs"])
    for t in inputs:
        if t.op >= num_ops:
            raise ValueError(f"{where}: input {_tensor_str(t)} refers to an op that does "
                             "not come before it")
    params = []
    for key, value in sorted(entry.get("params", {}).items()):
        if key not in PARAM_NAMES:
            raise ValueError(f"{where}: unknown parameter {key!r}")
        if isinstance(value, str):
            if is_src or not value.startswith("src:") or not value[4:].isdigit():
                raise ValueError(f"{where}: parameter {key}={value!r}: only target ops "
                                 "may copy, as 'src:K'")
        elif not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{where}: parameter {key} must be an int")
        params.append((key, value))
    return PatternOp(entry["type"], inputs, tuple(params))


def rule_to_json(rule: Rule) -> dict:
    return {
        "name": rule.name,
        "src": [_op_to_json(op) for op in rule.src],
        "dst": [_op_to_json(op) for op in rule.dst],
        "mapped_outputs": [[_tensor_str(s), _tensor_str(d)] for s, d in rule.mapped_outputs],
    }


def rule_from_json(entry: dict, position: int) -> Rule:
    name = entry.get("name") if isinstance(entry, dict) else None
    where = f"rule {position} ({name!r})"
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: needs a non-empty 'name'")
    for field in ("src", "dst", "mapped_outputs"):
        if not isinstance(entry.get(field), list) or not entry[field]:
            raise ValueError(f"{where}: needs a non-empty list '{field}'")
    src = tuple(_op_from_json(op, f"{where} src op {j}", j, True)
                for j, op in enumerate(entry["src"]))
    dst = tuple(_op_from_json(op, f"{where} dst op {j}", j, False)
                for j, op in enumerate(entry["dst"]))
    mapped = []
    for pair in entry["mapped_outputs"]:
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"{where}: a mapped output is a [source, target] pair")
        s, d = (_parse_tensor(t, where) for t in pair)
        if not 0 <= s.op < len(src) or not 0 <= d.op < len(dst):
            raise ValueError(f"{where}: mapped output {pair} refers to a missing op")
        mapped.append((s, d))
    return Rule(name, src, dst, tuple(mapped))


def save_rules(rules: Sequence[Rule], path: str) -> None:
    """Writes rules in the project's format, one rule per line."""
    lines = [json.dumps(rule_to_json(r), separators=(", ", ": ")) for r in rules]
    with open(path, "w") as f:
        f.write(f'{{"format": "{FORMAT}", "version": {VERSION}, "rules": [\n')
        f.write(",\n".join(lines))
        f.write("\n]}\n")


def load_rules(path: str) -> List[Rule]:
    """Reads a rule file of the project's format.

    Raises:
      ValueError: the file is not valid JSON or a rule is malformed (the
        message names the rule and the field).
    """
    with open(path) as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{path}: not an {FORMAT} file (missing 'format': '{FORMAT}')")
    if doc.get("version") != VERSION:
        raise ValueError(f"{path}: unsupported version {doc.get('version')!r}")
    rules = [rule_from_json(entry, i) for i, entry in enumerate(doc.get("rules", []))]
    names = [r.name for r in rules]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{path}: duplicate rule names {duplicates}")
    return rules


# ------------------------------------------------------- TASO's graph_subst.pb

# TASO's OpType values (REFERENCE.md Part A §2) of the ops its rules use.
_TASO_TYPES = {3: "conv2d", 6: "maxpool", 7: "avgpool", 8: "relu", 9: "sigmoid",
               10: "tanh", 11: "batchnorm", 12: "concat", 13: "split", 14: "reshape",
               15: "transpose", 16: "add", 17: "mul", 18: "matmul", 20: "enlarge",
               21: "merge_gconv", 28: "sub", 29: "div"}
# TASO's PMParameter keys. Its loader ignores KERNEL_H/W on convs, so the
# rules apply to every kernel size; we do the same (the semantics test checks
# them on 1x1 and 3x3 kernels).
_TASO_PARAMS = {1: "num_inputs", 2: "num_outputs", 3: "group", 6: "stride_h",
                7: "stride_w", 8: "padding", 9: "activation", 10: "numdim",
                11: "axis", 12: "perm", 14: "count"}
_TASO_IGNORED_PARAMS = {4, 5}  # KERNEL_H, KERNEL_W


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    result, shift, start = 0, 0, pos
    while True:
        if pos >= len(data):
            raise ValueError(f"truncated varint at byte offset {start}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError(f"varint too long at byte offset {start}")


def _fields(data: bytes, base: int = 0) -> List[Tuple[int, Union[int, bytes], int]]:
    """Decodes one message: [(field number, value, byte offset)]."""
    out, pos = [], 0
    while pos < len(data):
        offset = base + pos
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            if value >= 1 << 63:
                value -= 1 << 64
            out.append((field, value, offset))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ValueError(f"truncated field {field} at byte offset {offset}")
            out.append((field, data[pos:pos + length], base + pos))
            pos += length
        else:
            raise ValueError(f"unsupported wire type {wire} at byte offset {offset}")
    return out


def _int32(value: int) -> int:
    # proto2 int32: negative numbers arrive as 64-bit two's complement.
    return value - (1 << 32) if value >= 1 << 31 else value


class _Inexpressible(Exception):
    pass


def _taso_op(data: bytes, base: int) -> PatternOp:
    fields = _fields(data, base)
    types = [v for f, v, _ in fields if f == 1]
    if len(types) != 1:
        raise ValueError(f"operator at byte offset {base} has no type")
    taso_type = _int32(types[0])
    if taso_type not in _TASO_TYPES:
        raise _Inexpressible(f"TASO op type {taso_type} has no counterpart")
    inputs, params = [], []
    for f, v, off in fields:
        if f == 2:
            t = {k: _int32(x) for k, x, _ in _fields(v, off)}
            inputs.append(PatternTensor(t.get(1, 0), t.get(2, 0)))
        elif f == 3:
            p = {k: _int32(x) for k, x, _ in _fields(v, off)}
            key, value = p.get(1, 0), p.get(2, 0)
            if key in _TASO_IGNORED_PARAMS:
                continue
            if key not in _TASO_PARAMS:
                raise _Inexpressible(f"parameter key {key} on {_TASO_TYPES[taso_type]}")
            params.append((_TASO_PARAMS[key], value))
    return PatternOp(_TASO_TYPES[taso_type], tuple(inputs), tuple(sorted(params)))


def read_taso_rules(path: str) -> Tuple[List[Rule], List[str]]:
    """Reads TASO's binary rule collection (graph_subst.pb).

    Returns:
      (rules, skipped): the rules, named `taso_<index>`, and one message per
      rule that cannot be expressed here, saying why.

    Raises:
      ValueError: malformed bytes, naming the byte offset.
    """
    with open(path, "rb") as f:
        data = f.read()
    rules, skipped = [], []
    for index, (field, body, offset) in enumerate(
            (f, v, o) for f, v, o in _fields(data) if f == 1):
        name = f"taso_{index}"
        if not isinstance(body, bytes):
            raise ValueError(f"rule {index} at byte offset {offset} is not a message")
        try:
            fields = _fields(body, offset)
            src = tuple(_taso_op(v, o) for f, v, o in fields if f == 1)
            dst = tuple(_taso_op(v, o) for f, v, o in fields if f == 2)
            mapped = []
            for f, v, o in fields:
                if f == 3:
                    m = {k: _int32(x) for k, x, _ in _fields(v, o)}
                    mapped.append((PatternTensor(m.get(1, 0), m.get(3, 0)),
                                   PatternTensor(m.get(2, 0), m.get(4, 0))))
            rules.append(Rule(name, src, dst, tuple(mapped)))
        except _Inexpressible as e:
            skipped.append(f"{name}: {e}")
    return rules, skipped
