"""The planner's pUCT selection in C (`xflowrl.planning._puct`) against its
numpy statement (`xflowrl.planning.search.select_numpy`)."""

from typing import Optional

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.planning import Planner, _puct, deployed_config
from xflowrl.planning.search import select_numpy
from xflowrl.planning.simulator import Expansion
from xflowrl.planning.tree import Node


def _random_node(rng: np.random.Generator, count: int, singles: int) -> Node:
    """An expanded node of `count` actions (the first `singles` candidates),
    some children built, some actions dead or taken at the root only, with
    values drawn from a few levels so that ties occur."""
    costs = rng.choice([1.0, 1.5, 2.0, 2.0 + 1e-12, 3.0], size=count) + (
        rng.random(count) * rng.integers(0, 2))
    actions = np.zeros((count, 2), np.int64)
    expansion = Expansion(None, 2.0, None, actions, costs, singles)  # type: ignore[arg-type]
    node = Node(None, 2.0, None)  # type: ignore[arg-type]
    node.attach(expansion, rng.normal(size=count) * rng.choice([0.0, 1.0, 30.0]))
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
    index = _puct.select(node, c_puct)
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
        self.assertEqual(_puct.select(node, 1.25), -2)
        planner = Planner.__new__(Planner)
        planner.config = deployed_config()
        self.assertEqual(planner._select(node), select_numpy(node, 1.25))

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


if __name__ == "__main__":
    absltest.main()
