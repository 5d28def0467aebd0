"""Where a command's CPU time goes, over all its processes: samples of the
command and every process it starts (py-spy, pinned in requirements.txt),
sorted into kinds of work; prints JSON.

    python benchmarks/suite_profile.py [--rate=20] [--raw=PATH] -- COMMAND...
    python benchmarks/suite_profile.py --from_raw=PATH

e.g. the test suite as the README runs it:

    python benchmarks/suite_profile.py --raw=/tmp/suite.raw -- \\
        .venv/bin/python -m pytest tests -q

`py-spy record --subprocesses --format raw` samples every Python process of
the tree `--rate` times a second (native children such as Ray's raylet are
sampled but show no Python frame). A sample counts a thread that was
running or waiting for a CPU, not one blocked in a system call, so on a
loaded machine the samples exceed the CPU time; compare the shares, not
the seconds, between runs. `--from_raw` reads a saved recording again.

The report: the samples in all and their share by kind of work, in this
order of precedence (a sample counts once, under the first that matches):

- `tracing`: TensorFlow building a graph for a `tf.function` (its first
  call for a signature);
- `import`: importing modules (`import_by_process` splits it by where the
  process sits in the tree, read from its own frames and its ancestors'
  command lines: the suite's workers; the fork server and the entry points
  forked from it; Ray's workers and everything they start, such as
  `reproduce.py`'s jobs; other processes);
- `compile`: compiling a module's source to bytecode (no .pyc to read),
  inside `import`, reported apart as well;
- `other`: everything else (running graphs, the engine, the tests' code).

and the traced functions (the project's function whose call traced) with
their samples, the most first.
"""

import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

_PROCESS = re.compile(r"(?:^|;)process (\d+):")
_LINE = re.compile(r":\d+\)$")


def _samples(path: str):
    """(frames, count) of every stack of a raw recording."""
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if count.isdigit():
                yield stack.split(";"), int(count)


def _process_kind(frames: List[str]) -> str:
    """Where a sample's process sits: py-spy puts the command line of the
    process and of each of its ancestors among the frames."""
    text = ";".join(frames)
    if "xdist/remote.py" in text:
        return "suite worker"
    if "tests/fork_server.py" in text:
        return "fork server or forked entry point"
    if "ray/_private/workers/default_worker.py" in text:
        return "ray worker or what it started"
    return "other"


def _traced_by(frames: List[str]) -> str:
    """The innermost project function above TensorFlow's trace."""
    at = next(i for i, f in enumerate(frames) if "_create_concrete_function" in f)
    callers = [f for f in frames[:at] if "(xflowrl/" in f and "xflowrl/tracing.py" not in f]
    return _LINE.sub(")", callers[-1]) if callers else "(outside xflowrl)"


def summarise(path: str, rate: int) -> Dict:
    total = 0
    kinds: Dict[str, int] = collections.Counter()
    imports: Dict[str, int] = collections.Counter()
    traced: Dict[str, int] = collections.Counter()
    processes = set()
    for frames, count in _samples(path):
        total += count
        found = _PROCESS.findall(";".join(frames))
        if found:
            processes.add(found[-1])
        text = ";".join(frames)
        if "_create_concrete_function" in text:
            kinds["tracing"] += count
            traced[_traced_by(frames)] += count
        elif "_find_and_load" in text:
            kinds["import"] += count
            imports[_process_kind(frames)] += count
            if "source_to_code" in text:
                kinds["compile"] += count
        else:
            kinds["other"] += count

    def share(n: int) -> Dict:
        return {"samples": n, "share": round(n / max(total, 1), 4)}

    return {
        "rate_hz": rate, "samples": total, "processes": len(processes),
        "kinds": {k: share(kinds[k]) for k in ("tracing", "import", "compile", "other")},
        "import_by_process": {k: share(v) for k, v in imports.most_common()},
        "traced": [[name, n] for name, n in traced.most_common(20)],
    }


def _options(args: List[str]) -> Tuple[Dict[str, str], List[str]]:
    command: List[str] = []
    if "--" in args:
        args, command = args[:args.index("--")], args[args.index("--") + 1:]
    options = {}
    for arg in args:
        name, sep, value = arg.partition("=")
        if not sep or name not in ("--rate", "--raw", "--from_raw"):
            sys.exit(__doc__)
        options[name[2:]] = value
    return options, command


def main(args: List[str]) -> None:
    options, command = _options(args)
    rate = int(options.get("rate", "20"))
    if "from_raw" in options:
        print(json.dumps(summarise(options["from_raw"], rate), indent=1))
        return
    if not command:
        sys.exit(__doc__)
    raw = options.get("raw") or os.path.join(tempfile.mkdtemp(prefix="suite_profile_"),
                                            "profile.raw")
    spy = os.path.join(os.path.dirname(sys.executable), "py-spy")
    proc = subprocess.run([spy, "record", "--rate", str(rate), "--subprocesses",
                           "--format", "raw", "-o", raw, "--", *command])
    report = summarise(raw, rate)
    report.update(command=command, returncode=proc.returncode, raw=raw)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
