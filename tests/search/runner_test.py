"""The baseline runner: the same numbers as the code it replaced for a fixed
seed, one-step greedy equal to `greedy_search`, and TASO's steps replayed
(with their locations) to the search's best graph on several zoo graphs."""

import dataclasses
import json

from absl.testing import absltest

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.env.replay import replay
from xflowrl.search import (
    Baselines,
    NO_LOCATION,
    greedy_search,
    replay_result,
    run_baselines,
    run_greedy,
    run_random,
    run_taso,
)

_XFERS = XferSet.default()
_COST = CostModel("analytic")

# What `run_baselines(env, 1.05, 100, 5, 3)` returned on small_cnn
# (EnvConfig(max_steps=50)) before the runner and its record: the dicts of
# xflowrl/search/baselines.py at commit 6f2bc4d, printed (seconds left out).
# TASO's steps were names only then.
_BEFORE = {
    "greedy": {"cost_ms": 3.314751066666667, "steps": 11, "applied": [
        ["conv_relu_s1_same", 1], ["conv_relu_s1_same", 1], ["conv_relu_s1_same", 2],
        ["conv_relu_s1_same", 2], ["conv_relu_s1_same", 0], ["conv_relu_s1_same", 0],
        ["conv_bn_s1_same", 1], ["bias_add_relu", 0], ["conv_bn_s1_same", 1],
        ["conv_bn_s1_same", 0], ["bias_add_relu", 0]]},
    "taso": {"cost_ms": 3.314751066666667, "alpha": 1.05, "budget": 100, "expansions": 100,
             "applied": ["conv_relu_s1_same"] * 6 + ["conv_bn_s1_same", "bias_add_relu",
                                                     "conv_bn_s1_same", "conv_bn_s1_same",
                                                     "bias_add_relu"]},
    "random": {"cost_ms": 4.060703920000001, "std_ms": 0.04885611855070659,
               "best_ms": 4.001587333333334, "episodes": 5},
}

# Zoo graphs, rule set and budget on which TASO's steps are replayed;
# nasrnn's search steps past the first 200 locations of an xfer (its
# 300-odd matrix merges), so its steps are numbered under a larger cap.
_REPLAYED = (("small_cnn", "default", 100), ("squeezenet1_1", "default", 100),
             ("resnet18", "default", 100), ("bert", "default", 100),
             ("vit", "builtin+taso", 100), ("inception_v3", "default", 60),
             ("nasrnn", "default", 300))


def _env(name="small_cnn", rules=_XFERS, max_steps=50, max_locations=200):
    return GraphEnv(zoo.get_graph(name), rules, _COST,
                    EnvConfig(max_steps=max_steps, max_locations=max_locations))


class SameNumbersTest(absltest.TestCase):

    def test_a_fixed_seed_gives_the_numbers_of_before(self):
        got = run_baselines(_env(), 1.05, 100, 5, 3, eqsat_time_limit=0)
        greedy, taso, random = got.greedy, got.taso, got.random
        assert taso is not None and random is not None
        want = _BEFORE["greedy"]
        self.assertEqual((greedy.cost_ms, greedy.steps), (want["cost_ms"], want["steps"]))
        self.assertEqual(greedy.applied, [tuple(a) for a in want["applied"]])
        want = _BEFORE["taso"]
        self.assertEqual((taso.cost_ms, taso.alpha, taso.budget, taso.expansions),
                         (want["cost_ms"], want["alpha"], want["budget"], want["expansions"]))
        self.assertEqual([name for name, _ in taso.applied], want["applied"])
        self.assertEqual(taso.steps, len(want["applied"]))
        want = _BEFORE["random"]
        self.assertEqual((random.cost_ms, random.std_ms, random.best_ms, random.episodes),
                         (want["cost_ms"], want["std_ms"], want["best_ms"], want["episodes"]))
        self.assertEqual(got.max_locations, 200)

    def test_greedy_is_greedy_search_without_a_step_limit(self):
        env = _env("squeezenet1_1", max_steps=3)
        episode = greedy_search(env.with_config(max_steps=NO_STEP_LIMIT))
        result, graph = run_greedy(env)
        self.assertGreater(result.steps, 3)
        self.assertEqual((result.cost_ms, result.steps, result.applied),
                         (episode.final_cost, len(episode.applied), episode.applied))
        self.assertEqual(graph.cost(_COST), episode.final_cost)
        self.assertEqual(run_baselines(env, taso_budget=0, random_episodes=0,
                                       eqsat_time_limit=0).greedy.applied,
                         episode.applied)

    def test_taso_is_the_engine_search(self):
        env = _env("resnet18")
        search = _XFERS.search(env.initial_graph, _COST, alpha=1.05, budget=50)
        result, graph = run_taso(env, 1.05, 50)
        self.assertEqual((result.cost_ms, result.expansions, result.enqueued, result.applied,
                          result.initial_cost_ms, result.steps),
                         (search.best_cost, search.expansions, search.enqueued, search.applied,
                          search.initial_cost, len(search.applied)))
        self.assertEqual([(p.expansions, p.best_cost_ms) for p in result.trace],
                         [(e, c) for e, _, c in search.trace])
        self.assertEqual(graph.hash(), search.graph.hash())
        self.assertEqual(result.max_locations, 200)

    def test_random_is_seeded_and_keeps_its_cheapest_episode(self):
        env = _env(max_steps=10)
        first, again = run_random(env, 6, seed=4), run_random(env, 6, seed=4)
        self.assertEqual(first.applied, again.applied)
        self.assertEqual((first.cost_ms, first.std_ms, first.best_ms),
                         (again.cost_ms, again.std_ms, again.best_ms))
        self.assertLessEqual(first.best_ms, first.cost_ms)
        self.assertEqual(first.steps, len(first.applied))
        self.assertEqual(replay(env, first.applied).cost(_COST), first.best_ms)
        self.assertEqual(replay_result(env, first).cost(_COST), first.best_ms)
        with self.assertRaisesRegex(ValueError, "episodes >= 1"):
            run_random(env, 0)

    def test_skipped_baselines_are_none(self):
        got = run_baselines(_env(), taso_budget=0, random_episodes=0, eqsat_time_limit=0)
        self.assertIsNone(got.taso)
        self.assertIsNone(got.random)
        self.assertIsNone(got.eqsat)
        self.assertEqual(got.rows(), [("one-step greedy", got.greedy.cost_ms)])


class ReplayTest(absltest.TestCase):
    """TASO's steps, replayed from the initial graph, build its best graph."""

    def test_replaying_taso_gives_its_best_cost_exactly(self):
        improved = 0
        for name, rules, budget in _REPLAYED:
            with self.subTest(graph=name):
                xfers = _XFERS if rules == "default" else XferSet.from_name(rules)
                env = _env(name, xfers, max_steps=NO_STEP_LIMIT)
                result, graph = run_taso(env, 1.05, budget)
                self.assertNotIn(NO_LOCATION, [loc for _, loc in result.applied])
                rebuilt = replay_result(env, result)
                self.assertEqual(rebuilt.cost(_COST), result.cost_ms)
                self.assertEqual(rebuilt.hash(), graph.hash())
                improved += result.cost_ms < env.initial_cost
                if result.max_locations == env.config.max_locations:
                    # The environment itself takes the same steps.
                    self.assertEqual(replay(env, result.applied).cost(_COST), result.cost_ms)
                else:
                    self.assertEqual(name, "nasrnn")
                    self.assertGreater(max(loc for _, loc in result.applied), 200)
                    wide = env.with_config(max_locations=result.max_locations)
                    self.assertEqual(replay(wide, result.applied).cost(_COST), result.cost_ms)
        self.assertGreaterEqual(improved, 6)

    def test_steps_past_the_cap_have_no_location_in_the_engine_search(self):
        graph = zoo.get_graph("nasrnn")
        capped = _XFERS.search(graph, _COST, alpha=1.05, budget=300, max_locations=200)
        wide = _XFERS.search(graph, _COST, alpha=1.05, budget=300, max_locations=800)
        self.assertIn(NO_LOCATION, [loc for _, loc in capped.applied])
        self.assertEqual(capped.applied_names, wide.applied_names)
        self.assertEqual(capped.best_cost, wide.best_cost)
        with self.assertRaisesRegex(ValueError, r"replay: step \d+ \(gen_matrix_1171, -1\)"):
            _XFERS.replay(graph, capped.applied, 200)
        self.assertEqual(_XFERS.replay(graph, wide.applied, 800).hash(), wide.graph.hash())

    def test_a_record_without_locations_is_not_replayed(self):
        env = _env()
        result, _ = run_taso(env, 1.05, 20)
        old = dataclasses.replace(result, applied=[(n, NO_LOCATION) for n, _ in result.applied])
        with self.assertRaisesRegex(ValueError, "no location .* run the baselines again"):
            replay_result(env, old)

    def test_the_record_replays_after_a_round_trip_through_json(self):
        env = _env("resnet18")
        record = run_baselines(env, 1.05, 60, 2, 0, eqsat_time_limit=0)
        back = Baselines.from_json(json.loads(json.dumps(record.to_json())))
        self.assertEqual(back, record)
        assert back.taso is not None
        self.assertEqual(replay_result(env, back.taso).cost(_COST), record.taso.cost_ms)
        self.assertEqual(replay_result(env, back.greedy).cost(_COST), record.greedy.cost_ms)


if __name__ == "__main__":
    absltest.main()
