"""benchmarks/suite_runs.py: a `--durations=0` log's figures, and the
per-test ratios between runs."""

import os
import sys
import tempfile

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import suite_runs  # noqa: E402  pylint: disable=wrong-import-position


def _log(phases, summary):
    lines = ["........ [100%]", "============ slowest durations ============"]
    lines += [f"{seconds:.2f}s {kind:<8} {node}" for kind, node, seconds in phases]
    lines.append(summary)
    path = os.path.join(tempfile.mkdtemp(), "run.log")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


_A = "tests/a_test.py::ATest::test_one"
_B = "tests/a_test.py::ATest::test_two"
_C = "tests/b_test.py::test_three"


class SuiteRunsTest(absltest.TestCase):

    def test_a_log_s_figures(self):
        path = _log([("setup", _A, 10.0), ("call", _A, 2.0), ("call", _B, 3.0),
                     ("call", _C, 4.5)],
                    "1557 passed, 15 skipped, 2 failed, 723 warnings, 8501 subtests passed "
                    "in 718.48s (0:11:58)")
        report = suite_runs.main([path])
        [run] = report["runs"]
        self.assertEqual(run["pytest_seconds"], 718.48)
        self.assertEqual(run["counts"], {"passed": 1557, "skipped": 15, "failed": 2})
        self.assertEqual(run["summed_test_seconds"], 19.5)
        self.assertEqual(run["longest"], [{"scope": "tests/a_test.py::ATest", "seconds": 15.0},
                                          {"scope": "tests/b_test.py", "seconds": 4.5}])
        self.assertNotIn("against_first", run)
        self.assertEqual(report["pytest_seconds"],
                         {"median": 718.48, "min": 718.48, "max": 718.48, "n": 1})

    def test_later_runs_are_compared_test_by_test_with_the_first(self):
        first = _log([("setup", _A, 10.0), ("call", _A, 2.0), ("call", _B, 4.0),
                      ("call", _C, 0.5)], "3 passed in 800.00s (0:13:20)")
        # Every phase above a second takes 0.8 of the first run's time; the
        # short one, and a phase only one run has, are left out.
        second = _log([("setup", _A, 8.0), ("call", _A, 1.6), ("call", _B, 3.2),
                       ("call", _C, 0.1), ("teardown", _B, 5.0)],
                      "3 passed in 640.00s (0:10:40)")
        report = suite_runs.main([first, second])
        against = report["runs"][1]["against_first"]
        self.assertEqual(against["phases"], 3)
        self.assertAlmostEqual(against["median"], 0.8)
        self.assertEqual(report["pytest_seconds"]["median"], 720.0)

    def test_an_unfinished_run_is_refused(self):
        path = _log([("call", _A, 2.0)], "")
        with self.assertRaisesRegex(ValueError, "no pytest summary line"):
            suite_runs.main([path])


if __name__ == "__main__":
    absltest.main()
