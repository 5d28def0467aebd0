"""`optimise` hands over what the methods found without replaying them:
the same graphs and substitutions as the episodes replayed (how the
command found them before 2026-11-27), for greedy and the shipped policy."""

from absl.testing import absltest

from xflowrl import corpus, zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.env.replay import cheapest_prefix, replay
from xflowrl.optimize import methods
from xflowrl.search import equal_step_limit, greedy_search
from xflowrl.transfer import runtime, shipped_policy
from xflowrl.transfer.policy import load_numpy_policy

_XFERS = XferSet.default()
_V100 = CostModel("analytic", profile="v100")


def _env(graph, max_steps=NO_STEP_LIMIT):
    return GraphEnv(graph, _XFERS, _V100, EnvConfig(max_steps=max_steps))


class OptimiseTest(absltest.TestCase):

    def test_policy_hands_over_the_episodes_cheapest_prefix(self):
        # Graphs where the episode ends past its cheapest graph and where it
        # ends on it.
        ends_past = 0
        for name in ("nasnet/s1n2w16", "resnet/d32w16", "vit/l2h64p16", "squeezenet/f10w16"):
            graph = corpus.get(name)
            limit = equal_step_limit(10, len(greedy_search(_env(graph)).applied))
            env = _env(graph, limit)
            episode = runtime.greedy_episode(load_numpy_policy(shipped_policy(), env), env)
            cost, prefix = cheapest_prefix(env, episode.applied)
            result = methods.optimise(graph, "policy", _XFERS, _V100)
            self.assertEqual(result.applied, prefix, name)
            self.assertEqual(result.cost, min(cost, env.initial_cost), name)
            self.assertEqual(result.graph.hash(), replay(_env(graph), prefix).hash(), name)
            ends_past += len(prefix) < len(episode.applied)
        self.assertGreater(ends_past, 0)

    def test_greedy_hands_over_its_episodes_graph(self):
        graph = zoo.get_graph("squeezenet1_1")
        episode = greedy_search(_env(graph))
        self.assertGreater(len(episode.applied), 4)
        for budget, steps in ((0, len(episode.applied)), (3, 3)):
            result = methods.optimise(graph, "greedy", _XFERS, _V100, budget=budget)
            self.assertEqual(result.applied, episode.applied[:steps])
            self.assertEqual(result.graph.hash(),
                             replay(_env(graph), episode.applied[:steps]).hash())
            self.assertEqual(result.cost, result.graph.cost(_V100))
        self.assertEqual(result.cost, replay(_env(graph), episode.applied[:3]).cost(_V100))


if __name__ == "__main__":
    absltest.main()
