"""The world-model planner on real episodes: `EpisodeHarvest` turns episodes
into training data with the right targets, `EpisodeStore` keeps them across
a resumed run, and `plan_beside` hands over a checked graph never worse than
greedy's, its real steps counted apart from the episodes'."""

import dataclasses
import json
import os
import pickle
import tempfile
from typing import Dict, List, NamedTuple, Optional, Tuple

from absl.testing import absltest
import numpy as np

from tests.results.fixtures import mb_run
from xflowrl import zoo
from xflowrl.agents.random_agent import RandomAgent
from xflowrl.embedding import features
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.planning.model_episodes import BesideConfig, EpisodeStore, PlannerBeside, plan_beside
from xflowrl.planning.model_learning import EpisodeHarvest
from xflowrl.planning.model_search import replay_steps
from xflowrl.planning.simulator import Step
from xflowrl.results.model_based import imagined_steps, model_based_markdown
from xflowrl.results.records import dataclass_from_plain, to_plain
from xflowrl.results.runs import ModelBasedRun, ModelPlannerRun, ModelPlannerSeconds
from xflowrl.search import greedy_walk
from xflowrl.world_model import data

NOOP = 9   # num_xfers of the synthetic episodes


def _state(tag: float) -> features.GraphsTuple:
    """A distinct fake state per tag (only its bytes matter to the harvest)."""
    return features.GraphsTuple(
        nodes=np.full((2, 3), tag, np.float32), edges=np.zeros((1, 2), np.float32),
        receivers=np.array([1], np.int32), senders=np.array([0], np.int32),
        globals=np.array([[tag]], np.float32), n_node=np.array([2], np.int32),
        n_edge=np.array([1], np.int32))


class FakeEpisode(NamedTuple):
    states: List[features.GraphsTuple]
    valid: List[Dict[int, int]]
    actions: np.ndarray
    rewards: np.ndarray
    gains: Optional[List[Dict[int, Tuple[float, float]]]]


A, B, C, D = (_state(t) for t in (0.0, 1.0, 2.0, 3.0))
VALID = {"A": {1: 1, 3: 1, 5: 4}, "B": {2: 2}, "C": {}, "D": {4: 1}}
GAINS = {"A": {1: (-2.0, -2.0), 3: (1.0, 1.0), 5: (-1.0, -0.5)}, "B": {2: (-3.0, -1.0)},
         "C": {}, "D": {4: (-3.0, -3.0)}}


def _episode(names, actions, rewards) -> FakeEpisode:
    states = {"A": A, "B": B, "C": C, "D": D}
    return FakeEpisode([states[n] for n in names], [VALID[n] for n in names],
                       np.array(actions, np.int64).reshape(-1, 2),
                       np.array(rewards, np.float32), [GAINS[n] for n in names])


# Costs in points above the initial graph: A 0, B -2, C -5, D +1.
# Episode 1: A -x1 (one location, +2)-> B -x2 (two locations, +3)-> C -NO-OP-> C.
FIRST = _episode("ABCC", [(1, 0), (2, 1), (NOOP, 0)], [2.0, 3.0, 0.0])
# Episode 2: A -x3 (+1 point dearer)-> D -x4 (+3)-> B, then an xfer that does
# not apply there (refused: a penalty, the graph unchanged).
SECOND = _episode("ADBB", [(3, 0), (4, 0), (7, 0)], [-1.0, 3.0, -10.0])


class EpisodeHarvestTest(absltest.TestCase):

    def test_targets_of_joined_episodes(self):
        harvest = EpisodeHarvest(NOOP, "relative", initial_cost=2.0)
        self.assertEqual(harvest.add([FIRST]), 3)
        self.assertEqual(harvest.add([SECOND]), 1)       # only D is new
        self.assertEqual((harvest.real_steps, harvest.episodes), (6, 2))
        got = harvest.transitions()
        self.assertLen(got, 4)
        a, b, c, d = range(4)   # the order states were first seen: A, B, C, D
        # Values: the cost above the cheapest state reachable in the data,
        # through B's continuation in the first episode from D in the second.
        np.testing.assert_allclose(got.values, [5.0, 3.0, 0.0, 6.0])
        # Transitions are the steps of xfers with one location only.
        self.assertEqual(sorted((e.xfer, e.reward, e.child) for e in got.edges[a]),
                         [(1, 2.0, b), (3, -1.0, d)])
        self.assertEqual(got.edges[b], [])              # x2 had two locations
        self.assertEqual([(e.xfer, e.reward, e.child) for e in got.edges[d]], [(4, 3.0, b)])
        # Masks, exact rewards (steps taken, single candidates) and estimates.
        np.testing.assert_array_equal(got.active[a], [1, 3, 5])
        np.testing.assert_array_equal(got.known_xfers[a], [1, 3])
        np.testing.assert_allclose(got.known_rewards[a], [2.0, -1.0])
        # x5: four locations, best -1, mean -0.5: the sum 2 beats the best 1.
        np.testing.assert_allclose(got.estimates[a], [2.0, -1.0, 2.0])
        # x2: two locations, best -3, mean -1: the best (3) beats the sum (2).
        np.testing.assert_allclose(got.estimates[b], [3.0])
        self.assertLen(got.known_xfers[b], 0)
        self.assertLen(got.active[c], 0)

    def test_rewards_in_ms_are_converted_and_others_refused(self):
        harvest = EpisodeHarvest(NOOP, "delta", initial_cost=50.0)   # 1 ms = 2 points
        harvest.add([_episode("AB", [(1, 0)], [1.0])])
        got = harvest.transitions()
        np.testing.assert_allclose(got.values, [2.0, 0.0])
        self.assertEqual(got.edges[0][0].reward, 2.0)
        with self.assertRaisesRegex(ValueError, "'terminal' reward does not give"):
            EpisodeHarvest(NOOP, "terminal", initial_cost=1.0)


def _env() -> GraphEnv:
    return GraphEnv(zoo.get_graph("small_cnn"), XferSet.default(),
                    CostModel("analytic", profile="v100"), EnvConfig(max_steps=NO_STEP_LIMIT))


class EpisodeStoreTest(absltest.TestCase):

    def test_batches_are_kept_once_and_survive_a_restart(self):
        env = _env()
        folder = os.path.join(tempfile.mkdtemp(), "model_planner")
        rollouts = data.collect_rollouts(env.with_config(max_steps=5), 3,
                                         RandomAgent(0.0, seed=1))
        store = EpisodeStore(folder, env)
        self.assertEqual(store.missing(2), ["round 0", "round 1", "held_out"])
        store.add("round 0", rollouts[:2])
        store.add("held_out", rollouts[2:])
        store.add("round 0", rollouts)              # a resumed round: already there
        self.assertEqual(store.harvest.episodes, 3)
        self.assertEqual(store.missing(2), ["round 1"])
        # A file per batch, each with the states the earlier ones lacked
        # (every episode starts at the initial graph: stored once).
        self.assertEqual(sorted(os.listdir(folder)), ["0000.pkl", "0001.pkl"])
        stored = []
        for name in ("0000.pkl", "0001.pkl"):
            with open(os.path.join(folder, name), "rb") as f:
                stored.append(pickle.load(f))
        self.assertEqual([b["key"] for b in stored], ["round 0", "held_out"])
        self.assertFalse(set(stored[0]["states"]) & set(stored[1]["states"]))
        self.assertEqual(len(stored[0]["states"]) + len(stored[1]["states"]),
                         len(store.harvest))
        # A fresh store rebuilds the same data from the files.
        again = EpisodeStore(folder, env)
        self.assertEqual(again.keys, ["round 0", "held_out"])
        self.assertEqual(again.harvest.real_steps, data.real_steps(rollouts))
        want, got = store.harvest.transitions(), again.harvest.transitions()
        self.assertEqual(got.values, want.values)
        self.assertEqual([len(e) for e in got.edges], [len(e) for e in want.edges])
        for a, b in zip(got.states, want.states):
            np.testing.assert_array_equal(a.nodes, b.nodes)
        # Another graph's data in the same folder are not taken for this one's.
        other = GraphEnv(zoo.get_graph("squeezenet1_1"), XferSet.default(), env.cost_model,
                         env.config)
        self.assertEqual(EpisodeStore(folder, other).keys, [])
        self.assertEqual(os.listdir(folder), [])


class PlannerBesideTest(absltest.TestCase):

    def test_it_says_why_it_did_not_run(self):
        env = _env()
        folder = os.path.join(tempfile.mkdtemp(), "model_planner")
        config = BesideConfig.of(env, seed=0, train_steps=1)
        # Turned off: no data kept, no plan, nothing to say.
        off = PlannerBeside(folder, env, enabled=False)
        self.assertIsNone(off.on_rollouts)
        self.assertIsNone(off.plan(env, 1, config))
        self.assertIsNone(off.note)
        self.assertFalse(os.path.exists(folder))
        # A resumed run whose first round was collected without it.
        on = PlannerBeside(folder, env)
        rollouts = data.collect_rollouts(env.with_config(max_steps=3), 2,
                                         RandomAgent(0.0, seed=1))
        on.on_rollouts("round 1", rollouts)
        self.assertIsNone(on.plan(env, 2, config))
        self.assertIn("lack the episodes of round 0, held_out", on.note)
        # A reward its targets cannot be read from.
        terminal = GraphEnv(env.initial_graph, env.xfers, env.cost_model,
                            dataclasses.replace(env.config, reward="terminal"))
        refused = PlannerBeside(os.path.join(tempfile.mkdtemp(), "p"), terminal)
        self.assertIsNone(refused.on_rollouts)
        self.assertIn("'terminal' reward", refused.note)


class PlanBesideTest(absltest.TestCase):

    def test_a_checked_graph_never_worse_than_greedy_real_steps_apart(self):
        env = _env()
        folder = tempfile.mkdtemp()
        store = EpisodeStore(folder, env)
        rollouts = data.collect_rollouts(env.with_config(max_steps=10), 15,
                                         RandomAgent(0.2, seed=0))
        store.add("round 0", rollouts)
        harvested = store.harvest.transitions()
        self.assertGreater(harvested.transitions(), 0)
        self.assertGreater(max(harvested.values), 0.0)
        config = BesideConfig.of(env, seed=0, train_steps=20)
        # Small: what is checked below holds by construction (greedy's
        # floor, the replay, the outputs check, the seeds), whatever the
        # model learns. Most of the time is TensorFlow tracing the training
        # step, which grows with the encoder's rounds and the unroll (one of
        # each still runs every part of the loss: the dynamics, the
        # consistency of a later step); a few simulations per decision.
        config = dataclasses.replace(
            config,
            model=dataclasses.replace(config.model, latent_size=16, encoder_size=16,
                                      hidden_size=32, message_passing_steps=1),
            train=dataclasses.replace(config.train, unroll=1),
            plan=dataclasses.replace(config.plan, simulations=4, root_actions=4))
        beside = plan_beside(env, store, config)
        run = beside.run
        # The episodes' real steps are the agent's, counted apart from the
        # planner's own engine expansions of the graph.
        self.assertEqual(run.data_real_steps, data.real_steps(rollouts))
        self.assertEqual(run.real_steps_elsewhere, 0)
        self.assertGreaterEqual(run.real_steps, run.planner_real_steps)
        self.assertGreaterEqual(run.planner_real_steps, 1)
        self.assertLessEqual(run.real_steps_to_best, run.real_steps)
        self.assertEqual(run.states, len(store.harvest))
        self.assertEqual(run.train_steps, 20)
        self.assertTrue(all(np.isfinite(v) for v in run.train_losses.values()))
        # Never worse than greedy; the route rebuilds the graph, which
        # computes the original's outputs.
        greedy = greedy_walk(env)
        self.assertLessEqual(run.cost_ms, greedy.cost * (1 + 1e-9))
        self.assertLess(run.cost_ms, env.initial_cost)
        self.assertTrue(run.replayed)
        self.assertIs(run.same_outputs, True)
        self.assertTrue(run.checked)
        names = {name: i for i, name in enumerate(env.xfers.names)}
        graph = replay_steps(env, [Step(names[n], loc, after) for n, loc, after in run.route])
        self.assertEqual(graph.hash(), beside.graph.hash())
        self.assertAlmostEqual(graph.cost(env.cost_model), run.cost_ms)
        # The record goes through JSON unchanged.
        plain = json.loads(json.dumps(to_plain(run)))
        self.assertEqual(to_plain(dataclass_from_plain(ModelPlannerRun, plain, "run")),
                         to_plain(run))
        self.assertEqual(plain["route"][0], list(run.route[0]))
        # A resumed run's planner (a fresh store on the same folder) learns
        # from the episodes kept on disk and plans as before.
        again = plan_beside(env, EpisodeStore(folder, env), config).run
        for key in ("cost_ms", "route", "states", "transitions", "data_real_steps",
                    "real_steps", "model_steps", "train_losses"):
            self.assertEqual(getattr(again, key), getattr(run, key), key)


def _planner(same_outputs=True) -> ModelPlannerRun:
    return ModelPlannerRun(
        data="episodes", data_real_steps=110, real_steps_elsewhere=0, states=90,
        transitions=40, train_steps=5, train_losses={"value": 0.1}, cost_ms=80.0,
        planner_cost_ms=80.0, from_greedy=False,
        route=[("a", -1, 11), ("a", -1, 12), ("b", 3, 0), ("a", -1, 13)], real_steps=7,
        real_steps_to_best=2, planner_real_steps=4, model_steps=123, rule_enumerations=2,
        decisions=3, checked_actions=4, stopped="patience", replayed=True,
        same_outputs=same_outputs, seconds=ModelPlannerSeconds(3.0, 1.0, 0.5, 4.5), config={})


class ReportTest(absltest.TestCase):

    def test_the_planner_stands_beside_the_controller(self):
        run = dataclasses.replace(mb_run(cost=85.0), model_planner=_planner(),
                                  imagined_steps=640)
        again = ModelBasedRun.from_json(json.loads(json.dumps(run.to_json())))
        self.assertEqual(again.model_planner, dataclass_from_plain(
            ModelPlannerRun, json.loads(json.dumps(to_plain(_planner()))), "p"))
        text = model_based_markdown(again, [("one-step greedy", 90.0)])
        self.assertIn("| world-model planner | 80.0000 | -20.000% |", text)
        # Learnt from the world model's 100 + 10 held-out steps; the
        # controller's own: 5 evaluation steps; the planner's: 7 on the graph.
        self.assertIn("| model-based controller (dream) | -15.000% | 110 | 5 (round "
                      "evaluations, evaluation) | 0 | 640 imagined | 20 |", text)
        self.assertIn("| world-model planner | -20.000% | 110 (the same episodes) | 7 (2 to "
                      "its result, 4 before greedy's floor) | 0 | 123 | 4 |", text)
        self.assertIn("substitutions (@*: a step of a multi-location action): a@* x2, b@3, "
                      "a@*.", text)
        self.assertNotIn("not a result", text)

    def test_an_unchecked_or_absent_planner_is_not_called_a_result(self):
        run = dataclasses.replace(mb_run(), model_planner=_planner(same_outputs=False))
        text = model_based_markdown(run, [])
        self.assertIn("| world-model planner (not checked) |", text)
        self.assertIn("does NOT compute the original's outputs. It is not a result.", text)
        note = dataclasses.replace(mb_run(), model_planner_note="no data")
        self.assertIn("World-model planner: not run (no data).",
                      model_based_markdown(note, []))
        self.assertNotIn("planner", model_based_markdown(mb_run(), []))

    def test_imagined_steps_need_the_whole_history(self):
        rows = [{"episodes": 4, "dream_length": 2.5}, {"episodes": 8, "dream_length": 3.0}]
        self.assertEqual(imagined_steps(rows, 8), 22)
        self.assertIsNone(imagined_steps(rows[:1], 8))   # a history short of the episodes
        self.assertIsNone(imagined_steps([], 0))


if __name__ == "__main__":
    absltest.main()
