"""Benchmarks that time two source trees against each other: a long-lived
worker process per tree, one JSON call per line.

A benchmark script that times code of several trees (`--trees=A,B`) starts
itself once per tree with `--worker`, in that tree's folder and with it on
PYTHONPATH, so that the worker imports that tree's package; the worker
answers each JSON line on stdin with one JSON line on stdout (`serve`).
Imports, rule sets and graphs are then loaded once per worker, and calls
to the trees can be interleaved setting by setting, so that what they
measure runs under the same load.

Defines no flags when imported, so tests and other scripts import it beside
any benchmark; a benchmark script calls `define_flags` for the flags every
such benchmark shares.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Callable, Dict, Iterable, List, Sequence, Tuple

from absl import flags

FLAGS = flags.FLAGS
# One call of a schedule: the tree's index in --trees, the call, and the
# fields its answer is recorded with.
Job = Tuple[int, dict, Dict[str, Any]]


def define_flags(timed: str) -> None:
    """The flags of a benchmark of source trees: --trees (whose `timed` is
    timed; TASO's search runs in the first), --rounds, --taso, --out_json,
    --from_json and --worker."""
    flags.DEFINE_list("trees", ["."], f"Source trees whose {timed} is timed (each holds the "
                      "xflowrl package with its engine built); TASO's search runs in the "
                      "first.")
    flags.DEFINE_integer("rounds", 1, "Runs per setting and method, interleaved.")
    flags.DEFINE_bool("taso", True, "Time TASO's search too.")
    flags.DEFINE_string("out_json", "", "Write the report here as well.")
    flags.DEFINE_bool("worker", False, "Internal: serve calls on stdin (one JSON per line).")
    flags.DEFINE_string("from_json", "", "Print the summary of a report this benchmark saved "
                        "(--out_json) again, from its calls; runs nothing.")


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


def dispatch(make_worker: Callable[[], Callable[[dict], dict]],
             summary_of_report: Callable[[str], dict]) -> bool:
    """--worker (serve `make_worker()`'s calls) and --from_json (print the
    saved report's summary again); True where one of them ran."""
    if FLAGS.worker:
        serve(make_worker())
        return True
    if FLAGS.from_json:
        print(json.dumps(summary_of_report(FLAGS.from_json), indent=1))
        return True
    return False


def run_calls(script: str, trees: Sequence[str], schedule: Iterable[List[Job]]) -> List[dict]:
    """Each job of `schedule` in turn, on its tree's worker; the answers, each
    with its job's fields, its tree and the load average, also printed to
    stderr as they come."""
    workers = [TreeWorker(script, t) for t in trees]
    calls: List[dict] = []
    try:
        for jobs in schedule:
            for k, call, fields in jobs:
                got = workers[k].call(call)
                got.update(fields, tree=trees[k], load=os.getloadavg()[0])
                calls.append(got)
                print(json.dumps(got), file=sys.stderr, flush=True)
    finally:
        for worker in workers:
            worker.close()
    return calls


def report_out(report: Dict[str, Any]) -> None:
    """Writes `report` to --out_json (where given) and prints its summary."""
    if FLAGS.out_json:
        os.makedirs(os.path.dirname(os.path.abspath(FLAGS.out_json)), exist_ok=True)
        with open(FLAGS.out_json, "w") as f:
            f.write(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["summary"], indent=1))
