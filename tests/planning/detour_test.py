"""Detours (`xflowrl.planning.detour`, `PlanConfig.detours`) on squeezenet1_1
under the `generated` rules and `analytic/cpu` (a setting of the list,
`xflowrl.search.settings`), where each of the eight fire modules has a
four-step detour below greedy's graph that TASO's search does not find
(tests/benchmarks/search_probe_test.py finds it on one module by a
breadth-first search over every candidate): the planner stops at greedy's
graph without detours and goes below it with one; the detour stays in one
place and its xfers, taken everywhere, take it in the other modules too; a
search spends no more than its expansions, and the planner's budget bounds
it."""

from absl.testing import absltest

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.engine.xfers import TASO_ALPHA
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.planning import PlanConfig, Planner, plan
from xflowrl.planning.detour import find_detour, replay_everywhere
from xflowrl.planning.simulator import replay_route
from xflowrl.search.eqsat import same_outputs

# The deployed planner's action space (`xflowrl optimize --method=plan`).
_DEPLOYED = dict(everywhere=True, merge_identical=True, max_real_steps=1000)
# Each module's route (search_probe_test.py): un-fuse the 3x3 convolution's
# ReLU, merge the two expand convolutions, fuse the ReLU into the merged
# one, split it again with the ReLU fused into both halves.
_ROUTE = ["gen_conv_1466", "gen_conv_1447", "gen_conv_1194", "gen_conv_1542"]


def _env() -> GraphEnv:
    return GraphEnv(zoo.get_graph("squeezenet1_1"), XferSet.from_name("generated"),
                    CostModel("analytic", profile="cpu"), EnvConfig(max_steps=NO_STEP_LIMIT))


def _action_to(parent, child):
    """The (xfer, location) of `parent`'s action that built `child`."""
    index = next(i for i, c in parent.children.items() if c is child)
    return tuple(int(a) for a in parent.expansion.actions[index])


class DetourTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.env = _env()
        cls.without = plan(cls.env, PlanConfig(**_DEPLOYED))
        cls.with_one = plan(cls.env, PlanConfig(detours=1, **_DEPLOYED))

    def _greedy_cost(self):
        planner = Planner(self.env, PlanConfig(**_DEPLOYED))
        return planner.best.cost

    def test_without_detours_planning_stops_at_greedy_s_graph(self):
        self.assertAlmostEqual(self.without.cost, self._greedy_cost(), places=12)
        self.assertEqual(self.without.stopped, "no_improvement")
        self.assertEqual((self.without.detour_real_steps, self.without.detours_found), (0, 0))

    def test_the_result_counts_the_detour_s_real_steps_and_its_success(self):
        # The real steps of the planner with a detour, less those of the
        # same planner whose detour search spends nothing and finds nothing:
        # the detour's (its search's and its replay's) and what planning
        # did after it.
        result = self.with_one
        self.assertEqual(result.detours_found, 1)
        self.assertGreater(result.detour_real_steps, 0)
        self.assertLessEqual(result.detour_real_steps,
                             result.real_steps - self.without.real_steps)
        unlucky = plan(self.env, PlanConfig(detours=1, detour_expansions=1, **_DEPLOYED))
        self.assertEqual(unlucky.detours_found, 0)
        self.assertEqual(unlucky.detour_real_steps, unlucky.real_steps - self.without.real_steps)

    def test_with_one_it_goes_below_and_hands_over_a_graph_that_replays(self):
        result = self.with_one
        self.assertLess(result.cost, self._greedy_cost() * (1 - 1e-3))
        # The detour's expansions are real steps.
        self.assertGreater(result.real_steps, self.without.real_steps)
        rebuilt = replay_route(self.env, result.applied)
        self.assertEqual(rebuilt.hash(), result.graph.hash())
        self.assertAlmostEqual(rebuilt.cost(self.env.cost_model), result.cost, places=12)
        self.assertTrue(same_outputs(self.env.initial_graph, result.graph))
        self.assertLessEqual(result.real_steps, 1000)

    def test_the_detour_is_local_and_everywhere_takes_it_in_both_modules(self):
        planner = Planner(self.env, PlanConfig(**_DEPLOYED))
        start = planner._best_node()  # pylint: disable=protected-access
        steps = planner.sim.real_steps
        found = find_detour(planner, start, expansions=200)
        self.assertIsNotNone(found)
        self.assertLessEqual(planner.sim.real_steps - steps, 200)
        nodes = found.nodes
        self.assertIs(nodes[0], start)
        self.assertEqual([self.env.xfers.names[x] for x in found.xfers], _ROUTE)
        self.assertLess(nodes[-1].cost, start.cost)
        self.assertGreater(nodes[1].cost, start.cost)  # uphill first
        newest = max(op.guid for op in start.graph.ops())
        for k, (parent, child) in enumerate(zip(nodes, nodes[1:])):
            self.assertLessEqual(child.cost, TASO_ALPHA * start.cost)
            xfer, location = _action_to(parent, child)
            self.assertEqual(xfer, found.xfers[k])
            if k:  # after the first step, each rewrites an op the route made
                matched = parent.expansion.locations.matched_ops(xfer)[location]
                self.assertGreater(max(matched), newest)
        # The route's xfers everywhere: the detour in every module, cheaper
        # than in one.
        replayed = replay_everywhere(planner, start, found.xfers)
        self.assertLen(replayed, len(_ROUTE) + 1)
        self.assertLess(replayed[-1].cost, nodes[-1].cost * (1 - 1e-3))
        self.assertTrue(same_outputs(self.env.initial_graph, replayed[-1].graph))

    def test_a_search_spends_at_most_its_expansions(self):
        planner = Planner(self.env, PlanConfig(**_DEPLOYED))
        start = planner._best_node()  # pylint: disable=protected-access
        steps = planner.sim.real_steps
        self.assertIsNone(find_detour(planner, start, expansions=3))
        self.assertLessEqual(planner.sim.real_steps - steps, 3)

    def test_the_planner_s_budget_bounds_the_detour(self):
        budget = self.without.real_steps + 5
        result = plan(self.env, PlanConfig(detours=1, **dict(_DEPLOYED, max_real_steps=budget)))
        self.assertLessEqual(result.real_steps, budget)
        self.assertEqual(result.stopped, "real_steps")

    def test_bad_settings(self):
        with self.assertRaises(ValueError):
            PlanConfig(detours=-1)
        with self.assertRaises(ValueError):
            PlanConfig(detour_expansions=0)


if __name__ == "__main__":
    absltest.main()
