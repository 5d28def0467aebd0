"""The Q/K/V merges fire on real exporters' transformers.

The zoo BERT (TASO's example) merges its three projections into one matmul
per layer: `gen_matrix_1171` (`x w1, x w2 -> split(x concat(w1, w2))`)
twice. Real exports compute each projection as a MatMul of the 3-D
activation [1, S, H] by [H, H] (then a bias Add and the head
Reshape/Transpose); the importer flattens `[..., M, K] x [K, N]` to a 2-D
product, and once wrote one flattening reshape per MatMul, so the three
products read three equal reshapes and no rule saw a shared operand. The
importer now builds one view per (tensor, shape or perm)
(`load_onnx(share_views=True)`, docs/onnx.md "Q/K/V merges"). For the
exporter fixtures (`exporter_models`: TorchScript opset 13 BERT, dynamo
opset 18 encoder layer, the same with each Linear decomposed into explicit
Reshape nodes, tf2onnx Keras block) under analytic/v100
and analytic/cpu, TASO's search applies at least as many Q/K/V merges per
layer as the zoo BERT gets, the fused projection is there (one matmul of
width 3H per layer) and the optimised export computes the original's
function in onnxruntime (rtol 1e-4).

`python benchmarks/qkv_merge_bench.py` prints the counts before and after.
"""

import functools
from typing import Callable, Dict, FrozenSet, NamedTuple

from absl.testing import absltest, parameterized
import numpy as np
import onnx
import onnxruntime

from tests.onnx_io import exporter_models
from xflowrl import zoo
from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.onnx_io import load_onnx, to_onnx
from xflowrl.rules import rules_io

PROFILES = ("v100", "cpu")
BUDGET = 100
RTOL = 1e-4


class Fixture(NamedTuple):
    build: Callable[[], onnx.ModelProto]
    feeds: Callable[[], Dict[str, np.ndarray]]
    layers: int
    hidden: int


def _keras_feeds():
    return {"tokens": np.random.default_rng(0).standard_normal((1, 16, 32), np.float32)}


FIXTURES: Dict[str, Fixture] = {
    "hf_bert_torchscript": Fixture(exporter_models.hf_bert_torchscript,
                                   exporter_models.bert_feeds, layers=2, hidden=64),
    "torch_dynamo_transformer": Fixture(exporter_models.torch_dynamo_transformer,
                                        functools.partial(exporter_models.bert_feeds, 16, 50),
                                        layers=1, hidden=32),
    # The same layer with each Linear as ATen decomposes a 3-D matmul:
    # explicit Reshape nodes, one per projection.
    "torch_dynamo_decomposed_linear": Fixture(
        functools.partial(exporter_models.torch_dynamo_transformer, decomposed_linear=True),
        functools.partial(exporter_models.bert_feeds, 16, 50), layers=1, hidden=32),
    "keras_transformer_block": Fixture(exporter_models.keras_transformer_block, _keras_feeds,
                                       layers=1, hidden=32),
}


def is_shared_operand_matmul_merge(rule: rules_io.Rule) -> bool:
    """Two matmuls reading one left operand -> one matmul of the concatenated
    right operands, split: the rules that merge Q, K and V projections."""
    src_matmuls = [op for op in rule.src if op.type == "matmul"]
    dst_types = sorted(op.type for op in rule.dst)
    return (len(rule.src) == 2 and len(src_matmuls) == 2
            and src_matmuls[0].inputs[0] == src_matmuls[1].inputs[0]
            and src_matmuls[0].inputs[1] != src_matmuls[1].inputs[1]
            and dst_types == ["concat", "matmul", "split"])


def merge_rule_names(xfers: XferSet) -> FrozenSet[str]:
    return frozenset(r.name for r in xfers.rules if is_shared_operand_matmul_merge(r))


class MergeCount(NamedTuple):
    merges: int            # shared-operand matmul merges applied
    fused: int             # matmuls of width 3H (a fused Q/K/V projection)
    matmuls_before: int
    matmuls_after: int
    cost_before: float
    cost_after: float
    applied: tuple         # every xfer applied, in order
    graph: Graph


def count_merges(graph: Graph, xfers: XferSet, cost_model: CostModel, hidden: int,
                 budget: int = BUDGET) -> MergeCount:
    """TASO's search on `graph`; the Q/K/V merges it applied."""
    result = xfers.search(graph, cost_model, budget=budget)
    names = merge_rule_names(xfers)
    fused = sum(1 for op in result.graph.ops()
                if op.type == "matmul" and op.output_shapes[0][-1] == 3 * hidden)
    return MergeCount(sum(1 for a in result.applied_names if a in names), fused,
                      graph.op_counts()["matmul"], result.graph.op_counts()["matmul"],
                      result.initial_cost, result.best_cost, tuple(result.applied_names),
                      result.graph)


def zoo_bert_merges_per_layer(profile: str, layers: int = 2) -> float:
    xfers = XferSet.default()
    graph = zoo.bert(layers=layers)
    count = count_merges(graph, xfers, CostModel("analytic", profile=profile), hidden=1024)
    return count.merges / layers


def _ort(model: onnx.ModelProto, feeds):
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


class TransformerMergeTest(parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.xfers = XferSet.default()
        cls.models = {name: f.build() for name, f in FIXTURES.items()}
        cls.imported = {name: load_onnx(m) for name, m in cls.models.items()}
        # The target: the zoo BERT's merges per layer under analytic/v100.
        cls.target = zoo_bert_merges_per_layer("v100")

    def test_zoo_bert_merges_all_three_projections(self):
        # Q with K, then QK with V: two merges per layer, one fused matmul.
        self.assertEqual(self.target, 2)
        self.assertIn("gen_matrix_1171", merge_rule_names(self.xfers))

    @parameterized.product(name=tuple(FIXTURES), profile=PROFILES)
    def test_fixture_merges_qkv_and_keeps_its_function(self, name, profile):
        fixture = FIXTURES[name]
        graph, weights = self.imported[name]
        count = count_merges(graph, self.xfers, CostModel("analytic", profile=profile),
                             fixture.hidden)
        self.assertGreaterEqual(count.merges, self.target * fixture.layers, count.applied)
        self.assertEqual(count.fused, fixture.layers)  # one [S, 3H] projection a layer
        self.assertEqual(count.matmuls_after, count.matmuls_before - count.merges)
        self.assertLess(count.cost_after, count.cost_before)

        feeds = fixture.feeds()
        want = _ort(self.models[name], feeds)
        got = _ort(to_onnx(count.graph, weights), feeds)
        self.assertEqual(len(got), len(want))
        for w, g in zip(want, got):
            self.assertTrue(np.all(np.isfinite(w)))
            self.assertEqual(g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=1e-5 * np.abs(w).max())

    @parameterized.parameters("hf_bert_torchscript", "torch_dynamo_transformer",
                              "torch_dynamo_decomposed_linear")
    def test_unshared_views_hide_the_merge(self, name):
        # What the issue reported: one flattening reshape per projection,
        # so no rule sees that Q, K and V read one tensor.
        fixture = FIXTURES[name]
        graph, _ = load_onnx(self.models[name], share_views=False)
        count = count_merges(graph, self.xfers, CostModel("analytic", profile="v100"),
                             fixture.hidden)
        self.assertEqual(count.merges, 0)
        self.assertEqual(count.fused, 0)


if __name__ == "__main__":
    absltest.main()
