"""Mutation fuzzing of the ONNX path: `load_onnx -> search -> save_onnx`.

`run_fuzz(models, count, seed)` derives `count` mutants from a few valid
models and feeds each through `load_onnx`, a short TASO search and
`save_onnx` (to a scratch file) in a child process; it returns how every mutant ended. A mutant
is a pure function of `(seed, index)`, so one that misbehaves is reproduced
with `mutant(models, seed, index)`.

Mutations (`MUTATIONS`) are structural (an attribute, a dimension, an op
type, an opset or IR version changed; a node dropped, an input rewired to
another tensor, to a name nothing produces or to an empty slot; initializer
values replaced) or byte-level on the serialised model (truncated, bytes
flipped, inserted or deleted).

The documented outcomes are success and `ValueError` (the only exception
`load_onnx` and `save_onnx` raise for bad input). Anything else is
a defect: another exception type (`FuzzReport.undocumented`), a ValueError
that only wraps an unexpected exception inside the importer
(`FuzzReport.wrapped`: "cannot import (KeyError: ...)"), a child process
that died (`deaths`: a signal or an abort, as a segfault in native code
would) or one that stopped making progress (`hangs`). The child is restarted
after the mutant that killed it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import onnx
from onnx import numpy_helper

# Op types a node is switched to: engine-mapped, opaque, growing, unknown.
_OP_TYPES = ("Relu", "Conv", "MaxPool", "AveragePool", "BatchNormalization", "MatMul",
             "Gemm", "Add", "Mul", "Concat", "Split", "Reshape", "Transpose", "Flatten",
             "Squeeze", "Unsqueeze", "Softmax", "LayerNormalization", "ReduceMean",
             "GatherElements", "GatherND", "Gather", "Expand", "Where", "Cast", "Shape",
             "ConstantOfShape", "Range", "Tile", "Pad", "Resize", "Identity", "Dropout",
             "NoSuchOp", "If", "Loop")
_INTS = (0, -1, 1, 2, 3, 7, -(2 ** 40), 2 ** 31, 2 ** 62)
_FLOATS = (0.0, -1.0, float("nan"), float("inf"), 1e30, 1e-30)
_DIMS = (0, -1, 1, 2, 3, 64, 2 ** 31, 2 ** 40)
MUTATIONS = ("attribute", "dim", "op_type", "drop_node", "rewire", "initializer",
             "opset", "ir_version", "truncate", "flip_bytes", "insert_bytes",
             "delete_bytes")
_BYTE_LEVEL = ("truncate", "flip_bytes", "insert_bytes", "delete_bytes")


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One mutated model: its serialised bytes and how it was made."""
    index: int
    model: int          # which seed model
    kind: str           # one of MUTATIONS
    detail: str
    data: bytes


def mutant(models: Sequence[bytes], seed: int, index: int) -> Mutant:
    """Mutant `index` of the run seeded `seed` (deterministic)."""
    rng = np.random.default_rng([seed, index])
    which = int(rng.integers(len(models)))
    kind = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
    data = models[which]
    if kind in _BYTE_LEVEL:
        data, detail = _mutate_bytes(data, kind, rng)
    else:
        model = onnx.ModelProto()
        model.ParseFromString(data)
        detail = _MUTATORS[kind](model, rng)
        data = model.SerializeToString()
    return Mutant(index, which, kind, detail, data)


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _mutate_bytes(data: bytes, kind: str, rng) -> tuple:
    buf = bytearray(data)
    n = len(buf)
    if kind == "truncate":
        at = int(rng.integers(n))
        return bytes(buf[:at]), f"truncated at {at}/{n}"
    if kind == "flip_bytes":
        spots = rng.integers(n, size=int(rng.integers(1, 9)))
        for at in spots:
            buf[int(at)] ^= int(rng.integers(1, 256))
        return bytes(buf), f"flipped bytes at {sorted(int(a) for a in spots)}"
    if kind == "insert_bytes":
        at, k = int(rng.integers(n)), int(rng.integers(1, 17))
        buf[at:at] = rng.integers(0, 256, size=k, dtype=np.uint8).tobytes()
        return bytes(buf), f"inserted {k} bytes at {at}"
    at, k = int(rng.integers(n)), int(rng.integers(1, 65))
    del buf[at:at + k]
    return bytes(buf), f"deleted {k} bytes at {at}"


def _node(model, rng) -> Optional[onnx.NodeProto]:
    nodes = model.graph.node
    return nodes[int(rng.integers(len(nodes)))] if len(nodes) else None


def _attribute(model, rng) -> str:
    nodes = [n for n in model.graph.node if n.attribute]
    if not nodes:
        return "no attributes"
    node = _pick(rng, nodes)
    attr = node.attribute[int(rng.integers(len(node.attribute)))]
    if attr.type == onnx.AttributeProto.INT:
        attr.i = _pick(rng, _INTS)
        value = attr.i
    elif attr.type == onnx.AttributeProto.FLOAT:
        attr.f = _pick(rng, _FLOATS)
        value = attr.f
    elif attr.type == onnx.AttributeProto.INTS:
        choice = int(rng.integers(3))
        if choice == 0 and len(attr.ints):
            attr.ints[int(rng.integers(len(attr.ints)))] = _pick(rng, _INTS)
        elif choice == 1 and len(attr.ints):
            del attr.ints[int(rng.integers(len(attr.ints)))]
        else:
            attr.ints.append(_pick(rng, _INTS))
        value = list(attr.ints)
    elif attr.type == onnx.AttributeProto.STRING:
        attr.s = _pick(rng, (b"", b"SAME_LOWER", b"VALID", b"bogus", b"NOTSET"))
        value = attr.s
    elif attr.type == onnx.AttributeProto.TENSOR:
        attr.t.CopyFrom(numpy_helper.from_array(
            np.asarray(_pick(rng, (np.float32(np.nan), np.int64(-1), np.zeros((0,), np.int64),
                                   np.full((3,), 2 ** 40, np.int64))))))
        value = "tensor"
    else:
        node.attribute.remove(attr)
        value = "removed"
    return f"{node.name}({node.op_type}).{attr.name} = {value}"


def _dim(model, rng) -> str:
    g = model.graph
    infos = list(g.input) + list(g.output) + list(g.value_info)
    inits = list(g.initializer)
    if inits and rng.random() < 0.3:
        t = _pick(rng, inits)
        if len(t.dims):
            k = int(rng.integers(len(t.dims)))
            t.dims[k] = int(_pick(rng, _DIMS))
            return f"initializer {t.name} dim {k} = {t.dims[k]}"
    infos = [i for i in infos if i.type.HasField("tensor_type")
             and len(i.type.tensor_type.shape.dim)]
    if not infos:
        return "no dims"
    info = _pick(rng, infos)
    dims = info.type.tensor_type.shape.dim
    k = int(rng.integers(len(dims)))
    value = int(_pick(rng, _DIMS))
    if value < 0 or rng.random() < 0.15:
        dims[k].dim_param = "N"
        return f"{info.name} dim {k} = 'N'"
    dims[k].dim_value = value
    return f"{info.name} dim {k} = {value}"


def _op_type(model, rng) -> str:
    node = _node(model, rng)
    if node is None:
        return "no nodes"
    old, node.op_type = node.op_type, _pick(rng, _OP_TYPES)
    return f"{node.name}: {old} -> {node.op_type}"


def _drop_node(model, rng) -> str:
    node = _node(model, rng)
    if node is None:
        return "no nodes"
    model.graph.node.remove(node)
    return f"dropped {node.name}({node.op_type})"


def _rewire(model, rng) -> str:
    nodes = [n for n in model.graph.node if len(n.input)]
    if not nodes:
        return "no inputs"
    node = _pick(rng, nodes)
    slot = int(rng.integers(len(node.input)))
    names = ([i.name for i in model.graph.input] + [t.name for t in model.graph.initializer]
             + [o for n in model.graph.node for o in n.output])
    choice = rng.random()
    if choice < 0.2:
        new = "nothing_makes_this"
    elif choice < 0.3:
        new = ""
    else:
        new = _pick(rng, names)
    node.input[slot] = new
    return f"{node.name}({node.op_type}).input[{slot}] = {new!r}"


def _initializer(model, rng) -> str:
    inits = list(model.graph.initializer)
    if not inits:
        return "no initializers"
    t = _pick(rng, inits)
    value = numpy_helper.to_array(t)
    choice = int(rng.integers(4))
    if choice == 0:
        new = np.full_like(value, np.nan if value.dtype.kind == "f" else -1)
    elif choice == 1:
        new = np.zeros((0,), value.dtype)
    elif choice == 2:
        new = value.reshape(-1)[: max(value.size // 2, 1)]
    else:
        new = value.astype(np.int64 if value.dtype.kind == "f" else np.float32)
    t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(new), t.name))
    return f"initializer {t.name} -> {new.dtype}{list(new.shape)}"


def _opset(model, rng) -> str:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = int(rng.integers(1, 25))
            return f"opset {o.version}"
    return "no default opset"


def _ir_version(model, rng) -> str:
    model.ir_version = int(_pick(rng, (0, 1, 3, 6, 8, 9, 10, 11, 99)))
    return f"ir_version {model.ir_version}"


_MUTATORS = {"attribute": _attribute, "dim": _dim, "op_type": _op_type,
             "drop_node": _drop_node, "rewire": _rewire, "initializer": _initializer,
             "opset": _opset, "ir_version": _ir_version}


# ----------------------------------------------------------------- running


@dataclasses.dataclass
class FuzzReport:
    """How the mutants of one run ended.

    Attributes:
      mutants: how many were run.
      outcomes: count per outcome: "ok" (imported, searched, exported),
        "ValueError" (refused), or another exception's type name.
      by_kind: per mutation kind, count per outcome.
      undocumented: (index, kind, detail, "Type: message") of mutants that
        raised anything but ValueError.
      wrapped: the same for ValueErrors that wrap an unexpected exception of
        the importer ("cannot import (...)").
      deaths: (index, kind, detail, return code) of mutants during which the
        child process died.
      hangs: (index, kind, detail) of mutants the child spent more than the
        stall limit on.
      seconds: wall time of the run.
    """
    mutants: int = 0
    outcomes: Dict[str, int] = dataclasses.field(default_factory=dict)
    by_kind: Dict[str, Dict[str, int]] = dataclasses.field(default_factory=dict)
    undocumented: List[tuple] = dataclasses.field(default_factory=list)
    wrapped: List[tuple] = dataclasses.field(default_factory=list)
    deaths: List[tuple] = dataclasses.field(default_factory=list)
    hangs: List[tuple] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def add(self, kind: str, outcome: str) -> None:
        self.mutants += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        per = self.by_kind.setdefault(kind, {})
        per[outcome] = per.get(outcome, 0) + 1

    def to_json(self) -> Dict[str, object]:
        return dataclasses.asdict(self)


def run_fuzz(models: Sequence[onnx.ModelProto], count: int, seed: int, *, budget: int = 2,
             stall_s: float = 30.0, start: int = 0) -> FuzzReport:
    """Runs mutants `start .. start + count - 1` of `models` in a child process.

    Args:
      models: valid seed models.
      count: number of mutants.
      seed: the run's seed (with the index, it determines every mutant).
      budget: search expansions per imported mutant.
      stall_s: a mutant that takes longer than this is a hang (the child is
        killed and restarted after it).
      start: first mutant index.
    """
    report = FuzzReport()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k, m in enumerate(models):
            path = os.path.join(tmp, f"seed_{k}.onnx")
            with open(path, "wb") as f:
                f.write(m.SerializeToString())
            paths.append(path)
        next_index, end = start, start + count
        while next_index < end:
            next_index = _run_child(paths, seed, next_index, end, budget, stall_s, tmp, report)
    report.seconds = time.monotonic() - t0
    return report


def _child_env() -> Dict[str, str]:
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return env


def _run_child(paths, seed, first, end, budget, stall_s, tmp, report) -> int:
    """Runs mutants from `first` until the end or the child's death; returns
    the next index to run."""
    progress = os.path.join(tmp, f"progress_{first}.jsonl")
    cmd = [sys.executable, "-m", "xflowrl.onnx_io.fuzz", "--seed", str(seed),
           "--first", str(first), "--end", str(end), "--budget", str(budget),
           "--out", progress] + paths
    errors = os.path.join(tmp, f"stderr_{first}.txt")
    with open(errors, "wb") as err:
        proc = subprocess.Popen(cmd, env=_child_env(), stdout=subprocess.DEVNULL, stderr=err)
        # Progress is the log's growth (parsed once, at the end).
        size, last_change, current, done = -1, time.monotonic(), None, None
        rc: Union[int, str, None]  # the exit code, or "hang"
        while True:
            try:
                rc = proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                rc = None
            now = os.path.getsize(progress) if os.path.exists(progress) else 0
            if now != size:
                size, last_change = now, time.monotonic()
            if rc is None and time.monotonic() - last_change > stall_s:
                proc.kill()
                proc.wait()
                rc = "hang"
            if rc is not None:
                break
    with open(errors, "rb") as err:
        stderr = err.read()[-4000:].decode(errors="replace")
    for rec in _read_records(progress, complete=rc != "hang"):
        if rec["event"] == "start":
            current = rec
            continue
        done = rec["index"]
        report.add(rec["kind"], rec["outcome"])
        entry: Tuple[Any, ...] = (rec["index"], rec["kind"], rec["detail"], rec.get("error", ""))
        if rec["outcome"] not in ("ok", "ValueError"):
            report.undocumented.append(entry)
        elif rec.get("wrapped"):
            report.wrapped.append(entry)
        current = None
    if rc == 0 and current is None:
        return end
    if current is None:  # died between mutants: before the first one, say
        if done is None:
            raise RuntimeError(f"the fuzz child failed before any mutant (rc={rc}): "
                               f"{stderr[-2000:]}")
        return done + 1
    entry = (current["index"], current["kind"], current["detail"])
    if rc == "hang":
        report.hangs.append(entry)
        report.add(current["kind"], "hang")
    else:
        report.deaths.append(entry + (rc,))
        report.add(current["kind"], "death")
    return current["index"] + 1


def _read_records(path: str, complete: bool = False) -> List[dict]:
    """The child's records; a last line without its newline is still being
    written (unless the child has exited: `complete`) and is skipped."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = f.read().split("\n")
    records = []
    for line in lines[:-1] if not complete else lines:
        try:
            records.append(json.loads(line))
        except ValueError:  # empty or cut short by a death
            pass
    return records


def _worker(paths: Sequence[str], seed: int, first: int, end: int, budget: int,
            out: str) -> None:
    """The child: runs mutants first..end-1, one JSON line before and after
    each (flushed, so that the parent knows which mutant a death hit)."""
    from xflowrl.engine import CostModel, XferSet
    from xflowrl.onnx_io import load_onnx, save_onnx
    models = []
    for p in paths:
        with open(p, "rb") as f:
            models.append(f.read())
    xfers, cost = XferSet.default(), CostModel("analytic")
    # Test hook: die by SIGSEGV at this mutant, as a native crash would.
    die_at = int(os.environ.get("XFLOWRL_FUZZ_DIE_AT", "-1"))
    exported = out + ".exported.onnx"
    with open(out, "a") as log:
        def emit(rec):
            log.write(json.dumps(rec) + "\n")
            log.flush()
        for index in range(first, end):
            m = mutant(models, seed, index)
            emit({"event": "start", "index": index, "kind": m.kind, "detail": m.detail})
            rec = {"event": "done", "index": index, "kind": m.kind, "detail": m.detail}
            if index == die_at:
                os.kill(os.getpid(), signal.SIGSEGV)
            try:
                graph, weights = load_onnx(m.data)
                result = xfers.search(graph, cost, budget=budget)
                save_onnx(result.graph, weights, exported)
                rec["outcome"] = "ok"
            except ValueError as e:
                rec["outcome"] = "ValueError"
                rec["wrapped"] = "cannot import (" in str(e)
                rec["error"] = str(e)[:300]
            except Exception as e:  # what the fuzz test looks for
                rec["outcome"] = type(e).__name__
                rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            emit(rec)


def main(argv: Optional[Sequence[str]] = None) -> None:
    import argparse
    parser = argparse.ArgumentParser(description="onnx_fuzz child process")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--first", type=int, required=True)
    parser.add_argument("--end", type=int, required=True)
    parser.add_argument("--budget", type=int, default=2)
    parser.add_argument("--out", required=True)
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args(argv)
    _worker(args.paths, args.seed, args.first, args.end, args.budget, args.out)


if __name__ == "__main__":
    main()
