"""Maps a function over index ranges of shared data in forked processes.

The pipeline verifies ~100k candidates and checks ~2k rules at other sizes.
Forking after the data exists lets every worker read it without pickling
(a task is an index range; only results travel back), and passing the data
as the forked process' arguments keeps it out of module globals. Forking is
POSIX-only, as the pipeline always was.
"""

from __future__ import annotations

import multiprocessing
import queue
import traceback
from typing import Callable, Iterator, List, Sequence, Tuple

Range = Tuple[int, int]


def ranges(n: int, chunk: int) -> List[Range]:
    """[0, n) cut into consecutive ranges of `chunk` items (the last shorter)."""
    return [(k, min(k + chunk, n)) for k in range(0, n, chunk)]


def _serve(task: Callable, shared, mine: Sequence[Tuple[int, Range]], results) -> None:
    """Worker body: runs `task(shared, bounds)` on its ranges, sending
    (index, part, error) for each."""
    for index, bounds in mine:
        try:
            results.put((index, task(shared, bounds), None))
        except Exception:  # reported to the parent, which raises
            results.put((index, None, traceback.format_exc()))
            return


def map_ranges(task: Callable[[object, Range], list], shared, bounds: Sequence[Range],
               workers: int) -> Iterator[Tuple[int, list]]:
    """Yields `(range index, task(shared, bounds[index]))` for every range,
    in process when `workers` <= 1 or there is one range (in order), else
    in `workers` forked processes (in completion order).

    Raises:
      RuntimeError: a worker raised (its traceback is in the message) or
        died (e.g. killed for memory).
    """
    if workers <= 1 or len(bounds) <= 1:
        for index, b in enumerate(bounds):
            yield index, task(shared, b)
        return
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    indexed = list(enumerate(bounds))
    procs = [ctx.Process(target=_serve, args=(task, shared, indexed[w::workers], results),
                         daemon=True) for w in range(workers)]
    for p in procs:
        p.start()
    try:
        for _ in indexed:
            while True:
                try:
                    index, part, error = results.get(timeout=1.0)
                    break
                except queue.Empty:
                    if any(p.exitcode not in (None, 0) for p in procs):
                        raise RuntimeError("a worker process died") from None
            if error is not None:
                raise RuntimeError(f"a worker raised:\n{error}")
            yield index, part
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join()
