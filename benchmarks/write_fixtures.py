"""Writes the exporter fixtures as ONNX files, for the commands that take
model files (`search_bench.py --onnx`, `xflowrl optimize`).

    python benchmarks/write_fixtures.py --out_dir=results/fixtures [--models=a,b]

The fixtures are the models the importer's tests build node by node as
real exporters write them (tests/onnx_io/models.py: a torchvision-style CNN
and a Hugging Face style BERT layer as torch.onnx writes them, tf2onnx
conversions of a Keras CNN and a Keras attention block;
tests/onnx_io/exporter_models.py: a Hugging Face BertModel as the
TorchScript exporter writes it, a transformer layer as the dynamo exporter
writes it, a Keras transformer block through tf2onnx at opset 18). Every
input has a static shape. Prints one line per file written.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Dict

from absl import app, flags
import onnx

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

FLAGS = flags.FLAGS
FIXTURES = ("hf_bert_torchscript", "torch_dynamo_transformer", "keras_transformer_block",
            "torch_style_cnn", "torch_style_bert", "keras_cnn", "keras_attention")
flags.DEFINE_string("out_dir", "results/fixtures", "Where the .onnx files go.")
flags.DEFINE_list("models", list(FIXTURES), f"Fixtures to write, of {list(FIXTURES)}.")


def builders() -> Dict[str, Callable[[], onnx.ModelProto]]:
    """Each fixture's builder, by name."""
    from tests.onnx_io import exporter_models, models  # pylint: disable=C0415
    return {name: getattr(exporter_models if hasattr(exporter_models, name) else models, name)
            for name in FIXTURES}


def main(argv):
    del argv
    unknown = sorted(set(FLAGS.models) - set(FIXTURES))
    if unknown:
        raise app.UsageError(f"unknown fixtures {unknown}; known: {list(FIXTURES)}")
    os.makedirs(FLAGS.out_dir, exist_ok=True)
    build = builders()
    for name in FLAGS.models:
        path = os.path.join(FLAGS.out_dir, f"{name}.onnx")
        onnx.save(build[name](), path)
        print(path)


if __name__ == "__main__":
    app.run(main)
