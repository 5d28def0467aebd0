"""benchmarks/search_bench.py: every method in every row, the best known
cost and the gap, resuming, old rows in the tables, batches and the Ray path.

`--quick` runs once per class as the command a user types (a subprocess);
the rest calls the module's functions on small_cnn with small limits.
"""

import copy
import json
import os
import shutil
import sys
import tempfile

from absl.testing import absltest
import numpy as np

from tests import entry_point
from tests.local_ray import LocalRayTestCase
from xflowrl.search.eqsat import EqsatConfig

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BENCHMARKS = os.path.join(_ROOT, "benchmarks")
sys.path.insert(0, _BENCHMARKS)

import landscape  # noqa: E402  pylint: disable=wrong-import-position
import search_matrix as search_bench  # noqa: E402  pylint: disable=wrong-import-position

# A row as search_bench.py wrote it before eqsat and descents (docs/benchmark.md's
# run): greedy and TASO only, `gap_pct` meaning TASO's gap. `seconds` are
# markers: a rerun method would overwrite them.
OLD_ROW = {
    "graph": "small_cnn", "cost_model": "analytic/cpu", "rules": "default", "ops": 27,
    "xfers": 1678, "initial_cost_ms": 3.502943066666667,
    "greedy": {"cost_ms": 3.314751066666667, "steps": 11, "seconds": 123.0,
               "applied": ["conv_bn_s1_same"] * 11, "locations": 19,
               "xfers_with_locations": 5, "improving_locations": 9},
    "search": [{"alpha": 1.0, "budget": 1000, "time_limit": 30.0, "cost_ms": 3.314751066666667,
                "expansions": 40, "enqueued": 60, "seconds": 456.0, "time_limit_hit": False,
                "queue_emptied": True, "steps": 11, "applied": [], "repeated": False}],
    "best_search": {"alpha": 1.0, "budget": 1000, "cost_ms": 3.314751066666667},
    "greedy_change_pct": -5.372396765188644, "search_change_pct": -5.372396765188644,
    "gap_pct": 0.0}

# Small limits: each setting on small_cnn runs in about a second.
SMALL = search_bench.BenchConfig(
    alphas=(1.0,), budgets=(20,), time_limit=10.0,
    eqsat=EqsatConfig(time_limit_s=1.0, node_limit=1000, ilp_time_limit_s=1.0),
    descent_seeds=(0, 1, 2))


def _method_costs(row):
    return {m: search_bench.method_cost(row, m) for m in search_bench.METHODS}


class QuickRunTest(absltest.TestCase):
    """`search_bench.py --quick --rules=default`: small_cnn under `default` and
    squeezenet1_1 under `generated` on analytic/v100, where looking ahead pays."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix="search_bench_test_")
        out_json = os.path.join(cls.tmp, "bench.json")
        proc = entry_point.run(
            [sys.executable, os.path.join(_BENCHMARKS, "search_bench.py"), "--quick",
             "--rules=default", f"--out_json={out_json}",
             f"--out_md={os.path.join(cls.tmp, 'bench.md')}"],
            capture_output=True, text=True, timeout=240, check=False, cwd=_ROOT)
        if proc.returncode != 0:
            raise AssertionError(f"--quick failed:\n{proc.stderr[-3000:]}")
        cls.stdout = proc.stdout
        with open(os.path.join(cls.tmp, "quick.json")) as f:
            cls.rows = json.load(f)
        with open(os.path.join(cls.tmp, "quick.md")) as f:
            cls.markdown = f.read()
        cls.by_graph = {r["graph"]: r for r in cls.rows}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def test_the_quick_settings(self):
        self.assertEqual(sorted((r["graph"], r["cost_model"], r["rules"]) for r in self.rows),
                         [("small_cnn", "analytic/cpu", "default"),
                          ("squeezenet1_1", "analytic/v100", "generated")])

    def test_every_row_has_every_method(self):
        for row in self.rows:
            with self.subTest(row["graph"]):
                self.assertGreaterEqual(row["greedy"]["steps"], 1)
                self.assertLen(row["search"], 4)  # alphas 1.0/1.2 x budgets 50/200
                eqsat = row["eqsat"]
                self.assertNotIn("error", eqsat)
                self.assertIn(eqsat["stop_reason"],
                              ("saturated", "node_limit", "iteration_limit", "time_limit"))
                self.assertGreater(eqsat["e_nodes"], row["ops"])
                self.assertEqual(eqsat["config"]["time_limit_s"],
                                 search_bench.QUICK_EQSAT["time_limit_s"])
                # Both graphs are small: checked against the reference executor.
                self.assertTrue(eqsat["check_outputs"])
                self.assertEqual(eqsat["outputs_checked"],
                                 True if eqsat["handed_over"] != "original" else None)
                # The two phases lie within the run's seconds, which also
                # hold the output check (how much longer is the machine's
                # load: 1.3 s more on squeezenet1_1 in one loaded suite run).
                self.assertGreaterEqual(eqsat["saturation_seconds"], 0.0)
                self.assertGreaterEqual(eqsat["extraction_seconds"], 0.0)
                # (1e-6: differences of time.time() round at about 2e-7 s.)
                self.assertGreaterEqual(
                    eqsat["seconds"] + 1e-6,
                    eqsat["saturation_seconds"] + eqsat["extraction_seconds"])
                descent = row["descent"]
                self.assertEqual(descent["seeds"], list(range(search_bench.QUICK_DESCENTS)))
                self.assertLen(descent["costs_ms"], search_bench.QUICK_DESCENTS)
                self.assertEqual(descent["best_cost_ms"], min(descent["costs_ms"]))
                self.assertEqual(descent["median_cost_ms"], float(np.median(descent["costs_ms"])))

    def test_best_known_is_the_lowest_cost_and_its_winners(self):
        for row in self.rows:
            with self.subTest(row["graph"]):
                costs = _method_costs(row)
                self.assertNotIn(None, costs.values())
                self.assertEqual(row["best_known_ms"], min(costs.values()))
                self.assertEqual(row["winners"], [m for m, c in costs.items()
                                                  if c <= min(costs.values()) + 1e-9])

    def test_gap_formula(self):
        for row in self.rows:
            with self.subTest(row["graph"]):
                init, greedy = row["initial_cost_ms"], row["greedy"]["cost_ms"]
                self.assertAlmostEqual(row["gap_pct"],
                                       100 * (greedy - row["best_known_ms"]) / init, places=9)
                self.assertAlmostEqual(row["taso_gap_pct"],
                                       100 * (greedy - row["best_search"]["cost_ms"]) / init,
                                       places=9)
                self.assertGreaterEqual(row["gap_pct"], row["taso_gap_pct"] - 1e-9)

    def test_eqsat_finds_the_squeezenet_detour(self):
        # Greedy stops at -10.8%; the detour (docs/benchmark.md) reaches -36.7%.
        row = self.by_graph["squeezenet1_1"]
        init = row["initial_cost_ms"]
        self.assertGreaterEqual(100 * (row["greedy"]["cost_ms"] - row["eqsat"]["cost_ms"]) / init,
                                25.0)
        self.assertIn("eqsat", row["winners"])
        self.assertGreaterEqual(row["gap_pct"], 25.0)
        # Random descents take only cost-lowering steps: no detour.
        self.assertNotIn("random", row["winners"])
        # On small_cnn nothing beats greedy.
        self.assertAlmostEqual(self.by_graph["small_cnn"]["gap_pct"], 0.0, places=9)

    def test_markdown_is_the_rows_tables(self):
        self.assertEqual(self.markdown, search_bench.markdown_table(self.rows))
        self.assertIn(f"**{self.by_graph['squeezenet1_1']['gap_pct']:+.2f}**", self.markdown)
        self.assertIn("| squeezenet1_1 | analytic/v100 | 65 |", self.markdown)
        # One JSON line per setting, then the tables.
        lines = [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]
        self.assertEqual(sorted(line["graph"] for line in lines),
                         ["small_cnn", "squeezenet1_1"])

    def test_descents_replay_from_their_seeds(self):
        from xflowrl import zoo  # pylint: disable=import-outside-toplevel
        from xflowrl.engine import XferSet  # pylint: disable=import-outside-toplevel
        from xflowrl.entry_points import (
            cost_model_from_spec,  # pylint: disable=import-outside-toplevel
        )
        row = self.by_graph["small_cnn"]
        graph = zoo.get_graph("small_cnn")
        land = landscape.Landscape(graph, XferSet.from_name("default"),
                                   cost_model_from_spec("analytic/cpu", None), 200)
        seed = row["descent"]["seeds"][-1]
        cost, steps = landscape.random_descent(land, graph, np.random.default_rng(seed))
        self.assertEqual(cost, row["descent"]["costs_ms"][-1])
        self.assertEqual(steps, row["descent"]["steps"][-1])


class MatrixTest(absltest.TestCase):
    """Resuming, old rows and batches, on small_cnn in-process."""

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="search_bench_test_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.out_json = os.path.join(self.tmp, "bench.json")
        self.out_md = os.path.join(self.tmp, "bench.md")

    def _run(self, settings, rows, methods):
        config = search_bench.BenchConfig(**{**SMALL.__dict__, "methods": methods})
        return search_bench.run_matrix(settings, config, rows, self.out_json, self.out_md)

    def test_resume_skips_rows_present_and_adds_missing_methods(self):
        old = search_bench.Setting("small_cnn", "analytic/cpu", "default")
        new = search_bench.Setting("small_cnn", "analytic/cpu", "taso")
        rows = self._run([old, new], [copy.deepcopy(OLD_ROW)], ("greedy", "taso"))
        self.assertEqual([search_bench.row_key(r) for r in rows], [old.key, new.key])
        self.assertEqual(rows[0], OLD_ROW)  # complete for these methods: not rerun
        with open(self.out_json) as f:
            self.assertEqual(json.load(f), json.loads(json.dumps(rows)))

        # Adding a method runs only that one: greedy's and TASO's markers stay.
        rows = self._run([old, new], rows, ("greedy", "taso", "random"))
        self.assertLen(rows, 2)
        self.assertEqual(rows[0]["greedy"], OLD_ROW["greedy"])
        self.assertEqual(rows[0]["search"], OLD_ROW["search"])
        self.assertEqual(rows[0]["descent"]["seeds"], [0, 1, 2])
        self.assertEqual(rows[0]["winners"], ["greedy", "taso", "random"])
        self.assertNotIn("eqsat", rows[0])
        greedy_seconds = rows[1]["greedy"]["seconds"]
        rows = self._run([old, new], rows, ("greedy", "random"))  # nothing left to run
        self.assertEqual(rows[1]["greedy"]["seconds"], greedy_seconds)

        # --rerun: a dropped method runs again; the others stay.
        dropped = search_bench.drop_methods(rows[0], ["taso"])
        self.assertNotIn("search", dropped)
        self.assertNotIn("taso_change_pct", dropped)
        self.assertEqual(dropped["winners"], ["greedy", "random"])
        rows = self._run([old, new], [dropped, rows[1]], ("greedy", "taso"))
        self.assertEqual(rows[0]["greedy"], OLD_ROW["greedy"])
        self.assertNotEqual(rows[0]["search"][0]["seconds"], OLD_ROW["search"][0]["seconds"])

    def test_an_old_row_renders(self):
        markdown = search_bench.markdown_table([OLD_ROW])
        line = next(l for l in markdown.splitlines()
                    if l.startswith("| small_cnn | analytic/cpu | 27 |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        self.assertEqual(cells, ["small_cnn", "analytic/cpu", "27", "3.503", "-5.37",
                                 "-5.37 (a1, b1000)", "—", "—", "-5.37", "all", "+0.00"])
        summary = search_bench.summarize(OLD_ROW)
        self.assertEqual(summary["winners"], ["greedy", "taso"])
        self.assertEqual(summary["taso_gap_pct"], OLD_ROW["gap_pct"])

    def test_an_old_row_beside_a_new_one(self):
        rows = self._run([search_bench.Setting("small_cnn", "analytic/cpu", "taso")],
                         [copy.deepcopy(OLD_ROW)], search_bench.METHODS)
        markdown = search_bench.markdown_table(rows)
        self.assertIn("| small_cnn | analytic/cpu | 27 | 3.503 | -5.37 | -5.37 (a1, b1000) "
                      "| — | — |", markdown)
        self.assertIn("### Rule set `taso`", markdown)
        eqsat = rows[1]["eqsat"]
        self.assertIn(f"({eqsat['stop_reason']}, {eqsat['e_nodes']}, ", markdown)

    def test_batches(self):
        settings = search_bench.plan_settings(["bert", "small_cnn"], [], [1, 2],
                                              ["analytic/cpu"], ["default"])
        # bert's builder takes no batch size: batch 1 only.
        self.assertEqual([s.key for s in settings],
                         ["bert|analytic/cpu|default", "small_cnn|analytic/cpu|default",
                          "small_cnn|analytic/cpu|default|batch=2"])
        rows = self._run(settings[2:], [], ("greedy",))
        self.assertEqual(rows[0]["batch"], 2)
        self.assertEqual(search_bench.row_key(rows[0]), settings[2].key)
        batch1 = search_bench.zoo_graph("small_cnn").cost(
            search_bench.cost_model_from_spec("analytic/cpu", None))
        self.assertGreater(rows[0]["initial_cost_ms"], 1.5 * batch1)
        self.assertIn("| small_cnn (batch 2) |", search_bench.markdown_table(rows))
        with self.assertRaisesRegex(ValueError, "has no batch size"):
            search_bench.zoo_graph("vit", 4)


class RayTest(LocalRayTestCase):
    """--workers=2: the settings as Ray tasks give the rows run in-process gives."""

    @classmethod
    def setUpClass(cls):
        # The workers import search_matrix by reference: from this folder (a
        # command-line run has it as the script's, which Ray passes on).
        cls._pythonpath = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (_BENCHMARKS, cls._pythonpath) if p)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        if cls._pythonpath is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = cls._pythonpath

    def test_workers(self):
        tmp = tempfile.mkdtemp(prefix="search_bench_test_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        out_json = os.path.join(tmp, "bench.json")
        settings = [search_bench.Setting("small_cnn", "analytic/cpu", rules)
                    for rules in ("taso", "builtin+taso")]
        rows = search_bench.run_matrix(settings, SMALL, [], out_json,
                                       os.path.join(tmp, "bench.md"), workers=2)
        self.assertCountEqual([search_bench.row_key(r) for r in rows],
                              [s.key for s in settings])
        with open(out_json) as f:
            self.assertEqual(json.load(f), json.loads(json.dumps(rows)))
        for row in rows:
            setting = search_bench.Setting(row["graph"], row["cost_model"], row["rules"])
            here = search_bench.run_setting(setting, SMALL)
            costs = _method_costs(row)
            self.assertNotIn(None, costs.values())
            for method in ("greedy", "taso", "random"):  # eqsat: time limits
                self.assertEqual(costs[method], _method_costs(here)[method], method)


if __name__ == "__main__":
    absltest.main()
