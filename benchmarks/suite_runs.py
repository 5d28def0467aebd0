"""Runs of the test suite, read from their logs; prints JSON.

    .venv/bin/python -m pytest tests -q --durations=0 > run1.log 2>&1
    python benchmarks/suite_runs.py run1.log run2.log ...

Per log (a run of the README's test command with `--durations=0`, whose
output ends with pytest's summary line): pytest's own wall time, the counts
of passed, failed and skipped tests, the tests' setup, call and teardown
times summed over both workers, and the classes (modules where there is no
class) that took longest. Then, for each run after the first, how its
tests' times compare with the first run's: per test phase timed above 1 s
in both, the ratio run / first, its median and quartiles. A ratio that is
about the same for every test says the machine ran at another speed (a
shared VM drifts through the day), not that some tests changed.

The suite's time on this machine is in docs/install.md, "Tests"; the
machine's speed varies between runs by more than most changes to the suite,
so compare medians of several runs taken in one sitting.
"""

import collections
import json
import re
import statistics
import sys
from typing import Dict, List, Tuple

_DURATION = re.compile(r"^([0-9.]+)s (setup|call|teardown)\s+(\S+)")
_SUMMARY = re.compile(r"^=*\s*(.*) in ([0-9.]+)s")
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?)\b")
# Test phases shorter than this are mostly fixed overhead; their ratios are noise.
_MIN_SECONDS = 1.0
_TOP = 10

Phase = Tuple[str, str]  # (setup|call|teardown, node id)


def read_log(path: str) -> Tuple[Dict[Phase, float], dict]:
    """The log's per-phase durations and its summary line's figures.

    Raises:
      ValueError: no pytest summary line (the run did not finish).
    """
    durations: Dict[Phase, float] = {}
    summary = None
    with open(path, errors="replace") as f:
        for line in f:
            m = _DURATION.match(line)
            if m:
                durations[(m.group(2), m.group(3))] = float(m.group(1))
                continue
            m = _SUMMARY.match(line.strip())
            if m and _COUNT.search(m.group(1)):
                summary = m
    if summary is None:
        raise ValueError(f"{path}: no pytest summary line (did the run finish?)")
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
              for n, kind in _COUNT.findall(summary.group(1))}
    return durations, {"pytest_seconds": float(summary.group(2)), "counts": counts}


def run_report(path: str, durations: Dict[Phase, float], summary: dict) -> dict:
    by_scope: Dict[str, float] = collections.Counter()
    for (_, node), seconds in durations.items():
        by_scope[node.rsplit("::", 1)[0]] += seconds
    return {"log": path, **summary,
            "summed_test_seconds": round(sum(durations.values()), 1),
            "longest": [{"scope": s, "seconds": round(t, 1)}
                        for s, t in by_scope.most_common(_TOP)]}


def ratios(first: Dict[Phase, float], other: Dict[Phase, float]) -> dict:
    values = sorted(other[k] / first[k] for k in first
                    if k in other and first[k] > _MIN_SECONDS and other[k] > _MIN_SECONDS)
    if len(values) < 2:
        return {"phases": len(values)}
    q1, median, q3 = statistics.quantiles(values, n=4)
    return {"phases": len(values), "median": round(median, 3),
            "quartiles": [round(q1, 3), round(q3, 3)]}


def main(paths: List[str]) -> dict:
    if not paths:
        raise SystemExit("usage: python benchmarks/suite_runs.py LOG [LOG ...]")
    logs = [(p, *read_log(p)) for p in paths]
    runs = [run_report(p, d, s) for p, d, s in logs]
    first = logs[0][1]
    for run, (_, durations, _) in zip(runs[1:], logs[1:]):
        run["against_first"] = ratios(first, durations)
    walls = [r["pytest_seconds"] for r in runs]
    return {"benchmark": "suite_runs", "runs": runs,
            "pytest_seconds": {"median": statistics.median(walls), "min": min(walls),
                               "max": max(walls), "n": len(walls)}}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=1))
