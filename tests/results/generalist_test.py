"""xflowrl.results.generalist: the generalist's result.json and measured.json
as versioned records, laid out as the entry points have always written them."""

import json
import os
import shutil
import tempfile

from absl.testing import absltest

from xflowrl.results import RecordError
from xflowrl.results.generalist import (
    FinetuneGraph,
    FinetunedRun,
    GeneralistRun,
    HeldOutTimings,
    RouteSummary,
    ScratchRun,
    TimedGraph,
    TimedVariant,
    ZeroShotRow,
    ZeroShotSummary,
    agent_runs,
)
from xflowrl.results.records import to_plain
from xflowrl.results.runs import RoundController, WorldModelRound


def _row(graph="g", policy_ms=0.8):
    return ZeroShotRow(graph=graph, ops=10, initial_ms=1.0, policy_ms=policy_ms, greedy_ms=0.9,
                       taso_ms=None, random_ms=1.1, policy_seconds=0.1, greedy_seconds=0.2,
                       taso_seconds=None, steps=5, policy_applied=[["fuse", 3]])


def _run(seed=0, agent="mf", route=None, history=()):
    scratch = ScratchRun(episodes=30, interactions=400, greedy_cost_ms=0.9,
                         best_training_cost_ms=0.88, change=-12.0, cheapest_graph_ms=0.87,
                         cheapest_graph_change=-13.0, steps_to_own_result=None,
                         steps_to_own_cheapest_graph=200, generalist_route=route)
    tuned = FinetunedRun(episodes=3, interactions=30, lr_scale=0.1, greedy_cost_ms=0.95,
                         best_training_cost_ms=0.93, change=-7.0, cheapest_graph_ms=0.92,
                         cheapest_graph_change=-8.0, steps_to_reach=None,
                         steps_to_reach_cheapest_graph=12)
    return GeneralistRun(
        agent=agent, cost_model="analytic/v100", rules="default", seed=seed, episodes=10,
        interactions=86, train_seconds=3.0, eval_seconds=1.0, training_graphs=["a", "b"],
        held_out=[_row()], zero_shot=ZeroShotSummary(1, 0.0, 2.0, 0.0, 1.0, 0.0, 0.5),
        finetune=[FinetuneGraph(graph="g", initial_ms=1.0, finetuned=[tuned], scratch=scratch)],
        policy="p", commit="abc", history=list(history))


class GeneralistRunTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="generalist_test_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def test_the_layout_is_the_entry_point_s_in_its_order(self):
        value = _run().to_json()
        self.assertEqual(list(value), [
            "schema", "schema_version", "agent", "cost_model", "rules", "seed", "episodes",
            "interactions", "train_seconds", "eval_seconds", "training_graphs", "held_out",
            "zero_shot", "finetune", "policy", "commit", "history"])
        self.assertEqual(value["schema"], "generalist_run")
        self.assertEqual(list(value["zero_shot"]), [
            "graphs", "within_margin_of_greedy", "margin_points", "above_initial",
            "better_than_greedy", "matches_greedy", "policy_vs_taso_time"])
        (graph,) = value["finetune"]
        self.assertEqual(list(graph), ["graph", "initial_ms", "finetuned", "scratch"])
        self.assertEqual(list(graph["finetuned"][0])[:3], ["episodes", "interactions", "lr_scale"])
        # Not reached is null, kept; a route only where the generalist had one.
        self.assertIsNone(graph["scratch"]["steps_to_own_result"])
        self.assertNotIn("generalist_route", graph["scratch"])
        self.assertEqual(value["held_out"][0]["policy_applied"], [["fuse", 3]])

    def test_round_trips_through_its_file(self):
        route = RouteSummary(steps=2, log_prob=-1.5, off_greedy=1, new_xfers=[("a", -1.0)],
                             route=[["a", 1, -0.5, -0.5, False, 0.9]])
        run = _run(route=route)
        path = run.save(os.path.join(self.tmp, "seed0", "result.json"))
        loaded = GeneralistRun.load(path)
        self.assertEqual(loaded.finetune[0].scratch.generalist_route.new_xfers, [["a", -1.0]])
        self.assertEqual(loaded.held_out, run.held_out)
        self.assertEqual(loaded.zero_shot, run.zero_shot)
        self.assertEqual(loaded.finetune[0].finetuned, run.finetune[0].finetuned)
        self.assertAlmostEqual(loaded.held_out[0].policy_change, -20.0)

    def test_a_file_from_before_the_record_is_refused(self):
        value = _run().to_json()
        del value["schema"], value["schema_version"]
        path = os.path.join(self.tmp, "seed0", "result.json")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            json.dump(value, f)
        with self.assertRaisesRegex(RecordError, "run again"):
            GeneralistRun.load(path)

    def test_the_model_based_agent_s_history_reads_as_its_rounds(self):
        controller = RoundController(episodes=8, real_return=1.0, predicted_return=0.5,
                                     imagined_return=4.0, relative_cost=0.9)
        row = to_plain(WorldModelRound(round=1, real_steps=10, collection="controller",
                                       collected_return=0.0, vocabulary_known=5,
                                       vocabulary_full=5, train_total=1.0, train_latent_nll=1.0,
                                       held_out={"nll": 2.0}, controller=controller))
        self.assertIn("controller_imagined_return", row)  # flat, as the agent's state holds it
        (round_,) = _run(agent="mb", history=[row]).rounds()
        self.assertEqual(round_.controller, controller)
        self.assertEqual(_run(agent="mf", history=[{"episode": 1}]).rounds(), [])

    def test_agent_runs_reads_both_agents_seeds_in_seed_order(self):
        for seed in (2, 0):
            _run(seed=seed).save(os.path.join(self.tmp, f"seed{seed}", "result.json"))
        _run(seed=1, agent="mb").save(os.path.join(self.tmp, "mb", "seed1", "result.json"))
        runs = agent_runs(self.tmp)
        self.assertEqual([r.seed for r in runs["policy"]], [0, 2])
        self.assertEqual([(r.seed, r.agent) for r in runs["model-based"]], [(1, "mb")])


class HeldOutTimingsTest(absltest.TestCase):

    def test_round_trips_with_its_variants_by_name(self):
        variant = TimedVariant(estimated_ms=1.0, estimated_change=0.0, measured_ms=2.0,
                               measured_min_ms=1.9, measured_max_ms=2.1, measured_change=0.0,
                               graph_key="ab")
        timings = HeldOutTimings([TimedGraph(graph="g", clock="ort/cpu", rounds=2,
                                             variants={"initial": variant})])
        value = json.loads(json.dumps(timings.to_json()))
        self.assertEqual(value["graphs"][0]["variants"]["initial"]["measured_ms"], 2.0)
        self.assertEqual(HeldOutTimings.from_json(value), timings)


if __name__ == "__main__":
    absltest.main()
