"""benchmarks/repro_bench.py's comparison of what runs wrote: timing keys
and timing files left out, the first difference found and named."""

import json
import os
import sys
import tempfile

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import repro_bench  # noqa: E402  pylint: disable=wrong-import-position


def _write(folder: str, name: str, content) -> None:
    path = os.path.join(folder, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = "wb" if isinstance(content, bytes) else "w"
    with open(path, mode) as f:
        f.write(content if isinstance(content, (bytes, str)) else json.dumps(content))


class FirstDifferenceTest(absltest.TestCase):

    def test_equal_values_have_none(self):
        value = {"a": [1, {"b": 2.5}], "c": "x"}
        self.assertIsNone(repro_bench.first_difference(value, json.loads(json.dumps(value))))

    def test_names_the_first_differing_leaf(self):
        a = {"history": [{"loss": 1.0, "kl": 0.1}, {"loss": 2.0, "kl": 0.2}], "best": 3}
        b = {"history": [{"loss": 1.0, "kl": 0.1}, {"loss": 2.0000001, "kl": 0.3}], "best": 4}
        self.assertEqual(repro_bench.first_difference(a, b), "history[1].loss")

    def test_a_missing_key_or_a_shorter_list_differs(self):
        self.assertEqual(repro_bench.first_difference({"a": 1}, {"a": 1, "b": 2}), "b")
        self.assertEqual(repro_bench.first_difference({"a": [1, 2]}, {"a": [1]}), "a[1]")
        self.assertEqual(repro_bench.first_difference(1, 2), "(the whole file)")

    def test_timing_keys_are_stripped_at_any_depth(self):
        value = {"seconds": 1, "train_seconds": 2, "time": 3, "date": 4, "timeline": 5,
                 "runs": [{"wall_seconds": 6, "cost": 7, "measured": {"median_ms": 8}}],
                 "measured_cost": 9}
        self.assertEqual(repro_bench._strip(value),
                         {"timeline": 5, "runs": [{"cost": 7}], "measured_cost": 9})


class CompareTest(absltest.TestCase):

    def test_runs_that_differ_only_in_time_agree(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            for folder, seconds in ((a, 1.5), (b, 9.0)):
                _write(folder, "g/result.json", {"cost": 1.25, "train_seconds": seconds})
                _write(folder, "g/result.md", f"took {seconds} s")
                _write(folder, "g/checkpoints/checkpoint", f"timestamp: {seconds}")
                _write(folder, "g/tensorboard/events.out.tfevents.1", str(seconds))
                _write(folder, "g/checkpoints/ckpt-1.data", b"\x00\x01")
            report = repro_bench.compare([a, b])
        self.assertEqual(sorted(report), ["g/checkpoints/ckpt-1.data", "g/result.json"])
        self.assertTrue(all(entry["same"] for entry in report.values()))

    def test_a_run_s_own_folder_in_a_path_is_not_a_difference(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            for folder in (a, b):
                _write(folder, "run.json", {"policy": os.path.join(folder, "policy"),
                                            "graph": "/elsewhere/" + os.path.basename(folder)})
            report = repro_bench.compare([a, b])
        self.assertEqual(report["run.json"],  # a path outside the run's folder still counts
                         {"same": False, "differences": [{"run": 1, "at": "graph"}]})

    def test_differing_values_bytes_and_missing_files_are_reported(self):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b, \
                tempfile.TemporaryDirectory() as c:
            for folder, loss, weights in ((a, 0.5, b"\x00"), (b, 0.5, b"\x01"), (c, 0.25, b"\x00")):
                _write(folder, "progress.json", {"history": [{"loss": loss}]})
                _write(folder, "ckpt.data", weights)
            _write(a, "only_here.json", {})
            report = repro_bench.compare([a, b, c])
        self.assertEqual(report["progress.json"],
                         {"same": False, "differences": [{"run": 2, "at": "history[0].loss"}]})
        self.assertEqual(report["ckpt.data"],
                         {"same": False, "differences": [{"run": 1, "at": "bytes"}]})
        self.assertFalse(report["only_here.json"]["same"])


if __name__ == "__main__":
    absltest.main()
