"""benchmarks/eqsat_time_bench.py's summary (benchmarks/eqsat_time.py, which
defines no flags): eqsat against TASO's search, and each later tree against
the first, setting by setting; `--from_json` as a user runs it."""

import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import eqsat_time  # noqa: E402  pylint: disable=wrong-import-position


def _eqsat(setting, tree, cpu, saturation, extraction, digest="d", cost=1.0,
           status="optimal+optimal"):
    return {"setting": setting, "method": "eqsat", "tree": tree, "seconds": cpu,
            "cpu_seconds": cpu, "saturation_seconds": saturation,
            "extraction_seconds": extraction, "digest": digest, "stop_reason": "saturated",
            "cost_ms": cost, "initial_ms": 2.0, "ilp_status": status}


def _taso(setting, seconds, cost=1.0):
    return {"setting": setting, "method": "taso", "tree": "/a", "seconds": seconds,
            "cpu_seconds": seconds, "cost_ms": cost, "initial_ms": 2.0}


# Tree /b takes half, the same and twice /a's CPU on three settings; on g/y
# its second ILP program ended otherwise.
_CALLS = [_taso("g/x", 1.0), _eqsat("g/x", "/a", 2.0, 1.0, 1.0), _eqsat("g/x", "/b", 1.0, 0.5, 0.5),
          _taso("g/y", 1.0), _eqsat("g/y", "/a", 4.0, 2.0, 2.0),
          _eqsat("g/y", "/b", 4.0, 1.0, 3.0, status="optimal+same"),
          _taso("g/z", 8.0), _eqsat("g/z", "/a", 1.0, 0.5, 0.5),
          _eqsat("g/z", "/b", 2.0, 1.0, 1.0, digest="other", cost=0.9)]


class SummaryTest(absltest.TestCase):

    def test_each_later_tree_against_the_first(self):
        summary = eqsat_time.summarise(_CALLS, ["/a", "/b"])
        b = summary["eqsat /b"]
        self.assertEqual(b["cpu_over_first"]["median"], 1.0)
        self.assertEqual((b["cpu_over_first"]["min"], b["cpu_over_first"]["max"]), (0.5, 2.0))
        self.assertEqual(b["cpu_faster_than_first"], 1)
        self.assertEqual(b["saturation_over_first"]["median"], 0.5)
        self.assertEqual(b["extraction_over_first"]["median"], 1.5)
        self.assertEqual(b["digest_differs"], ["g/z"])
        self.assertEqual(b["cost_differs"], ["g/z"])
        self.assertEqual(b["status_differs"], {
            "g/y": {"statuses": ["optimal+optimal", "optimal+same"], "cpu_seconds": [4.0, 4.0]}})
        self.assertNotIn("cpu_over_first", summary["eqsat /a"])
        # Against TASO's search: /a faster on g/z only; /b on g/z only too.
        self.assertEqual(summary["eqsat /a"]["faster_than_taso"], 1)
        self.assertEqual(summary["eqsat /a"]["ratio_eqsat_over_taso"]["median"], 2.0)
        self.assertEqual(summary["taso"]["cpu_seconds"]["median"], 1.0)
        # Each phase against TASO's search, and extraction's share: /b's
        # extraction is 3 of its 4 s on g/y, half elsewhere.
        self.assertEqual(summary["eqsat /a"]["saturation_over_taso"]["median"], 1.0)
        self.assertEqual(b["saturation_over_taso"]["median"], 0.5)
        self.assertEqual((b["extraction_over_taso"]["min"], b["extraction_over_taso"]["max"]),
                         (0.125, 3.0))
        self.assertEqual((b["extraction_share"]["median"], b["extraction_share"]["max"]),
                         (0.5, 0.75))
        # No call had a second start (older calls have no such field).
        self.assertNotIn("second_start_seconds", b)

    def test_the_second_start_where_it_ran(self):
        calls = [dict(c, second_start_seconds=1.5 if c["setting"] == "g/y" else 0.0)
                 for c in _CALLS if c["method"] == "eqsat" and c["tree"] == "/b"]
        entry = eqsat_time.summarise(calls, ["/b"])["eqsat /b"]
        self.assertEqual(entry["second_start_settings"], ["g/y"])
        self.assertEqual((entry["second_start_seconds"]["n"],
                          entry["second_start_seconds"]["median"]), (1, 1.5))

    def test_a_saved_report_is_summarised_again(self):
        path = os.path.join(tempfile.mkdtemp(), "report.json")
        with open(path, "w") as f:
            json.dump({"trees": ["/a", "/b"], "calls": _CALLS}, f)
        done = subprocess.run(
            [sys.executable, os.path.join(_ROOT, "benchmarks", "eqsat_time_bench.py"),
             f"--from_json={path}"], capture_output=True, text=True, check=True, timeout=120)
        self.assertEqual(json.loads(done.stdout), eqsat_time.summarise(_CALLS, ["/a", "/b"]))


if __name__ == "__main__":
    absltest.main()
