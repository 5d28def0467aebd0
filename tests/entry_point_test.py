"""`tests.entry_point.run`: what a script run from the fork server sees and
hands back is what it sees and hands back as a fresh process
(`subprocess.run`)."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from unittest import mock

from absl.testing import absltest

from tests import entry_point

_SCRIPT = textwrap.dedent("""\
    import json, os, sys
    if "--sleep" in sys.argv:
        import time
        with open(os.environ["XFLOWRL_PROBE_PID"], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(120)
    import numpy as np
    import tensorflow as tf
    print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(),
                      "name": __name__, "probe": os.environ.get("XFLOWRL_PROBE"),
                      "sum": float(tf.reduce_sum(tf.ones([3]))),
                      "grappler_off": tf.config.optimizer.get_experimental_options().get(
                          "disable_meta_optimizer", False),
                      "draw": float(np.random.random_sample())}))
    print("on stderr", file=sys.stderr)
    if "--raise" in sys.argv:
        raise ValueError("raised on purpose")
    sys.exit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)
""")


def _gone(pid: int, seconds: float = 30) -> bool:
    """Whether process `pid` ends (and is reaped) within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


class RunTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = tempfile.mkdtemp()
        cls.script = os.path.join(cls.folder, "probe.py")
        with open(cls.script, "w") as f:
            f.write(_SCRIPT)
        with open(os.path.join(cls.folder, "probe_module.py"), "w") as f:
            f.write(_SCRIPT)

    def _both(self, argv, **kwargs):
        forked = entry_point.run(argv, capture_output=True, text=True, timeout=120, **kwargs)
        fresh = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                               stdin=subprocess.DEVNULL, **kwargs)
        return forked, fresh

    def test_a_script_sees_what_a_fresh_process_sees(self):
        env = dict(os.environ, XFLOWRL_PROBE="yes")
        forked, fresh = self._both([sys.executable, self.script, "--flag", "3"],
                                   cwd=tempfile.gettempdir(), env=env)
        self.assertEqual(forked.returncode, 3, forked.stderr)
        self.assertEqual(fresh.returncode, 3, fresh.stderr)
        seen, expected = json.loads(forked.stdout), json.loads(fresh.stdout)
        self.assertNotEqual(seen.pop("draw"), expected.pop("draw"))
        # The one difference, the suite's setting (tests/fork_server.py):
        # a forked run has no graph optimiser.
        forking = os.environ.get("XFLOWRL_TEST_FORK_SERVER", "1") != "0"
        self.assertEqual(seen.pop("grappler_off"), forking)
        self.assertFalse(expected.pop("grappler_off"))
        self.assertEqual(seen, expected)
        self.assertEqual(seen["probe"], "yes")
        self.assertEqual(seen["name"], "__main__")
        self.assertIn("on stderr", forked.stderr)

    def test_a_module_sees_what_a_fresh_process_sees(self):
        forked, fresh = self._both([sys.executable, "-m", "probe_module", "0"], cwd=self.folder)
        self.assertEqual((forked.returncode, fresh.returncode), (0, 0), forked.stderr)
        seen, expected = json.loads(forked.stdout), json.loads(fresh.stdout)
        for key in ("draw", "grappler_off"):
            seen.pop(key)
            expected.pop(key)
        self.assertEqual(seen, expected)

    def test_two_runs_draw_other_numpy_numbers(self):
        draws = {json.loads(entry_point.run([sys.executable, self.script], capture_output=True,
                                            text=True, timeout=120).stdout)["draw"]
                 for _ in range(2)}
        self.assertLen(draws, 2)

    def test_an_exception_ends_with_status_1_and_its_traceback(self):
        forked = entry_point.run([sys.executable, self.script, "--raise"], capture_output=True,
                                 text=True, timeout=120)
        self.assertEqual(forked.returncode, 1)
        self.assertIn("ValueError: raised on purpose", forked.stderr)

    def test_check_raises_as_subprocess_does(self):
        with self.assertRaises(subprocess.CalledProcessError):
            entry_point.run([sys.executable, self.script, "2"], capture_output=True,
                            timeout=120, check=True)

    def test_stderr_into_stdout_and_into_a_file(self):
        merged = entry_point.run([sys.executable, self.script], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, timeout=120)
        self.assertIn("on stderr", merged.stdout)
        self.assertIsNone(merged.stderr)
        with tempfile.TemporaryFile("w+") as log:
            entry_point.run([sys.executable, self.script], stdout=log, stderr=log, timeout=120)
            log.seek(0)
            self.assertIn("on stderr", log.read())

    def test_a_timeout_kills_the_run(self):
        pid_file = os.path.join(self.folder, "pid")
        env = dict(os.environ, XFLOWRL_PROBE_PID=pid_file)
        with self.assertRaises(subprocess.TimeoutExpired):
            entry_point.run([sys.executable, self.script, "--sleep"], capture_output=True,
                            timeout=3, env=env)
        with open(pid_file) as f:
            self.assertTrue(_gone(int(f.read())))

    def test_a_client_that_goes_away_leaves_no_run_behind(self):
        # What a test process killed mid-run does: its end of the
        # connection closes, and the server kills the run.
        pid_file = os.path.join(self.folder, "pid_of_orphan")
        request = {"argv": [sys.executable, self.script, "--sleep"], "cwd": self.folder,
                   "env": dict(os.environ, XFLOWRL_PROBE_PID=pid_file)}
        with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            conn.connect(entry_point._server_path())  # pylint: disable=protected-access
            socket.send_fds(conn, [json.dumps(request).encode()],
                            [null_in.fileno(), null_out.fileno(), null_out.fileno()])
            pid = json.loads(conn.recv(4096))["pid"]
            while not os.path.exists(pid_file):
                time.sleep(0.05)
            conn.close()
        self.assertTrue(_gone(pid))

    def test_other_python_variables_run_a_fresh_process(self):
        env = dict(os.environ, PYTHONPATH=self.folder)
        with mock.patch.dict(os.environ, {"XFLOWRL_TEST_FORK_SERVER": "1"}):
            forkable = entry_point._forkable  # pylint: disable=protected-access
            self.assertFalse(forkable([sys.executable, self.script], env))
            self.assertTrue(forkable([sys.executable, self.script], os.environ))
        done = entry_point.run([sys.executable, "-c", "import sys; print(sys.path[1])"],
                               capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(done.stdout.strip(), self.folder)


if __name__ == "__main__":
    absltest.main()
