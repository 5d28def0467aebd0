"""Q/K/V merges on real exporters' transformers, before and after the
importer shares views; prints a markdown table (docs/onnx.md, "Q/K/V merges").

    python benchmarks/qkv_merge_bench.py [--budget=100] [--profiles=v100,cpu]

Rows: the zoo BERT (TASO's example, 8 layers) and the three exporter
fixtures of tests/onnx_io/exporter_models.py (TorchScript opset 13 BERT,
dynamo opset 18 encoder layer, tf2onnx Keras block; the Keras one imports
TensorFlow), each imported with `load_onnx(share_views=False)` (one view per
request: the importer before) and with `share_views=True` (the default),
searched by `XferSet.default().search(graph, CostModel("analytic",
profile=...), budget=...)`. Columns: shared-operand matmul merges applied
(total and per layer), fused [S, 3H] projections, matmuls and cost before
and after the search. The test (tests/onnx_io/transformer_merge_test.py)
asserts the shared rows.
"""

import os
import sys

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.onnx_io.transformer_merge_test import FIXTURES, count_merges  # noqa: E402
from xflowrl import zoo  # noqa: E402
from xflowrl.engine import CostModel, XferSet  # noqa: E402
from xflowrl.onnx_io import load_onnx  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("budget", 100, "Search expansions per graph.")
flags.DEFINE_list("profiles", ["v100", "cpu"], "Analytic cost profiles.")


def main(argv):
    del argv
    xfers = XferSet.default()
    graphs = [("zoo bert", "-", zoo.bert(), 8, 1024)]
    for name, fixture in FIXTURES.items():
        model = fixture.build()
        for shared in (False, True):
            graph, _ = load_onnx(model, share_views=shared)
            graphs.append((name, "shared" if shared else "separate", graph, fixture.layers,
                           fixture.hidden))
    print("| model | views | profile | merges (per layer) | fused QKV | matmuls | cost (ms) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for profile in FLAGS.profiles:
        cost_model = CostModel("analytic", profile=profile)
        for name, views, graph, layers, hidden in graphs:
            c = count_merges(graph, xfers, cost_model, hidden, budget=FLAGS.budget)
            print(f"| {name} | {views} | analytic/{profile} | {c.merges} "
                  f"({c.merges / layers:g}) | {c.fused} | {c.matmuls_before} -> "
                  f"{c.matmuls_after} | {c.cost_before:.4f} -> {c.cost_after:.4f} |")


if __name__ == "__main__":
    app.run(main)
