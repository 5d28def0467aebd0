"""xflowrl.results.state: the model-based agent's world-model state.json as
a record, round trips of the agent's dict, states from before the record refused."""

import json
import os
import re
import shutil
import tempfile

from absl.testing import absltest

from xflowrl.results import BestRound, RecordError, WorldModelState

# The agent's dict after two rounds with controller collection, in its key order.
ROUND = {"round": 1, "real_steps": 120, "collection": "random", "collected_return": 0.25,
         "vocabulary_known": 5, "vocabulary_full": 0, "train_total": 1.5,
         "train_latent_nll": 1.25, "held_out_latent_nll": 1.0, "held_out_reward_mse": 0.01,
         "held_out_location_count": 0.5, "controller_episodes": 64,
         "controller_real_return": 0.1, "controller_predicted_return": 0.2,
         "controller_imagined_return": 0.3, "controller_relative_cost": 0.85,
         "controller_cost_ms": 9.0, "controller_cheapest_cost_ms": 8.5}
STATE = {"round": 2, "real_steps": 240, "held_out_steps": 40, "evaluation_steps": 12,
         "rounds": [ROUND, dict(ROUND, round=2, real_steps=240)],
         "encoder": {"first": {"loss": 2.0}, "last": {"loss": 1.0}}, "seconds": 3.5,
         "vocab": json.dumps({"xfer_ids": [3, 1], "num_real_xfers": 10, "capacity": 4}),
         "reward_scale": 2.0, "first_loss": 4.0,
         "best_round": {"round": 2, "relative_cost": 0.85, "episodes": 128, "cost_ms": 8.5}}


class WorldModelStateTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="state_test_")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def _write(self, value):
        path = os.path.join(self.tmp, "world_model", "state.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(value, f)
        return path

    def test_the_agents_dict_round_trips_through_its_file(self):
        record = WorldModelState.from_state(STATE)
        self.assertEqual(record.best_round, BestRound(round=2, episodes=128, relative_cost=0.85,
                                                      cost_ms=8.5))
        self.assertEqual(record.rounds[1].controller.cheapest_cost_ms, 8.5)
        value = record.to_json()
        self.assertEqual(list(value)[:2], ["schema", "schema_version"])
        self.assertEqual((value["schema"], value["schema_version"]), ("world_model_state", 2))
        path = self._write(value)
        self.assertEqual(WorldModelState.load(path), record)
        self.assertEqual(WorldModelState.load(path).to_state(), STATE)
        self.assertEqual(list(WorldModelState.load(path).to_state()), list(STATE))
        self.assertEqual(list(WorldModelState.load(path).to_state()["best_round"]),
                         list(STATE["best_round"]))

    def test_before_the_first_round_and_before_a_best_round(self):
        fresh = {"round": 0, "real_steps": 0, "held_out_steps": 0, "evaluation_steps": 0,
                 "rounds": [], "encoder": {}, "seconds": 0.0}
        self.assertEqual(WorldModelState.from_state(fresh).to_state(), fresh)
        one_graph = dict(STATE, best_round={"round": 1, "relative_cost": 0.9, "episodes": 64})
        self.assertEqual(WorldModelState.from_state(one_graph).to_state(), one_graph)

    def test_a_state_from_before_the_record_is_refused(self):
        # No schema, no evaluation steps, a best round without its relative
        # cost (an older agent's).
        old = {k: v for k, v in STATE.items() if k != "evaluation_steps"}
        old["best_round"] = {"round": 2, "cost_ms": 8.5, "episodes": 128}
        path = self._write(old)
        with self.assertRaisesRegex(RecordError, f"^{re.escape(path)}: no 'schema' or "
                                    r"'schema_version' \(version 0, written before versioned "
                                    r"records\); this code reads world_model_state version 2 "
                                    "only: run again to write it anew$"):
            WorldModelState.load(path)

    def test_a_best_round_without_its_relative_cost_is_refused(self):
        value = WorldModelState.from_state(STATE).to_json()
        value["best_round"] = {"round": 2, "episodes": 128, "cost_ms": 8.5}
        with self.assertRaisesRegex(RecordError, r"best_round: BestRound lacks "
                                                 r"\['relative_cost'\]"):
            WorldModelState.load(self._write(value))

    def test_another_schema_a_newer_version_and_unknown_keys_are_refused(self):
        value = WorldModelState.from_state(STATE).to_json()
        with self.assertRaisesRegex(RecordError, "a 'model_based_run' record, not "
                                    "'world_model_state'"):
            WorldModelState.load(self._write(dict(value, schema="model_based_run")))
        with self.assertRaisesRegex(RecordError, "reads version 2 only"):
            WorldModelState.from_json(dict(value, schema_version=3))
        with self.assertRaisesRegex(RecordError, r"world-model state: WorldModelState has no "
                                    r"fields \['novel'\]"):
            WorldModelState.from_state(dict(STATE, novel=1))
        with self.assertRaisesRegex(RecordError, r"no fields \['novel'\]"):
            WorldModelState.from_state(dict(STATE, rounds=[dict(ROUND, novel=1)]))
        with self.assertRaisesRegex(RecordError, "lacks"):
            WorldModelState.from_state({k: v for k, v in STATE.items()
                                        if k != "evaluation_steps"})


if __name__ == "__main__":
    absltest.main()
