"""Every corpus member builds, costs, exports to ONNX and imports back, and
one-step greedy finds an improving substitution on most of them.

All 116 members take every check (about 10 s together on the shared 2-core
machine, most of it importing TensorFlow through `xflowrl.env`).
"""

import collections
import math

from absl.testing import absltest, parameterized

from xflowrl import corpus
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.executor.weights import random_weights
from xflowrl.onnx_io import load_onnx, to_onnx
from xflowrl.search import GreedyAgent

NAMES = [(spec.name.replace("/", "_").replace("-", "_"), spec.name)
         for spec in corpus.MEMBERS]
# The least share of a family's members on which greedy improves at once.
MIN_FAMILY_SHARE = 0.75


class MembersTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cost_models = {"cpu": CostModel("analytic"),
                           "v100": CostModel("analytic", profile="v100")}

    @parameterized.named_parameters(*NAMES)
    def test_builds_costs_and_round_trips_onnx(self, name):
        spec = corpus.CORPUS.spec(name)
        graph = spec.build()
        self.assertGreater(graph.num_ops(), 0)
        for profile, cost_model in self.cost_models.items():
            cost = graph.cost(cost_model)
            self.assertTrue(math.isfinite(cost) and cost > 0, (profile, cost))
        # Export with random weights (onnx.checker runs inside to_onnx) and
        # import back: same inputs, same output shapes, every weight valued.
        model = to_onnx(graph, random_weights(graph, seed=0, gain=spec.weight_gain))
        imported, weights = load_onnx(model)
        self.assertEqual(imported.inputs(), graph.inputs())
        self.assertEqual(imported.output_shapes(), graph.output_shapes())
        self.assertTrue(set(imported.weights()) <= set(weights))

    def test_greedy_improves_most_members_of_every_family(self):
        # Greedy's first step under analytic/v100 lowers the cost: a
        # distribution where nothing can be rewritten teaches nothing.
        xfers = XferSet.default()
        agent = GreedyAgent()
        improves = collections.defaultdict(list)
        for spec in corpus.MEMBERS:
            env = GraphEnv(spec.build(), xfers, self.cost_models["v100"],
                           EnvConfig(max_steps=200))
            observation = env.reset()
            noop = len(observation.xfer_mask) - 1
            improves[spec.family].append(agent.act(observation)[0] != noop)
        shares = {family: sum(v) / len(v) for family, v in improves.items()}
        for family, share in shares.items():
            self.assertGreaterEqual(share, MIN_FAMILY_SHARE, shares)


if __name__ == "__main__":
    absltest.main()
