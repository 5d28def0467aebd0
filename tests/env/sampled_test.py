"""`SampledGraphEnv`: episodes on graphs drawn from a set."""

import collections

from absl.testing import absltest
import numpy as np

from tests.env.conformance import EnvironmentConformance
from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.env.sampled import SampledGraphEnv
from xflowrl.search import greedy_search

XFERS = XferSet.default()
COST = CostModel("analytic")


def _graphs():
    return {"small": lambda: zoo.get_graph("small_cnn"),
            "wide": lambda: zoo.get_graph("small_cnn", width=48),
            "squeezenet": lambda: zoo.get_graph("squeezenet1_1")}


class SampledConformanceTest(EnvironmentConformance, absltest.TestCase):

    def make_env(self):
        return SampledGraphEnv(_graphs(), XFERS, COST, EnvConfig(max_steps=6), seed=1)


class SampledGraphEnvTest(absltest.TestCase):

    def test_draws_every_graph_and_plays_it_as_its_own_environment(self):
        env = SampledGraphEnv(_graphs(), XFERS, COST, EnvConfig(max_steps=5), seed=0)
        drawn = collections.Counter()
        for _ in range(30):
            env.reset()
            drawn[env.current] += 1
        self.assertEqual(set(drawn), set(_graphs()))
        # An episode on a chosen graph is that graph's real environment's.
        alone = GraphEnv(zoo.get_graph("squeezenet1_1"), XFERS, COST, EnvConfig(max_steps=5))
        env.reset_to("squeezenet")
        self.assertAlmostEqual(env.initial_cost, alone.initial_cost)
        self.assertEqual(len(greedy_search(alone).applied), 5)

    def test_same_seed_same_draws_and_clones_draw_their_own(self):
        draws = []
        for _ in range(2):
            env = SampledGraphEnv(_graphs(), XFERS, COST, seed=7)
            draws.append([(env.reset(), env.current)[1] for _ in range(12)])
        self.assertEqual(draws[0], draws[1])
        env = SampledGraphEnv(_graphs(), XFERS, COST, seed=7)
        clone = env.clone()
        self.assertNotEqual([(clone.reset(), clone.current)[1] for _ in range(12)], draws[0])
        # Clones share the built graphs.
        env.reset_to("small")
        clone.reset_to("small")
        self.assertIs(env.env.initial_graph, clone.env.initial_graph)

    def test_equal_budget_gives_each_graph_room_beyond_greedy(self):
        env = SampledGraphEnv(_graphs(), XFERS, COST, EnvConfig(max_steps=2), seed=0,
                              equal_budget=True)
        env.reset_to("squeezenet")
        greedy = len(greedy_search(GraphEnv(zoo.get_graph("squeezenet1_1"), XFERS, COST,
                                            EnvConfig(max_steps=1000))).applied)
        self.assertEqual(env.env.config.max_steps, int(np.ceil(1.5 * greedy)))

    def test_weights_set_how_often_each_graph_is_drawn(self):
        env = SampledGraphEnv(_graphs(), XFERS, COST, seed=3,
                              weights={"small": 0.0, "wide": 1.0, "squeezenet": 3.0})
        drawn = collections.Counter((env.reset(), env.current)[1] for _ in range(200))
        self.assertEqual(drawn["small"], 0)
        self.assertGreater(drawn["squeezenet"], 2 * drawn["wide"])
        with self.assertRaises(ValueError):
            SampledGraphEnv(_graphs(), XFERS, COST, weights={"small": 1.0})

    def test_no_graphs_is_an_error(self):
        with self.assertRaises(ValueError):
            SampledGraphEnv({}, XFERS, COST)


if __name__ == "__main__":
    absltest.main()
