"""benchmarks/rerun_list_sources.py: the flags it reads from a file's rows,
its comparison, and one rerun of eqsat on a one-row source file as a user
runs it (subprocesses)."""

import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import rerun_list_sources  # noqa: E402  pylint: disable=wrong-import-position


def _row(graph, rules, cost, batch=1, eqsat_nodes=10000):
    row = {"graph": graph, "cost_model": "analytic/v100", "rules": rules,
           "initial_cost_ms": 10.0, "greedy": {"cost_ms": 9.0},
           "search": [{"alpha": a, "budget": 1000, "cost_ms": 8.0} for a in (1.0, 1.2)],
           "eqsat": {"cost_ms": cost, "seconds": cost, "config": {"node_limit": eqsat_nodes,
                                                 "time_limit_s": 30.0, "backoff": None}},
           "descent": {"episodes": 10}}
    if batch != 1:
        row["batch"] = batch
    return row


class FlagsAndComparisonTest(absltest.TestCase):

    def test_flags_give_back_the_rows_settings(self):
        rows = [_row(g, r, 8.0, batch=16) for g in ("vgg19", "bert") for r in ("taso", "tensat")]
        self.assertEqual(rerun_list_sources.bench_flags(rows), [
            "--eqsat_node_limit=10000", "--eqsat_time_limit=30.0",
            "--graphs=bert,vgg19", "--batches=16", "--cost_models=analytic/v100",
            "--rules=taso,tensat", "--alphas=1.0,1.2", "--budgets=1000", "--descents=10"])

    def test_rows_that_are_not_one_product_are_refused(self):
        rows = [_row("vgg19", "taso", 8.0), _row("bert", "tensat", 8.0)]
        with self.assertRaisesRegex(ValueError, "product"):
            rerun_list_sources.bench_flags(rows)
        rows = [_row("vgg19", "taso", 8.0), _row("vgg19", "tensat", 8.0, eqsat_nodes=5)]
        with self.assertRaisesRegex(ValueError, "eqsat settings"):
            rerun_list_sources.bench_flags(rows)

    def test_comparison_counts_moves_and_rows_above_taso(self):
        before = [_row("vgg19", r, 8.5) for r in ("taso", "tensat", "default")]
        after = [_row("vgg19", "taso", 7.0), _row("vgg19", "tensat", 8.5 + 1e-9),
                 _row("vgg19", "default", 9.5)]
        counts = rerun_list_sources.compare(before, after, "eqsat")
        self.assertEqual({k: counts[k] for k in ("rows", "lower", "same", "higher",
                                                 "above_taso", "above_greedy")},
                         {"rows": 3, "lower": 1, "same": 1, "higher": 1,
                          "above_taso": 2, "above_greedy": 1})
        self.assertEqual([c["setting"] for c in counts["changed"]],
                         ["vgg19/1/analytic/v100/taso", "vgg19/1/analytic/v100/default"])
        self.assertEqual(counts["changed"][0]["after_pct"], -30.0)
        self.assertEqual(counts["seconds_median"], {"before": 8.5, "after": 8.5})
        self.assertEqual((counts["second_starts"], counts["from_second_start"],
                          counts["second_start_seconds_median"]), (0, 0, None))
        self.assertEqual((counts["new_second_starts"], counts["new_second_start_seconds"]),
                         (0, None))

    def test_second_starts_new_to_the_rerun_are_counted_apart(self):
        before = [_row("vgg19", r, 8.5) for r in ("taso", "tensat", "default")]
        before[0]["eqsat"]["descent_start"] = {"seconds": 1.0}
        after = [_row("vgg19", r, 8.5) for r in ("taso", "tensat", "default")]
        for row, seconds in zip(after, (2.0, 3.0, 5.0)):
            row["eqsat"]["descent_start"] = {"seconds": seconds}
        after[2]["eqsat"]["start"] = "descent"
        counts = rerun_list_sources.compare(before, after, "eqsat")
        self.assertEqual((counts["second_starts"], counts["new_second_starts"],
                          counts["from_second_start"]), (3, 2, 1))
        self.assertEqual(counts["new_second_start_seconds"],
                         {"min": 3.0, "median": 4.0, "max": 5.0})
        self.assertEqual(counts["second_start_seconds_median"], 3.0)


class RerunTest(absltest.TestCase):

    def test_eqsat_again_on_a_one_row_file(self):
        tmp = tempfile.mkdtemp()
        source = os.path.join(tmp, "source.json")
        subprocess.run(
            [sys.executable, "benchmarks/search_bench.py", "--graphs=small_cnn",
             "--cost_models=analytic/cpu", "--rules=default", "--alphas=1.0",
             "--budgets=50", "--descents=2", "--eqsat_node_limit=3000",
             "--eqsat_ilp_time_limit=2", f"--out_json={source}",
             f"--out_md={tmp}/source.md"],
            check=True, cwd=_ROOT, capture_output=True, timeout=300)
        settings = os.path.join(tmp, "settings.json")
        with open(settings, "w") as f:
            json.dump({"source": {"benchmark_json": [source]}}, f)
        done = subprocess.run(
            [sys.executable, "benchmarks/rerun_list_sources.py", f"--settings={settings}",
             f"--out_dir={tmp}/rerun", "--workers=1"],
            cwd=_ROOT, capture_output=True, text=True, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        (line,) = done.stdout.splitlines()
        report = json.loads(line)
        # small_cnn saturates: the same graph again, below nothing.
        self.assertEqual((report["rows"], report["same"], report["above_greedy"]), (1, 1, 0))
        with open(os.path.join(tmp, "rerun", "source.json")) as f:
            (row,) = json.load(f)
        with open(source) as f:
            (old,) = json.load(f)
        self.assertEqual(row["eqsat"]["config"]["node_limit"], 3000)   # the file's limits
        self.assertEqual(row["greedy"], old["greedy"])                  # kept, not rerun
        self.assertNotEqual(row["eqsat"]["seconds"], old["eqsat"]["seconds"])  # rerun


if __name__ == "__main__":
    absltest.main()
