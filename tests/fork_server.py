"""The fork server behind `tests.entry_point.run`: a process that has
imported the heavy libraries every entry point imports (TensorFlow,
TensorFlow Probability, Sonnet, graph_nets, networkx, SciPy), and forks a
child per request that runs one script or module as `__main__`.

Not for users: started by `tests.entry_point` with the path of a Unix
socket (`python tests/fork_server.py SOCKET`). Each request is one
SOCK_SEQPACKET message, a JSON object {"argv", "cwd", "env"} with three file
descriptors (the child's stdin, stdout, stderr). For each request the
server forks a supervisor, which forks the child, sends its pid, waits for
it and sends its wait status; the server goes on accepting. A client that
goes away before its run ends (a test process killed mid-run) takes the
run with it: the supervisor kills the child's process group. The server
ends when the process that started it is gone.

Why a fork is as good as a fresh process here. Importing these libraries
runs no TensorFlow op (TensorFlow's thread pools and eager context come
with the first op, in the child) and starts no thread but OpenBLAS's,
which OpenBLAS stops before a fork and restarts after it (its
pthread_atfork handlers). No module of this project is imported here, so
everything the project reads from its environment at import time it reads
from the request's environment. Python's `random` is reseeded in every
child by Python itself (os.register_at_fork); NumPy's legacy global state
is reseeded here. The child's environment, working folder, argv and
sys.path[0] are those `python SCRIPT ARGS` (or `python -m MODULE ARGS`)
would have in the request's folder; the PYTHON* variables, which shape
an interpreter at its start, must equal this server's
(`tests.entry_point` runs any other request as a fresh process).

One difference from a fresh process, the suite's own setting: the child
runs without TensorFlow's graph optimiser (grappler), as the suite's
in-process tests do (tests/conftest.py says why). Rewriting each newly
traced function costs more than it saves on the entry points' small
networks and short runs: `experiments/train_mb.py --quick` with
quick_run_test's flags took 94 CPU-s with it and 87 without, the median of
two runs each, alternating (benchmarks/grappler_bench.py;
reports/2026-11-29_suite_without_grappler.md). It changes no result a test checks:
what a test compares bit for bit (a resumed run with an uninterrupted one)
runs both ways alike, and what it compares with the test process's own
computations now runs as those do.
"""

import json
import os
import signal
import socket
import sys
import threading
import traceback

# What every entry point imports before doing anything (8-9 s of CPU on
# the 2-core test machine: TensorFlow about 5 s, TensorFlow Probability
# about 2 s, graph_nets and networkx about 1 s).
import graph_nets  # noqa: F401
import networkx  # noqa: F401
import numpy as np
import scipy.optimize  # noqa: F401
import scipy.sparse  # noqa: F401
import sonnet  # noqa: F401
import tensorflow  # noqa: F401
import tensorflow_probability  # noqa: F401

_MAX_REQUEST = 1 << 20


def _run_main(argv, cwd: str, env: dict) -> int:
    """Runs `argv` (`[python, SCRIPT, ...]` or `[python, -m, MODULE, ...]`)
    in this (forked) process as the interpreter would; its exit status."""
    import atexit  # pylint: disable=import-outside-toplevel
    import runpy  # pylint: disable=import-outside-toplevel

    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    np.random.seed()
    # Stored for the eager context, which the child's first op creates.
    tensorflow.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    code = 0
    try:
        if argv[1] == "-m":
            sys.argv = [argv[2], *argv[3:]]  # runpy puts the module's path first
            sys.path[0] = cwd
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv[1:])
            sys.path[0] = os.path.dirname(os.path.realpath(argv[1]))
            runpy.run_path(argv[1], run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # pylint: disable=broad-except
        traceback.print_exc()
        code = 1
    # What the interpreter does at its end: wait for non-daemon threads,
    # run the exit handlers (Ray's shutdown, logging's flush), flush.
    threading._shutdown()  # pylint: disable=protected-access
    atexit._run_exitfuncs()  # pylint: disable=protected-access
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # pylint: disable=broad-except
            pass
    return code


def _serve_one(conn: socket.socket, request: dict, fds) -> None:
    """The supervisor: forks the child, reports its pid and wait status, and
    kills the child's process group if the client goes away first (a test
    process that ended or was killed leaves no run behind)."""
    child = os.fork()
    if child == 0:
        conn.close()
        os.setpgid(0, 0)  # the client's timeout kills the child's group
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        code = 1
        try:
            code = _run_main(request["argv"], request["cwd"], request["env"])
        finally:
            os._exit(code)  # pylint: disable=protected-access
    try:
        os.setpgid(child, child)  # as the child does: whichever comes first
    except OSError:
        pass
    for fd in fds:
        os.close(fd)
    ended = threading.Event()

    def watch_client():
        try:
            conn.recv(1)  # the client sends nothing more: this returns when it is gone
        except OSError:
            pass
        if not ended.is_set():
            try:
                os.killpg(child, signal.SIGKILL)
            except ProcessLookupError:
                pass

    threading.Thread(target=watch_client, daemon=True).start()
    conn.send(json.dumps({"pid": child}).encode())
    _, status = os.waitpid(child, 0)
    ended.set()
    conn.send(json.dumps({"status": status}).encode())


def main(path: str) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server.bind(path)
    server.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped by the kernel
    parent = os.getppid()
    server.settimeout(5.0)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    # Nothing else goes to the pipe the client read that line from (no one
    # reads it again: a full pipe would block the server).
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    while True:
        try:
            conn, _ = server.accept()
        except socket.timeout:
            if os.getppid() != parent:  # the test process is gone: so is its server
                return
            continue
        message, fds, _, _ = socket.recv_fds(conn, _MAX_REQUEST, 3)
        if not message:  # a client that closed before asking
            conn.close()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            server.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                _serve_one(conn, json.loads(message), fds)
            finally:
                os._exit(0)  # pylint: disable=protected-access
        conn.close()
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    main(sys.argv[1])
