"""The engine planner's inner loops in C (`xflowrl.planning._inner`)
against their numpy statements: pUCT's selection
(`xflowrl.planning.search.select_numpy`), an expansion's arrays
(`__expansion_arrays_numpy` below, what `EngineSimulator.expand` computed
before) and the `xfer` prior's logits (`XferCostPrior.logits_numpy`)."""

import math
from typing import Optional
from unittest import mock

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.planning import Planner, _inner, deployed_config, plan
from xflowrl.planning.priors import XferCostPrior
from xflowrl.planning.search import select_numpy
from xflowrl.planning.simulator import EVERYWHERE, Expansion
from xflowrl.planning.tree import Node


def _expansion_arrays_numpy(active: np.ndarray, counts: np.ndarray, per_xfer: np.ndarray,
                            cost: float, everywhere: bool):
    """(actions, costs, singles) of an expansion from the engine's step
    arrays in numpy: the reference `_inner.expansion_arrays` is held to."""
    valid = np.arange(per_xfer.shape[1]) < counts[:, None]
    rows, columns = np.nonzero(valid)
    several = counts >= 2 if everywhere else np.zeros(len(counts), bool)
    singles, macros = len(rows), int(np.count_nonzero(several))
    actions = np.empty((singles + macros, 2), np.int64)
    actions[:singles, 0] = active[rows]
    actions[:singles, 1] = columns
    costs = per_xfer[valid]
    if macros:
        actions[singles:, 0] = active[several]
        actions[singles:, 1] = EVERYWHERE
        # Each candidate's gain, clipped at zero; an invalid location's
        # cost is NaN, which np.fmin passes over: no gain.
        gains = np.fmin(per_xfer[several] - cost, 0.0)
        costs = np.concatenate([costs, cost + gains.sum(axis=1)])
    return actions, costs, singles


def _random_node(rng: np.random.Generator, count: int, singles: int) -> Node:
    """An expanded node of `count` actions (the first `singles` candidates),
    some children built, some actions dead or taken at the root only, with
    values drawn from a few levels so that ties occur."""
    costs = rng.choice([1.0, 1.5, 2.0, 2.0 + 1e-12, 3.0], size=count) + (
        rng.random(count) * rng.integers(0, 2))
    actions = np.zeros((count, 2), np.int64)
    expansion = Expansion(None, 2.0, None, actions, costs, singles)  # type: ignore[arg-type]
    node = Node(None, 2.0, None)  # type: ignore[arg-type]
    logits = rng.normal(size=count) * rng.choice([0.0, 1.0, 30.0])
    node.attach(expansion, lambda _: logits)
    node.edge_visits = rng.integers(0, 5, count)
    node.visits = int(rng.integers(0, 50))
    node.dead = rng.random(count) < rng.choice([0.0, 0.3, 1.0])
    node.root_only = rng.random(count) < rng.choice([0.0, 0.3])
    for index in rng.choice(count, size=int(rng.integers(0, count + 1)), replace=False):
        child = Node(None, float(costs[index]), node)  # type: ignore[arg-type]
        child.best_cost = float(rng.choice([0.5, 1.0, costs[index], 2.5]))
        node.children[int(index)] = child
    return node


def _native(node: Node, c_puct: float) -> Optional[int]:
    index = _inner.select(node, c_puct)
    assert index != -2, "no NaN here"
    return None if index < 0 else index


class SelectTest(absltest.TestCase):

    def test_the_same_action_as_numpy_on_random_nodes(self):
        rng = np.random.default_rng(0)
        outcomes = {"none": 0, "tie": 0, "action": 0}
        for _ in range(3000):
            count = int(rng.integers(1, 40))
            node = _random_node(rng, count, int(rng.integers(0, count + 1)))
            c_puct = float(rng.choice([0.0, 1.25, 4.0]))
            expected = select_numpy(node, c_puct)
            self.assertEqual(_native(node, c_puct), expected)
            if expected is None:
                outcomes["none"] += 1
            else:
                alive = ~(node.dead | node.root_only)
                values = node.action_values()[alive]
                outcomes["tie" if values.min() == values.max() else "action"] += 1
        # The draws reach every branch: no live action, all values equal, a spread.
        self.assertTrue(all(n > 50 for n in outcomes.values()), outcomes)

    def test_a_nan_value_is_left_to_numpy(self):
        rng = np.random.default_rng(1)
        node = _random_node(rng, 8, 8)
        node.dead[:] = False
        node.root_only[:] = False
        assert node.expansion is not None
        node.expansion.costs[3] = np.nan
        self.assertEqual(_inner.select(node, 1.25), -2)
        planner = Planner.__new__(Planner)
        planner.config = deployed_config()
        self.assertEqual(planner._select(node), select_numpy(node, 1.25))

    def test_arrays_laid_out_otherwise_are_left_to_numpy(self):
        # `select` reads the node's arrays as `Node` makes them (contiguous
        # float64, int64 and bool); any other layout is numpy's to handle.
        rng = np.random.default_rng(2)
        planner = Planner.__new__(Planner)
        planner.config = deployed_config()
        changes = {
            "strided prior": lambda n: setattr(n, "prior", np.repeat(n.prior, 2)[::2]),
            "int32 visits": lambda n: setattr(n, "edge_visits", n.edge_visits.astype(np.int32)),
            "strided dead": lambda n: setattr(n, "dead", np.repeat(n.dead, 2)[::2]),
            "float32 costs": lambda n: setattr(n, "expansion", n.expansion._replace(
                costs=n.expansion.costs.astype(np.float32))),
            "a list of flags": lambda n: setattr(n, "root_only", list(n.root_only)),
        }
        for name, change in changes.items():
            node = _random_node(rng, 12, 6)
            node.dead[:] = False
            change(node)
            self.assertEqual(_inner.select(node, 1.25), -2, name)
            self.assertEqual(planner._select(node), select_numpy(node, 1.25), name)
        node = _random_node(rng, 12, 6)
        node.prior = node.prior[:-1]  # a length the actions do not have
        self.assertEqual(_inner.select(node, 1.25), -2)

    def test_every_select_of_a_planning_run_agrees(self):
        env = GraphEnv(zoo.get_graph("small_cnn"), XferSet.default(), CostModel("analytic"),
                       EnvConfig(max_steps=NO_STEP_LIMIT))
        planner = Planner(env, deployed_config(max_real_steps=300))
        seen = []
        native = planner._select

        def both(node):
            expected = select_numpy(node, planner.config.c_puct)
            got = native(node)
            self.assertEqual(got, expected)
            seen.append(got)
            return got

        planner._select = both
        planner.run()
        self.assertGreater(len(seen), 20)


class PlanningRunTest(absltest.TestCase):

    def test_a_run_with_the_numpy_statements_takes_the_same_route(self):
        env = GraphEnv(zoo.get_graph("squeezenet1_1"), XferSet.default(), CostModel("analytic"),
                       EnvConfig(max_steps=NO_STEP_LIMIT))
        config = deployed_config(max_real_steps=150)
        native = plan(env, config)
        with mock.patch.object(_inner, "select", lambda node, c: -2), \
                mock.patch.object(_inner, "xfer_cost_logits", lambda *args: None), \
                mock.patch.object(_inner, "expansion_arrays",
                                  side_effect=_expansion_arrays_numpy) as arrays:
            numpy = plan(env, config)
        self.assertGreater(arrays.call_count, 100)
        self.assertLess(native.cost, env.initial_cost)
        self.assertGreater(native.rule_enumerations, 0)   # multi-location actions taken
        self.assertEqual(native.applied, numpy.applied)
        self.assertEqual(native.cost, numpy.cost)
        self.assertEqual((native.real_steps, native.applies, native.rule_enumerations,
                          native.nodes, native.stopped),
                         (numpy.real_steps, numpy.applies, numpy.rule_enumerations,
                          numpy.nodes, numpy.stopped))


def _step_arrays(rng: np.random.Generator, width: int):
    """Made-up step arrays: ascending active xfers, their counts, their
    candidates' costs [A, width], NaN past the counts."""
    num = int(rng.integers(1, 12))
    active = np.sort(rng.choice(400, size=num, replace=False)).astype(np.int64)
    counts = rng.integers(1, width + 1, num).astype(np.int64)
    per_xfer = np.full((num, width), np.nan)
    for i, count in enumerate(counts):
        per_xfer[i, :count] = 2.0 + rng.normal(size=count) * rng.choice([1e-3, 0.1, 1.0])
    return active, counts, per_xfer


# Whether numpy's exp and log are the C library's here (no AVX512F): then
# the prior's logits agree to the bit, elsewhere to rounding.
_X = np.linspace(-700.0, 50.0, 10_001)
_LIBM = (all(np.exp(_X) == [math.exp(x) for x in _X])
         and all(np.log(_X[_X > 0]) == [math.log(x) for x in _X[_X > 0]]))


class ArraysTest(absltest.TestCase):

    def test_the_pairwise_sum_is_numpy_s(self):
        rng = np.random.default_rng(2)
        for n in list(range(0, 300)) + [511, 1000, 4097]:
            values = rng.normal(size=n) * np.exp(rng.normal(size=n) * 5)
            self.assertEqual(_inner.pairwise_sum(values), values.sum(), n)

    def test_expansion_arrays_are_numpy_s(self):
        rng = np.random.default_rng(3)
        for _ in range(500):
            width = int(rng.choice([1, 2, 7, 8, 9, 50, 129, 200]))
            active, counts, per_xfer = _step_arrays(rng, width)
            for everywhere in (False, True):
                args = (active, counts, per_xfer, 2.0, everywhere)
                actions, costs, singles = _inner.expansion_arrays(*args)
                want_actions, want_costs, want_singles = _expansion_arrays_numpy(*args)
                self.assertEqual(singles, want_singles)
                np.testing.assert_array_equal(actions, want_actions)
                np.testing.assert_array_equal(costs, want_costs)
                self.assertEqual(int(np.sum(actions[:, 1] == EVERYWHERE)),
                                 int(np.sum(counts >= 2)) if everywhere else 0)

    def test_more_candidates_than_the_rows_hold_is_refused(self):
        active, counts, per_xfer = np.array([3]), np.array([3]), np.zeros((1, 2))
        with self.assertRaisesRegex(ValueError, "xfer 3 has 3 candidates; the rows hold 2"):
            _inner.expansion_arrays(active, counts, per_xfer, 1.0, True)

    def test_xfer_prior_logits_are_numpy_s(self):
        rng = np.random.default_rng(4)
        for _ in range(500):
            active, counts, per_xfer = _step_arrays(rng, int(rng.choice([2, 9, 200])))
            actions, costs, singles = _expansion_arrays_numpy(active, counts, per_xfer, 2.0,
                                                             bool(rng.integers(0, 2)))
            if rng.random() < 0.2:  # a multi-location action whose xfer has no candidate
                actions = np.concatenate([actions, [[999, EVERYWHERE]]])
                costs = np.concatenate([costs, [1.5]])
            expansion = Expansion(None, 2.0, None, actions, costs, singles)  # type: ignore[arg-type]
            prior = XferCostPrior(initial_cost=float(rng.choice([1.0, 3.0])),
                                  temperature=float(rng.choice([0.5, 1.0])))
            got, want = prior.logits(expansion), prior.logits_numpy(expansion)
            if _LIBM:
                np.testing.assert_array_equal(got, want)
            else:
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)

    def test_candidates_out_of_order_or_nan_are_left_to_numpy(self):
        actions = np.array([[5, 0], [2, 0], [2, 1]], np.int64)
        costs = np.array([1.0, 2.0, 3.0])
        self.assertIsNone(_inner.xfer_cost_logits(actions, costs, 3, 2.0, 1.0))
        prior = XferCostPrior(initial_cost=1.0)
        expansion = Expansion(None, 2.0, None, actions, costs, 3)  # type: ignore[arg-type]
        np.testing.assert_array_equal(prior.logits(expansion), prior.logits_numpy(expansion))
        ordered = np.array([[2, 0], [2, 1], [5, 0]], np.int64)
        self.assertIsNone(_inner.xfer_cost_logits(ordered, np.array([1.0, np.nan, 3.0]), 3,
                                                  2.0, 1.0))


if __name__ == "__main__":
    absltest.main()
