"""The baselines record: JSON round trips, files of the two producers before
the record (no version) and what it refuses."""

import json

from absl.testing import absltest

from xflowrl import zoo
from xflowrl.engine import XferSet
from xflowrl.engine.cost import cost_model_from_spec
from xflowrl.env import GraphEnv
from xflowrl.results import Record, RecordError
from xflowrl.search import (
    Baselines,
    EqsatResult,
    GreedyResult,
    NO_LOCATION,
    RECORD_VERSION,
    RandomResult,
    TasoResult,
    TracePoint,
    replay_result,
    run_eqsat,
)
from xflowrl.search.record import OLD_VERSION_KEY, VERSION_KEY, record_version

_GREEDY = GreedyResult(cost_ms=3.31, seconds=0.5, steps=2,
                       applied=[("conv_relu_s1_same", 1), ("bias_add_relu", 0)])
_TASO = TasoResult(cost_ms=3.2, seconds=1.5, steps=3,
                   applied=[("conv_relu_s1_same", 1), ("gen_matrix_1171", 250),
                            ("bias_add_relu", 0)],
                   alpha=1.05, budget=100, expansions=100, enqueued=340, initial_cost_ms=4.5,
                   trace=[TracePoint(0, 0.0, 4.5), TracePoint(7, 0.1, 3.2),
                          TracePoint(100, 1.5, 3.2)],
                   max_locations=800)
_RANDOM = RandomResult(cost_ms=4.06, std_ms=0.05, best_ms=4.0, episodes=5, seconds=0.2,
                       steps=1, applied=[("conv_relu_s1_same", 3)])


def _through_a_file(value):
    return json.loads(json.dumps(value))


class RoundTripTest(absltest.TestCase):

    def test_every_field_survives_json(self):
        for record in (Baselines(_GREEDY, _TASO, _RANDOM, max_locations=200),
                       Baselines(_GREEDY, max_locations=50)):
            with self.subTest(taso=record.taso is not None):
                data = _through_a_file(record.to_json())
                self.assertEqual(data[VERSION_KEY], RECORD_VERSION)
                back = Baselines.from_json(data)
                self.assertEqual(back, record)
                self.assertIsInstance(back.greedy.applied[0], tuple)
                if record.taso is None:
                    self.assertIsNone(data["taso"])
                    self.assertIsNone(data["random"])

    def test_equality_saturation_keeps_its_graph(self):
        env = GraphEnv(zoo.get_graph("small_cnn"), XferSet.default(),
                       cost_model_from_spec("analytic/v100"))
        eqsat = run_eqsat(env, time_limit_s=5)
        self.assertIsInstance(eqsat, EqsatResult)
        record = Baselines(_GREEDY, _TASO, _RANDOM, max_locations=200, eqsat=eqsat)
        back = Baselines.from_json(_through_a_file(record.to_json()))
        self.assertEqual(back, record)
        graph = replay_result(env, back.eqsat)
        self.assertAlmostEqual(graph.cost(env.cost_model), eqsat.cost_ms, places=9)
        self.assertLess(eqsat.cost_ms, env.initial_cost)
        self.assertEqual(back.rows()[-1][1], eqsat.cost_ms)
        # A record without it (every file written before) reads as None.
        old = _through_a_file(Baselines(_GREEDY, max_locations=50).to_json())
        del old["eqsat"]
        self.assertIsNone(Baselines.from_json(old).eqsat)

    def test_the_json_keeps_the_keys_readers_of_the_files_use(self):
        data = Baselines(_GREEDY, _TASO, _RANDOM, max_locations=200).to_json()
        self.assertEqual(data["greedy"]["cost_ms"], 3.31)
        self.assertEqual(data["greedy"]["applied"], [["conv_relu_s1_same", 1],
                                                     ["bias_add_relu", 0]])
        self.assertEqual(data["taso"]["applied"][1], ["gen_matrix_1171", 250])
        self.assertEqual(data["taso"]["trace"][1],
                         {"expansions": 7, "seconds": 0.1, "best_cost_ms": 3.2})
        self.assertEqual((data["random"]["cost_ms"], data["random"]["episodes"]), (4.06, 5))

    def test_a_file_with_more_keys_reads_its_record(self):
        # experiments/baselines.py writes the record beside its timings.
        record = Baselines(_GREEDY, _TASO, max_locations=200)
        data = {"graph": "small_cnn", "variants": {}, **record.to_json()}
        self.assertEqual(Baselines.from_json(_through_a_file(data)), record)

    def test_rows(self):
        self.assertEqual(Baselines(_GREEDY, _TASO, _RANDOM).rows(),
                         [("one-step greedy", 3.31),
                          ("TASO search (alpha 1.05, budget 100)", 3.2),
                          ("random agent (mean of 5)", 4.06)])


class OldFilesTest(absltest.TestCase):
    """Files written before the record: no version; TASO's steps are names."""

    def test_run_baselines_dict(self):
        # What run_baselines returned (train_mf/train_mb kept it as "baselines").
        old = {"greedy": {"cost_ms": 3.31, "seconds": 0.5, "steps": 2,
                          "applied": [["conv_relu_s1_same", 1], ["bias_add_relu", 0]]},
               "taso": {"cost_ms": 3.2, "seconds": 1.5, "alpha": 1.05, "budget": 100,
                        "expansions": 100, "applied": ["conv_relu_s1_same", "bias_add_relu"]},
               "random": {"cost_ms": 4.06, "std_ms": 0.05, "best_ms": 4.0, "episodes": 5}}
        got = Baselines.from_json(old)
        self.assertEqual(got.greedy, GreedyResult(3.31, 0.5, 2, [("conv_relu_s1_same", 1),
                                                                 ("bias_add_relu", 0)]))
        self.assertEqual(got.taso.applied, [("conv_relu_s1_same", NO_LOCATION),
                                            ("bias_add_relu", NO_LOCATION)])
        self.assertEqual((got.taso.steps, got.taso.expansions, got.taso.alpha), (2, 100, 1.05))
        self.assertIsNone(got.taso.trace)
        self.assertIsNone(got.taso.enqueued)
        self.assertIsNone(got.taso.max_locations)
        self.assertEqual((got.random.cost_ms, got.random.best_ms, got.random.episodes),
                         (4.06, 4.0, 5))
        self.assertIsNone(got.random.applied)
        self.assertIsNone(got.max_locations)

    def test_experiments_baselines_result(self):
        old = {"graph": "small_cnn", "initial_cost_ms": 4.5,
               "greedy": {"cost_ms": 3.31, "steps": 2, "seconds": 0.5,
                          "applied": [["conv_relu_s1_same", 1], ["bias_add_relu", 0]]},
               "taso": {"cost_ms": 3.2, "initial_cost_ms": 4.5, "alpha": 1.05, "budget": 100,
                        "expansions": 100, "enqueued": 340, "seconds": 1.5, "steps": 1,
                        "applied": ["conv_relu_s1_same"],
                        "trace": [{"expansions": 0, "seconds": 0.0, "best_cost_ms": 4.5},
                                  {"expansions": 7, "seconds": 0.1, "best_cost_ms": 3.2}]},
               "variants": {}}
        got = Baselines.from_json(old)
        self.assertEqual(got.taso.trace, [TracePoint(0, 0.0, 4.5), TracePoint(7, 0.1, 3.2)])
        self.assertEqual((got.taso.enqueued, got.taso.initial_cost_ms, got.taso.steps),
                         (340, 4.5, 1))
        self.assertEqual(got.taso.applied, [("conv_relu_s1_same", NO_LOCATION)])
        self.assertIsNone(got.random)

    def test_an_old_file_missing_a_field_is_named(self):
        with self.assertRaisesRegex(ValueError, "before version 1.*'seconds'"):
            Baselines.from_json({"greedy": {"cost_ms": 1.0, "steps": 0, "applied": []}})


class RecordLayoutTest(absltest.TestCase):
    """The record is a `xflowrl.results.Record`: its schema and version first;
    version-1 files of before (`OLD_VERSION_KEY`) read the same."""

    def test_schema_and_version_first_then_the_keys_of_before(self):
        record = Baselines(_GREEDY, _TASO, _RANDOM, max_locations=200)
        self.assertIsInstance(record, Record)
        data = record.to_json()
        self.assertEqual(list(data), ["schema", VERSION_KEY, "max_locations", "greedy", "taso",
                                      "random", "eqsat"])
        self.assertEqual((data["schema"], data[VERSION_KEY]), ("baselines", RECORD_VERSION))
        self.assertEqual(record_version(data), RECORD_VERSION)

    def test_a_version_1_file_of_before_the_record(self):
        record = Baselines(_GREEDY, _TASO, _RANDOM, max_locations=200)
        data = _through_a_file(record.to_json())
        del data["schema"], data[VERSION_KEY]
        old = {OLD_VERSION_KEY: 1, **data}
        self.assertEqual(record_version(old), 1)
        self.assertEqual(Baselines.from_json(old), record)
        # Strict as version 1 is: an unknown field of a baseline is refused.
        old["greedy"] = dict(old["greedy"], colour="blue")
        with self.assertRaisesRegex(RecordError, "'greedy' has fields"):
            Baselines.from_json(old)
        self.assertEqual(record_version({"greedy": {}}), 0)

    def test_another_schema_is_refused(self):
        data = dict(Baselines(_GREEDY).to_json(), schema="measurement")
        with self.assertRaisesRegex(RecordError, "a 'measurement' record, not 'baselines'"):
            Baselines.from_json(data)

    def test_save_and_load(self):
        import os  # pylint: disable=import-outside-toplevel
        import tempfile  # pylint: disable=import-outside-toplevel
        record = Baselines(_GREEDY, _TASO, max_locations=50)
        path = os.path.join(tempfile.mkdtemp(), "baselines", "result.json")
        record.save(path)
        self.assertEqual(Baselines.load(path), record)


class RefusedTest(absltest.TestCase):

    def test_not_a_record(self):
        for data in ({}, {"greedy": None}, [1, 2]):
            with self.assertRaisesRegex(ValueError, "not a baselines record"):
                Baselines.from_json(data)

    def test_a_newer_version(self):
        data = Baselines(_GREEDY).to_json()
        data[VERSION_KEY] = RECORD_VERSION + 1
        with self.assertRaisesRegex(ValueError, "reads versions up to 1: update it"):
            Baselines.from_json(data)

    def test_missing_or_unknown_fields(self):
        data = Baselines(_GREEDY, _TASO).to_json()
        del data["taso"]["enqueued"]
        with self.assertRaisesRegex(ValueError, "'taso' has fields"):
            Baselines.from_json(data)
        data = Baselines(_GREEDY).to_json()
        data["greedy"]["colour"] = "blue"
        with self.assertRaisesRegex(ValueError, "'greedy' has fields"):
            Baselines.from_json(data)


if __name__ == "__main__":
    absltest.main()
