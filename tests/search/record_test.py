"""The baselines record: JSON round trips and what it refuses (files of the
two producers before the record, of another version, missing keys)."""

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
    RECORD_VERSION,
    RandomResult,
    TasoResult,
    TracePoint,
    replay_result,
    run_eqsat,
)
from xflowrl.search.record import VERSION_KEY

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
        # A record without its key (a file written before it) is refused.
        old = _through_a_file(Baselines(_GREEDY, max_locations=50).to_json())
        del old["eqsat"]
        with self.assertRaisesRegex(RecordError, r"^old.json: a baselines record without "
                                                 r"\['eqsat'\]$"):
            Baselines.from_json(old, where="old.json")

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
    """Files written before the record (no schema or version; TASO's steps
    names only) are refused, naming the file, its version and what to do."""

    _REFUSED = (r"^results/g/baselines/result.json: a baselines record without 'schema' or "
                r"'schema_version' \(version 0, written before the record\); this code reads "
                r"version 1 only: run the baselines again$")

    def test_run_baselines_dict(self):
        # What run_baselines returned (train_mf/train_mb kept it as "baselines").
        old = {"greedy": {"cost_ms": 3.31, "seconds": 0.5, "steps": 2,
                          "applied": [["conv_relu_s1_same", 1], ["bias_add_relu", 0]]},
               "taso": {"cost_ms": 3.2, "seconds": 1.5, "alpha": 1.05, "budget": 100,
                        "expansions": 100, "applied": ["conv_relu_s1_same", "bias_add_relu"]},
               "random": {"cost_ms": 4.06, "std_ms": 0.05, "best_ms": 4.0, "episodes": 5}}
        with self.assertRaisesRegex(RecordError, self._REFUSED):
            Baselines.from_json(old, where="results/g/baselines/result.json")

    def test_a_version_1_file_of_before_the_record(self):
        # Its version under "baselines_version", no schema: refused as well.
        data = _through_a_file(Baselines(_GREEDY, _TASO, _RANDOM, max_locations=200).to_json())
        del data["schema"], data[VERSION_KEY]
        old = {"baselines_version": 1, **data}
        with self.assertRaisesRegex(RecordError, self._REFUSED):
            Baselines.from_json(old, where="results/g/baselines/result.json")

    def test_steps_without_locations_are_refused(self):
        data = _through_a_file(Baselines(_GREEDY, _TASO, max_locations=200).to_json())
        data["taso"]["applied"] = ["conv_relu_s1_same"]
        with self.assertRaisesRegex(RecordError, "'taso' has steps that are not "
                                                 r"\[xfer, location\] pairs"):
            Baselines.from_json(data)


class RecordLayoutTest(absltest.TestCase):
    """The record is a `xflowrl.results.Record`: its schema and version first."""

    def test_schema_and_version_first_then_the_keys(self):
        record = Baselines(_GREEDY, _TASO, _RANDOM, max_locations=200)
        self.assertIsInstance(record, Record)
        data = record.to_json()
        self.assertEqual(list(data), ["schema", VERSION_KEY, "max_locations", "greedy", "taso",
                                      "random", "eqsat"])
        self.assertEqual((data["schema"], data[VERSION_KEY]), ("baselines", RECORD_VERSION))

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

    def test_another_version(self):
        for version in (RECORD_VERSION - 1, RECORD_VERSION + 1):
            data = Baselines(_GREEDY).to_json()
            data[VERSION_KEY] = version
            with self.assertRaisesRegex(ValueError, f"^r.json: baselines record version "
                                                    f"{version}; this code reads version 1 "
                                                    "only: run the baselines again$"):
                Baselines.from_json(data, where="r.json")

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
