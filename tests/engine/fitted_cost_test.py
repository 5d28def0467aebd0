"""Tests of the fitted cost backend: onnxruntime's fusions in graph context,
and every consumer of costs (graph cost, op costs, search, candidate costs,
the environment) agreeing on them."""

import json
import os
import tempfile

from absl.testing import absltest
import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, GraphBuilder, XferSet, fitted_features
from xflowrl.engine.cost import FITTED_CLASSES, load_fitted_coefficients
from xflowrl.env import EnvConfig, GraphEnv

# Distinct per class, so a cost says which class priced it.
COEFFICIENTS = {
    "conv": [0.010, 10.0, 0.10], "matmul": [0.020, 20.0, 0.20], "pool": [0.003, 0.0, 0.3],
    "eltwise": [0.004, 0.0, 0.4], "batchnorm": [0.005, 0.0, 0.5],
    "concat": [0.006, 0.0, 0.6], "copy": [0.007, 0.0, 0.7, 1.0, 2.0],
}


def _rounded(value: float) -> float:
    """Rounds to 12 digits so assertCountEqual compares costs."""
    return round(value, 12)


def _model(coefficients=None) -> CostModel:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "test.json")
        with open(path, "w") as f:
            json.dump({"coefficients": coefficients or COEFFICIENTS}, f)
        return CostModel("fitted", profile=path)


def _conv_chain(bn=True, relu=True, extra_reader=False, residual=False, pool=False):
    """[pool ->] conv [-> bn] [-> + shortcut] [-> relu]; the shortcut is the
    pool's output when there is a pool, else the graph input."""
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, 8, 16, 16))
    if pool:
        x = b.maxpool2d(input=x, kernel=(3, 3), strides=(1, 1))
    y = b.conv2d(input=x, weight=b.weight(name="w", shape=(8, 8, 3, 3)))
    conv_out = y
    if bn:
        y = b.batchnorm(input=y, scale=b.weight(name="s", shape=(8,)),
                        bias=b.weight(name="b", shape=(8,)),
                        mean=b.weight(name="m", shape=(8,)), var=b.weight(name="v", shape=(8,)))
    if residual:
        y = b.add(x=y, y=x)
    if relu:
        y = b.relu(input=y)
    outs = [y]
    if extra_reader:
        outs.append(b.sigmoid(input=conv_out))
    return b.build(outs)


def _single(make, shape):
    """A graph of one op applied to an input of `shape`."""
    b = GraphBuilder()
    return b.build([make(b, b.input(name="x", shape=shape))])


def _single_conv(pool=False):
    b = GraphBuilder()
    x = b.input(name="x", shape=(1, 8, 16, 16))
    if pool:
        x = b.maxpool2d(input=x, kernel=(3, 3), strides=(1, 1))
    return b.build([b.conv2d(input=x, weight=b.weight(name="w", shape=(8, 8, 3, 3)))])


class FusionTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.model = _model()

    def test_conv_bn_relu_chain_costs_one_conv(self):
        self.assertGreater(_single_conv().cost(self.model), 0)
        for kwargs in ({}, {"residual": True, "pool": True}, {"bn": False}, {"relu": False},
                       {"pool": True}):
            conv = _single_conv(kwargs.get("pool", False)).cost(self.model)
            chain = _conv_chain(**kwargs)
            self.assertAlmostEqual(chain.cost(self.model), conv, places=12, msg=str(kwargs))
            types = [op.type for op in chain.ops()]
            costs = dict(zip(types, chain.op_costs(self.model)))
            for fused in ("batchnorm", "relu", "add"):
                if fused in costs:
                    self.assertEqual(costs[fused], 0.0, msg=f"{fused} in {kwargs}")

    def test_residual_add_of_a_graph_input_is_not_fused(self):
        # onnxruntime keeps such an Add (and the relu after it): the graph
        # input is not in its NCHWc layout (tests/measure/ort_runtime_test.py).
        g = _conv_chain(residual=True)
        costs = dict(zip([op.type for op in g.ops()], g.op_costs(self.model)))
        self.assertEqual(costs["batchnorm"], 0.0)
        self.assertGreater(costs["add"], 0.0)
        self.assertGreater(costs["relu"], 0.0)

    def test_no_fusion_when_the_conv_output_has_another_reader(self):
        g = _conv_chain(extra_reader=True)
        costs = dict(zip([op.type for op in g.ops()], g.op_costs(self.model)))
        self.assertGreater(costs["batchnorm"], 0)
        # The relu now follows an unfused batch-norm: it runs as its own kernel.
        self.assertGreater(costs["relu"], 0)
        self.assertGreater(g.cost(self.model), _single_conv().cost(self.model))

    def test_analytic_backend_still_sums_context_free_costs(self):
        model = CostModel("analytic")
        g = _conv_chain()
        costs = g.op_costs(model)
        self.assertTrue(all(c > 0 for c, op in zip(costs, g.ops())
                            if op.type in ("conv2d", "batchnorm", "relu")))
        self.assertAlmostEqual(g.cost(model), sum(costs))

    def test_transpose_and_split(self):
        b = GraphBuilder()
        x = b.input(name="x", shape=(64, 32))
        t = b.transpose(input=x, perm=(1, 0))                  # read only by a matmul
        m = b.matmul(a=t, b=b.weight(name="w", shape=(64, 16)))
        t2 = b.transpose(input=m, perm=(1, 0))                 # read by a relu: a copy
        r = b.relu(input=t2)
        s0, s1 = b.split(input=r, axis=0, sizes=(8, 8))        # a copy
        g = b.build([s0, s1])
        costs = {op.type + ("2" if op.type == "transpose" and op.inputs[0][0] == m.id[0] else ""):
                 c for op, c in zip(g.ops(), g.op_costs(self.model))}
        self.assertEqual(costs["transpose"], 0.0)
        mb = 4 * 2 * 32 * 16 / 1e6
        self.assertAlmostEqual(costs["transpose2"], 0.007 + 0.7 * mb)
        self.assertAlmostEqual(costs["split"], 0.007 + 0.7 * mb)

    def test_nchwc_reorders(self):
        # onnxruntime runs convs in its blocked NCHWc layout; a split is not
        # blocked: a ReorderOutput (charged to the conv) before it and a
        # ReorderInput (charged to the next conv) after it, each one copy.
        b = GraphBuilder()
        x = b.input(name="x", shape=(1, 8, 16, 16))
        y = b.conv2d(input=x, weight=b.weight(name="w", shape=(32, 8, 1, 1)))
        p0, p1 = b.split(input=y, axis=1, sizes=(16, 16))
        z = b.conv2d(input=p0, weight=b.weight(name="w2", shape=(16, 16, 1, 1)))
        g = b.build([z, p1])
        costs = dict(zip([op.guid for op in g.ops()], g.op_costs(self.model)))
        types = {op.guid: op.type for op in g.ops()}
        conv1, conv2 = [guid for guid in costs if types[guid] == "conv2d"]
        split = next(guid for guid in costs if types[guid] == "split")
        model = self.model
        alone1 = _single(lambda b, x: b.conv2d(
            input=x, weight=b.weight(name="w", shape=(32, 8, 1, 1))), (1, 8, 16, 16))
        alone2 = _single(lambda b, x: b.conv2d(
            input=x, weight=b.weight(name="w2", shape=(16, 16, 1, 1))), (1, 16, 16, 16))
        copy = lambda elements: 0.007 + 0.7 * 8 * elements / 1e6 + 1.0 * max(
            0.0, 8 * elements / 1e6 - 2.0)
        # Alone, each conv reorders its output (a graph output) and reads
        # its graph input directly.
        self.assertAlmostEqual(costs[conv1], alone1.cost(model))
        self.assertAlmostEqual(costs[conv2], alone2.cost(model) + copy(16 * 256))
        self.assertAlmostEqual(costs[split], copy(32 * 256))
        self.assertAlmostEqual(g.cost(model), sum(costs.values()))

    def test_matmul_activation_is_a_separate_kernel(self):
        shapes = [(64, 32), (32, 16)]
        cls, flops, nbytes = fitted_features("matmul", shapes, activation="RELU")
        self.assertEqual((cls, flops), ("matmul", 2 * 64 * 32 * 16))
        b = GraphBuilder()
        x = b.input(name="x", shape=(64, 32))
        g = b.build([b.matmul(a=x, b=b.weight(name="w", shape=(32, 16)), activation="RELU")])
        out = 64 * 16
        expected = (0.020 + 20.0 * flops * 1e-9 + 0.2 * nbytes * 1e-6
                    + 0.004 + 0.4 * 8 * out * 1e-6)
        self.assertAlmostEqual(g.cost(self.model), expected)

    def test_hinge_term(self):
        # copy: 0.7 ms/MB, plus 1.0 ms/MB above 2 MB.
        big = fitted_features("transpose", [(1024, 1024)], perm=(1, 0))
        self.assertEqual(big[0], "copy")
        b = GraphBuilder()
        x = b.input(name="x", shape=(1024, 1024))
        g = b.build([b.relu(input=b.transpose(input=x, perm=(1, 0)))])
        mb = big[2] * 1e-6
        transpose_cost = g.op_costs(self.model)[[op.type for op in g.ops()].index("transpose")]
        self.assertAlmostEqual(transpose_cost, 0.007 + 0.7 * mb + 1.0 * (mb - 2.0))

    def test_bad_coefficients(self):
        missing = dict(COEFFICIENTS)
        del missing["pool"]
        with self.assertRaisesRegex(ValueError, "no coefficients for op class 'pool'"):
            _model(missing)
        with self.assertRaisesRegex(ValueError, "unknown op class 'gemm'"):
            _model({**COEFFICIENTS, "gemm": [0, 0, 0]})
        with self.assertRaisesRegex(ValueError, "negative"):
            _model({**COEFFICIENTS, "conv": [-1, 0, 0]})
        with self.assertRaisesRegex(ValueError, "no fitted cost profile"):
            CostModel("fitted", profile="nonexistent")

    def test_shipped_profile_loads(self):
        coefficients = load_fitted_coefficients("cpu")
        self.assertCountEqual(coefficients, FITTED_CLASSES)
        model = CostModel("fitted")
        self.assertEqual(model.name, "fitted/cpu")
        self.assertGreater(zoo.get_graph("small_cnn").cost(model), 0)


class ConsumersAgreeTest(absltest.TestCase):
    """Graph cost, op costs, search and candidate costs use one function."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.xfers = XferSet.from_name("default")

    def setUp(self):
        super().setUp()
        self.model = _model()
        self.graph = zoo.get_graph("resnet18")

    def test_graph_cost_is_the_sum_of_op_costs(self):
        for name in ("resnet18", "squeezenet1_1", "bert"):
            g = zoo.get_graph(name)
            self.assertAlmostEqual(g.cost(self.model), sum(g.op_costs(self.model)), places=9)

    def test_candidate_and_search_costs_agree_with_graph_cost(self):
        locs = self.xfers.locations(self.graph, 20)
        costs = locs.costs(self.model)
        checked = 0
        for x, count in enumerate(locs.counts):
            for l in range(min(count, 2)):
                candidate = locs.apply(x, l)
                self.assertAlmostEqual(costs[x, l], candidate.cost(self.model), places=9)
                # A fresh model (no memo) agrees too: costs depend on the graph only.
                self.assertAlmostEqual(costs[x, l], candidate.cost(_model()), places=9)
                checked += 1
        self.assertGreater(checked, 3)
        result = self.xfers.search(self.graph, self.model, alpha=1.0, budget=5)
        self.assertAlmostEqual(result.best_cost, result.graph.cost(_model()), places=9)
        self.assertAlmostEqual(result.initial_cost, self.graph.cost(self.model), places=9)

    def test_environment_cost_deltas(self):
        env = GraphEnv(self.graph, self.xfers, self.model, EnvConfig(max_locations=20))
        obs = env.reset()
        self.assertAlmostEqual(env.initial_cost, self.graph.cost(self.model))
        x = int(np.flatnonzero(obs.xfer_mask[:-1])[0])
        step = env.step((x, 0))
        delta = obs.locations.cost_delta_of(x)[0]
        self.assertAlmostEqual(delta, 100 * (step.info["cost"] - env.initial_cost)
                               / env.initial_cost, places=4)
        self.assertAlmostEqual(step.info["cost"], env.graph.cost(_model()), places=9)

    def test_folding_a_batchnorm_the_runtime_already_folds_gains_nothing(self):
        # ResNet's conv+BN fusion rewrites: the analytic model sees a gain,
        # the fitted model (like onnxruntime) none.
        env = GraphEnv(self.graph, self.xfers, self.model, EnvConfig(max_locations=20))
        obs = env.reset()
        names = self.xfers.names
        conv_bn = [x for x, n in enumerate(names) if n.startswith("conv_bn_")
                   and obs.xfer_mask[x]]
        self.assertNotEmpty(conv_bn)
        for x in conv_bn:
            self.assertAlmostEqual(float(obs.locations.cost_delta_of(x)[0]), 0.0, places=4)


if __name__ == "__main__":
    absltest.main()
