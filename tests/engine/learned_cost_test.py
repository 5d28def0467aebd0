"""Tests of the learned GPU cost backend: its arithmetic, its specs, and the
consumers (environment, greedy, TASO's search) taking it like any backend."""

import json
import os
import tempfile

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, GraphBuilder, XferSet
from xflowrl.engine import cost as engine_cost
from xflowrl.engine.cost import FITTED_CLASSES, cost_model_from_spec, parse_learned_profile

# Distinct per class, so that a class priced with another's row shows.
_ROWS = {cls: [0.001 * (k + 1), 0.01 * (k + 2), 0.0001 * (k + 3)]
         for k, cls in enumerate(FITTED_CLASSES)}


def _profile(folder: str, dtypes=("float32",)) -> str:
    path = os.path.join(folder, "learned_test.json")
    with open(path, "w") as f:
        json.dump({"dtypes": {d: {"coefficients": _ROWS} for d in dtypes}}, f)
    return path


def _linear(cls: str, flops: float, nbytes: float) -> float:
    c = _ROWS[cls]
    return c[0] + c[1] * flops * 1e-9 + c[2] * nbytes * 1e-6


class LearnedSpecTest(absltest.TestCase):

    def test_precision_aliases(self):
        self.assertEqual(parse_learned_profile("h200"), ("h200", "float32"))
        self.assertEqual(parse_learned_profile("h200:bf16"), ("h200", "bfloat16"))
        self.assertEqual(parse_learned_profile("h100:FP16"), ("h100", "float16"))
        with self.assertRaisesRegex(ValueError, "unknown precision"):
            parse_learned_profile("h200:int8")

    def test_shipped_cards_load_from_a_spec(self):
        for card in ("h200", "h100"):
            for model in (CostModel(f"learned/{card}"), cost_model_from_spec(f"learned/{card}"),
                          CostModel("learned", profile=f"{card}:fp32")):
                self.assertEqual(model.name, f"learned/{card}")
                self.assertGreater(zoo.get_graph("resnet50").cost(model), 0.0)

    def test_no_card_is_the_default_card(self):
        for model in (CostModel("learned"), CostModel("learned", profile="v100")):
            self.assertEqual(model.name, f"learned/{engine_cost.GPU_PROFILE_LEARNED_DEFAULT}")

    def test_a_missing_precision_or_card_says_so(self):
        with self.assertRaisesRegex(ValueError, "no bfloat16 coefficients"):
            CostModel("learned/h200:bf16")
        with self.assertRaisesRegex(ValueError, "no learned cost profile for card 'z9'"):
            CostModel("learned/z9")

    def test_learned_is_listed(self):
        self.assertIn("learned", engine_cost.BACKENDS)
        self.assertIn("learned", engine_cost.available_backends())


class LearnedArithmeticTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.model = CostModel("learned", profile=_profile(self.dir, ("float32", "bfloat16")))

    def test_matmul_and_its_unfused_activation(self):
        m, k, n = 64, 128, 256
        for act, extra in (("NONE", 0.0), ("RELU", 1.0)):
            b = GraphBuilder()
            x = b.input(shape=(m, k), name="x")
            w = b.weight(shape=(k, n), name="w")
            g = b.build([b.matmul(a=x, b=w, activation=act)])
            flops = 2.0 * m * n * k
            nbytes = 4.0 * (m * k + k * n + m * n)
            want = _linear("matmul", flops, nbytes) + extra * _linear("eltwise", m * n, 8.0 * m * n)
            self.assertAlmostEqual(g.cost(self.model), want, places=12)

    def test_conv_relu_is_one_kernel_and_sigmoid_two(self):
        costs = {}
        for act in ("NONE", "RELU", "SIGMOID"):
            b = GraphBuilder()
            x = b.input(shape=(1, 16, 32, 32), name="x")
            w = b.weight(shape=(32, 16, 3, 3), name="w")
            g = b.build([b.conv2d(input=x, weight=w, strides=(1, 1), padding="SAME",
                                  activation=act)])
            costs[act] = g.cost(self.model)
        out = 32 * 32 * 32
        # RELU adds its FLOPs to the conv kernel (op_work), not a kernel.
        self.assertAlmostEqual(costs["RELU"] - costs["NONE"], _ROWS["conv"][1] * out * 1e-9,
                               places=12)
        self.assertAlmostEqual(costs["SIGMOID"] - costs["RELU"],
                               _linear("eltwise", out, 8.0 * out), places=12)

    def test_graph_cost_is_the_sum_of_its_ops(self):
        g = zoo.get_graph("squeezenet1_1")
        self.assertAlmostEqual(g.cost(self.model), float(np.sum(g.op_costs(self.model))),
                               places=9)

    def test_precision_selects_its_row_set(self):
        path = os.path.join(self.dir, "learned_two.json")
        rows16 = {cls: [2 * v for v in row] for cls, row in _ROWS.items()}
        with open(path, "w") as f:
            json.dump({"dtypes": {"float32": {"coefficients": _ROWS},
                                  "bfloat16": {"coefficients": rows16}}}, f)
        g = zoo.get_graph("resnet18")
        fp32 = g.cost(CostModel("learned", profile=path))
        bf16 = CostModel("learned", profile=f"{path}:bf16")
        self.assertEqual(bf16.name, "learned/learned_two:bfloat16")
        self.assertAlmostEqual(g.cost(bf16), 2 * fp32, places=9)

    def test_negative_coefficient_refused(self):
        path = os.path.join(self.dir, "learned_bad.json")
        rows = dict(_ROWS, conv=[-1.0, 0.0, 0.0])
        with open(path, "w") as f:
            json.dump({"dtypes": {"float32": {"coefficients": rows}}}, f)
        with self.assertRaisesRegex(Exception, "negative"):
            CostModel("learned", profile=path)


class LearnedConsumersTest(absltest.TestCase):
    """The environment, greedy and TASO's search take the backend."""

    def test_greedy_and_search_lower_the_learned_cost(self):
        # pylint: disable=import-outside-toplevel
        from xflowrl.env import EnvConfig, GraphEnv
        from xflowrl.search.greedy import greedy_walk
        model = CostModel("learned/h200")
        graph = zoo.get_graph("small_cnn")
        xfers = XferSet.default()
        env = GraphEnv(graph, xfers, model, EnvConfig(max_locations=50))
        walk = greedy_walk(env)
        self.assertLess(walk.cost, graph.cost(model))
        self.assertAlmostEqual(walk.graph.cost(model), walk.cost, places=9)
        result = xfers.search(graph, model, budget=20)
        self.assertLessEqual(result.best_cost, graph.cost(model))
        self.assertAlmostEqual(result.graph.cost(model), result.best_cost, places=9)
        obs = env.reset()
        self.assertIsNotNone(obs)


if __name__ == "__main__":
    absltest.main()
