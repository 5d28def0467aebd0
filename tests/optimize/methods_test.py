"""`optimise` hands over what the methods found without replaying them:
the same graphs and substitutions as the episodes replayed, for greedy and the shipped policy;
and a learned method hands over greedy's graph where greedy's walk for its
step limit found a cheaper one."""

from absl.testing import absltest

from xflowrl import corpus, zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.entry_points import cost_model_from_spec
from xflowrl.env import CHEAPER, EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.env.replay import cheapest_prefix, replay
from xflowrl.optimize import methods
from xflowrl.planning.simulator import replay_route
from xflowrl.policy import load_numpy_policy, runtime, shipped_policy
from xflowrl.search import equal_step_limit, greedy_search

_XFERS = XferSet.default()
_V100 = CostModel("analytic", profile="v100")


def _env(graph, max_steps=NO_STEP_LIMIT):
    return GraphEnv(graph, _XFERS, _V100, EnvConfig(max_steps=max_steps))


class OptimiseTest(absltest.TestCase):

    def test_policy_hands_over_the_episodes_cheapest_prefix_or_greedys_graph(self):
        # Graphs where the episode ends past its cheapest graph, where it
        # ends on it, where it beats greedy and where greedy's walk (made
        # for the step limit) found the cheaper graph.
        ends_past, found_by = 0, set()
        for name in ("nasnet/s1n2w16", "resnet/d32w16", "inception/a1c1w16",
                     "squeezenet/f10w16"):
            graph = corpus.get(name)
            greedy = greedy_search(_env(graph))
            limit = equal_step_limit(10, len(greedy.applied))
            env = _env(graph, limit)
            episode = runtime.greedy_episode(load_numpy_policy(shipped_policy(), env), env)
            cost, prefix = cheapest_prefix(env, episode.applied)
            lines = []
            result = methods.optimise(graph, "policy", _XFERS, _V100, progress=lines.append)
            # A progress line for every step but the last, in order.
            steps = [line for line in lines if line.startswith("policy: step ")]
            self.assertEqual([int(line.split()[2]) for line in steps],
                             list(range(1, episode.steps)), name)
            self.assertIn(f"of at most {limit}, cost ", steps[0])
            if greedy.final_cost < cost - CHEAPER:
                want = ("greedy", greedy.applied, greedy.final_cost)
            else:
                want = ("policy", prefix, min(cost, env.initial_cost))
            self.assertEqual((result.found_by, result.applied, result.cost), want, name)
            self.assertEqual(result.graph.hash(), replay(_env(graph), want[1]).hash(), name)
            ends_past += len(prefix) < len(episode.applied)
            found_by.add(result.found_by)
            if result.found_by == "policy":
                self.assertLessEqual(result.cost, greedy.final_cost + CHEAPER, name)
        self.assertGreater(ends_past, 0)
        self.assertEqual(found_by, {"policy", "greedy"})
        self.assertFalse([line for line in lines if "trained under" in line])

    def test_says_when_the_policy_acts_under_another_cost_model(self):
        lines = []
        methods.optimise(corpus.get("vit/l1h64p16"), "policy", _XFERS,
                         cost_model_from_spec("analytic/cpu"), progress=lines.append)
        self.assertIn("policy: trained under analytic/v100, acting under analytic/cpu",
                      lines[0])

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

    def test_plan_hands_over_its_route_never_above_greedy(self):
        graph = zoo.get_graph("squeezenet1_1")
        greedy = greedy_search(_env(graph))
        for method in ("plan", f"plan:{shipped_policy()}"):
            lines = []
            result = methods.optimise(graph, method, _XFERS, _V100, budget=300,
                                      progress=lines.append)
            self.assertEqual(result.found_by, "plan", method)
            self.assertLessEqual(result.cost, greedy.final_cost + CHEAPER, method)
            self.assertEqual(result.graph.hash(),
                             replay_route(_env(graph), result.applied).hash())
            self.assertEqual(result.cost, result.graph.cost(_V100))
            self.assertTrue(lines[-1].startswith("plan: "), lines[-1])
            self.assertIn("real steps", lines[-1])

    def test_plan_refuses_a_folder_without_a_numpy_policy(self):
        with self.assertRaises(methods.BadInput):
            methods.optimise(zoo.get_graph("small_cnn"), "plan:/nonexistent", _XFERS, _V100)


if __name__ == "__main__":
    absltest.main()
