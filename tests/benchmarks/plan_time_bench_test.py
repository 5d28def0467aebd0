"""benchmarks/plan_time_bench.py: its summary (benchmarks/plan_time.py,
which defines no flags) on made-up calls, and a run as a user makes it (a
subprocess, one setting, one seed, the same tree twice), with
`--from_json` and a bad `--config`."""

import json
import os
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import plan_time  # noqa: E402  pylint: disable=wrong-import-position

_SETTING = "squeezenet1_1/tensat/analytic-v100"


def _plan(setting, tree, seed, cpu, cost=1.0, route="r", to_best=None):
    call = {"setting": setting, "method": "plan", "tree": tree, "seed": seed,
            "cpu_seconds": cpu, "cost_ms": cost, "route": route, "real_steps": 10,
            "rule_enumerations": 0, "applies": 5, "decisions": 2, "nodes": 7,
            "stopped": "no_improvement"}
    if to_best is not None:
        call["cpu_to_best"] = to_best
    return call


def _taso(setting, seed, cpu):
    return {"setting": setting, "method": "taso", "tree": "/a", "seed": seed,
            "cpu_seconds": cpu}


class SummaryTest(absltest.TestCase):

    def test_trees_against_taso_and_against_the_first(self):
        # Tree /b takes half, the same and twice /a's CPU on three settings
        # (medians over two seeds); on g/z seed 1 it hands over another route.
        calls = []
        for seed in (0, 1):
            calls += [_taso("g/x", seed, 2.0), _plan("g/x", "/a", seed, 1.0 + seed),
                      _plan("g/x", "/b", seed, 0.5 + seed / 2),
                      _taso("g/y", seed, 1.0), _plan("g/y", "/a", seed, 2.0),
                      _plan("g/y", "/b", seed, 2.0),
                      _taso("g/z", seed, 1.0), _plan("g/z", "/a", seed, 0.5),
                      _plan("g/z", "/b", seed, 1.0, route="r" if seed == 0 else "other")]
        calls.append({"setting": "g/x", "method": "plan", "tree": "/b", "seed": 2,
                      "error": "RuntimeError: boom"})
        summary = plan_time.summarise(calls, ["/a", "/b"])
        self.assertEqual(summary["settings"], 3)
        self.assertLen(summary["errors"], 1)
        self.assertEqual(summary["taso"]["cpu_seconds"]["median"], 1.0)
        first, later = summary["plan /a"], summary["plan /b"]
        # /a: medians 1.5, 2.0 and 0.5 against TASO's 2.0, 1.0 and 1.0.
        self.assertEqual((first["within_taso_time"], first["within_taso_time_of"]), (2, 3))
        self.assertEqual(first["over_taso"]["median"], 0.75)
        self.assertEqual((first["runs"], first["real_steps"]), (6, 60))
        self.assertEqual(first["stops"], {"no_improvement": 6})
        self.assertNotIn("over_first_tree", first)
        # /b: 0.75, 2.0 and 1.0.
        self.assertEqual(later["within_taso_time"], 2)
        self.assertEqual(later["over_first_tree"]["min"], 0.5)
        self.assertEqual(later["over_first_tree"]["median"], 1.0)
        self.assertEqual(later["over_first_tree"]["max"], 2.0)
        self.assertEqual(later["faster_than_first_tree"], 1)
        self.assertEqual(later["results_differ"], ["g/z seed 1"])
        # Neither tree's calls say when their graph was first seen.
        self.assertNotIn("best_within_taso_time", first)

    def test_the_cpu_until_the_handed_over_graph_against_taso(self):
        # Over TASO's 2.0 and 1.0: the whole run within on g/x only; its
        # graph first seen within TASO's time on both (median 0.5 on g/y;
        # g/z's calls, from before the field, are left out).
        calls = []
        for seed in (0, 1):
            calls += [_taso("g/x", seed, 2.0), _plan("g/x", "/a", seed, 1.0, to_best=1.5),
                      _taso("g/y", seed, 1.0), _plan("g/y", "/a", seed, 3.0,
                                                     to_best=0.25 + 0.5 * seed),
                      _taso("g/z", seed, 1.0), _plan("g/z", "/a", seed, 3.0)]
        entry = plan_time.summarise(calls, ["/a"])["plan /a"]
        self.assertEqual((entry["within_taso_time"], entry["within_taso_time_of"]), (1, 3))
        self.assertEqual((entry["best_within_taso_time"], entry["best_within_taso_time_of"]),
                         (2, 2))
        self.assertEqual(entry["to_best_over_taso"]["min"], 0.5)
        self.assertEqual(entry["to_best_over_taso"]["max"], 0.75)
        self.assertEqual(entry["by_setting"]["g/y"], {"over_taso": 3.0, "to_best_over_taso": 0.5})
        self.assertEqual(entry["by_setting"]["g/z"], {"over_taso": 3.0})

    def test_detour_steps_and_successes_are_summed_where_every_call_has_them(self):
        calls = [_plan("g/x", "/a", seed, 1.0) for seed in (0, 1)]
        for seed, call in enumerate(calls):
            call.update(detour_real_steps=3 + seed, detours_found=seed)
        entry = plan_time.summarise(calls, ["/a"])["plan /a"]
        self.assertEqual((entry["detour_real_steps"], entry["detours_found"]), (7, 1))
        older = plan_time.summarise(calls + [_plan("g/x", "/a", 2, 1.0)], ["/a"])["plan /a"]
        self.assertNotIn("detour_real_steps", older)


class AgainstTest(absltest.TestCase):

    def test_runs_handing_over_another_graph_or_route_are_listed(self):
        # Two reports of one tree each: seed 0 the same but for its real
        # steps, seed 1 another route, seed 2 another cost; g/y only in one.
        mine = [_plan("g/x", "/a", 0, 1.0), _plan("g/x", "/a", 1, 1.0, route="other"),
                _plan("g/x", "/a", 2, 1.0, cost=0.5), _plan("g/y", "/a", 0, 1.0)]
        theirs = [_plan("g/x", "/b", seed, 2.0) for seed in (0, 1, 2)]
        theirs[0]["real_steps"] = 20
        with tempfile.TemporaryDirectory() as folder:
            paths = []
            for name, tree, calls in (("a", "/a", mine), ("b", "/b", theirs)):
                paths.append(os.path.join(folder, name + ".json"))
                with open(paths[-1], "w") as f:
                    json.dump({"trees": [tree], "calls": calls}, f)
            self.assertEqual(plan_time.handed_over_differs(*paths),
                             ["g/x seed 1", "g/x seed 2"])


class RunTest(absltest.TestCase):

    def _run(self, *args):
        return entry_point.run(
            [sys.executable, os.path.join(_ROOT, "benchmarks", "plan_time_bench.py"), *args],
            capture_output=True, text=True, cwd=_ROOT, timeout=600)

    def test_the_same_tree_twice_gives_the_same_results(self):
        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "report.json")
            done = self._run(f"--settings={_SETTING}", "--seeds=0", "--trees=.,.",
                             '--config={"max_real_steps": 30}', f"--out_json={out}")
            self.assertEqual(done.returncode, 0, done.stderr[-2000:])
            summary = json.loads(done.stdout)
            with open(out) as f:
                report = json.load(f)
            self.assertEqual(report["config"], {"max_real_steps": 30})
            self.assertEqual([c["method"] for c in report["calls"]], ["taso", "plan", "plan"])
            plans = [c for c in report["calls"] if c["method"] == "plan"]
            for c in plans:
                self.assertGreater(c["cpu_seconds"], 0)
                self.assertGreater(c["cpu_to_best"], 0)   # greedy's start is offered
                self.assertLessEqual(c["cpu_to_best"], c["cpu_seconds"])
                self.assertLessEqual(c["real_steps"], 30 + 1)
                self.assertGreater(c["real_steps_to_best"], 0)
                self.assertLessEqual(c["real_steps_to_best"], c["real_steps"])
                self.assertLessEqual(c["detour_real_steps"], c["real_steps"])
            self.assertEqual(plans[0]["route"], plans[1]["route"])
            self.assertEqual(summary["plan " + _ROOT]["within_taso_time_of"], 1)
            again = self._run(f"--from_json={out}")
            self.assertEqual(again.returncode, 0, again.stderr[-2000:])
            self.assertEqual(json.loads(again.stdout), summary)

    def test_a_config_that_is_not_a_json_object_is_refused(self):
        done = self._run(f"--settings={_SETTING}", "--config=[1]")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("--config is a JSON object", done.stderr)


if __name__ == "__main__":
    absltest.main()
