"""The `apply_everywhere` calls of a planning run, recorded, and what a cache
of them could skip at most (`benchmarks/everywhere_reuse.py`'s docstring
defines the two counts).

Defines no flags, so tests and other scripts import it beside any benchmark.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Dict, Iterator, List, Sequence, Set, Tuple

from xflowrl.engine import XferSet


@dataclasses.dataclass(frozen=True)
class Call:
    """One `apply_everywhere` call as recorded."""
    start: int                # canonical hash of the graph it started from
    xfer: int
    after: Tuple[int, ...]    # canonical hash after each application
    enumerations: int
    cpu_seconds: float


@contextlib.contextmanager
def recorded(xfers: XferSet) -> Iterator[List[Call]]:
    """Records every `xfers.apply_everywhere` call made inside (on this
    instance only) into the list it yields."""
    calls: List[Call] = []
    original = xfers.apply_everywhere

    def recording(graph, xfer, *args, **kwargs):
        cpu = time.thread_time()
        out = original(graph, xfer, *args, **kwargs)
        cpu = time.thread_time() - cpu
        calls.append(Call(graph.hash(), xfer, tuple(out[1]), out[2], cpu))
        return out

    xfers.apply_everywhere = recording  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        del xfers.apply_everywhere  # the class's method again


def ceilings(calls: Sequence[Call]) -> Dict[str, Dict[str, float]]:
    """The module docstring's `start_seen` and `converging` counts of `calls`
    (in call order): calls, enumerations and CPU seconds each."""
    seen: Set[Tuple[int, int]] = set()
    start = {"calls": 0, "enumerations": 0, "cpu_seconds": 0.0}
    converging = {"calls": 0, "enumerations": 0, "cpu_seconds": 0.0}
    for call in calls:
        path = (call.start,) + call.after
        if (call.start, call.xfer) in seen:
            start["calls"] += 1
            start["enumerations"] += call.enumerations
            start["cpu_seconds"] += call.cpu_seconds
        # Graph i of the path is where enumeration i runs (the last one
        # finds no location where the call stopped early).
        first = next((i for i, h in enumerate(path) if (h, call.xfer) in seen), None)
        if first is not None and first < call.enumerations:
            skipped = call.enumerations - first
            converging["calls"] += 1
            converging["enumerations"] += skipped
            converging["cpu_seconds"] += call.cpu_seconds * skipped / call.enumerations
        seen.update((h, call.xfer) for h in path)
    return {"start_seen": start, "converging": converging}
