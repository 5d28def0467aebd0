"""`run`: `subprocess.run` for the suite's runs of the project's entry points
(`python experiments/X.py ...`, `python -m xflowrl.cli ...`), each forked
from a server that has already imported TensorFlow and the other heavy
libraries (tests/fork_server.py says why a fork is as good as a fresh
process there). A fresh interpreter spends 8-9 s of CPU importing them
before an entry point does anything; the suite runs dozens.

One server per test process, started at the first call and ended with the
process. `XFLOWRL_TEST_FORK_SERVER=0` runs every entry point as a fresh
process instead (to rule the server out when a test fails). Anything else
(another program, `python -c`, an environment whose PYTHON* variables
differ from this process's) runs as a fresh process too.
"""

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from typing import Any, IO, Mapping, Optional, Sequence, Union

_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fork_server.py")
_LOCK = threading.Lock()
_state: dict = {}  # this process's server: "proc", "path" (its socket), "pid" (ours)


def _python_variables(env: Mapping[str, str]) -> dict:
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


def _forkable(argv: Sequence[str], env: Mapping[str, str]) -> bool:
    if os.environ.get("XFLOWRL_TEST_FORK_SERVER", "1") == "0":
        return False
    if len(argv) < 2 or argv[0] != sys.executable:
        return False
    if argv[1] == "-m":
        ok = len(argv) >= 3
    else:
        ok = argv[1].endswith(".py") and not argv[1].startswith("-")
    return ok and _python_variables(env) == _python_variables(os.environ)


def _stop_server() -> None:
    """Ends this process's server and removes its socket (a server started
    by a process we were forked from is that process's to end)."""
    if _state.get("pid") != os.getpid():
        return
    proc = _state["proc"]
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    try:
        os.unlink(_state["path"])
        os.rmdir(os.path.dirname(_state["path"]))
    except OSError:
        pass


def _server_path() -> str:
    """The socket of this process's server, started if it is not running."""
    with _LOCK:
        proc = _state.get("proc")
        if proc is not None and proc.poll() is None and _state["pid"] == os.getpid():
            return _state["path"]
        if _state:  # a server that died, or our parent's (we were forked)
            _stop_server()
        folder = tempfile.mkdtemp(prefix="xflowrl-fork-server-")
        path = os.path.join(folder, "socket")
        proc = subprocess.Popen([sys.executable, _SERVER, path], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        if line.strip() != "ready":
            proc.kill()
            raise RuntimeError(f"the fork server did not start (it said {line!r})")
        if not _state:
            atexit.register(_stop_server)
        _state.update(proc=proc, path=path, pid=os.getpid())
        return path


def _receive(conn: socket.socket, timeout: Optional[float]) -> dict:
    conn.settimeout(timeout)
    message = conn.recv(4096)
    if not message:
        raise RuntimeError("the fork server's supervisor ended without a reply")
    return json.loads(message)


Output = Union[None, int, IO[Any]]


def run(argv: Sequence[str], *, capture_output: bool = False, text: bool = False,
        timeout: Optional[float] = None, cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None, check: bool = False,
        stdout: Output = None, stderr: Output = None) -> subprocess.CompletedProcess:
    """As `subprocess.run(argv, ...)` with these arguments (stdin is
    /dev/null), the entry point forked from the server where it can be."""
    argv = [str(a) for a in argv]
    env = dict(os.environ if env is None else env)
    if not _forkable(argv, env):
        return subprocess.run(argv, capture_output=capture_output, text=text, timeout=timeout,
                              cwd=cwd, env=env, check=check, stdout=stdout, stderr=stderr,
                              stdin=subprocess.DEVNULL)
    if capture_output and (stdout is not None or stderr is not None):
        raise ValueError("stdout and stderr arguments may not be used with capture_output")
    files = []  # what this call opened, closed at its end
    captured = {}  # fd -> its temporary file

    def target(where: Output, inherited: int) -> int:
        """The file descriptor the child writes to."""
        if capture_output or where == subprocess.PIPE:
            files.append(tempfile.TemporaryFile())
            captured[files[-1].fileno()] = files[-1]
            return files[-1].fileno()
        if where is None:
            return inherited
        if where == subprocess.DEVNULL:
            files.append(open(os.devnull, "wb"))  # pylint: disable=consider-using-with
            return files[-1].fileno()
        if where == subprocess.STDOUT:
            return out
        return where if isinstance(where, int) else where.fileno()

    try:
        files.append(open(os.devnull, "rb"))  # pylint: disable=consider-using-with
        stdin = files[-1].fileno()
        out = target(stdout, 1)
        err = target(stderr, 2)
        request = {"argv": argv, "cwd": os.path.abspath(cwd or os.getcwd()), "env": env}
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
            conn.connect(_server_path())
            socket.send_fds(conn, [json.dumps(request).encode()], [stdin, out, err])
            pid = _receive(conn, 60)["pid"]
            try:
                status = _receive(conn, timeout)["status"]
            except socket.timeout:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                raise subprocess.TimeoutExpired(argv, timeout) from None
        code = os.waitstatus_to_exitcode(status)

        def read(fd: int, where: Output):
            if where == subprocess.STDOUT or fd not in captured:
                return None
            captured[fd].seek(0)
            data = captured[fd].read()
            return data.decode() if text else data

        result = subprocess.CompletedProcess(argv, code, read(out, stdout), read(err, stderr))
    finally:
        for f in files:
            f.close()
    if check:
        result.check_returncode()
    return result


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_report(script: str, args: Sequence[str], timeout: float = 600) -> Any:
    """Runs `script` (a path from the repository's root, e.g.
    benchmarks/x_bench.py) with `args` as a user does, from the root, and
    returns the JSON it printed on stdout.

    Raises:
      AssertionError: it exited non-zero (the end of its stderr says why).
    """
    done = run([sys.executable, os.path.join(_ROOT, script), *args], capture_output=True,
               text=True, timeout=timeout, cwd=_ROOT)
    if done.returncode != 0:
        raise AssertionError(f"{script} exited {done.returncode}: {done.stderr[-3000:]}")
    return json.loads(done.stdout)
