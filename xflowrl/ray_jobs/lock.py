"""One driver at a time per results folder."""

import contextlib
import fcntl
import os


@contextlib.contextmanager
def results_lock(results_dir: str, owner: str = "reproduce.py",
                 name: str = ".reproduce.lock"):
    """Holds an exclusive lock on `results_dir`/`name`, or exits with a message.

    Two drivers on one folder would delete each other's unfinished runs (a
    folder whose run is of another command goes). The lock is an flock on
    the driver's machine: drivers on two machines sharing the folder over a
    network filesystem are not kept apart unless that filesystem honours
    flock (NFSv4 does).

    Args:
      results_dir: the folder (created if missing).
      owner: the program named in the message.
      name: the lock file's name inside `results_dir`.

    Raises:
      SystemExit: another process holds the lock.
    """
    os.makedirs(results_dir, exist_ok=True)
    path = os.path.join(results_dir, name)
    with open(path, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another {owner} is running on {results_dir} "
                             f"(it holds {path}); wait for it or use another --results_dir")
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield
