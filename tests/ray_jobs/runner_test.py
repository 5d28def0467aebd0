"""xflowrl.ray_jobs: a job's folder decides reuse, resume or a fresh start; a
failing exit code is retried from a fresh folder; on Ray, a job whose
worker is killed runs again and resumes in its folder, and its orphan does
not survive the worker.

The jobs are tiny `python -c` commands. One local Ray instance (2 CPUs)
serves every test of `RunJobsTest` (a few seconds to start).
"""

import io
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

from absl.testing import absltest

from tests.local_ray import LocalRayTestCase
from xflowrl import ray_jobs as jobs_lib
from xflowrl.ray_jobs import runner

# Writes result.json with a count of the starts it saw in its folder and its
# environment; fails with exit 3 while <out_dir>/../fail_<name> holds a
# positive count (decremented on each start).
_SCRIPT = r"""
import json, os, sys, time
out, name = sys.argv[1], sys.argv[2]
fail = os.path.join(os.path.dirname(out), "fail_" + name)
if os.path.exists(fail):
    n = int(open(fail).read())
    if n > 0:
        open(fail, "w").write(str(n - 1))
        print("failing on purpose"); sys.exit(3)
os.makedirs(out, exist_ok=True)
seen = os.path.join(out, "starts_seen")
count = (int(open(seen).read()) if os.path.exists(seen) else 0) + 1
open(seen, "w").write(str(count))
open(os.path.join(out, "child.pid"), "w").write(str(os.getpid()))
# Sleeps on its first start when asked: a worker to kill mid-run.
if count == 1 and os.path.exists(os.path.join(os.path.dirname(out), "sleep_" + name)):
    time.sleep(120)
json.dump({"starts_seen": count, "ray_address": os.environ.get("RAY_ADDRESS"),
           "omp": os.environ.get("OMP_NUM_THREADS"), "cwd": os.getcwd()},
          open(os.path.join(out, "result.json"), "w"))
print("done", name)
"""


def _job(root: str, name: str, extra=(), **kwargs) -> jobs_lib.Job:
    out = os.path.join(root, name)
    return jobs_lib.Job(name, (sys.executable, "-c", _SCRIPT, out, name) + tuple(extra), out,
                        **kwargs)


def _result(job):
    with open(job.result) as f:
        return json.load(f)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is not alive.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


class RunJobTest(absltest.TestCase):
    """`run_job` without Ray: what a folder's state makes it do."""

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="jobs_test_")
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)

    def test_runs_then_reuses(self):
        job = _job(self.root, "a")
        self.assertEqual(jobs_lib.job_state(job), "stale")
        record = jobs_lib.run_job(job)
        self.assertEqual(record["status"], "ran")
        self.assertLen(record["starts"], 1)
        self.assertEqual(jobs_lib.job_state(job), "finished")
        with open(job.marker) as f:
            marker = json.load(f)
        self.assertTrue(marker["finished"])
        self.assertEqual(marker["flags"], list(job.argv[1:]))
        with open(job.log) as f:
            self.assertIn("done a", f.read())
        self.assertEqual(jobs_lib.run_job(job)["status"], "reused")
        self.assertEqual(_result(job)["starts_seen"], 1)

    def test_another_command_starts_afresh(self):
        job = _job(self.root, "a")
        jobs_lib.run_job(job)
        other = _job(self.root, "a", extra=("--budget=2",))
        self.assertEqual(jobs_lib.job_state(other), "stale")
        self.assertEqual(jobs_lib.run_job(other)["status"], "ran")
        self.assertEqual(_result(other)["starts_seen"], 1)   # the folder was deleted

    def test_key_and_result_keys_decide_reuse(self):
        job = _job(self.root, "a", key=("same",))
        jobs_lib.run_job(job)
        moved = _job(self.root, "a", extra=("--ray_address=x",), key=("same",))
        self.assertEqual(jobs_lib.job_state(moved), "finished")
        wants_more = _job(self.root, "a", key=("same",), result_keys=("max_steps",))
        self.assertEqual(jobs_lib.job_state(wants_more), "started")

    def test_an_unfinished_run_resumes_in_its_folder(self):
        job = _job(self.root, "a")
        jobs_lib.run_job(job)
        with open(job.marker) as f:
            marker = json.load(f)
        marker["finished"] = False     # as a lost worker leaves it
        with open(job.marker, "w") as f:
            json.dump(marker, f)
        os.remove(job.result)
        self.assertEqual(jobs_lib.job_state(job), "started")
        record = jobs_lib.run_job(job)
        self.assertEqual(_result(job)["starts_seen"], 2)     # the folder was kept
        self.assertLen(record["starts"], 2)
        self.assertTrue(record["starts"][1]["resumed"])

    def test_markerless_results_are_reused_only_when_trusted(self):
        os.makedirs(os.path.join(self.root, "a"))
        with open(os.path.join(self.root, "a", "result.json"), "w") as f:
            json.dump({"by": "hand"}, f)
        self.assertEqual(jobs_lib.job_state(_job(self.root, "a", trust_result=True)),
                         "finished")
        self.assertEqual(jobs_lib.job_state(_job(self.root, "a")), "stale")

    def test_a_marker_of_an_older_layout_is_refused(self):
        job = _job(self.root, "a")
        os.makedirs(job.out_dir)
        with open(job.result, "w") as f:
            json.dump({"by": "hand"}, f)
        with open(job.marker, "w") as f:
            json.dump({"flags": list(job.flags)}, f)  # no "finished": written at the end only
        with self.assertRaisesRegex(ValueError, f"{job.marker}: a job marker of an older "
                                                f"layout .* delete {job.out_dir} to run"):
            jobs_lib.job_state(job)

    def test_a_failing_exit_code_is_retried_from_a_fresh_folder(self):
        with open(os.path.join(self.root, "fail_a"), "w") as f:
            f.write("1")
        job = _job(self.root, "a")
        record = jobs_lib.run_job(job, retries=1, retry_delay=0)
        self.assertEqual(record["exit_codes"], [3, 0])
        self.assertLen(record["starts"], 2)
        self.assertFalse(record["starts"][1]["resumed"])
        with open(job.log) as f:
            log = f.read()
        self.assertIn("failing on purpose", log)
        self.assertIn("failed (exit 3); again from a fresh folder", log)

    def test_failing_every_try_raises(self):
        with open(os.path.join(self.root, "fail_a"), "w") as f:
            f.write("5")
        job = _job(self.root, "a")
        with self.assertRaisesRegex(jobs_lib.JobFailed, r"a failed \(exit 3\); see .*a\.log"):
            jobs_lib.run_job(job, retries=1, retry_delay=0)
        self.assertEqual(jobs_lib.job_state(job), "started")

    def test_strip_flags(self):
        argv = ["--graph=bert", "--seeds=3", "--jobs", "4", "--noquick", "--ray_address=a:1",
                "--seeds", "--x"]
        self.assertEqual(jobs_lib.strip_flags(argv, ["seeds", "jobs", "ray_address", "quick"]),
                         ["--graph=bert", "--x"])

    def test_progress_line_and_estimate(self):
        self.assertIsNone(runner.estimate_left([], 3, 2))
        # Three left, two at a time, 10 s each: two rounds.
        self.assertEqual(runner.estimate_left([5.0, 15.0], 3, 2), 20.0)
        line = runner.progress_line(4, 9, 1, 0, 125.0, 3700.0, "x: ran 3 s")
        self.assertEqual(line, "[4/9 jobs done, 1 reused, 0 failed; 2 min 05 s elapsed, "
                               "about 1 h 01 min left] x: ran 3 s")


class RunJobsTest(LocalRayTestCase):
    """`run_jobs` on one local Ray instance of 2 CPUs."""

    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="jobs_ray_test_")
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)

    def test_runs_reuses_and_reports_failures(self):
        with open(os.path.join(self.root, "fail_c"), "w") as f:
            f.write("9")
        jobs = [_job(self.root, n) for n in "abc"]
        progress = io.StringIO()
        results = jobs_lib.run_jobs(jobs, retries=1, retry_delay=0, raise_on_failure=False,
                                    progress=progress)
        self.assertEqual({n: r["status"] for n, r in results.items()},
                         {"a": "ran", "b": "ran", "c": "failed"})
        self.assertIn("c failed (exit 3)", results["c"]["error"])
        self.assertEqual(jobs_lib.failed_jobs(results), ["c"])
        lines = progress.getvalue().splitlines()
        self.assertIn("3 jobs: 0 reused, 3 to run on Ray", lines[0])
        self.assertLen(lines, 4)
        self.assertIn("[3/3 jobs done, 0 reused, 1 failed;", lines[-1])
        # Every job ran in the driver's working directory, was given the
        # cluster's address and not Ray's OMP_NUM_THREADS=1.
        for job in jobs[:2]:
            got = _result(job)
            self.assertEqual(got["cwd"], os.getcwd())
            self.assertTrue(got["ray_address"])
            self.assertEqual(got["omp"], os.environ.get("OMP_NUM_THREADS"))
        # Again: a and b are reused, c (still failing) raises.
        with self.assertRaisesRegex(jobs_lib.JobsFailed, "1 of 3 jobs failed: c"):
            jobs_lib.run_jobs(jobs, retries=0, progress=io.StringIO())
        # Once c passes, nothing is left to run: Ray is not asked.
        os.remove(os.path.join(self.root, "fail_c"))
        jobs_lib.run_jobs(jobs, retries=0, progress=io.StringIO())
        progress = io.StringIO()
        results = jobs_lib.run_jobs(jobs, progress=progress)
        self.assertEqual(progress.getvalue(), "3 jobs: every one reused\n")
        self.assertEqual({r["status"] for r in results.values()}, {"reused"})

    def test_a_killed_worker_is_retried_and_the_job_resumes(self):
        with open(os.path.join(self.root, "sleep_a"), "w") as f:
            f.write("")
        job = _job(self.root, "a")
        got = {}
        thread = threading.Thread(target=lambda: got.update(jobs_lib.run_jobs(
            [job], max_retries=2, progress=io.StringIO())))
        thread.start()
        child_pid_file = os.path.join(job.out_dir, "child.pid")
        # Generous: on a loaded machine Ray and the command take long to start.
        deadline = time.time() + 300
        while not os.path.exists(child_pid_file) and time.time() < deadline:
            time.sleep(0.2)
        self.assertTrue(os.path.exists(child_pid_file),
                        "the job's command did not start within 300 s")
        with open(job.marker) as f:
            worker = json.load(f)["starts"][0]["pid"]
        with open(child_pid_file) as f:
            child = int(f.read())
        os.kill(worker, signal.SIGKILL)
        thread.join(timeout=300)
        self.assertFalse(thread.is_alive(), "the retried job did not finish within 300 s")
        record = got["a"]
        self.assertEqual(record["status"], "ran")
        self.assertLen(record["starts"], 2)
        self.assertTrue(record["starts"][1]["resumed"])
        self.assertNotEqual(record["starts"][1]["pid"], worker)
        # The second start found the first's files: it resumed in the folder.
        self.assertEqual(_result(job)["starts_seen"], 2)
        # The first start's command died with its worker (guard.py).
        deadline = time.time() + 10
        while _alive(child) and time.time() < deadline:
            time.sleep(0.2)
        self.assertFalse(_alive(child))
        with open(job.log) as f:
            self.assertIn("=== a: resumed on", f.read())


if __name__ == "__main__":
    absltest.main()
