"""Mutation fuzz test of `load_onnx -> search -> save_onnx`.

1,000 seeded mutants (structural and byte-level, `xflowrl.onnx_io.fuzz`)
of six small models from three exporters' patterns run in a child process:
no process death, no hang, no exception but ValueError, and no ValueError
that merely wraps an unexpected exception of the importer. The 1,000
mutants take about 25 s (the file about 30 s), niced on the shared 2-core
machine at load ~10; `benchmarks/onnx_fuzz_bench.py` runs longer campaigns.
"""

import os

from absl.testing import absltest
import numpy as np
import onnx

from tests.onnx_io import exporter_models as onnx_exporter_models
from tests.onnx_io import models as onnx_models
from xflowrl.onnx_io import fuzz as onnx_fuzz

MUTANTS = 1000
SEED = 20261123


def seed_models():
    """Small valid models: a torchvision-style CNN, a BERT encoder as
    torch.onnx (opset 11) writes it, the TorchScript Hugging Face BERT with
    its mask chain (opset 13), the dynamo exporter's IR 10 / opset 18 layer,
    the same exporter's model-local functions (nested, with attribute
    references) and a small CNN written with opset-13 Split/Squeeze inputs."""
    return [onnx_models.torch_style_cnn(size=16),
            onnx_models.torch_style_bert(seq=8, hidden=16, layers=1),
            onnx_exporter_models.hf_bert_torchscript(seq=8, hidden=16, layers=1, max_pos=16),
            onnx_exporter_models.torch_dynamo_transformer(seq=8, hidden=16),
            onnx_exporter_models.dynamo_with_functions(),
            _split_squeeze13()]


def _split_squeeze13() -> onnx.ModelProto:
    w = onnx_models.OnnxWriter(seed=21)
    x = "image"
    y = w.op("Conv", [x, w.weight("w", (8, 3, 3, 3))], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    a, b = w.op("Split", [y, w.init("split", np.array([4, 4], np.int64))], n_out=2, axis=1)
    y = w.op("Concat", [w.op("Relu", [a]), w.op("Sigmoid", [b])], axis=1)
    y = w.op("AveragePool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = w.op("GlobalMaxPool", [y])
    y = w.op("Squeeze", [y, w.const(np.array([2, 3], np.int64))])
    y = w.op("Gemm", [y, w.weight("fc", (4, 8)), w.weight("fc_b", (4,), 0.1)], transB=1)
    return w.model([onnx.helper.make_tensor_value_info(x, onnx.TensorProto.FLOAT, (1, 3, 8, 8))],
                   [onnx.helper.make_tensor_value_info(y, onnx.TensorProto.FLOAT, (1, 4))],
                   opset=13)


class OnnxFuzzTest(absltest.TestCase):

    def test_mutants_end_in_success_or_a_value_error(self):
        report = onnx_fuzz.run_fuzz(seed_models(), MUTANTS, SEED, stall_s=30.0)
        self.assertEqual(report.mutants, MUTANTS)
        self.assertEqual(report.deaths, [])
        self.assertEqual(report.hangs, [])
        self.assertEqual(report.undocumented, [])
        self.assertEqual(report.wrapped, [])
        self.assertEqual(set(report.outcomes), {"ok", "ValueError"})
        # Both outcomes are common: the mutants are neither all fatal nor all
        # harmless, and every mutation kind was drawn.
        self.assertGreater(report.outcomes["ok"], MUTANTS // 20)
        self.assertGreater(report.outcomes["ValueError"], MUTANTS // 2)
        self.assertEqual(set(report.by_kind), set(onnx_fuzz.MUTATIONS))
        self.assertLess(report.seconds, 60.0)

    def test_mutants_are_reproducible(self):
        data = [m.SerializeToString() for m in seed_models()]
        for index in (0, 7, 123):
            a, b = (onnx_fuzz.mutant(data, SEED, index) for _ in range(2))
            self.assertEqual(a, b)
        self.assertNotEqual(onnx_fuzz.mutant(data, SEED, 1).data,
                            onnx_fuzz.mutant(data, SEED + 1, 1).data)

    def test_a_death_is_reported_and_the_run_goes_on(self):
        # A child that dies mid-mutant (as a segfault would) is counted and
        # restarted after that mutant.
        os.environ["XFLOWRL_FUZZ_DIE_AT"] = "3"
        try:
            report = onnx_fuzz.run_fuzz(seed_models()[:1], 6, SEED)
        finally:
            del os.environ["XFLOWRL_FUZZ_DIE_AT"]
        self.assertEqual(report.mutants, 6)
        self.assertEqual([d[0] for d in report.deaths], [3])
        self.assertEqual(report.outcomes.get("death"), 1)


if __name__ == "__main__":
    absltest.main()
