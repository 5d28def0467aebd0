"""A function run in a child process that a deadline can stop.

HiGHS checks its limits (its own wall-clock `time_limit`, and our CPU-time
limit in its MIP interrupt callback) between its steps, not inside a round
of cut separation at the root, and one such round can run for most of a
minute (ViT's e-graph under `analytic/cpu`, docs/benchmark.md). A thread
cannot be stopped from outside; a process can. So equality saturation
solves its programs in a child process, kept for the life of the calling
process (forked once, at the first call, rather than once per program:
a fork copies the page tables of a process that may hold a large
e-graph), and kills it where a call runs past its deadline; the next
call forks another. What it costs: reports/2026-12-02_eqsat_deadline.md.

The function runs as `fn(*args, report=report)`: what it passes to
`report` (e.g. each better solution HiGHS finds) comes back as the
`partial` of a call stopped by its deadline, so a stopped call still hands
over the best it had. `call` returns a `ChildResult`; an exception the
function raises is raised again in the caller.

`cpu_seconds()` counts the CPU time of every call made in child processes
by this process, killed ones included, for benchmarks that measure a
run's CPU (a parent's `time.process_time()` does not see its children's;
`process_cpu_seconds()` is both).
"""

from __future__ import annotations

import atexit
import gc
import os
import pickle
import select
import signal
import struct
import threading
import time
from typing import Any, Callable, NamedTuple, Optional, Tuple

_HEADER = struct.Struct("<Q")


def available() -> bool:
    """Whether this platform can fork (Linux and macOS; not Windows)."""
    return hasattr(os, "fork")


class ChildResult(NamedTuple):
    """One call's outcome."""
    finished: bool          # False: stopped at its deadline (or the child died)
    value: Any              # the function's return value where finished
    partial: Any            # the last value it reported (None: none)
    cpu_seconds: float      # the child's CPU time for this call
    died: Optional[str] = None  # why the child ended by itself (a crash), or None


def _write(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, n: int) -> Optional[bytes]:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _serve(requests: int, replies: int) -> None:
    """The child's loop: a call per request until the parent closes its end."""
    # The parent's objects are frozen out of the collector's reach (scanning
    # them would copy every page the fork shares); what the calls make is
    # collected as usual. Ctrl-C is the parent's to handle: it kills this.
    gc.freeze()
    gc.enable()
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread (a Python that does not make it so)
        pass
    while True:
        header = _read_exactly(requests, _HEADER.size)
        if header is None:
            return
        body = _read_exactly(requests, _HEADER.unpack(header)[0])
        if body is None:
            return
        fn, args = pickle.loads(body)

        def report(value: Any) -> None:
            _write(replies, ("partial", value, time.process_time()))
        try:
            message = ("done", fn(*args, report=report), time.process_time())
        except Exception as error:  # pylint: disable=broad-except
            message = ("error", error, time.process_time())
        _write(replies, message)


class _Child:
    """One forked child and its two pipes."""

    def __init__(self):
        request_in, request_out = os.pipe()   # the caller writes, the child reads
        reply_in, reply_out = os.pipe()       # the child writes, the caller reads
        pid = os.fork()
        if pid == 0:  # the child: never returns into the caller's code
            code = 0
            try:
                os.close(request_out)
                os.close(reply_in)
                _serve(request_in, reply_out)
            except BaseException:  # pylint: disable=broad-except
                code = 1
            finally:
                os._exit(code)  # pylint: disable=protected-access
        os.close(request_in)
        os.close(reply_out)
        self.pid, self.requests, self.replies = pid, request_out, reply_in
        self.buffer = b""
        self.cpu_reported = 0.0   # the child's process CPU at its last message

    def stop(self) -> float:
        """Kills the child; its CPU time since its last message."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            _, _, usage = os.wait4(self.pid, 0)
        except ChildProcessError:
            return 0.0
        return max(usage.ru_utime + usage.ru_stime - self.cpu_reported, 0.0)

    def next_message(self, deadline: float) -> Optional[Tuple]:
        """The next message, or None at the deadline; EOFError where the
        child ended."""
        while True:
            if len(self.buffer) >= _HEADER.size:
                size = _HEADER.unpack(self.buffer[:_HEADER.size])[0]
                if len(self.buffer) >= _HEADER.size + size:
                    body = self.buffer[_HEADER.size:_HEADER.size + size]
                    self.buffer = self.buffer[_HEADER.size + size:]
                    return pickle.loads(body)
            left = deadline - time.time()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.replies], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.replies, 1 << 20)
            if not chunk:
                raise EOFError
            self.buffer += chunk


_lock = threading.Lock()
_child: Optional[_Child] = None
_owner_pid: Optional[int] = None   # the process the child belongs to
_cpu_total = 0.0


def cpu_seconds() -> float:
    """CPU seconds of every call this process made in a child so far."""
    return _cpu_total


def process_cpu_seconds() -> float:
    """This process's CPU time with its calls' in the child: what a run of
    equality saturation costs in CPU, measured as a difference."""
    return time.process_time() + _cpu_total


def call(fn: Callable[..., Any], args: tuple, deadline: float) -> ChildResult:
    """Runs `fn(*args, report=...)` in the child process, waiting until
    `deadline` (`time.time()` seconds) at most; past it the child is killed.
    `fn` and `args`, and what `fn` returns and reports, must pickle (a
    module-level function).

    Raises:
      Whatever `fn` raised, raised again here.
    """
    global _child, _owner_pid, _cpu_total  # pylint: disable=global-statement
    with _lock:
        if _child is not None and _owner_pid != os.getpid():
            _child = None  # inherited by a fork of the owner: not ours to use
        if _child is None:
            _child, _owner_pid = _Child(), os.getpid()
        child = _child
        cpu_before = child.cpu_reported
        partial, cpu, error = None, 0.0, None
        try:
            _write(child.requests, (fn, args))
            while True:
                message = child.next_message(deadline)
                if message is None:  # the deadline: the child is stopped
                    cpu = child.cpu_reported - cpu_before + child.stop()
                    _child = None
                    return ChildResult(False, None, partial, cpu)
                kind, value, child_cpu = message
                child.cpu_reported = child_cpu
                cpu = child_cpu - cpu_before
                if kind == "partial":
                    partial = value
                elif kind == "done":
                    return ChildResult(True, value, partial, cpu)
                else:
                    error = value
                    break
        except (EOFError, BrokenPipeError):
            _child = None
            cpu = child.cpu_reported - cpu_before + child.stop()
            return ChildResult(False, None, partial, cpu, died="the child process ended")
        except BaseException:
            # Ctrl-C (or anything else) while the child works: it is stopped
            # rather than left running.
            _child = None
            cpu = child.cpu_reported - cpu_before + child.stop()
            raise
        finally:
            _cpu_total += cpu
        raise error


@atexit.register
def _shutdown() -> None:
    """Ends this process's child."""
    global _child  # pylint: disable=global-statement
    if _child is not None and _owner_pid == os.getpid():
        _child.stop()
    _child = None
