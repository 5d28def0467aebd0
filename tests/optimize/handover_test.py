"""The one deployment path (`xflowrl.optimize.handover`): the model-based
agent's best round is deployed, by the entry points and by `optimise`'s
`mb` method alike; the cheapest graph any evaluation episode passed
through is handed over, by its shortest prefix, never the end of an
episode that went past it; greedy's graph where a learned method found a
costlier one.

The model-based agent here is a stub whose rounds' controllers play
fixed substitution sequences in the real environment, so that which
round is deployed shows in the graph handed over, in seconds."""

import math
from unittest import mock

from absl.testing import absltest

from xflowrl import zoo
from xflowrl.agents.ppo.training import TrainResult
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.env.interface import Episode
from xflowrl.env.replay import replay, trace
from xflowrl.optimize import handover, methods
from xflowrl.search import equal_step_limit, greedy_walk
from xflowrl.world_model.controller import Evaluation

_XFERS = XferSet.default()
_V100 = CostModel("analytic", profile="v100")
_GRAPH = zoo.get_graph("small_cnn")


def _env(max_steps=NO_STEP_LIMIT):
    return GraphEnv(_GRAPH, _XFERS, _V100, EnvConfig(max_steps=max_steps))


def _evaluation(env, applied):
    """What the controller's real episode that applies `applied` reports."""
    costs = [env.initial_cost] + [cost for _, _, cost in trace(env, applied)]
    best = min(range(len(costs)), key=lambda k: (costs[k], k))
    return Evaluation(costs[-1], 0.0, 0.0, 0, len(applied), list(applied), costs[best], best)


def _past_the_end(env, applied):
    """`applied` and one more valid substitution after it (no cheaper:
    one-step greedy stopped there)."""
    obs = env.reset()
    index = {name: i for i, name in enumerate(env.xfers.names)}
    for name, location in applied:
        obs, _, _, _ = env.step((index[name], location))
    xfer = next(x for x in range(len(env.xfers)) if obs.xfer_mask[x])
    return list(applied) + [(env.xfers.names[xfer], 0)]


class StubModelBasedAgent:
    """A model-based agent whose round r's controller plays `ROUNDS[r]`
    greedily, and its sampled episodes `SAMPLED[r]` in turn; round 1 (of
    two) reached the cheaper graph in its per-round evaluation."""

    ROUNDS: list = []
    SAMPLED: list = []
    BEST_ROUND = 1

    def __init__(self, env, logdir, wm_config=None, *args, seed=0, progress=None, **kwargs):
        del logdir, args, seed, progress, kwargs
        self.env = env
        self.rounds = 2 if wm_config is None else wm_config.rounds
        self.deployed = self.rounds  # the last round's controller
        self.calls = []
        self.sampled_played = 0

    def learn_world_model(self):
        self.calls.append("learn_world_model")
        return {"round": self.rounds, "real_steps": 0, "held_out_steps": 0,
                "evaluation_steps": 0, "rounds": [], "encoder": {}, "seconds": 0.0}

    def train_controller(self):
        self.calls.append("train_controller")
        return "controller"

    def select_best_round(self):
        self.calls.append("select_best_round")
        self.deployed = self.BEST_ROUND
        return {"round": self.BEST_ROUND}

    def evaluate(self, masks="real", greedy=True):
        self.calls.append(("evaluate", masks, greedy))
        r = self.deployed - 1
        if greedy:
            return _evaluation(self.env, self.ROUNDS[r])
        sampled = self.SAMPLED[r]
        self.sampled_played += 1
        return _evaluation(self.env, sampled[(self.sampled_played - 1) % len(sampled)])


class HandOverTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.walk = greedy_walk(_env())
        assert len(cls.walk.applied) >= 3, cls.walk.applied
        cls.limit = equal_step_limit(10, len(cls.walk.applied))

    def _stub(self, rounds, sampled):
        return mock.patch.multiple(StubModelBasedAgent, ROUNDS=rounds, SAMPLED=sampled)

    def test_optimise_mb_hands_over_the_best_rounds_graph(self):
        # Round 1 reached greedy's graph, the last round only its first
        # step: the last round's graph is costlier than greedy's, so a
        # hand-over that skipped the selection would give greedy's walk
        # (found_by "greedy"); the selected round's graph is greedy's own.
        walk = self.walk.applied
        with self._stub([walk, walk[:1]], [[walk[:1]], [walk[:1]]]), mock.patch(
                "xflowrl.world_model.ModelBasedAgent", StubModelBasedAgent):
            result = methods.optimise(_GRAPH, "mb", _XFERS, _V100, budget=2)
        self.assertEqual(result.found_by, "mb")
        self.assertEqual(result.applied, walk)
        self.assertAlmostEqual(result.cost, self.walk.cost)

    def test_train_model_based_deploys_the_selected_round(self):
        walk = self.walk.applied
        env = _env(self.limit)
        with self._stub([walk[:2], walk[:1]], [[walk[:1]], [walk[:1]]]):
            for select, want in ((True, walk[:2]), (False, walk[:1])):
                agent = StubModelBasedAgent(env, "unused")
                training = handover.train_model_based(agent, select_round=select)
                found = handover.hand_over_model_based(agent, env, sampled_episodes=1)
                self.assertEqual(training.selected_round, {"round": 1} if select else None)
                self.assertEqual(training.controller, "controller")
                self.assertEqual(found.applied, want)
                self.assertEqual(found.graph.hash(),
                                 replay(_env(), want).hash())
                self.assertEqual(agent.calls[:3 if select else 2],
                                 ["learn_world_model", "train_controller",
                                  "select_best_round"][:3 if select else 2])

    def test_the_cheapest_graph_of_greedy_and_sampled_by_its_shortest_prefix(self):
        walk = self.walk.applied
        env = _env(self.limit)
        past = _past_the_end(env, walk)
        # A sampled episode goes past greedy's graph; the greedy one stops
        # short of it; the ablation's episode is cheaper still but not
        # the deployed controller's (another masks' episode).
        with self._stub([walk[:1]], [[walk[:2], past]]):
            agent = StubModelBasedAgent(env, "unused")
            agent.deployed = 1
            evaluations = handover.evaluate_model_based(agent, sampled_episodes=2,
                                                        ablation_masks="model", warm_up=True)
        self.assertEqual(agent.calls, [
            ("evaluate", "real", True), ("evaluate", "real", True),
            ("evaluate", "model", True), ("evaluate", "real", False),
            ("evaluate", "real", False)])
        self.assertEqual(evaluations.sampled[1].applied, past)
        self.assertEqual(evaluations.steps, 1 + 1 + 1 + 2 + len(past))
        self.assertIsNotNone(evaluations.first_call_seconds)
        found = handover.hand_over_evaluations(env, evaluations)
        self.assertEqual(found.applied, walk)
        self.assertAlmostEqual(found.cost, self.walk.cost)
        self.assertAlmostEqual(found.graph.cost(_V100), self.walk.cost)
        self.assertEqual(found.found_by, "mb")

    def test_model_free_hands_over_the_cheapest_prefix_of_its_two_episodes(self):
        walk = self.walk.applied
        env = _env(self.limit)
        past = _past_the_end(env, walk)

        def episode(applied):
            return Episode(0.0, env.initial_cost, math.nan, len(applied), list(applied), 0)

        def training(sequence):
            return TrainResult(episodes=1, interactions=1, seconds=0.0, best_final_cost=0.0,
                               best_sequence=list(sequence), history=[])

        # The greedy episode went past its cheapest graph: its prefix.
        found = handover.hand_over_model_free(env, episode(past), training(walk[:1]))
        self.assertEqual((found.applied, found.found_by), (walk, "mf"))
        self.assertAlmostEqual(found.cost, self.walk.cost)
        # The best training episode reached the cheaper graph.
        found = handover.hand_over_model_free(env, episode(walk[:1]), training(past))
        self.assertEqual(found.applied, walk)
        self.assertEqual(found.graph.hash(), replay(_env(), walk).hash())

    def test_no_worse_than_greedy(self):
        env = _env(self.limit)
        walk = self.walk
        short = handover.hand_over_model_free(
            env, Episode(0.0, 0.0, 0.0, 1, walk.applied[:1], 0),
            TrainResult(1, 1, 0.0, 0.0, [], []))
        floored = handover.no_worse_than_greedy(short, walk)
        self.assertEqual((floored.applied, floored.found_by, floored.cost),
                         (walk.applied, "greedy", walk.cost))
        level = handover.hand_over_model_free(
            env, Episode(0.0, 0.0, 0.0, 1, walk.applied, 0), TrainResult(1, 1, 0.0, 0.0, [], []))
        self.assertIs(handover.no_worse_than_greedy(level, walk), level)


if __name__ == "__main__":
    absltest.main()
