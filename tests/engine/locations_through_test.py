"""Tests of enumerating a prefix of the rules (`XferSet.locations`'
`through`) and of the route translation that uses it
(`EngineSimulator.full_route`)."""

from typing import List, Tuple

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.engine.dedupe import merge_identical_ops
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.planning import EngineSimulator, PlanConfig, plan
from xflowrl.planning.simulator import EVERYWHERE, MERGE, Step, replay_route
from xflowrl.rules.sets import RULE_SETS

_COST = CostModel("analytic", profile="v100")


def _walk(xfers: XferSet, graph: Graph, steps: int) -> List[Graph]:
    """`graph` and the graphs of a walk from it (each step the last active
    xfer's last location): several shapes of graph per zoo graph."""
    out = [graph]
    for _ in range(steps):
        locs = xfers.locations(out[-1], 200, 2 * graph.num_ops())
        active = locs.active_xfers()
        if not len(active):
            break
        out.append(locs.apply(int(active[-1]), locs.counts[int(active[-1])] - 1))
    return out


def _same_lists(test: absltest.TestCase, full, part, through: int) -> None:
    """`part` holds `full`'s locations of xfers 0..`through`, bit for bit,
    and none after."""
    counts = np.asarray(full.counts)
    np.testing.assert_array_equal(np.asarray(part.counts)[:through + 1], counts[:through + 1])
    test.assertEqual(int(np.asarray(part.counts)[through + 1:].sum()), 0)
    for x in np.flatnonzero(counts[:through + 1]):
        x = int(x)
        test.assertEqual(part.hashes_of(x), full.hashes_of(x))
        test.assertEqual(part.matched_ops(x), full.matched_ops(x))
    test.assertEqual(part.costs(_COST)[:through + 1].tobytes(),
                     full.costs(_COST)[:through + 1].tobytes())


def _reference_route(xfers: XferSet, graph: Graph, route: List[Step], max_locations: int,
                     max_ops: int) -> List[Tuple[int, int]]:
    """A route's translation with every xfer enumerated at every step: own
    xfer's candidates first, then every active xfer's in order (what
    `full_route` computed before it enumerated prefixes)."""
    out = []
    for step in route:
        if step.xfer == MERGE:
            graph = merge_identical_ops(graph)
            out.append((MERGE, EVERYWHERE))
            continue
        locs = xfers.locations(graph, max_locations, max_ops)
        xfer, location = step.xfer, step.location
        if location == EVERYWHERE:
            order = [step.xfer] + [int(x) for x in locs.active_xfers() if x != step.xfer]
            xfer, location = next((x, locs.hashes_of(x).index(step.after)) for x in order
                                  if locs.counts[x] and step.after in locs.hashes_of(x))
        graph = locs.apply(xfer, location)
        out.append((xfer, location))
    return out


class LocationsThroughTest(absltest.TestCase):

    def test_a_prefix_of_the_rules_keeps_their_locations_exactly(self):
        # Every zoo graph (and two graphs of a walk from it) under every
        # named rule set: the first, a middle and the last active xfer, and
        # the one just before the first active one.
        checked = 0
        for name in RULE_SETS:
            xfers = XferSet.from_name(name)
            for graph_name in zoo.GRAPHS:
                for graph in _walk(xfers, zoo.get_graph(graph_name, **zoo.REDUCED.get(
                        graph_name, {})), 2):
                    full = xfers.locations(graph, 200, 2 * graph.num_ops())
                    active = full.active_xfers()
                    if not len(active):
                        continue
                    for through in {int(active[0]), int(active[len(active) // 2]),
                                    int(active[-1]), max(int(active[0]) - 1, 0)}:
                        part = xfers.locations(graph, 200, 2 * graph.num_ops(),
                                               through=through)
                        _same_lists(self, full, part, through)
                        checked += 1
        self.assertGreater(checked, 100)

    def test_the_last_xfer_is_the_full_enumeration_and_bad_prefixes_raise(self):
        xfers = XferSet.from_name("tensat")
        graph = zoo.get_graph("squeezenet1_1")
        full = xfers.locations(graph, 200)
        last = xfers.locations(graph, 200, through=len(xfers) - 1)
        self.assertEqual(last.counts, full.counts)
        self.assertEqual(last.hashes(), full.hashes())
        for bad in (-1, len(xfers)):
            with self.assertRaises(ValueError):
                xfers.locations(graph, 200, through=bad)

    def test_a_prefix_drops_duplicates_of_the_earlier_xfers(self):
        # A rule set holding one rule twice: the copy's candidates are all
        # duplicates of the first's, in the full enumeration and in the
        # prefix through the copy alike; alone, the copy has them all.
        xfers = XferSet.from_name("tensat")
        graph = zoo.get_graph("squeezenet1_1")
        full = xfers.locations(graph, 200)
        rule = xfers.rules[int(full.active_xfers()[0])]
        twice = XferSet([rule, rule])
        alone = XferSet([rule]).locations(graph, 200)
        self.assertGreater(alone.counts[0], 0)
        for part in (twice.locations(graph, 200), twice.locations(graph, 200, through=1)):
            self.assertEqual(part.counts, [alone.counts[0], 0])
            self.assertEqual(part.hashes_of(0), alone.hashes_of(0))
        self.assertEqual(twice.locations(graph, 200, through=0).counts, [alone.counts[0], 0])


class FullRouteTest(absltest.TestCase):

    def _env(self, graph: str, rules: str) -> GraphEnv:
        return GraphEnv(zoo.get_graph(graph), XferSet.from_name(rules), _COST,
                        EnvConfig(max_steps=NO_STEP_LIMIT))

    def test_planned_routes_translate_as_with_every_xfer_enumerated(self):
        # The deployed configuration's routes (multi-location and merge
        # steps) on graphs whose routes use early and late xfers of large
        # rule sets; the translation, its real steps and the replayed graph
        # are the full enumeration's.
        for graph, rules in (("squeezenet1_1", "generated"), ("squeezenet1_1", "primitive"),
                             ("nasrnn", "tensat")):
            env = self._env(graph, rules)
            planner_config = PlanConfig(everywhere=True, merge_identical=True,
                                        max_real_steps=150, time_limit_s=600.0, seed=0)
            result = plan(env, planner_config)
            sim = EngineSimulator.of(env, merge_identical=True)
            # The route as steps again: replaying it step by step gives each
            # multi-location step's graph hash.
            names = {name: i for i, name in enumerate(env.xfers.names)}
            steps, g = [], env.initial_graph
            for name, location in result.applied:
                if location == EVERYWHERE:
                    steps.append(Step(MERGE, EVERYWHERE))
                    g = merge_identical_ops(g)
                    continue
                g = env.xfers.locations(g, env.config.max_locations, env.max_ops).apply(
                    names[name], location)
                steps.append(Step(names[name], EVERYWHERE, g.hash()))
            self.assertTrue(any(s.xfer != MERGE for s in steps))
            got = sim.full_route(env.initial_graph, steps)
            self.assertEqual(sim.real_steps, sum(s.xfer != MERGE for s in steps))
            self.assertEqual(got, _reference_route(env.xfers, env.initial_graph, steps,
                                                   env.config.max_locations, env.max_ops))
            self.assertEqual(got, [(names.get(n, MERGE), l) for n, l in result.applied])
            self.assertEqual(replay_route(env, result.applied).hash(), result.graph.hash())

    def test_a_graph_only_a_later_xfer_gives_is_found_there(self):
        # A step named by an earlier xfer whose graph only a later xfer's
        # candidate gives: the prefix lacks it, the full enumeration has it.
        env = self._env("squeezenet1_1", "tensat")
        locs = env.xfers.locations(env.initial_graph, env.config.max_locations, env.max_ops)
        active = [int(x) for x in locs.active_xfers()]
        self.assertGreaterEqual(len(active), 2)
        early, late = active[0], active[-1]
        target = locs.hashes_of(late)[0]
        self.assertNotIn(target, locs.hashes_of(early))
        sim = EngineSimulator.of(env)
        route = [Step(early, EVERYWHERE, target)]
        self.assertEqual(sim.full_route(env.initial_graph, route), [(late, 0)])
        self.assertEqual(sim.real_steps, 1)
        self.assertEqual(_reference_route(env.xfers, env.initial_graph, route,
                                          env.config.max_locations, env.max_ops), [(late, 0)])
        with self.assertRaises(RuntimeError):
            sim.full_route(env.initial_graph, [Step(early, EVERYWHERE, 12345)])


if __name__ == "__main__":
    absltest.main()
