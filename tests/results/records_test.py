"""xflowrl.results.records and the run records: versioned JSON written and
read by the same code; files from before records, or of another version,
refused."""

import json
import os
import shutil
import tempfile

from absl.testing import absltest
import numpy as np

from tests.results import fixtures
from xflowrl.results import (
    Measurement,
    ModelBasedRun,
    ModelFreeRun,
    RealSteps,
    RecordError,
    WorldModelRound,
)
from xflowrl.results.measurement import ClockTiming, SweepTiming, TimedGraph
from xflowrl.results.sweep import SweepCell, SweepResult, SweepRow, SweepSeed


class RecordTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="records_test_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def test_model_free_run_round_trips_with_its_schema_first(self):
        run = fixtures.mf_run(seed=3, cost=91.5)
        value = run.to_json()
        self.assertEqual(list(value)[:3], ["schema", "schema_version", "graph"])
        self.assertEqual(value["schema"], "model_free_run")
        self.assertEqual(value["schema_version"], ModelFreeRun.VERSION)
        self.assertNotIn("onnx", value)  # only where the run optimised a model file
        self.assertEqual(ModelFreeRun.from_json(value), run)
        path = run.save(os.path.join(self.tmp, "a", "result.json"))
        self.assertEqual(ModelFreeRun.load(path), run)
        with open(path) as f:
            self.assertEqual(json.load(f), value)
        self.assertIsNone(ModelFreeRun.load(os.path.join(self.tmp, "missing.json")))

    def test_onnx_written_where_given(self):
        run = fixtures.mf_run()
        run.onnx = "my_model.onnx"
        value = run.to_json()
        self.assertEqual(list(value)[-1], "onnx")
        self.assertEqual(ModelFreeRun.from_json(value).onnx, "my_model.onnx")

    def test_model_based_run_round_trips(self):
        run = fixtures.mb_run(seed=1, cost=80.0)
        value = json.loads(json.dumps(run.to_json()))
        back = ModelBasedRun.from_json(value)
        self.assertEqual(back, run)
        self.assertEqual(back.controller["greedy"].cheapest_cost, 80.0)
        self.assertEqual(back.world_model.rounds[0].held_out["reward_mse"], 0.5)
        self.assertEqual(back.real_steps.total, 200 + 10 + 5)

    def test_refuses_another_schema_another_version_and_unknown_keys(self):
        value = fixtures.mf_run().to_json()
        with self.assertRaisesRegex(RecordError, "a 'model_free_run' record, not "
                                                 "'model_based_run'"):
            ModelBasedRun.from_json(value)
        for version in (ModelFreeRun.VERSION - 1, ModelFreeRun.VERSION + 1, "2"):
            with self.assertRaisesRegex(RecordError, f"^train_mf/result.json: model_free_run "
                                        f"version {version!r}; this code reads version "
                                        f"{ModelFreeRun.VERSION} only: run again to write it "
                                        "anew$"):
                ModelFreeRun.from_json(dict(value, schema_version=version),
                                       where="train_mf/result.json")
        with self.assertRaisesRegex(RecordError, r"has no fields \['surprise'\]"):
            ModelFreeRun.from_json(dict(value, surprise=1))
        del value["agent_cost_ms"]
        with self.assertRaisesRegex(RecordError, r"lacks \['agent_cost_ms'\]"):
            ModelFreeRun.from_json(value)

    def test_files_from_before_records_are_refused(self):
        value = fixtures.mf_run().to_json()
        del value["schema"], value["schema_version"]
        fixtures.assert_legacy_refused(self, ModelFreeRun, value, "train_mf", "result.json")
        # Without a version but with the schema, or the other way round.
        for key in ("schema", "schema_version"):
            with self.assertRaisesRegex(RecordError, "^r.json: no 'schema' or 'schema_version' "
                                        r"\(version 0"):
                ModelFreeRun.from_json(dict(value, **{key: fixtures.mf_run().to_json()[key]}),
                                       where="r.json")

    def test_a_current_file_missing_an_optional_field_is_refused(self):
        value = fixtures.mf_run().to_json()
        del value["optimize_seconds"]
        with self.assertRaisesRegex(RecordError, r"lacks \['optimize_seconds'\]"):
            ModelFreeRun.from_json(value)

    def test_numpy_numbers_are_written_as_floats(self):
        run = fixtures.mf_run()
        run.agent_cost_ms = np.float32(0.5)
        path = run.save(os.path.join(self.tmp, "result.json"))
        self.assertEqual(ModelFreeRun.load(path).agent_cost_ms, 0.5)

    def test_real_steps_total(self):
        steps = RealSteps(world_model_rollouts=7, held_out_rollouts=2, round_evaluations=3,
                          evaluation=4, lockstep_dream=5)
        self.assertEqual(steps.total, 21)
        value = fixtures.mb_run().to_json()
        del value["real_steps"]["round_evaluations"]  # a run from before it was counted
        with self.assertRaisesRegex(RecordError, r"real_steps: RealSteps lacks "
                                                 r"\['round_evaluations'\]"):
            ModelBasedRun.from_json(value)


class WorldModelRoundTest(absltest.TestCase):

    # The agent's row on one graph: the controller's cost there; on several,
    # how many graphs its relative cost averages over.
    STATE_ROW = {"round": 2, "real_steps": 300, "collection": "controller",
                 "collected_return": 0.25, "vocabulary_known": 5, "vocabulary_full": False,
                 "train_total": 1.5, "train_latent_nll": 1.25, "held_out_latent_nll": 1.0,
                 "held_out_reward_mse": 0.01, "held_out_xfer_mask_accuracy": 0.9,
                 "controller_episodes": 64, "controller_real_return": 0.1,
                 "controller_predicted_return": 0.2, "controller_imagined_return": 0.3,
                 "controller_relative_cost": 0.85, "controller_cost_ms": 9.0,
                 "controller_cheapest_cost_ms": 8.5}

    def test_the_agents_row_round_trips_flat_in_its_order(self):
        r = WorldModelRound.from_state(self.STATE_ROW)
        self.assertEqual(r.held_out, {"latent_nll": 1.0, "reward_mse": 0.01,
                                      "xfer_mask_accuracy": 0.9})
        self.assertEqual(r.controller.cheapest_cost_ms, 8.5)
        self.assertEqual(r.controller.imagined_return, 0.3)
        self.assertEqual(list(r._fields_to_json().items()), list(self.STATE_ROW.items()))

    def test_rounds_without_a_controller_on_several_graphs_and_from_older_agents(self):
        row = {k: v for k, v in self.STATE_ROW.items() if not k.startswith("controller_")}
        r = WorldModelRound.from_state(row)
        self.assertIsNone(r.controller)
        self.assertEqual(r._fields_to_json(), row)
        several = {k: v for k, v in self.STATE_ROW.items()
                   if k not in ("controller_cost_ms", "controller_cheapest_cost_ms")}
        several["controller_graphs"] = 8
        r = WorldModelRound.from_state(several)
        self.assertEqual((r.controller.graphs, r.controller.cost_ms), (8, None))
        self.assertEqual(list(r._fields_to_json().items()), list(several.items()))
        # An older agent's row (no relative cost) is refused.
        older = {k: v for k, v in self.STATE_ROW.items() if k != "controller_relative_cost"}
        with self.assertRaisesRegex(RecordError, r"controller: RoundController lacks "
                                                 r"\['relative_cost'\]"):
            WorldModelRound.from_state(older)
        with self.assertRaisesRegex(RecordError, "lacks"):
            WorldModelRound.from_state({k: v for k, v in self.STATE_ROW.items()
                                        if k != "controller_real_return"})

    def test_an_unknown_key_is_refused(self):
        with self.assertRaisesRegex(RecordError, r"no fields \['novel'\]"):
            WorldModelRound.from_state(dict(self.STATE_ROW, novel=1))


class MeasurementTest(absltest.TestCase):

    def test_round_trip_and_medians(self):
        def timed(key, ms):
            return TimedGraph(graph_key=key, ops=3, estimated_ms=1.0, measured={
                "ort/cpu": ClockTiming(median_ms=ms, q1_ms=ms - 1, q3_ms=ms + 1, min_ms=ms - 2,
                                       max_ms=ms + 2, rounds_ms=[ms])})
        m = Measurement(graph="bert", setting="gpu", cost_model="analytic/v100",
                        settings={"rounds": 1}, seconds=2.0,
                        variants={"original": timed("a", 10.0), "greedy": timed("b", 9.0)})
        value = m.to_json()
        self.assertNotIn("sweep", value)
        self.assertEqual(Measurement.from_json(json.loads(json.dumps(value))), m)
        self.assertEqual(m.median_ms("greedy", "ort/cpu"), 9.0)
        self.assertIsNone(m.median_ms("greedy", "tf/cpu"))
        self.assertIsNone(m.median_ms("taso", "ort/cpu"))
        m.sweep = [SweepTiming(temperature=0.5, seeds=[timed("c", 8.0)])]
        self.assertEqual(Measurement.from_json(m.to_json()).sweep[0].seeds[0].graph_key, "c")

    # reproduce.py's measured/result.json before the record: a plain object
    # (the same keys, no schema or version).
    LEGACY = {"graph": "bert", "setting": "gpu", "cost_model": "analytic/v100",
              "settings": {"runtimes": "ort", "rounds": 1, "inputs": {"mf": [["fuse", 1]]}},
              "seconds": 1.5,
              "variants": {"original": {"graph_key": "a", "ops": 3, "estimated_ms": 1.0,
                                        "measured": {"ort/cpu": {
                                            "median_ms": 10.0, "q1_ms": 9.0, "q3_ms": 11.0,
                                            "min_ms": 8.0, "max_ms": 12.0,
                                            "rounds_ms": [10.0]}}}},
              "sweep": [{"temperature": 0.5, "seeds": []}]}

    def test_a_file_from_before_the_record_is_refused(self):
        fixtures.assert_legacy_refused(self, Measurement, self.LEGACY, "measured",
                                       "result.json")

    def test_its_keys_with_the_schema_read(self):
        m = Measurement.from_json(dict(self.LEGACY, schema="measurement", schema_version=1))
        self.assertEqual(m.median_ms("original", "ort/cpu"), 10.0)
        self.assertEqual(m.settings, self.LEGACY["settings"])
        self.assertEqual(m.sweep, [SweepTiming(temperature=0.5, seeds=[])])
        self.assertIsNone(Measurement.load(os.path.join(tempfile.mkdtemp(), "none.json")))

    def test_another_schema_a_newer_version_and_unknown_keys_are_refused(self):
        value = dict(self.LEGACY, schema="measurement", schema_version=1)
        with self.assertRaisesRegex(RecordError, "a 'model_free_run' record, not 'measurement'"):
            Measurement.from_json(dict(value, schema="model_free_run"))
        with self.assertRaisesRegex(RecordError, "reads version 1 only"):
            Measurement.from_json(dict(value, schema_version=2))
        with self.assertRaisesRegex(RecordError, r"no fields \['extra'\]"):
            Measurement.from_json(dict(value, extra=1))
        with self.assertRaisesRegex(RecordError, "lacks"):
            Measurement.from_json({k: v for k, v in value.items() if k != "variants"})


class SweepSeedTest(absltest.TestCase):

    # A seed's cells.json before the record (temperature_sweep.py's plain object).
    LEGACY = {"seed": 1, "initial_cost_ms": 10.0,
              "cells": [{"temperature": 0.5, "world_model": -1.5, "real": -2.0,
                         "applied": [["fuse", 3]], "invalid_actions": 0}],
              "seconds": 4.0}

    def test_a_file_from_before_the_record_is_refused(self):
        fixtures.assert_legacy_refused(self, SweepSeed, self.LEGACY, "seed_1", "cells.json")

    def test_round_trip(self):
        seed = SweepSeed.from_json(dict(self.LEGACY, schema="temperature_sweep_seed",
                                        schema_version=1))
        self.assertEqual(SweepSeed.from_json(seed.to_json()), seed)
        self.assertEqual(seed.cells, [SweepCell(temperature=0.5, world_model=-1.5, real=-2.0,
                                                applied=[["fuse", 3]], invalid_actions=0)])

    def test_another_schema_and_unknown_keys_are_refused(self):
        value = dict(self.LEGACY, schema="temperature_sweep_seed", schema_version=1)
        with self.assertRaisesRegex(RecordError, "a 'measurement' record, not "
                                    "'temperature_sweep_seed'"):
            SweepSeed.from_json(dict(value, schema="measurement"))
        with self.assertRaisesRegex(RecordError, r"cells\[0\]: SweepCell has no fields"):
            SweepSeed.from_json(dict(value, cells=[dict(self.LEGACY["cells"][0], extra=1)]))


class SweepResultTest(absltest.TestCase):

    # The sweep's result.json as temperature_sweep.py wrote it before the
    # record (a plain object, its keys in this order).
    LEGACY = {"graph": "bert", "cost_model": "analytic/v100", "seeds": 2, "dream_episodes": 64,
              "rules": "default", "max_locations": 50, "initial_cost_ms": 10.0,
              "seconds": 12.0,
              "rows": [{"temperature": 0.5, "world_model_mean": -1.0, "world_model_std": 0.5,
                        "real_mean": -2.0, "real_std": 1.0, "world_model": [-1.5, -0.5],
                        "real": [-3.0, -1.0], "applied": [[["fuse", 3]], []]}],
              "world_model": {"hidden": 8}}
    # An older sweep's: before `cost_model`, `rules`, `max_locations` and the
    # rows' `applied` were written (with a schema: what a version-1 file lacking
    # them would be).
    OLDEST = {"graph": "bert", "seeds": 1, "dream_episodes": 8, "initial_cost_ms": 10.0,
              "seconds": 3.0,
              "rows": [{"temperature": 1.0, "world_model_mean": -1.0, "world_model_std": 0.0,
                        "real_mean": -2.0, "real_std": 0.0, "world_model": [-1.0],
                        "real": [-2.0]}],
              "world_model": {"hidden": 8}}

    def test_round_trip(self):
        result = SweepResult(
            graph="bert", cost_model="fitted/cpu", seeds=1, dream_episodes=8, rules="default",
            max_locations=50, initial_cost_ms=10.0, seconds=1.0, world_model={"hidden": 8},
            rows=[SweepRow(temperature=0.5, world_model_mean=-1.0, world_model_std=0.0,
                           real_mean=-2.0, real_std=0.0, world_model=[-1.0], real=[-2.0],
                           applied=[[["fuse", 3]]])])
        path = result.save(os.path.join(tempfile.mkdtemp(), "result.json"))
        self.addCleanup(shutil.rmtree, os.path.dirname(path), ignore_errors=True)
        self.assertEqual(SweepResult.load(path), result)
        with open(path) as f:   # the keys in the order the plain object had them
            self.assertEqual(list(json.load(f)), ["schema", "schema_version", *self.LEGACY])

    def test_files_from_before_the_record_are_refused(self):
        for legacy in (self.LEGACY, self.OLDEST):
            fixtures.assert_legacy_refused(self, SweepResult, legacy, "temperature_sweep",
                                           "result.json")
        sweep = SweepResult.from_json(dict(self.LEGACY, schema="temperature_sweep",
                                           schema_version=1))
        self.assertEqual(sweep.rows[0].applied, [[["fuse", 3]], []])
        oldest = dict(self.OLDEST, schema="temperature_sweep", schema_version=1)
        with self.assertRaisesRegex(RecordError, r"SweepResult lacks \['cost_model', 'rules', "
                                                 r"'max_locations'\]"):
            SweepResult.from_json(oldest)

    def test_another_schema_a_newer_version_and_unknown_keys_are_refused(self):
        value = dict(self.LEGACY, schema="temperature_sweep", schema_version=1)
        fixtures.assert_refuses_other_schema_and_newer_version(self, SweepResult, value,
                                                               "temperature_sweep_seed")
        with self.assertRaisesRegex(RecordError, r"rows\[0\]: SweepRow has no fields"):
            SweepResult.from_json(dict(value, rows=[dict(self.LEGACY["rows"][0], extra=1)]))
        with self.assertRaisesRegex(RecordError, r"SweepResult lacks \['rows'\]"):
            SweepResult.from_json({k: v for k, v in value.items() if k != "rows"})


class ImportTest(absltest.TestCase):

    def test_the_package_needs_neither_tensorflow_nor_the_engine(self):
        import subprocess  # pylint: disable=import-outside-toplevel
        import sys  # pylint: disable=import-outside-toplevel
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = ("import sys, xflowrl.results; print(sorted(m for m in sys.modules if m.split('.')"
                "[0] in ('tensorflow', 'matplotlib', 'onnx') or m.startswith(('xflowrl._engine', "
                "'xflowrl.engine'))))")
        out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                             text=True, check=True, env=dict(os.environ, PYTHONPATH=root))
        self.assertEqual(out.stdout.strip(), "[]")


if __name__ == "__main__":
    absltest.main()
