"""Python's cyclic garbage collector paused for a block of search work.

A search (equality saturation, the engine planner) makes tens of thousands
of objects that live until it ends: e-nodes, tree nodes, tuples, arrays.
Every allocation-triggered collection during it rescans them, and an
occasional full collection rescans the whole heap (every rule set and
graph a long-lived process holds) for nothing (what that cost:
docs/benchmark.md, "What the benchmark finds"; docs/planning.md,
"Speed"). Reference counting still frees
what the block drops; reference cycles made meanwhile wait for the next
collection after it.
"""

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """The cyclic collector off for the block, and as it was after (also
    where the block raises)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
