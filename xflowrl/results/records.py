"""Versioned JSON records: one dataclass, written and read by the same code.

A `Record` is a dataclass whose JSON file names what it is (`"schema"`)
and the version of its layout (`"schema_version"`) before its fields, in
field order. Reading checks both and reads only the current layout: a file
of another schema, without a schema or version (one written before
records, version 0), or of any version but the record's `VERSION` is
refused (`RecordError`, naming the file, its version and that the run that
wrote it is to be run again), and so are unknown keys and missing fields.
A record is read whole or not at all.

Fields may be numbers, strings, None, lists, dicts with string keys, other
dataclasses (nested records serialise without a schema of their own) and
`Optional`, `List`, `Dict`, `Tuple` of these. A field with `OMIT_NONE` as
its metadata is left out of the JSON while it is None (a key that files
hold only where it applies, as `onnx`). A subclass changes how one record
is laid out by overriding `_fields_to_json` / `_fields_from_json`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from typing import Any, ClassVar, Dict, Mapping, Optional, Type, TypeVar

SCHEMA_KEY = "schema"
VERSION_KEY = "schema_version"

R = TypeVar("R", bound="Record")
D = TypeVar("D")


# dataclasses.field(default=None, metadata=OMIT_NONE): no key while None.
OMIT_NONE = {"omit_none": True}


def _written(obj: Any) -> Any:
    """The fields of the dataclass `obj` that its JSON holds."""
    return [f for f in dataclasses.fields(obj)
            if not (f.metadata.get("omit_none") and getattr(obj, f.name) is None)]


class RecordError(ValueError):
    """A JSON value that is not the record it is read as."""


def to_plain(value: Any) -> Any:
    """`value` as plain JSON values: dataclasses as dicts in field order
    (a record by its own layout), tuples as lists; numbers as they are
    (`Record.save` writes numpy scalars as floats)."""
    if isinstance(value, Record):
        return value._fields_to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in _written(value)}
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value  # numpy scalars too: `save` writes them as json.dump(default=float) did


def _hints(cls: type) -> Dict[str, Any]:
    return typing.get_type_hints(cls)


def from_plain(kind: Any, value: Any, where: str) -> Any:
    """`value` (plain JSON) as the type `kind` describes."""
    if value is None or kind is Any or (isinstance(kind, type) and isinstance(value, kind)):
        return value
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin is typing.Union:
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return from_plain(options[0], value, where)
        return value
    if origin in (list, typing.List):
        if not isinstance(value, list):
            raise RecordError(f"{where}: expected a list, got {type(value).__name__}")
        return [from_plain(args[0] if args else Any, v, f"{where}[{i}]")
                for i, v in enumerate(value)]
    if origin in (tuple, typing.Tuple):
        return list(value)
    if origin in (dict, typing.Dict):
        if not isinstance(value, dict):
            raise RecordError(f"{where}: expected an object, got {type(value).__name__}")
        item = args[1] if len(args) == 2 else Any
        return {k: from_plain(item, v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(kind, type) and issubclass(kind, Record):
        return kind._fields_from_json(value, where)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return dataclass_from_plain(kind, value, where)
    return value


def dataclass_from_plain(cls: Type[D], value: Any, where: str) -> D:
    """The dataclass `cls` from a plain JSON object: every key a field,
    every field without a default present."""
    if not isinstance(value, dict):
        raise RecordError(f"{where}: expected an object for {cls.__name__}, got "
                          f"{type(value).__name__}")
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise RecordError(f"{where}: {cls.__name__} has no fields {unknown}")
    missing = [n for n, f in fields.items() if n not in value
               and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise RecordError(f"{where}: {cls.__name__} lacks {missing}")
    return cls(**{n: from_plain(hints[n], value[n], f"{where}.{n}")
                  for n in fields if n in value})


@dataclasses.dataclass
class Record:
    """A dataclass with a versioned JSON form (`to_json`, `from_json`,
    `save`, `load`). Subclasses set `SCHEMA` and `VERSION`."""

    SCHEMA: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1

    # -- the layout of one record (overridable) --------------------------------
    def _fields_to_json(self) -> Dict[str, Any]:
        return {f.name: to_plain(getattr(self, f.name)) for f in _written(self)}

    @classmethod
    def _fields_from_json(cls: Type[R], value: Any, where: str) -> R:
        return dataclass_from_plain(cls, value, where)

    # -- versioned files -----------------------------------------------------------
    def to_json(self) -> Dict[str, Any]:
        """The record as a JSON object: schema, version, then its fields."""
        return {SCHEMA_KEY: self.SCHEMA, VERSION_KEY: self.VERSION, **self._fields_to_json()}

    @classmethod
    def from_json(cls: Type[R], value: Mapping[str, Any], where: str = "") -> R:
        """The record from a JSON object `to_json` of this version wrote.

        Args:
          value: the JSON object.
          where: what to name it in errors (`load` passes the file's path).

        Raises:
          RecordError: not an object, another schema, no version (a file
            written before records) or another version than `VERSION`,
            unknown or missing fields.
        """
        where = where or cls.__name__
        if not isinstance(value, Mapping):
            raise RecordError(f"{where}: expected an object, got {type(value).__name__}")
        body = dict(value)
        schema = body.pop(SCHEMA_KEY, None)
        version = body.pop(VERSION_KEY, None)
        if schema is not None and schema != cls.SCHEMA:
            raise RecordError(f"{where}: a {schema!r} record, not {cls.SCHEMA!r}")
        if schema is None or version is None:
            raise RecordError(f"{where}: no {SCHEMA_KEY!r} or {VERSION_KEY!r} (version 0, written "
                              f"before versioned records); this code reads {cls.SCHEMA} version "
                              f"{cls.VERSION} only: run again to write it anew")
        if not isinstance(version, int) or version != cls.VERSION:
            raise RecordError(f"{where}: {cls.SCHEMA} version {version!r}; this code reads "
                              f"version {cls.VERSION} only: run again to write it anew")
        return cls._fields_from_json(body, where)

    def save(self, path: str, indent: Optional[int] = 2) -> str:
        """Writes the record to `path` (its folder created); returns `path`."""
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            json.dump(self.to_json(), f, indent=indent, default=float)
        return path

    @classmethod
    def load(cls: Type[R], path: str) -> Optional[R]:
        """The record in the file `path`; None where there is no file."""
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return cls.from_json(json.load(f), where=path)
