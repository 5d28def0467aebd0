"""Whether an entry point gives the same results in every process; prints JSON.

    python benchmarks/repro_bench.py [--runs=3] [--grappler=default|off|arithmetic_on]
        [--out_json=PATH] -- SCRIPT [ARGS...]

e.g. the model-free agent's quick run:

    python benchmarks/repro_bench.py -- experiments/train_mf.py --quick --results_dir={tmp}

Runs SCRIPT `--runs` times, one after the other, each in a fresh
interpreter (`{tmp}` in an argument becomes a new empty folder per run),
then compares what the runs wrote under their folders, file by file:
a JSON file by its values, keys naming a time left out (`seconds`,
`_seconds`, `time`, `date`: wall-clock figures differ from run to run)
and so are `measured` (runtimes timed on the machine); a run's own folder
in a string (a path it records) reads `{tmp}` in every run;
any other file by its bytes. Files that hold wall-clock figures in other
forms are left out: TensorBoard's event files, TensorFlow's `checkpoint`
bookkeeping file (its timestamps; the checkpoints' data files are
compared) and Markdown (the rendering of a result that its JSON holds,
with the run's seconds in its prose). For each file the report says whether every run agrees
with the first and, for JSON, where the first difference lies (e.g.
`history[15].policy_loss_xfer`).

`--grappler` sets TensorFlow's graph optimiser before the script's first
op (`entry_point_runs.py`): `default` leaves it as the project leaves it
(`xflowrl.tracing` turns the arithmetic optimiser off on import), `off`
disables grappler whole, `arithmetic_on` turns the arithmetic optimiser
back on after the project's modules are imported (what the project did
before it turned it off). The runs get TensorFlow's default thread pools unless the
environment sets them.
"""

import json
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

import entry_point_runs

# JSON keys that hold wall-clock figures.
_TIMING_KEY = re.compile(r"(^|_)(seconds|time|date)$|^measured$")
# Files holding wall-clock figures in other forms (see the docstring).
_IGNORED_FILE = re.compile(r"tfevents|(^|/)checkpoint$|\.md$")


def _strip(value: Any, folder: str = "") -> Any:
    """`value` without the keys that hold wall-clock figures, and with the
    run's own `folder` written `{tmp}` in its strings (a path a run records
    names the folder it was given)."""
    if isinstance(value, dict):
        return {k: _strip(v, folder) for k, v in value.items()
                if not _TIMING_KEY.search(str(k))}
    if isinstance(value, list):
        return [_strip(v, folder) for v in value]
    if folder and isinstance(value, str):
        return value.replace(folder, "{tmp}")
    return value


def first_difference(a: Any, b: Any, path: str = "") -> Optional[str]:
    """The path of the first place where `a` and `b` differ (depth first, in
    `a`'s order), or None where they are equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{path}.{k}".lstrip(".")
            found = first_difference(a[k], b[k], f"{path}.{k}")
            if found is not None:
                return found.lstrip(".")
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None if len(a) == len(b) else f"{path}[{min(len(a), len(b))}]"
    return None if a == b else path or "(the whole file)"


def _files(folder: str) -> Dict[str, str]:
    out = {}
    for root, _, names in os.walk(folder):
        for name in names:
            full = os.path.join(root, name)
            relative = os.path.relpath(full, folder)
            if not _IGNORED_FILE.search(relative):
                out[relative] = full
    return out


def compare(folders: List[str]) -> Dict[str, Dict[str, Any]]:
    """Per file of any run: whether every run holds it and agrees with the
    first run's, and for JSON the first difference of each run that does not."""
    files = [_files(f) for f in folders]
    report: Dict[str, Dict[str, Any]] = {}
    for name in sorted(set().union(*files)):
        entry: Dict[str, Any] = {"same": True, "differences": []}
        if any(name not in f for f in files):
            entry.update(same=False, differences=["missing in some runs"])
            report[name] = entry
            continue
        if name.endswith(".json"):
            with open(files[0][name]) as f:
                first = _strip(json.load(f), folders[0])
            for run, other in enumerate(files[1:], start=1):
                with open(other[name]) as f:
                    found = first_difference(first, _strip(json.load(f), folders[run]))
                if found is not None:
                    entry["same"] = False
                    entry["differences"].append({"run": run, "at": found})
        else:
            with open(files[0][name], "rb") as f:
                first_bytes = f.read()
            for run, other in enumerate(files[1:], start=1):
                with open(other[name], "rb") as f:
                    if f.read() != first_bytes:
                        entry["same"] = False
                        entry["differences"].append({"run": run, "at": "bytes"})
        report[name] = entry
    return report


def main(args: List[str]) -> None:
    options, argv = entry_point_runs.split_command(
        args, {"runs": "3", "grappler": "default", "out_json": ""}, __doc__)
    runs, grappler = int(options["runs"]), options["grappler"]
    if runs < 2 or grappler not in entry_point_runs.GRAPPLER:
        sys.exit(__doc__)
    folders, seconds = [], []
    try:
        for run in range(runs):
            folders.append(tempfile.mkdtemp(prefix="repro_bench_"))
            start = time.time()
            entry_point_runs.run(grappler, argv, folders[-1])
            seconds.append(round(time.time() - start, 1))
            print(json.dumps({"run": run, "seconds": seconds[-1]}), file=sys.stderr, flush=True)
        files = compare(folders)
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    entry_point_runs.write_report(
        {"argv": argv, "runs": runs, "grappler": grappler, "seconds": seconds,
         "all_same": all(entry["same"] for entry in files.values()), "files": files},
        options["out_json"])


if __name__ == "__main__":
    main(sys.argv[1:])
