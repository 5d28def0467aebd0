"""benchmarks/entry_point_runs.py (the command line, a fresh run of a
script) and benchmarks/repro_bench.py end to end on small scripts that
import nothing heavy."""

from contextlib import redirect_stdout
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import entry_point_runs  # noqa: E402  pylint: disable=wrong-import-position
import repro_bench  # noqa: E402  pylint: disable=wrong-import-position

# Writes what it was run as, and a value from its argument, under {tmp}.
_SCRIPT = """
import json, os, random, sys
out, value = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
if value == "random":
    value = random.random()
with open(os.path.join(out, "result.json"), "w") as f:
    json.dump({"name": __name__, "args": sys.argv[2:], "value": value,
               "seconds": random.random()}, f)
if value == "fail":
    sys.exit(3)
"""


class SplitCommandTest(absltest.TestCase):

    def test_options_over_defaults_and_the_command(self):
        options, argv = entry_point_runs.split_command(
            ["--runs=5", "--", "s.py", "--runs=9"], {"runs": "3", "out_json": ""}, "usage")
        self.assertEqual(options, {"runs": "5", "out_json": ""})
        self.assertEqual(argv, ["s.py", "--runs=9"])

    def test_bad_command_lines_exit_with_the_usage(self):
        for args in (["s.py"], ["--runs=2", "--"], ["--rounds=2", "--", "s.py"], ["x", "--", "s.py"]):
            with self.assertRaises(SystemExit, msg=str(args)):
                entry_point_runs.split_command(args, {"runs": "3"}, "usage")


class RunTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix="entry_point_runs_test_")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.script = os.path.join(self.dir, "script.py")
        with open(self.script, "w") as f:
            f.write(_SCRIPT)

    def test_the_script_runs_as_main_with_its_arguments_and_tmp_replaced(self):
        folder = os.path.join(self.dir, "run")
        entry_point_runs.run("default", [self.script, "{tmp}/out", "7"], folder)
        with open(os.path.join(folder, "out", "result.json")) as f:
            seen = json.load(f)
        self.assertEqual(seen["name"], "__main__")
        self.assertEqual(seen["args"], ["7"])  # and {tmp} became `folder`, where it wrote

    def test_a_failing_run_raises(self):
        with self.assertRaises(subprocess.CalledProcessError):
            entry_point_runs.run("default", [self.script, "{tmp}", "fail"], self.dir)
        with self.assertRaises(subprocess.CalledProcessError):  # an unknown setting
            entry_point_runs.run("sideways", [self.script, "{tmp}", "1"], self.dir)

    def _repro(self, value: str) -> dict:
        out_json = os.path.join(self.dir, "report.json")
        with redirect_stdout(io.StringIO()):
            repro_bench.main(["--runs=3", f"--out_json={out_json}", "--",
                              self.script, "{tmp}/out", value])
        with open(out_json) as f:
            return json.load(f)

    def test_repro_bench_tells_a_reproducible_script_from_a_random_one(self):
        same = self._repro("7")
        self.assertTrue(same["all_same"])
        self.assertEqual(list(same["files"]), ["out/result.json"])  # its seconds left out
        self.assertLen(same["seconds"], 3)
        differs = self._repro("random")
        self.assertFalse(differs["all_same"])
        self.assertEqual(differs["files"]["out/result.json"]["differences"],
                         [{"run": 1, "at": "value"}, {"run": 2, "at": "value"}])


if __name__ == "__main__":
    absltest.main()
