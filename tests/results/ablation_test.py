"""xflowrl.results.ablation: the two ablations' results as records, their
summaries from the runs' records, and their tables."""

import dataclasses
import json
import os
import shutil
import tempfile

from absl.testing import absltest

from tests.results import fixtures
from xflowrl.results import (
    AblationVariant,
    BaselineMs,
    EpisodeLog,
    ModelBasedAblation,
    ObservationAblation,
    Reach,
    RealSteps,
    RecordError,
    Spread,
    first_reaching,
    summarize_run,
    summarize_variant,
)

# Per training episode: its final cost (ms) and steps.
LOG = EpisodeLog([1, 2, 3, 4], [3.9, 3.5, 3.0, 3.2], [4, 5, 6, 5])


def _mf(seed=0, cost=3.2, variant="full", wall=None):
    return dataclasses.replace(
        fixtures.mf_run(seed, cost, "small_cnn"), cost_features=variant, episodes=4,
        initial_cost_ms=4.0, best_training_cost_ms=3.0, steps_to_final_cost=15,
        interactions=20, train_seconds=5.0, wall_seconds=wall)


class ObservationRunTest(absltest.TestCase):

    def test_first_reaching(self):
        self.assertEqual(first_reaching(LOG, 3.5), Reach(episode=2, interactions=9))
        self.assertEqual(first_reaching(LOG, 3.0), Reach(episode=3, interactions=15))
        self.assertIsNone(first_reaching(LOG, 2.9))
        self.assertIsNone(first_reaching(EpisodeLog([], [], []), 10.0))

    def test_summarize_run(self):
        run = summarize_run(_mf(wall=12.5), LOG, greedy_cost_ms=3.2)
        self.assertEqual((run.cost_features, run.seed, run.agent_cost_ms), ("full", 0, 3.2))
        self.assertAlmostEqual(run.agent_change_pct, -20.0)
        self.assertAlmostEqual(run.best_training_change_pct, -25.0)
        self.assertEqual(run.last_episodes, 4)
        self.assertAlmostEqual(run.last_mean_cost_ms, 3.4)
        self.assertAlmostEqual(run.last_mean_change_pct, -15.0)
        self.assertEqual(run.to_best, Reach(3, 15))
        self.assertEqual(run.to_greedy, Reach(3, 15))
        self.assertEqual((run.episodes, run.interactions, run.train_seconds, run.wall_seconds),
                         (4, 20, 5.0, 12.5))
        self.assertEqual(run.agent_applied, [["mf", 0]])
        last_two = summarize_run(_mf(), LOG, greedy_cost_ms=2.0, last=2)
        self.assertEqual(last_two.last_episodes, 2)
        self.assertAlmostEqual(last_two.last_mean_cost_ms, 3.1)
        self.assertIsNone(last_two.to_greedy)


class ObservationAblationTest(absltest.TestCase):

    # observation_ablation.py's result.json before the record (a plain
    # object, these keys in this order; the baselines a Baselines record).
    LEGACY = {"graph": "small_cnn", "episodes": 4, "command": "python experiments/...",
              "initial_cost_ms": 4.0,
              "baselines": {"schema": "baselines", "schema_version": 1, "max_locations": 50,
                            "greedy": {"cost_ms": 3.2, "seconds": 0.1, "steps": 4,
                                       "applied": [["fuse", 1]]},
                            "taso": None, "random": {"cost_ms": 4.5, "std_ms": 0.1}},
              "runs": [{"last_episodes": 4, "last_mean_cost_ms": 3.4,
                        "last_mean_change_pct": -15.0, "cost_features": "full", "seed": 0,
                        "agent_cost_ms": 3.2, "agent_change_pct": -20.0,
                        "best_training_cost_ms": 3.0, "best_training_change_pct": -25.0,
                        "steps_to_final_cost": 15, "to_best": {"episode": 3, "interactions": 15},
                        "to_greedy": None, "episodes": 4, "interactions": 20,
                        "train_seconds": 5.0, "wall_seconds": None,
                        "agent_applied": [["mf", 0]]}]}

    def _ablation(self):
        runs = [summarize_run(_mf(0, 3.2, "full"), LOG, 3.2),
                summarize_run(_mf(1, 3.6, "full", wall=12.4), LOG, 2.0),
                summarize_run(_mf(0, 3.2, "none"), LOG, 3.2)]
        return ObservationAblation(graph="small_cnn", episodes=4, command="python x.py",
                                   initial_cost_ms=4.0, baselines={"greedy": {}}, runs=runs)

    def test_round_trip(self):
        ablation = self._ablation()
        tmp = tempfile.mkdtemp(prefix="ablation_test_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        path = ablation.save(os.path.join(tmp, "result.json"))
        self.assertEqual(ObservationAblation.load(path), ablation)
        with open(path) as f:
            value = json.load(f)
        self.assertEqual(list(value), ["schema", "schema_version", *self.LEGACY])
        self.assertEqual(list(value["runs"][0]), list(self.LEGACY["runs"][0]))
        self.assertIsNone(value["runs"][0]["wall_seconds"])   # null, not left out
        self.assertIsNone(value["runs"][1]["to_greedy"])

    def test_a_file_from_before_the_record_is_refused(self):
        fixtures.assert_legacy_refused(self, ObservationAblation, self.LEGACY, "small_cnn",
                                       "observation_ablation", "result.json")

    def test_its_keys_with_the_schema_read(self):
        old = ObservationAblation.from_json(dict(self.LEGACY, schema="observation_ablation",
                                                 schema_version=1))
        self.assertEqual(old.runs[0].to_best, Reach(episode=3, interactions=15))
        self.assertIsNone(old.runs[0].to_greedy)
        self.assertIsNone(old.runs[0].wall_seconds)

    def test_another_schema_a_newer_version_and_unknown_keys_are_refused(self):
        value = dict(self.LEGACY, schema="observation_ablation", schema_version=1)
        fixtures.assert_refuses_other_schema_and_newer_version(self, ObservationAblation, value,
                                                               "mb_ablation")
        with self.assertRaisesRegex(RecordError, r"runs\[0\]: ObservationRun has no fields"):
            ObservationAblation.from_json(dict(value, runs=[dict(self.LEGACY["runs"][0],
                                                                 extra=1)]))
        with self.assertRaisesRegex(RecordError, r"runs\[0\].to_best: Reach has no fields"):
            ObservationAblation.from_json(dict(value, runs=[dict(
                self.LEGACY["runs"][0], to_best={"episode": 3, "interactions": 15, "x": 1})]))
        with self.assertRaisesRegex(RecordError, r"ObservationRun lacks \['wall_seconds'\]"):
            ObservationAblation.from_json(dict(value, runs=[{
                k: v for k, v in self.LEGACY["runs"][0].items() if k != "wall_seconds"}]))

    def test_markdown(self):
        text = self._ablation().markdown(BaselineMs(greedy=3.2, taso=None, random=4.5))
        self.assertTrue(text.startswith(
            "# Observation ablation on small_cnn (analytic cost, 4 episodes)\n\n"
            "Initial cost 4.0000 ms. Command: `python x.py`.\n\n"))
        self.assertIn("| mean of last 4 |", text)
        self.assertIn("\n| full | 0 | 3.2000 | -20.00% | -25.00% | -15.00% | 15 | 3 (15) | "
                      "3 (15) | 5 |  |\n", text)
        self.assertIn("\n| full | 1 | 3.6000 | -10.00% | -25.00% | -15.00% | 15 | 3 (15) | "
                      "never | 5 | 12 |\n", text)
        # Per variant: seed 0's agent and training reach greedy's cost, seed 1's not.
        self.assertIn("\n| full | 2 | -15.00% | -15.00% | 1/2 | 1/2 |\n", text)
        self.assertIn("\n| none | 1 | -20.00% | -15.00% | 1/1 | 1/1 |\n", text)
        self.assertTrue(text.endswith("|---|---|---|\n| greedy | 3.2000 | -20.00% |\n"
                                      "| random | 4.5000 | +12.50% |\n"))   # no TASO row


class BaselineMsTest(absltest.TestCase):

    def test_of_a_baselines_record(self):
        from xflowrl.search.record import (  # pylint: disable=import-outside-toplevel
            Baselines,
            GreedyResult,
            RandomResult,
        )
        b = Baselines(greedy=GreedyResult(cost_ms=3.2, seconds=0.1, steps=4, applied=[]),
                      random=RandomResult(cost_ms=4.5, std_ms=0.1, best_ms=4.2, episodes=1),
                      max_locations=50)
        self.assertEqual(BaselineMs.of(b), BaselineMs(greedy=3.2, taso=None, random=4.5))


def _mb(seed, best, greedy=90.0, taso=80.0, random=None, invalid=0):
    evaluation = dataclasses.replace(fixtures.episode(best, [["mb", seed]]),
                                     invalid_actions=invalid)
    run = dataclasses.replace(
        fixtures.mb_run(seed, best), initial_cost_ms=100.0, controller_cost_ms=best + 1.0,
        controller_cheapest_cost_ms=best, max_steps=50, controller={"greedy": evaluation},
        sampled=[evaluation, evaluation],
        real_steps=RealSteps(world_model_rollouts=100, held_out_rollouts=10,
                             round_evaluations=5, evaluation=15, lockstep_dream=7))
    return run, BaselineMs(greedy=greedy, taso=taso, random=random)


class ModelBasedAblationTest(absltest.TestCase):

    # mb_ablation.py's ablation.json before the record (a plain object, these
    # keys in this order; TASO's change absent where a run lacked it).
    LEGACY = {"graph": "bert", "cost_model": "analytic/v100", "rules": "default", "extra": [],
              "variants": {"no_penalty": {
                  "what": "no disagreement penalty", "flags": ["--disagreement_penalty=0"],
                  "seeds": [0, 1], "initial_cost_ms": 100.0,
                  "greedy_episode_change_pct": {"median": -6.5, "min": -7.0, "max": -6.0,
                                                "values": [-7.0, -6.0]},
                  "best_change_pct": {"median": -7.5, "min": -8.0, "max": -7.0,
                                      "values": [-8.0, -7.0]},
                  "greedy_change_pct": {"median": -10.0, "min": -10.0, "max": -10.0,
                                        "values": [-10.0, -10.0]},
                  "invalid_actions": {"median": 0.0, "min": 0.0, "max": 0.0,
                                      "values": [0.0, 0.0]},
                  "real_steps": {"median": 130.0, "min": 130.0, "max": 130.0,
                                 "values": [130.0, 130.0]},
                  "seconds": {"median": 60.5, "min": 60.0, "max": 61.0, "values": [60.0, 61.0]},
                  "max_steps": 50, "eval_masks": "real",
                  "random_change_pct": {"median": 5.5, "min": 5.0, "max": 6.0,
                                        "values": [5.0, 6.0]},
                  "within_1_point_of_greedy": False}}}

    def _variant(self) -> AblationVariant:
        pairs = [_mb(0, 91.0), _mb(1, 89.5, invalid=1), _mb(2, 95.0)]
        return summarize_variant("the agent", ["--x"], [r for r, _ in pairs],
                                 [b for _, b in pairs])

    def test_spread(self):
        s = Spread.of([3.0, -1.0, 2.0])
        self.assertEqual(s, Spread(median=2.0, min=-1.0, max=3.0, values=[3.0, -1.0, 2.0]))
        self.assertEqual(s.cell(), "+2.00 [-1.00, +3.00]")
        self.assertEqual(s.cell(1), "+2.0 [-1.0, +3.0]")

    def test_summarize_variant(self):
        v = self._variant()
        self.assertEqual((v.what, v.flags, v.seeds), ("the agent", ["--x"], [0, 1, 2]))
        for got, want in zip(v.best_change_pct.values, [-9.0, -10.5, -5.0]):
            self.assertAlmostEqual(got, want)
        self.assertAlmostEqual(v.best_change_pct.median, -9.0)
        self.assertAlmostEqual(v.best_change_pct.min, -10.5)
        self.assertAlmostEqual(v.greedy_episode_change_pct.median, -8.0)
        self.assertAlmostEqual(v.greedy_change_pct.median, -10.0)
        self.assertAlmostEqual(v.taso_change_pct.median, -20.0)
        self.assertIsNone(v.random_change_pct)       # no run had the random agent
        # The greedy and two sampled episodes' invalid actions.
        self.assertEqual(v.invalid_actions.values, [0.0, 3.0, 0.0])
        # Without --lockstep's dream steps.
        self.assertEqual(v.real_steps.median, 130.0)
        self.assertEqual(v.seconds.values, [20.0, 21.0, 22.0])
        self.assertEqual((v.max_steps, v.eval_masks), (50, "real"))
        self.assertTrue(v.within_1_point_of_greedy)    # -9.0 against -10.0
        worse = summarize_variant("", [], [_mb(0, 99.0)[0]], [_mb(0, 99.0)[1]])
        self.assertFalse(worse.within_1_point_of_greedy)
        # TASO's change only where every seed's run has it.
        some = [_mb(0, 91.0), _mb(1, 91.0, taso=None, random=101.0)]
        mixed = summarize_variant("", [], [r for r, _ in some], [b for _, b in some])
        self.assertIsNone(mixed.taso_change_pct)

    def test_round_trip_leaves_out_what_a_variant_lacks(self):
        ablation = ModelBasedAblation(graph="bert", cost_model="analytic/v100",
                                      rules="default", extra=["--rounds=2"],
                                      variants={"full": self._variant()})
        value = ablation.to_json()
        self.assertEqual(list(value), ["schema", "schema_version", *self.LEGACY])
        full = value["variants"]["full"]
        self.assertNotIn("random_change_pct", full)
        self.assertNotIn("measured_ort_cpu_change_pct", full)
        self.assertEqual(list(full)[-3:], ["eval_masks", "taso_change_pct",
                                           "within_1_point_of_greedy"])
        self.assertEqual(ModelBasedAblation.from_json(json.loads(json.dumps(value))), ablation)
        ablation.variants["full"].measured_ort_cpu_change_pct = Spread.of([-1.0, -2.0, 0.5])
        ablation.variants["full"].measured_greedy_ort_cpu_change_pct = -3.0
        value = ablation.to_json()
        self.assertEqual(list(value["variants"]["full"])[-3:],
                         ["within_1_point_of_greedy", "measured_ort_cpu_change_pct",
                          "measured_greedy_ort_cpu_change_pct"])
        self.assertEqual(ModelBasedAblation.from_json(value), ablation)

    def test_a_file_from_before_the_record_is_refused(self):
        fixtures.assert_legacy_refused(self, ModelBasedAblation, self.LEGACY, "bert",
                                       "mb_ablation", "ablation.json")

    def test_its_keys_with_the_schema_read(self):
        old = ModelBasedAblation.from_json(dict(self.LEGACY, schema="mb_ablation",
                                                schema_version=1))
        v = old.variants["no_penalty"]
        self.assertIsNone(v.taso_change_pct)
        self.assertEqual(v.random_change_pct.median, 5.5)
        self.assertEqual(v.best_change_pct, Spread(-7.5, -8.0, -7.0, [-8.0, -7.0]))

    def test_another_schema_a_newer_version_and_unknown_keys_are_refused(self):
        value = dict(self.LEGACY, schema="mb_ablation", schema_version=1)
        fixtures.assert_refuses_other_schema_and_newer_version(self, ModelBasedAblation, value,
                                                               "observation_ablation")
        variant = self.LEGACY["variants"]["no_penalty"]
        with self.assertRaisesRegex(RecordError, r"variants.no_penalty: AblationVariant has "
                                    r"no fields \['extra'\]"):
            ModelBasedAblation.from_json(dict(value, variants={"no_penalty": dict(variant,
                                                                                  extra=1)}))
        with self.assertRaisesRegex(RecordError, r"AblationVariant lacks \['seeds'\]"):
            ModelBasedAblation.from_json(dict(value, variants={"no_penalty": {
                k: v for k, v in variant.items() if k != "seeds"}}))

    def test_markdown(self):
        ablation = ModelBasedAblation.from_json(dict(self.LEGACY, schema="mb_ablation",
                                                     schema_version=1))
        full = self._variant()
        full.measured_ort_cpu_change_pct = Spread.of([-1.0, -2.0, 0.5])
        full.measured_greedy_ort_cpu_change_pct = -3.0
        ablation.variants["full"] = full
        text = ablation.markdown()
        self.assertTrue(text.startswith(
            "# Model-based ablation on bert (analytic/v100, default rules)\n\nMedian [min, max] "
            "over seeds of the real cost change (% of the initial cost).\n\n| variant | what |"))
        self.assertIn("\n| no_penalty | no disagreement penalty | -6.50 [-7.00, -6.00] | "
                      "-7.50 [-8.00, -7.00] | -10.00 [-10.00, -10.00] | - | "
                      "+5.50 [+5.00, +6.00] | - | 0 | 130 | 60 |\n", text)
        self.assertTrue(text.endswith(
            "\n| full | the agent | -8.00 [-9.50, -4.00] | -9.00 [-10.50, -5.00] | "
            "-10.00 [-10.00, -10.00] | -20.00 [-20.00, -20.00] | - | "
            "-1.00 [-2.00, +0.50] / -3.00 | 0 | 130 | 21 |\n"))


if __name__ == "__main__":
    absltest.main()
