"""Runs a command that dies with the process that started it.

    python guard.py <parent pid> <command> [args...]

A job's task starts its entry point through this file: it asks Linux to
send the command SIGKILL when its parent (the Ray worker running the task)
dies (prctl PR_SET_PDEATHSIG), then becomes the command (exec), so that a
killed worker or node leaves no orphan writing into a folder that the
retried task is about to use. It is a separate program because the request
must be made in the child before exec, and `subprocess`'s preexec_fn is
unsafe in a process with threads, which a Ray worker has. On other systems
it only execs.
"""

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def main(argv) -> None:
    parent, command = int(argv[1]), argv[2:]
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request
            sys.exit(128 + signal.SIGKILL)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
