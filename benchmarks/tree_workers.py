"""Benchmarks that time two source trees against each other: a long-lived
worker process per tree, one JSON call per line.

A benchmark script that times code of several trees (`--trees=A,B`) starts
itself once per tree with `--worker`, in that tree's folder and with it on
PYTHONPATH, so that the worker imports that tree's package; the worker
answers each JSON line on stdin with one JSON line on stdout (`serve`).
Imports, rule sets and graphs are then loaded once per worker, and calls
to the trees can be interleaved setting by setting, so that what they
measure runs under the same load.

Defines no flags, so tests and other scripts import it beside any benchmark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Callable


def serve(run: Callable[[dict], dict]) -> None:
    """The worker's loop: a ready line, then `run(call)` per line of stdin,
    each answer one JSON line (an exception's as {"error": ...})."""
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        call = json.loads(line)
        try:
            out = run(call)
        except Exception as error:  # pylint: disable=broad-except
            out = {"error": f"{type(error).__name__}: {error}"}
        print(json.dumps(out), flush=True)


class TreeWorker:
    """`script --worker` running in source tree `tree` (its package first on
    the path, one thread for OpenMP), until `close`."""

    def __init__(self, script: str, tree: str):
        tree = os.path.abspath(tree)
        env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1")
        self.tree = tree
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(script), "--worker"], cwd=tree, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._read()

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the worker on {self.tree} ended")
            if line.startswith("{"):
                return json.loads(line)

    def call(self, call: dict) -> dict:
        """One call's answer."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(call) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
