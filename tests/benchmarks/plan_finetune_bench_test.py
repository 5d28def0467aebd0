"""benchmarks/plan_finetune_bench.py: the pairs file it reads, and one pair
planned at a small budget under each prior and action space, in this
process (the benchmark's functions), then `--quick` as a user runs it."""

import json
import os
import sys

from absl.testing import absltest

from xflowrl import corpus

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

import plan_finetune_bench as bench  # pylint: disable=wrong-import-position
from tests import entry_point


def _pairs():
    with open(os.path.join(_ROOT, "benchmarks", "data", "finetune_pairs.json")) as f:
        return json.load(f)


class PairsTest(absltest.TestCase):

    def test_nine_held_out_pairs_three_seeds_each(self):
        data = _pairs()
        self.assertLen(data["pairs"], 9)
        held_out = {spec.name for spec in corpus.specs("held_out")}
        for pair in data["pairs"]:
            self.assertIn(pair["graph"], held_out)
            self.assertLess(pair["scratch_change_pct"], 0.0)
            self.assertGreater(pair["scratch_steps"], 0)
        self.assertEqual(sorted(p["seed"] for p in data["pairs"]), [0, 0, 0, 1, 1, 1, 2, 2, 2])


class RunPairTest(absltest.TestCase):

    def test_rows_say_what_was_reached_and_counted(self):
        data = _pairs()
        vit = next(p for p in data["pairs"] if p["graph"].startswith("vit/"))
        env = bench.environment(vit["graph"], data)
        runs = [bench.run_pair(vit, env, prior, space, 30)
                for prior in ("xfer", "policy:shipped") for space in ("deployed", "thesis")]
        rows = [row for row, _ in runs]
        for row, graph in runs:
            self.assertAlmostEqual(
                row["change_pct"], 100.0 * (graph.cost(env.cost_model) / env.initial_cost - 1.0))
            # The handed-over graph computes the original's outputs, and
            # "reached" is the change and the budget, both.
            self.assertIs(row["same_outputs"], True, row)
            self.assertGreaterEqual(row["real_steps"], 1)
            self.assertLessEqual(row["change_pct"], 0.0)
            self.assertEqual(row["reached"],
                             row["change_pct"] <= vit["scratch_change_pct"] + bench.TOLERANCE_PT
                             and row["real_steps"] <= 30)
            if row["space"] == "thesis":
                self.assertEqual(row["rule_enumerations"], 0)
                self.assertEqual(row["engine_calls_to_best"], row["real_steps_to_best"])
            else:
                self.assertGreaterEqual(row["engine_calls_to_best"], row["real_steps_to_best"])
            # The budget counted every engine call; "all counted" is when
            # the result was first seen.
            self.assertEqual(row["budget_counts"], "engine_calls")
            self.assertEqual(row["within_budget_all_counted"], row["engine_calls_to_best"] <= 30)
        # Counting expansions alone, the deployed space runs on past the
        # budget of engine calls.
        counted = rows[0]
        free, _ = bench.run_pair(vit, env, "xfer", "deployed", 30, count_enumerations=False)
        self.assertEqual((counted["prior"], counted["space"]), ("xfer", "deployed"))
        self.assertEqual(free["budget_counts"], "expansions")
        self.assertGreater(free["real_steps"] + free["rule_enumerations"],
                           counted["real_steps"] + counted["rule_enumerations"])
        out = bench.summary(rows)
        self.assertEqual(set(out), {"xfer / deployed", "xfer / thesis",
                                    "policy:shipped / deployed", "policy:shipped / thesis"})
        self.assertEqual(sum(s["reached"] for s in out.values()),
                         sum(r["reached"] for r in rows))
        self.assertTrue(all(s["all_compute_the_original"] for s in out.values()))

    def test_learned_row_counts_self_play_into_the_budget(self):
        data = _pairs()
        vit = next(p for p in data["pairs"] if p["graph"].startswith("vit/"))
        env = bench.environment(vit["graph"], data)
        row, graph = bench.run_pair(vit, env, "learned", "thesis", 30, data,
                                    bench.Learned(iterations=1, steps=2, compiled=False))
        self.assertAlmostEqual(
            row["change_pct"], 100.0 * (graph.cost(env.cost_model) / env.initial_cost - 1.0))
        self.assertIs(row["same_outputs"], True, row)
        self.assertEqual(row["self_play_real_steps"], 20)   # two thirds of 30
        self.assertGreater(row["real_steps"], row["self_play_real_steps"])  # + the final run
        self.assertLessEqual(row["real_steps"], 30)
        self.assertBetween(row["real_steps_to_best"], 1, row["real_steps"])
        self.assertLen(row["learning"], 1)

    def test_quick_as_a_user_runs_it(self):
        done = entry_point.run([sys.executable, os.path.join(_ROOT, "benchmarks",
                                                            "plan_finetune_bench.py"), "--quick"],
                               capture_output=True, text=True, cwd=_ROOT, timeout=600)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        summary = json.loads(done.stdout)
        self.assertEqual(summary["xfer / deployed"]["pairs"], 1)

    def test_baselines_and_measured_times_beside_the_planner(self):
        data = _pairs()
        env = bench.environment("vit/l2h128p64", data)
        graphs = {"initial": env.initial_graph, **bench.baselines(env)}
        cost = {k: g.cost(env.cost_model) for k, g in graphs.items()}
        # Greedy improves on the input; TASO's search is never above greedy here.
        self.assertLess(cost["greedy"], cost["initial"])
        self.assertLessEqual(cost["taso"], cost["greedy"] + 1e-9)
        timed = bench.measure(env, graphs, rounds=1)
        self.assertEqual(set(timed), set(graphs))
        self.assertEqual(timed["initial"][1], 0.0)
        for ms, _ in timed.values():
            self.assertGreater(ms, 0.0)


if __name__ == "__main__":
    absltest.main()
