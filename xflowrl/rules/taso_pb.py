"""Reader of TASO's binary rule collection (`graph_subst.pb`).

TASO ships its verified substitutions as a protobuf `GraphSubst.RuleCollection`
(schema: `src/core/rules.proto` in github.com/jiazhihao/TASO). This module decodes it with a small
hand-written wire-format decoder (no protobuf dependency) into the rule data
model of `xflowrl.rules.rules_io`, and says exactly which rules it cannot
express and why.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Sequence, Tuple, Union, cast

from xflowrl import ops
from xflowrl.rules.rules_io import PatternOp, PatternTensor, Rule, validate_rule


class _Field(NamedTuple):
    number: int
    wire_type: int
    value: Union[int, Tuple[int, int]]  # varint/fixed value, or (start, end) of bytes
    offset: int                         # byte offset of the field's key


_WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 5: "32-bit"}


def _read_varint(data: bytes, pos: int, end: int) -> Tuple[int, int]:
    """(value, position after it) of the varint at `pos`."""
    result, start = 0, pos
    for shift in range(0, 70, 7):
        if pos >= end:
            raise ValueError(f"truncated varint at byte offset {start}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
    raise ValueError(f"varint longer than 10 bytes at byte offset {start}")


def _decode_message(data: bytes, start: int, end: int) -> List[_Field]:
    """The fields of the message in data[start:end]; offsets are absolute."""
    fields, pos = [], start
    while pos < end:
        offset = pos
        value: Union[int, Tuple[int, int]]
        key, pos = _read_varint(data, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError(f"invalid field number 0 at byte offset {offset}")
        if wire == 0:
            value, pos = _read_varint(data, pos, end)
        elif wire == 2:
            length, pos = _read_varint(data, pos, end)
            if pos + length > end:
                raise ValueError(f"truncated field {number}: {length} bytes announced at "
                                 f"byte offset {offset}, {end - pos} left")
            value = (pos, pos + length)
            pos += length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > end:
                raise ValueError(f"truncated {size * 8}-bit field {number} at byte offset "
                                 f"{offset}")
            value = int.from_bytes(data[pos:pos + size], "little")
            pos += size
        else:
            raise ValueError(f"unsupported wire type {wire} (field {number}) at byte "
                             f"offset {offset}")
        fields.append(_Field(number, wire, value, offset))
    return fields


def _int32(field: _Field, message: str) -> int:
    """A proto int32 field (negatives arrive as 64-bit two's complement)."""
    if field.wire_type != 0:
        raise ValueError(f"{message} field {field.number} at byte offset {field.offset}: "
                         f"expected a varint, got wire type {field.wire_type}")
    value = cast(int, field.value) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _submessage(data: bytes, field: _Field, message: str) -> List[_Field]:
    if field.wire_type != 2:
        raise ValueError(f"{message} field {field.number} at byte offset {field.offset}: "
                         f"expected a message, got wire type {field.wire_type}")
    return _decode_message(data, *cast(Tuple[int, int], field.value))


def _scalars(data: bytes, field: _Field, message: str, required: Sequence[int],
             names: Sequence[str]) -> Dict[int, int]:
    """Decodes a message of int32 fields that must all be present."""
    values = {f.number: _int32(f, message)
              for f in _submessage(data, field, message) if f.number in required}
    for number, name in zip(required, names):
        if number not in values:
            raise ValueError(f"{message} at byte offset {field.offset} lacks required field "
                             f"{name} ({number})")
    return values


# ---------------------------------------------------- TASO's graph_subst.pb

# TASO's OpType names (`enum OpType` in its src/core/ops.h), for messages.
_TASO_TYPE_NAMES = {
    0: "INPUT", 1: "WEIGHT", 2: "ANY", 3: "CONV2D", 4: "DROPOUT", 5: "LINEAR",
    6: "POOL2D_MAX", 7: "POOL2D_AVG", 8: "RELU", 9: "SIGMOID", 10: "TANH",
    11: "BATCHNORM", 12: "CONCAT", 13: "SPLIT", 14: "RESHAPE", 15: "TRANSPOSE",
    16: "EW_ADD", 17: "EW_MUL", 18: "MATMUL", 19: "MUL", 20: "ENLARGE", 21: "MERGE_GCONV",
    22: "CONSTANT_IMM", 23: "CONSTANT_ICONV", 24: "CONSTANT_ONE", 25: "CONSTANT_POOL",
    26: "SQUEEZE", 27: "UNSQUEEZE", 28: "EW_SUB", 29: "EW_DIV", 58: "FUSE_CONV_BATCHNORM",
    59: "FUSE_CONV_BATCHNORM_ALPHA_VAR", 60: "FUSE_CONV_BATCHNORM_BIAS",
    61: "BROADCAST_ADD",
}
# Why some TASO op types cannot be expressed.
_TASO_TYPE_REASONS = {
    6: "TASO's pools read an implicit weight as a second input and take the kernel "
       "size from it; xflowrl's pools read one input and carry kernel_h/kernel_w",
    14: "a TASO rule cannot carry a reshape's target shape, which xflowrl's reshape "
        "needs as its 'shape' parameter",
    15: "TASO encodes a transpose's permutation as one integer (plus OUTSHUFFLE); "
        "xflowrl's 'perm' is a list a rule cannot set",
    22: "TASO's constant ops exist only in its rule generator",
    58: "xflowrl folds batch norm through fuse_conv_bn_alpha_var and "
        "fuse_conv_bn_bias, not one fused op",
}
_TASO_TYPE_REASONS[7] = _TASO_TYPE_REASONS[6]
for _t in (23, 24, 25):
    _TASO_TYPE_REASONS[_t] = _TASO_TYPE_REASONS[22]
# TASO op types with the same semantics here: the engine numbers its op types
# as TASO does (the op table, `xflowrl.ops`), so these are the pattern
# types whose TASO form carries what ours needs.
TASO_OP_TYPES: Dict[int, str] = {s.type_id: s.name for s in ops.SPECS
                                 if s.pattern and s.type_id not in _TASO_TYPE_REASONS}

# KERNEL_H and KERNEL_W: TASO's own loader (load_graph_xfer_from_pb_file) never
# turns them into constraints, so TASO applies its conv rules to every kernel
# size; dropping them keeps the same meaning (tests/rules/semantics_test.py
# checks the rules on 1x1 and 3x3 kernels).
TASO_IGNORED_PARAMS = {4: "KERNEL_H", 5: "KERNEL_W"}
_TASO_PARAM_REASONS = {
    0: "OP_TYPE is a generator-internal key",
    12: "TASO's integer-encoded PERM has no counterpart (xflowrl's perm is a list)",
    13: "OUTSHUFFLE has no counterpart",
    15: "AXES (reductions) has no counterpart",
    16: "KEEP_DIMS (reductions) has no counterpart",
    17: "TASO's EPSILON is an int32 here; xflowrl's epsilon is a float",
}
# TASO's PMParameter keys -> ours: the engine's rule keys are TASO's numbers,
# less the ignored ones and those with no counterpart.
TASO_PARAMS: Dict[int, str] = {p.key: p.name for p in ops.RULE_PARAMS
                               if p.key not in TASO_IGNORED_PARAMS
                               and p.key not in _TASO_PARAM_REASONS}


class _Inexpressible(Exception):
    """A TASO rule that has no counterpart in the project's rule model."""


def _taso_op(data: bytes, field: _Field, where: str) -> PatternOp:
    fields = _submessage(data, field, "Operator")
    types = [_int32(f, "Operator") for f in fields if f.number == 1]
    if not types:
        raise ValueError(f"Operator at byte offset {field.offset} lacks required field "
                         "type (1)")
    taso_type = types[-1]
    taso_name = _TASO_TYPE_NAMES.get(taso_type, f"type {taso_type}")
    where = f"{where} (TASO {taso_name})"
    inputs, params = [], []
    for f in fields:
        if f.number == 2:
            t = _scalars(data, f, "Tensor", (1, 2), ("opId", "tsId"))
            inputs.append(PatternTensor(t[1], t[2]))
        elif f.number == 3:
            p = _scalars(data, f, "Parameter", (1, 2), ("key", "value"))
            params.append((p[1], p[2]))
    if taso_type not in TASO_OP_TYPES:
        raise _Inexpressible(f"{where}: " + _TASO_TYPE_REASONS.get(
            taso_type, "the op type has no counterpart in xflowrl"))
    ours = []
    for key, value in params:
        if key in TASO_IGNORED_PARAMS:
            continue
        if key not in TASO_PARAMS:
            reason = _TASO_PARAM_REASONS.get(
                key, "shape constraints (TNParameter/DIMParameter keys) have no "
                     "counterpart" if key >= 100 else "unknown PMParameter key")
            raise _Inexpressible(f"{where}: parameter key {key}={value}: {reason}")
        ours.append((TASO_PARAMS[key], value))
    return PatternOp(TASO_OP_TYPES[taso_type], tuple(inputs), tuple(ours))


def _taso_rule(data: bytes, field: _Field, name: str) -> Rule:
    fields = _submessage(data, field, "Rule")
    src: List[PatternOp] = []
    dst: List[PatternOp] = []
    mapped = []
    for f in fields:
        if f.number == 1:
            src.append(_taso_op(data, f, f"src op {len(src)}"))
        elif f.number == 2:
            dst.append(_taso_op(data, f, f"dst op {len(dst)}"))
        elif f.number == 3:
            m = _scalars(data, f, "MapOutput", (1, 2, 3, 4),
                         ("srcOpId", "dstOpId", "srcTsId", "dstTsId"))
            mapped.append((PatternTensor(m[1], m[3]), PatternTensor(m[2], m[4])))
    # TASO's generator enumerated ungrouped convs only and its loader ignores
    # group counts, so its conv rules also fire on grouped convs, where some
    # are wrong (rules 99, 100, 130 and 131 split channels across groups):
    # source convs are pinned to one group.
    src = [PatternOp(op.type, op.inputs, tuple(sorted(op.params + (("group", 1),))))
           if op.type == "conv2d" and "group" not in dict(op.params) else op for op in src]
    return Rule(name, tuple(src), tuple(dst), tuple(mapped))


# Rules that are wrong in general, found by tests/rules/semantics_test.py:
# concat(conv(x1, w1), conv(x2, w2)) -> conv(concat(x1, x2), concat(w1, w2))
# relies on the target conv having two groups of equal width, which holds only
# when w1 and w2 have equal shapes, and no rule constraint can say so (TASO's
# verify.py hangs on exactly these four, REFERENCE §3).
TASO_UNSOUND = {
    99: "conv-concat merge is wrong unless both weights have equal shapes",
    100: "conv-concat merge (ReLU) is wrong unless both weights have equal shapes",
    130: "conv-concat merge is wrong unless both weights have equal shapes",
    131: "conv-concat merge (ReLU) is wrong unless both weights have equal shapes",
}


def decode_taso_rules(data: bytes, drop_unsound: bool = True) -> Tuple[List[Rule], List[str]]:
    """Decodes the bytes of a TASO `RuleCollection`; see `read_taso_rules`."""
    rules, skipped = [], []
    index = 0
    for field in _decode_message(data, 0, len(data)):
        if field.number != 1:
            continue  # unknown fields are skipped, as protobuf does
        name = f"taso_{index}"
        index += 1
        if drop_unsound and index - 1 in TASO_UNSOUND:
            skipped.append(f"{name}: unsound: {TASO_UNSOUND[index - 1]}")
            continue
        try:
            rule = _taso_rule(data, field, name)
        except _Inexpressible as e:
            skipped.append(f"{name}: {e}")
            continue
        try:
            validate_rule(rule)
        except ValueError as e:
            skipped.append(f"{name}: not a valid rule after conversion: {e}")
            continue
        rules.append(rule)
    return rules, skipped


def read_taso_rules(path: str, drop_unsound: bool = True) -> Tuple[List[Rule], List[str]]:
    """Reads TASO's binary rule collection (`graph_subst.pb`).

    The file is a protobuf `GraphSubst.RuleCollection` (schema in
    TASO's src/core/rules.proto), decoded here without the protobuf library. TASO's
    op types and parameter keys map to ours (`TASO_OP_TYPES`, `TASO_PARAMS`);
    its conv KERNEL_H/KERNEL_W keys are dropped, as TASO's own loader ignores
    them; source convs are pinned to one group (TASO's generator only saw
    ungrouped convs).

    Args:
      path: the `.pb` file.
      drop_unsound: skip the rules of `TASO_UNSOUND` (with a message).

    Returns:
      `(rules, skipped)`: the rules this project can express, named
      `taso_<index>` by their position in the file, and one message per rule
      it cannot express, naming the rule, the op and the type or parameter at
      fault and why.

    Raises:
      ValueError: malformed bytes (truncated data, a bad wire type, a missing
        required field); the message names the byte offset.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        return decode_taso_rules(data, drop_unsound)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
