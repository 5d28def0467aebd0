"""Rule data model and file formats: the project's JSON and TASO's protobuf.

A rule (xfer) rewrites a source pattern into a target pattern over shared
external variables. This module holds the rule data model (`PatternTensor`,
`PatternOp`, `Rule`), validates rules (`validate_rule`), reads and writes the
project's JSON rule files (`load_rules`, `save_rules`; format in
docs/rules.md); `xflowrl.rules.taso_pb` reads TASO's binary collection. It takes
operator facts (pattern types, arities, parameter keys, enum names) from the
engine's op table (`xflowrl.ops`); `xflowrl.engine.xfers` hands rules to
the engine.

Conventions (TASO's): a `PatternTensor` with `op < 0` is external variable
`op`, shared by both patterns; `op >= 0` is output `index` of op `op` of the
same pattern, which must come earlier. Op type names and parameter keys are
those of docs/engine.md plus the pattern-only keys `num_inputs num_outputs
numdim group`; `padding` and `activation` values are TASO's enums (SAME 0,
VALID 1; NONE 0, SIGMOID 1, RELU 2, TANH 3).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

from xflowrl import ops as op_table

ParamValue = Union[int, float, str]  # str: "src:K" copies the value of source op K

# Parameter keys a pattern may use: the engine's rule keys (TASO's
# PMParameter; `op_table.PARAM_KEYS`). `group` is the conv group count (derived
# from shapes, so a check) and, on merge_gconv, the group count of the conv
# being regrouped.
PARAM_NAMES = tuple(op_table.PARAM_KEYS)
# Enum values by name, as rule files write them ({"SAME": 0, "VALID": 1}).
PADDINGS: Dict[str, int] = {name: value for value, name in enumerate(op_table.PADDINGS)}
ACTIVATIONS: Dict[str, int] = {name: value for value, name in enumerate(op_table.ACTIVATIONS)}
_ENUM_RANGES = {"padding": len(PADDINGS), "activation": len(ACTIVATIONS)}
COPY_PREFIX = "src:"

FORMAT = "xflowrl-rules"
VERSION = 1


# -------------------------------------------------------------- data model


@dataclasses.dataclass(frozen=True)
class PatternTensor:
    """Output `index` of pattern op `op`; `op < 0` is external variable `op`."""
    op: int
    index: int = 0

    @property
    def is_variable(self) -> bool:
        return self.op < 0

    def __str__(self) -> str:
        return f"v{-self.op}" if self.op < 0 else f"op{self.op}.{self.index}"


@dataclasses.dataclass(frozen=True)
class PatternOp:
    """One op of a pattern.

    In a source pattern `params` are equality constraints on the matched op;
    in a target pattern they are the values to set (the shape-derived keys
    `num_inputs num_outputs numdim group` are checks there, except `group` on
    merge_gconv), and a value `"src:K"` copies that parameter from source op
    K. `params` is kept sorted by key, so equal ops compare equal.
    """
    type: str
    inputs: Tuple[PatternTensor, ...]
    params: Tuple[Tuple[str, ParamValue], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        params = tuple(sorted((str(k), v) for k, v in self.params))
        keys = [k for k, _ in params]
        if len(set(keys)) != len(keys):
            raise ValueError(f"{self.type} op: duplicate parameter keys in {keys}")
        object.__setattr__(self, "params", params)

    def param(self, key: str, default: Optional[ParamValue] = None) -> Optional[ParamValue]:
        """The value of parameter `key`, or `default` when it is not set."""
        return dict(self.params).get(key, default)


@dataclasses.dataclass(frozen=True)
class Rule:
    """A substitution: `src` is rewritten into `dst`.

    `mapped_outputs` pairs each source tensor that may be read outside a
    match (or be a graph output) with the target tensor that replaces it.
    """
    name: str
    src: Tuple[PatternOp, ...]
    dst: Tuple[PatternOp, ...]
    mapped_outputs: Tuple[Tuple[PatternTensor, PatternTensor], ...]

    def __post_init__(self):
        object.__setattr__(self, "src", tuple(self.src))
        object.__setattr__(self, "dst", tuple(self.dst))
        object.__setattr__(self, "mapped_outputs",
                           tuple((s, d) for s, d in self.mapped_outputs))


# -------------------------------------------------------------- validation


def _check_tensor_ref(t: PatternTensor, ops: Sequence[PatternOp], before: int,
                      where: str) -> None:
    """Checks that `t` names an existing output of one of ops[:before]."""
    if not isinstance(t, PatternTensor) or not isinstance(t.op, int) or not isinstance(
            t.index, int):
        raise ValueError(f"{where}: {t!r} is not a PatternTensor of ints")
    if t.index < 0:
        raise ValueError(f"{where}: tensor {t} has a negative output index")
    if t.is_variable:
        if t.index != 0:
            raise ValueError(f"{where}: variable tensor {t.op} must have index 0, "
                             f"got {t.index}")
        return
    if t.op >= len(ops):
        raise ValueError(f"{where}: {t} refers to a missing op (the pattern has "
                         f"{len(ops)} ops)")
    if t.op >= before:
        raise ValueError(f"{where}: {t} refers to op {t.op}, which does not come before it")
    producer = ops[t.op]
    if producer.type != "split":
        if t.index != 0:
            raise ValueError(f"{where}: {t}: {producer.type} has a single output")
    else:
        n = producer.param("num_outputs")
        if isinstance(n, int) and t.index >= n:
            raise ValueError(f"{where}: {t}: the split has {n} outputs")


def _check_param(key: str, value: ParamValue, is_src: bool, num_src: int,
                 where: str) -> None:
    if key not in PARAM_NAMES:
        raise ValueError(f"{where}: unknown parameter {key!r} (known: "
                         f"{', '.join(PARAM_NAMES)})")
    if isinstance(value, str):
        if (is_src or not value.startswith(COPY_PREFIX)
                or not value[len(COPY_PREFIX):].isdigit()):
            raise ValueError(f"{where}: parameter {key}={value!r}: only target ops may "
                             f"copy a value, written '{COPY_PREFIX}K'")
        if int(value[len(COPY_PREFIX):]) >= num_src:
            raise ValueError(f"{where}: parameter {key}={value!r}: the source has only "
                             f"{num_src} ops")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: parameter {key} must be a number, got {value!r}")
    if isinstance(value, float) and key not in op_table.FLOAT_PARAMS:
        raise ValueError(f"{where}: parameter {key} must be an int, got {value!r}")
    if key in _ENUM_RANGES and not 0 <= value < _ENUM_RANGES[key]:
        raise ValueError(f"{where}: parameter {key}={value} is out of range "
                         f"[0, {_ENUM_RANGES[key]})")


def _check_op(op: PatternOp, j: int, ops: Sequence[PatternOp], is_src: bool,
              num_src: int, bound: Set[int], where: str) -> None:
    if op.type not in op_table.PATTERN_TYPES:
        raise ValueError(f"{where}: unknown op type {op.type!r}")
    arity = op_table.ARITY[op.type]
    if (arity is not None and len(op.inputs) != arity) or not op.inputs:
        raise ValueError(f"{where}: {op.type} takes {arity or 'at least 1'} inputs, "
                         f"got {len(op.inputs)}")
    for t in op.inputs:
        _check_tensor_ref(t, ops, j, where)
        if not is_src and t.is_variable and t.op not in bound:
            raise ValueError(f"{where}: reads variable {t}, which the source does not bind")
    for key, value in op.params:
        _check_param(key, value, is_src, num_src, where)
    n = op.param("num_inputs")
    if isinstance(n, int) and n != len(op.inputs):
        raise ValueError(f"{where}: num_inputs={n} but the op has {len(op.inputs)} inputs")


def validate_rule(rule: Rule) -> None:
    """Checks that a rule is well formed.

    Checks: a non-empty name; non-empty patterns and mapped outputs; known op
    types with the right number of inputs; inputs that refer to earlier ops'
    existing outputs; target variables bound by the source; known parameter
    keys with values of the right type and range (`"src:K"` only in the
    target, with K a source op); mapped outputs that name existing source and
    target op outputs, each source tensor at most once.

    Raises:
      ValueError: naming the rule, the op (side and index) and the field.
    """
    name = rule.name
    if not isinstance(name, str) or not name:
        raise ValueError(f"rule {name!r}: needs a non-empty name")
    for side in ("src", "dst", "mapped_outputs"):
        if not getattr(rule, side):
            raise ValueError(f"rule {name!r}: '{side}' is empty")
    bound = {t.op for op in rule.src for t in op.inputs if t.op < 0}
    for side, ops in (("src", rule.src), ("dst", rule.dst)):
        for j, op in enumerate(ops):
            if not isinstance(op, PatternOp):
                raise ValueError(f"rule {name!r} {side} op {j}: {op!r} is not a PatternOp")
            _check_op(op, j, ops, side == "src", len(rule.src), bound,
                      f"rule {name!r} {side} op {j} ({op.type})")
    seen = set()
    for k, pair in enumerate(rule.mapped_outputs):
        where = f"rule {name!r} mapped output {k}"
        if len(pair) != 2:
            raise ValueError(f"{where}: must be a (source, target) pair")
        s, d = pair
        for t, ops, side in ((s, rule.src, "source"), (d, rule.dst, "target")):
            if isinstance(t, PatternTensor) and t.is_variable:
                raise ValueError(f"{where}: the {side} tensor {t} is a variable, not an "
                                 "op output")
            _check_tensor_ref(t, ops, len(ops), f"{where} ({side})")
        if s in seen:
            raise ValueError(f"{where}: source tensor {s} is mapped twice")
        seen.add(s)


# ------------------------------------------------------------- JSON format


def _parse_tensor(text, where: str) -> PatternTensor:
    if isinstance(text, str):
        try:
            if text.startswith("v") and int(text[1:]) >= 1:
                return PatternTensor(-int(text[1:]), 0)
            if text.startswith("op"):
                op, dot, index = text[2:].partition(".")
                if dot and op.isdigit() and index.isdigit():
                    return PatternTensor(int(op), int(index))
        except ValueError:
            pass
    raise ValueError(f"{where}: bad tensor reference {text!r} (use 'vK' for variable K "
                     "or 'opJ.I' for output I of op J)")


def _op_to_json(op: PatternOp) -> dict:
    entry: Dict[str, Any] = {"type": op.type, "inputs": [str(t) for t in op.inputs]}
    if op.params:
        entry["params"] = dict(op.params)
    return entry


def _op_from_json(entry, where: str) -> PatternOp:
    if not isinstance(entry, dict) or "type" not in entry or "inputs" not in entry:
        raise ValueError(f"{where}: an op is an object with 'type' and 'inputs'")
    unknown = sorted(set(entry) - {"type", "inputs", "params"})
    if unknown:
        raise ValueError(f"{where}: unknown fields {unknown}")
    if not isinstance(entry["inputs"], list):
        raise ValueError(f"{where}: 'inputs' must be a list")
    params = entry.get("params", {})
    if not isinstance(params, dict):
        raise ValueError(f"{where}: 'params' must be an object")
    return PatternOp(entry["type"], tuple(_parse_tensor(t, where) for t in entry["inputs"]),
                     tuple(params.items()))


def rule_to_json(rule: Rule) -> dict:
    """A rule as a JSON-ready dict (docs/rules.md)."""
    return {
        "name": rule.name,
        "src": [_op_to_json(op) for op in rule.src],
        "dst": [_op_to_json(op) for op in rule.dst],
        "mapped_outputs": [[str(s), str(d)] for s, d in rule.mapped_outputs],
    }


def rule_from_json(entry, position: int) -> Rule:
    """Parses and validates one rule of a JSON rule file.

    Args:
      entry: the decoded JSON object.
      position: the rule's position in the file, for messages.

    Raises:
      ValueError: naming the rule and the field at fault.
    """
    name = entry.get("name") if isinstance(entry, dict) else None
    where = f"rule {position} ({name!r})"
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: needs a non-empty string 'name'")
    unknown = sorted(set(entry) - {"name", "src", "dst", "mapped_outputs"})
    if unknown:
        raise ValueError(f"{where}: unknown fields {unknown}")
    for field in ("src", "dst", "mapped_outputs"):
        if not isinstance(entry.get(field), list) or not entry[field]:
            raise ValueError(f"{where}: needs a non-empty list '{field}'")
    try:
        src = tuple(_op_from_json(op, f"{where} src op {j}")
                    for j, op in enumerate(entry["src"]))
        dst = tuple(_op_from_json(op, f"{where} dst op {j}")
                    for j, op in enumerate(entry["dst"]))
    except ValueError as e:
        raise ValueError(str(e)) from None
    mapped: List[Tuple[PatternTensor, PatternTensor]] = []
    for k, pair in enumerate(entry["mapped_outputs"]):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"{where} mapped output {k}: must be a [source, target] pair")
        source, target = (_parse_tensor(t, f"{where} mapped output {k}") for t in pair)
        mapped.append((source, target))
    rule = Rule(name, src, dst, tuple(mapped))
    try:
        validate_rule(rule)
    except ValueError as e:
        raise ValueError(f"rule {position}: {e}") from None
    return rule


def save_rules(rules: Sequence[Rule], path: str) -> None:
    """Writes rules in the project's JSON format, one rule per line.

    Raises:
      ValueError: a rule is malformed or two rules share a name (nothing is
        written then).
    """
    for rule in rules:
        validate_rule(rule)
    _check_unique_names(rules, path)
    lines = [json.dumps(rule_to_json(r), separators=(", ", ": ")) for r in rules]
    with open(path, "w") as f:
        f.write(f'{{"format": "{FORMAT}", "version": {VERSION}, "rules": [\n')
        f.write(",\n".join(lines))
        f.write("\n]}\n")


# Rule files read before, by absolute path: their bytes and their rules.
# Rules are immutable, so a file whose bytes are unchanged is not parsed
# and validated again (a quarter of a second for the default set, which
# the environment, the searches and the tests build many times).
_READ: Dict[str, Tuple[bytes, Tuple[Rule, ...]]] = {}


def load_rules(path: str) -> List[Rule]:
    """Reads and validates a rule file of the project's JSON format (a
    file read before with the same bytes gives its rules at once).

    Raises:
      ValueError: the file is not valid JSON, not of this format or version,
        a rule is malformed (the message names the rule and the field), or
        two rules share a name.
    """
    key = os.path.abspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    read = _READ.get(key)
    if read is not None and read[0] == raw:
        return list(read[1])
    rules = _parse_rules(raw, path)
    _READ[key] = (raw, tuple(rules))
    return rules


def _parse_rules(raw: bytes, path: str) -> List[Rule]:
    """The rules of a rule file's bytes; ValueError as `load_rules`."""
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{path}: not an {FORMAT} file (missing 'format': '{FORMAT}')")
    if doc.get("version") != VERSION:
        raise ValueError(f"{path}: unsupported version {doc.get('version')!r} "
                         f"(this reader knows version {VERSION})")
    if not isinstance(doc.get("rules"), list):
        raise ValueError(f"{path}: 'rules' must be a list")
    try:
        rules = [rule_from_json(entry, i) for i, entry in enumerate(doc["rules"])]
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    _check_unique_names(rules, path)
    return rules


def _check_unique_names(rules: Sequence[Rule], path: str) -> None:
    names = [r.name for r in rules]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{path}: duplicate rule names {duplicates}")
