"""Entry-point runs as Ray tasks, with reuse, resume, retries and progress.

A `Job` is one run of an entry point: its command line, the folder it writes
(`out_dir`) and the result file it ends with. `run_jobs` runs a list of
them as Ray Core tasks; each task (`run_job`) runs the command as a
subprocess with its output in `<out_dir>.log`. What a job's folder holds
decides what its task does (`job_state`):

- **finished**: the folder's marker (`MARKER`, reproduce_job.json) names the
  same command and says it finished, and the result file holds the keys the
  job names: the run is reused (0 s).
- **started**: the marker names the same command but the run did not
  finish (its worker or node was lost, or an earlier driver was stopped):
  the folder is kept and the command runs again in it, so the entry point
  resumes from its own checkpoints.
- **stale**: no marker, or one of another command: the folder is deleted
  first, so that an entry point never resumes checkpoints of other budgets.

A marker without "finished" (of an older layout, written at the end only)
is refused (`ValueError`): its folder is deleted by hand to run the job
again.

Two kinds of failure are retried. A failing exit code: up to `retries`
more times after `retry_delay` seconds, each from a fresh folder (a
checkpoint may be why it failed, or a change to the checkout while it ran). A lost worker or node (the process killed, the machine
gone): Ray runs the task again (`max_retries`) and it resumes, as above.
The command is started through guard.py, so it dies with its worker and a
retried task never shares its folder with an orphan.

Where the jobs run: `run_jobs` uses a Ray instance this process already
joined; else it joins the cluster at `address` (or at $RAY_ADDRESS, which
it sets for every job, so that an entry point that itself runs jobs joins
the same cluster instead of starting a second one); else it starts a local
instance with `num_cpus` CPUs, and stops it at the end. A job reserves
`num_cpus` (the local instance's CPUs / a job's CPUs = jobs at a time).

Several machines: each node runs `ray start --address=<head>` from a
checkout at the same path with the same virtualenv (a task runs the job's
command, whose interpreter and script are absolute paths of the driver's
machine, in the driver's working directory), and every node must see the
results folder at the same path (a shared filesystem): a job's task reads
and writes the folder on whichever node it runs, and the driver reads the
results at the end.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from typing import Dict, List, Mapping, Optional, Sequence, TextIO, Tuple, Union

MARKER = "reproduce_job.json"

_GUARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard.py")

# What a Ray worker's environment differs in from its driver's: Ray sets these
# for its workers (OMP_NUM_THREADS=1 would cap the entry points' OpenMP
# threads; CUDA_VISIBLE_DEVICES='' would hide a GPU from them). A job's
# command gets the driver's values back (or none, where the driver had none).
_RAY_WORKER_ENV = ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES",
                   "HABANA_VISIBLE_MODULES", "NEURON_RT_VISIBLE_CORES", "PYTHONBREAKPOINT",
                   "RAY_JOB_ID", "RAY_LD_PRELOAD", "RAY_RAYLET_PID", "SPT_NOENV")


@dataclasses.dataclass(frozen=True)
class Job:
    """One entry-point run.

    Attributes:
      name: unique among the jobs run together; in the progress lines.
      argv: the command line (interpreter and script first).
      out_dir: the folder the run writes; its log is `<out_dir>.log`.
      result_file: the file, relative to `out_dir`, that a finished run has.
      result_keys: keys that file must hold for the run to be reused.
      num_cpus: CPUs the job's task reserves (0: a job that only waits for
        jobs it runs itself, which reserve their own).
      resources: other Ray resources the task reserves (a node's custom
        resources pin it there).
      key: what must equal the marker's "flags" for reuse (None: argv
        without the interpreter), e.g. the flags without a cluster address
        that changes from one invocation to the next.
      cwd: the command's working directory (None: the driver's).
      trust_result: a result file without a marker counts as finished
        (results placed in the folder by hand or by a caller).
    """
    name: str
    argv: Tuple[str, ...]
    out_dir: str
    result_file: str = "result.json"
    result_keys: Tuple[str, ...] = ()
    num_cpus: float = 1.0
    resources: Mapping[str, float] = dataclasses.field(default_factory=dict)
    key: Optional[Tuple[str, ...]] = None
    cwd: Optional[str] = None
    trust_result: bool = False

    @property
    def flags(self) -> List[str]:
        """What the marker records and compares."""
        return list(self.key if self.key is not None else self.argv[1:])

    @property
    def log(self) -> str:
        return self.out_dir.rstrip("/") + ".log"

    @property
    def marker(self) -> str:
        return os.path.join(self.out_dir, MARKER)

    @property
    def result(self) -> str:
        return os.path.join(self.out_dir, self.result_file)


class JobFailed(RuntimeError):
    """A job's command failed on every try."""


class JobsFailed(RuntimeError):
    """Some jobs of `run_jobs` failed; `.results` holds every job's outcome."""

    def __init__(self, message: str, results: Dict[str, dict]):
        super().__init__(message)
        self.results = results


def _read_json(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_json(path: str, value: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1)
    os.replace(tmp, path)


def job_state(job: Job) -> str:
    """"finished", "started" or "stale": what the job's folder holds (the
    module docstring says what each means for the task).

    Raises:
      ValueError: a marker of the same command without "finished" (an
        older layout).
    """
    marker = _read_json(job.marker)
    if marker is None:
        return ("finished" if job.trust_result and os.path.exists(job.result)
                and _has_keys(job) else "stale")
    if marker.get("flags") != job.flags:
        return "stale"
    if "finished" not in marker:
        raise ValueError(f"{job.marker}: a job marker of an older layout (no 'finished'); "
                         f"this code reads the current one only: delete {job.out_dir} to run "
                         "the job again")
    if marker["finished"] and os.path.exists(job.result) and _has_keys(job):
        return "finished"
    return "started"


def _has_keys(job: Job) -> bool:
    if not job.result_keys:
        return True
    result = _read_json(job.result)
    return result is not None and set(job.result_keys) <= set(result)


def _node() -> Dict[str, Union[str, int, None]]:
    node_id = None
    try:
        import ray  # pylint: disable=import-outside-toplevel
        if ray.is_initialized():
            node_id = ray.get_runtime_context().get_node_id()
    except ImportError:
        pass
    return {"host": socket.gethostname(), "node_id": node_id, "pid": os.getpid()}


def _command_env(driver_env: Optional[Mapping[str, Optional[str]]],
                 address: Optional[str]) -> Dict[str, str]:
    env = dict(os.environ)
    for name, value in (driver_env or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    if address:
        env["RAY_ADDRESS"] = address
    return env


def run_job(job: Job, retries: int = 1, retry_delay: float = 30.0,
            driver_env: Optional[Mapping[str, Optional[str]]] = None,
            address: Optional[str] = None) -> dict:
    """Runs `job` as its folder's state says (module docstring); the body of
    each Ray task, and callable without Ray.

    Args:
      job: the job; `out_dir` and `cwd` absolute when run on a cluster.
      retries: reruns, each from a fresh folder, of a failing exit code.
      retry_delay: seconds before each rerun.
      driver_env: environment variables to give the command the driver's
        values of (None values: removed).
      address: the Ray cluster's address, given to the command as
        $RAY_ADDRESS.

    Returns:
      {"name", "status": "reused" | "ran", "seconds" (of the last start,
      0 when reused), "starts": [one record per start of the command in
      this folder: host, node, worker pid, time, "resumed"], "exit_codes"}.

    Raises:
      JobFailed: the command failed `retries + 1` times.
    """
    state = job_state(job)
    if state == "finished":
        return {"name": job.name, "status": "reused", "seconds": 0.0, "starts": [],
                "exit_codes": []}
    starts: List[dict] = []
    if state == "started":
        starts = list((_read_json(job.marker) or {}).get("starts", []))
    elif os.path.isdir(job.out_dir):
        shutil.rmtree(job.out_dir)
    resumed = state == "started"
    env = _command_env(driver_env, address)
    codes: List[int] = []
    for attempt in range(retries + 1):
        os.makedirs(job.out_dir, exist_ok=True)
        starts.append(dict(_node(), time=time.strftime("%Y-%m-%d %H:%M:%S"),
                           resumed=resumed, attempt=attempt))
        _write_json(job.marker, {"flags": job.flags, "argv": list(job.argv),
                                 "finished": False, "starts": starts})
        start = time.time()
        fresh_log = attempt == 0 and not resumed
        with open(job.log, "w" if fresh_log else "a") as log:
            if not fresh_log:
                log.write(f"\n=== {job.name}: {'resumed' if resumed else 'run again'} on "
                          f"{starts[-1]['host']} (start {len(starts)}) ===\n")
                log.flush()
            code = subprocess.run([sys.executable, _GUARD, str(os.getpid())] + list(job.argv),
                                  stdout=log, stderr=subprocess.STDOUT, cwd=job.cwd, env=env,
                                  check=False).returncode
        codes.append(code)
        if code == 0:
            seconds = time.time() - start
            _write_json(job.marker, {"flags": job.flags, "argv": list(job.argv),
                                     "finished": True, "seconds": seconds, "starts": starts,
                                     "exit_codes": codes})
            return {"name": job.name, "status": "ran", "seconds": seconds, "starts": starts,
                    "exit_codes": codes}
        if attempt == retries:
            raise JobFailed(f"{job.name} failed (exit {code}); see {job.log}")
        with open(job.log, "a") as log:
            log.write(f"\n=== {job.name} failed (exit {code}); again from a fresh folder in "
                      f"{retry_delay:.0f} s ===\n")
        shutil.rmtree(job.out_dir, ignore_errors=True)
        resumed = False
        time.sleep(retry_delay)
    raise AssertionError("unreachable")


def strip_flags(argv: Sequence[str], names: Sequence[str]) -> List[str]:
    """`argv` without the flags `names` (absl's `--name=v`, `--name v`,
    `--noname` and `--name` forms), e.g. to rerun a script's own command
    line without its sweep flags."""
    out, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        bare = arg.split("=", 1)[0]
        if bare in {f"--{n}" for n in names} | {f"-{n}" for n in names}:
            # "--name value": absl takes the next token as the value unless
            # this one had "=" or the next is another flag.
            skip = "=" not in arg and i + 1 < len(argv) and not argv[i + 1].startswith("-")
            continue
        if bare in {f"--no{n}" for n in names}:
            continue
        out.append(arg)
    return out


# -- the driver ----------------------------------------------------------------

def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def estimate_left(ran_seconds: Sequence[float], left: int, slots: int) -> Optional[float]:
    """Seconds until `left` more jobs finish, `slots` at a time, if each
    takes the mean of the jobs that ran (None before one has): a rough
    figure, the jobs of a sweep differ."""
    if not ran_seconds:
        return None
    if left <= 0:
        return 0.0
    return float(sum(ran_seconds) / len(ran_seconds)) * math.ceil(left / max(1, slots))


def progress_line(done: int, total: int, reused: int, failed: int, elapsed: float,
                  left: Optional[float], what: str) -> str:
    """The sweep's progress: finished/total, reused, failed, elapsed and
    estimated time left, then what just happened."""
    eta = "time left unknown" if left is None else f"about {_duration(left)} left"
    return (f"[{done}/{total} jobs done, {reused} reused, {failed} failed; "
            f"{_duration(elapsed)} elapsed, {eta}] {what}")


def _init_ray(address: str, num_cpus: Optional[int]) -> bool:
    """Joins or starts Ray; True when this call started (or joined) it, so
    the caller shuts it down."""
    import ray  # pylint: disable=import-outside-toplevel
    if ray.is_initialized():
        return False
    if address or os.environ.get("RAY_ADDRESS"):
        ray.init(address=address or None, log_to_driver=False)
    else:
        # A small object store: the tasks pass only their small result dicts.
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                 object_store_memory=100 * 2**20)
    return True


def run_jobs(jobs: Sequence[Job], address: str = "", num_cpus: Optional[int] = None,
             rerun: bool = False, retries: int = 1, retry_delay: float = 30.0,
             max_retries: int = 3, raise_on_failure: bool = True,
             progress: Optional[TextIO] = None) -> Dict[str, dict]:
    """Runs `jobs` as Ray tasks and waits for them all.

    Jobs whose folders hold finished runs are reused without starting Ray;
    the others run as tasks (`run_job`), as many at a time as the cluster's
    CPUs allow. A line goes to `progress` (default stderr) as each job
    finishes.

    Args:
      jobs: the jobs (unique names). Relative `out_dir`s are taken from this
        process's working directory, which is each command's too unless the
        job names one.
      address: a Ray cluster to join ("auto": the one started on this machine
        by `ray start`); "": join $RAY_ADDRESS if set, else start a local
        instance.
      num_cpus: the CPUs of a local instance (None: this machine's).
      rerun: delete every job's folder first.
      retries, retry_delay: of a failing exit code (`run_job`).
      max_retries: Ray's reruns of a task whose worker or node was lost.
      raise_on_failure: raise JobsFailed after all jobs ended if any failed.
      progress: where the progress lines go.

    Returns:
      Per job name, `run_job`'s record, or {"name", "status": "failed",
      "error"} for a job that failed.

    Raises:
      JobsFailed: some job failed and `raise_on_failure`.
      ValueError: two jobs share a name.
    """
    out = sys.stderr if progress is None else progress
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValueError(f"job names must be unique: {names}")
    cwd = os.getcwd()
    jobs = [dataclasses.replace(j, out_dir=os.path.abspath(j.out_dir), cwd=j.cwd or cwd)
            for j in jobs]
    start = time.time()
    results: Dict[str, dict] = {}
    if rerun:
        for j in jobs:
            shutil.rmtree(j.out_dir, ignore_errors=True)
            if os.path.exists(j.log):
                os.remove(j.log)
    pending = []
    for j in jobs:
        if job_state(j) == "finished":
            results[j.name] = {"name": j.name, "status": "reused", "seconds": 0.0,
                               "starts": [], "exit_codes": []}
        else:
            pending.append(j)
    reused = len(results)
    if not pending:
        print(f"{len(jobs)} jobs: every one reused", file=out, flush=True)
        return {n: results[n] for n in names}
    import ray  # pylint: disable=import-outside-toplevel
    shut_down = _init_ray(address, num_cpus)
    try:
        cluster_address = ray.get_runtime_context().gcs_address
        cpus = ray.cluster_resources().get("CPU", 1.0)
        reserving = [j.num_cpus for j in pending if j.num_cpus > 0]
        slots = max(1, int(cpus // min(reserving))) if reserving else len(pending)
        print(f"{len(jobs)} jobs: {reused} reused, {len(pending)} to run on Ray at "
              f"{cluster_address} ({cpus:g} CPUs, {len(ray.nodes())} node(s))",
              file=out, flush=True)
        driver_env = {name: os.environ.get(name) for name in _RAY_WORKER_ENV}
        task = ray.remote(run_job)
        refs = {}
        for j in pending:
            ref = task.options(num_cpus=j.num_cpus, resources=dict(j.resources) or None,
                               max_retries=max_retries, retry_exceptions=False,
                               name=j.name).remote(j, retries, retry_delay, driver_env,
                                                   cluster_address)
            refs[ref] = j
        ran: List[float] = []
        while refs:
            finished, _ = ray.wait(list(refs), num_returns=1)
            job = refs.pop(finished[0])
            try:
                record = ray.get(finished[0])
                ran.append(record["seconds"])
                starts = len(record["starts"])
                what = (f"{job.name}: ran {_duration(record['seconds'])}"
                        + (f" ({starts} starts)" if starts > 1 else ""))
            except ray.exceptions.RayError as e:  # JobFailed inside, or the worker lost
                record = {"name": job.name, "status": "failed",
                          "error": str(e).strip().splitlines()[-1] if str(e).strip() else
                          type(e).__name__}
                what = f"{job.name}: FAILED ({record['error']})"
            results[job.name] = record
            failed = sum(r["status"] == "failed" for r in results.values())
            print(progress_line(len(results), len(jobs), reused, failed, time.time() - start,
                                estimate_left(ran, len(refs), slots), what),
                  file=out, flush=True)
    finally:
        if shut_down:
            ray.shutdown()
    results = {n: results[n] for n in names}
    failed = failed_jobs(results)
    if failed and raise_on_failure:
        raise JobsFailed(f"{len(failed)} of {len(jobs)} jobs failed: "
                         + "; ".join(f"{n} ({results[n]['error']})" for n in failed), results)
    return results


def failed_jobs(results: Mapping[str, dict]) -> List[str]:
    """The names of the jobs `run_jobs` reports as failed."""
    return [n for n, r in results.items() if r["status"] == "failed"]
