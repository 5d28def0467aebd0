"""Entry-point runs as Ray tasks: the engine of every sweep of experiments/.

A `Job` is one run of an entry point (a command line, the folder it writes,
the result file it ends with). `run_jobs` runs a list of them as Ray Core
tasks, on a Ray instance it starts on this machine or on a cluster
(`address`), each task running its command as a subprocess: per-job CPUs,
reuse of finished runs, resume of interrupted ones from the entry point's own
checkpoints, retries of a failed exit code and of a lost worker or node, and
one progress line per finished job. `results_lock` keeps two drivers off one
results folder. This package imports no TensorFlow: a Ray worker unpickling a
task imports only it.
"""

from xflowrl.ray_jobs.lock import results_lock
from xflowrl.ray_jobs.runner import (
                                 Job,
                                 JobFailed,
                                 JobsFailed,
                                 MARKER,
                                 failed_jobs,
                                 job_state,
                                 run_job,
                                 run_jobs,
                                 strip_flags,
)
