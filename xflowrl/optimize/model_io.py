"""A user's ONNX model in and out: read with its own weights, written back
with its interface, metadata and external data, atomically.

`load_model(path)` imports a model file (`xflowrl.onnx_io.load_onnx`) and
keeps what the engine graph does not hold: the original `ModelProto`'s
metadata (producer, doc strings, model version, `metadata_props`) and whether
its weights live in an external data file. `to_model(user_model, graph)`
exports an optimised engine graph with the model's own weights (folded
weights recomputed by the exporter), its input and output names and opsets
(`OnnxWeights.interface`) and that metadata, plus one `metadata_props` entry
saying what xflowrl did. `write_model` writes a `ModelProto` so that a
failure leaves nothing behind: into a temporary folder beside the target,
renamed into place at the end.

Every error a user can cause (missing, unreadable, malformed or truncated
file; an unsupported operator or a dynamic shape the importer cannot
resolve; an output path that cannot be written) is a `BadInput` with one
message naming the file, and the node or op where there is one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from typing import Dict, Mapping, Optional, Sequence, Tuple

import onnx

from xflowrl.engine import Graph

# The `metadata_props` key under which an optimised model records what was done.
PROVENANCE_KEY = "xflowrl.optimized"


class BadInput(ValueError):
    """Input a user can fix: a file that cannot be read or imported, a
    path that cannot be written, an option out of range. Its message is
    meant to be shown as it is."""


@dataclasses.dataclass
class UserModel:
    """An imported model file.

    Attributes:
      path: the file it was read from.
      proto: the model as read (external data loaded), unchanged.
      graph: the engine graph the importer made of it.
      weights: its weights by name (`OnnxWeights`: they carry the interface).
      external_data: its initializers were stored in an external data file.
      fixed_inputs: inputs whose dynamic dimensions `input_shapes` fixed,
        with the shape used (the optimised model has these static shapes).
    """
    path: str
    proto: onnx.ModelProto
    graph: Graph
    weights: Mapping
    external_data: bool
    fixed_inputs: Dict[str, Tuple[int, ...]]

    @property
    def name(self) -> str:
        """The file name without its extension (names results folders)."""
        return os.path.splitext(os.path.basename(self.path))[0]


def parse_input_shapes(specs: Sequence[str]) -> Dict[str, Tuple[int, ...]]:
    """`["input_ids=1,64", "pixels=1,3,224,224"]` -> {name: shape}.

    Raises:
      BadInput: a spec is not NAME=D1,D2,... with positive integers.
    """
    shapes: Dict[str, Tuple[int, ...]] = {}
    for spec in specs:
        name, sep, dims = spec.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims else ()
        except ValueError:
            shape = ()
        if not sep or not name or not shape or min(shape) < 1:
            raise BadInput(f"--input_shape {spec!r}: expected NAME=D1,D2,... with positive "
                           f"integer dimensions, e.g. input_ids=1,128")
        shapes[name] = shape
    return shapes


def _has_external_data(path: str) -> bool:
    """Whether the model at `path` keeps any initializer in an external file."""
    header = onnx.load(path, load_external_data=False)
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in header.graph.initializer)


def _dynamic_inputs(proto: onnx.ModelProto) -> Dict[str, Tuple[str, ...]]:
    """Graph inputs (not initializers) with a symbolic or unknown dimension:
    name -> the dimensions as written (a number, a name or '?')."""
    initializers = {t.name for t in proto.graph.initializer}
    dynamic = {}
    for info in proto.graph.input:
        if info.name in initializers or not info.type.HasField("tensor_type"):
            continue
        dims = tuple(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
                     for d in info.type.tensor_type.shape.dim)
        if any(not d.isdigit() for d in dims):
            dynamic[info.name] = dims
    return dynamic


def batch_input_shapes(path: str, batch: int,
                       input_shapes: Optional[Mapping[str, Sequence[int]]] = None
                       ) -> Dict[str, Tuple[int, ...]]:
    """`input_shapes` with the first dimension of every other run-time input
    set to `batch` (`--batch`): a dynamic first dimension takes it, a static
    one must already be `batch`; inputs `input_shapes` names keep their
    shape. Other dynamic dimensions stay for `--input_shape` to fix.

    Raises:
      BadInput: `batch` below 1, an unreadable file, or an input whose
        static first dimension is not `batch`, or that has no dimension.
    """
    shapes = {str(k): tuple(int(d) for d in v) for k, v in dict(input_shapes or {}).items()}
    if batch < 1:
        raise BadInput(f"--batch={batch}: the batch is a positive integer")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file")
    try:
        header = onnx.load(path, load_external_data=False)
    except Exception as e:  # protobuf's DecodeError and kin
        raise BadInput(f"{path}: cannot parse as an ONNX model (malformed or truncated "
                       f"file): {e}") from None
    initializers = {t.name for t in header.graph.initializer}
    for info in header.graph.input:
        if info.name in initializers or info.name in shapes:
            continue
        dims = info.type.tensor_type.shape.dim
        if not dims:
            raise BadInput(f"{path}: input {info.name!r} has no batch dimension; --batch "
                           f"needs one (or give its shape with --input_shape)")
        if dims[0].HasField("dim_value") and dims[0].dim_value != batch:
            raise BadInput(f"{path}: input {info.name!r} has a static batch of "
                           f"{dims[0].dim_value}, not --batch={batch}; export the model with "
                           f"a dynamic batch dimension or at batch {batch}")
        if all(d.HasField("dim_value") for d in dims):
            continue
        rest = [d.dim_value if d.HasField("dim_value") else 0 for d in dims[1:]]
        if 0 in rest:  # another dynamic dimension: leave it to the importer's hint
            continue
        shapes[info.name] = (batch, *rest)
    return shapes


def load_model(path: str, input_shapes: Optional[Mapping[str, Sequence[int]]] = None
               ) -> UserModel:
    """Reads and imports the ONNX model at `path`.

    Args:
      path: an .onnx file (its external data, if any, beside it).
      input_shapes: static shapes for inputs declared with dynamic dimensions.

    Raises:
      BadInput: the file is missing or unreadable, not an ONNX model,
        truncated, or holds something the importer refuses (the message
        names the node and its op type); an `input_shapes` name the model
        has no input of.
    """
    # Imported here: `xflowrl.optimize` is importable where onnx_io's
    # dependencies are, but the engine-only paths should not pay for them.
    from xflowrl.onnx_io import load_onnx  # pylint: disable=import-outside-toplevel
    from xflowrl.onnx_io.importer import read_model  # pylint: disable=import-outside-toplevel

    path = os.fspath(path)
    if not os.path.exists(path):
        raise BadInput(f"{path}: no such file")
    if os.path.isdir(path):
        raise BadInput(f"{path}: is a folder, not an ONNX file")
    try:
        proto = read_model(path)
        external = _has_external_data(path)
    except (ValueError, OSError) as e:
        raise BadInput(_with_path(path, e)) from None
    except Exception as e:  # protobuf's DecodeError and kin from the header read
        raise BadInput(f"{path}: cannot parse as an ONNX model (malformed or truncated "
                       f"file): {e}") from None
    shapes = {str(k): tuple(int(d) for d in v) for k, v in dict(input_shapes or {}).items()}
    declared = {i.name for i in proto.graph.input}
    unknown = sorted(set(shapes) - declared)
    if unknown:
        raise BadInput(f"{path}: --input_shape names {unknown}, but the model's inputs are "
                       f"{sorted(declared - {t.name for t in proto.graph.initializer})}")
    dynamic = _dynamic_inputs(proto)
    try:
        graph, weights = load_onnx(proto, input_shapes=shapes)
    except ValueError as e:
        message = _with_path(path, e)
        missing = sorted(set(dynamic) - set(shapes))
        if missing:
            hints = ", ".join(f"{n} has shape [{', '.join(dynamic[n])}]" for n in missing)
            message += (f" ({hints}: fix dynamic dimensions with --input_shape NAME=D1,D2,...)")
        raise BadInput(message) from None
    fixed = {name: shapes[name] for name in dynamic if name in shapes}
    return UserModel(path, proto, graph, weights, external, fixed)


def _with_path(path: str, error: Exception) -> str:
    """The error's message, naming `path` once."""
    text = str(error)
    return text if path in text else f"{path}: {text}"


def to_model(model: UserModel, graph: Graph, provenance: str = "") -> onnx.ModelProto:
    """`graph` (an optimised version of `model.graph`) as an ONNX model with
    the model's own weights, interface and metadata.

    Args:
      model: the imported original.
      graph: the graph to export (`model.graph` itself gives the round trip).
      provenance: what was done, recorded as the `PROVENANCE_KEY` entry of
        `metadata_props` (nothing recorded when empty).
    """
    from xflowrl.onnx_io import to_onnx  # pylint: disable=import-outside-toplevel

    out = to_onnx(graph, model.weights, name=model.proto.graph.name or "xflowrl")
    original = model.proto
    for field in ("producer_name", "producer_version", "domain", "model_version",
                  "doc_string"):
        setattr(out, field, getattr(original, field))
    out.graph.doc_string = original.graph.doc_string
    del out.metadata_props[:]
    for prop in original.metadata_props:
        if prop.key != PROVENANCE_KEY:
            out.metadata_props.add(key=prop.key, value=prop.value)
    if provenance:
        out.metadata_props.add(key=PROVENANCE_KEY, value=provenance)
    return out


def check_writable(path: str) -> None:
    """Raises `BadInput` unless a file can be created at `path` (its folder
    exists and is writable, and `path` is not a folder); writes nothing."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise BadInput(f"{path}: is a folder; give a file name for the output")
    if not os.path.isdir(folder):
        raise BadInput(f"{path}: cannot write the output: folder {folder} does not exist")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise BadInput(f"{path}: cannot write the output: permission denied")
    try:  # the definitive test: create (and remove) a file in the folder
        fd, probe = tempfile.mkstemp(prefix=".xflowrl-probe.", dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise BadInput(f"{path}: cannot write the output: {e.strerror or e}") from None


# Protobuf's limit on one serialised message; larger models need external data.
_PROTOBUF_LIMIT = 2 ** 31 - 1


@contextlib.contextmanager
def _staged(path: str):
    """Yields (temporary folder beside `path`, the file name to stage in it);
    the caller writes there and renames into place. The folder is removed
    whatever happens, and an OSError becomes a `BadInput` naming `path`."""
    check_writable(path)
    folder, base = os.path.split(os.path.abspath(os.fspath(path)))
    tmp = tempfile.mkdtemp(prefix=f".{base}.", dir=folder)
    try:
        yield tmp, base
    except OSError as e:
        raise BadInput(f"{path}: cannot write the output: {e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_model(proto: onnx.ModelProto, path: str, external_data: bool = False) -> None:
    """Writes `proto` to `path`; with `external_data` (or when the model is
    too large for one protobuf) its initializers go to `<file name>.data`
    beside it. Written into a temporary folder next to `path` and renamed
    into place (data file first), so a failure leaves no file behind.

    Raises:
      BadInput: the folder cannot be written.
    """
    external_data = external_data or proto.ByteSize() > _PROTOBUF_LIMIT
    with _staged(path) as (tmp, base):
        staged, folder = os.path.join(tmp, base), os.path.dirname(os.path.abspath(path))
        if external_data:
            copy = onnx.ModelProto()
            copy.CopyFrom(proto)  # saving with external data rewrites the proto
            onnx.save_model(copy, staged, save_as_external_data=True,
                            all_tensors_to_one_file=True, location=f"{base}.data",
                            size_threshold=1024)
            os.replace(os.path.join(tmp, f"{base}.data"), os.path.join(folder, f"{base}.data"))
        else:
            onnx.save_model(proto, staged)
        os.replace(staged, os.path.abspath(path))


def copy_model_file(source: str, path: str, external_data: bool) -> None:
    """Writes the original model unchanged to `path` (the refusal path of
    `optimize`): the file's bytes when it has no external data, else the
    loaded model re-saved with its data beside `path`."""
    if external_data:
        write_model(onnx.load(source), path, external_data=True)
        return
    with _staged(path) as (tmp, base):
        staged = os.path.join(tmp, base)
        shutil.copyfile(source, staged)
        os.replace(staged, os.path.abspath(path))
