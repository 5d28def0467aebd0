"""`GraphSource`: a zoo graph carries random weights and inputs; a user's
model carries its own, is read once per process (again when the file
changes), and is written back with `to_model`. `RunSettings` with `onnx`
builds its environment from the model."""

import os
import tempfile

from absl.testing import absltest
import numpy as np
import onnx
from onnx import numpy_helper

from tests.onnx_io.models import torch_style_cnn
from xflowrl import zoo
from xflowrl.engine import XferSet
from xflowrl.entry_points import (
    GRAPH_JSON,
    GRAPH_ONNX,
    RunSettings,
    model_name,
    model_source,
    zoo_source,
    zoo_weights,
)
from xflowrl.executor.weights import random_inputs
from xflowrl.optimize import BadInput, load_model


def _write_model(folder: str, name: str = "tiny_cnn.onnx", size: int = 16) -> str:
    path = os.path.join(folder, name)
    onnx.save(torch_style_cnn(size=size), path)
    return path


class ZooSourceTest(absltest.TestCase):

    def test_a_batch_size(self):
        source = zoo_source("small_cnn", batch=4)
        self.assertEqual(source.graph.hash(), zoo.get_graph("small_cnn", batch_size=4).hash())
        self.assertNotEqual(source.graph.hash(), zoo_source("small_cnn").graph.hash())
        with self.assertRaisesRegex(ValueError, "'bert' has no batch size"):
            zoo_source("bert", batch=4)

    def test_random_weights_and_inputs(self):
        source = zoo_source("small_cnn")
        self.assertEqual((source.name, source.graph.hash()),
                         ("small_cnn", zoo.get_graph("small_cnn").hash()))
        self.assertIsNone(source.model)
        want = zoo_weights("small_cnn", source.graph, 4)
        got = source.weights(4)
        self.assertEqual(sorted(got), sorted(want))
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
        inputs = source.inputs(4)
        for name, value in random_inputs(source.graph, 4).items():
            np.testing.assert_array_equal(inputs[name], value)


class ModelSourceTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.folder = tempfile.mkdtemp()
        self.path = _write_model(self.folder)

    def test_own_weights_and_inputs(self):
        source = model_source(self.path)
        model = load_model(self.path)
        self.assertEqual(source.name, "tiny_cnn")
        self.assertEqual(source.graph.hash(), model.graph.hash())
        self.assertIs(source.weights(0), source.weights(1))  # the seed does not matter
        for name, value in model.weights.items():
            np.testing.assert_array_equal(source.weights(0)[name], value)
        self.assertEqual({k: v.shape for k, v in source.inputs(0).items()},
                         {"input": (1, 3, 16, 16)})

    def test_read_once_and_again_when_the_file_changes(self):
        first = model_source(self.path)
        self.assertIs(model_source(self.path), first)
        _write_model(self.folder, size=32)
        os.utime(self.path, ns=(1, 1))  # a different modification time, whatever the clock
        second = model_source(self.path)
        self.assertIsNot(second, first)
        self.assertEqual(second.graph.inputs()["input"], (1, 3, 32, 32))

    def test_bad_input_names_the_file(self):
        missing = os.path.join(self.folder, "nope.onnx")
        with self.assertRaisesRegex(BadInput, f"^{missing}: no such file$"):
            model_source(missing)
        garbage = os.path.join(self.folder, "garbage.onnx")
        with open(garbage, "wb") as f:
            f.write(b"not a model")
        with self.assertRaisesRegex(BadInput, "garbage.onnx"):
            model_source(garbage)

    def test_save_graph_writes_the_model_with_its_own_weights(self):
        source = model_source(self.path)
        out = tempfile.mkdtemp()
        source.save_graph(out, source.graph, seed=0, provenance="nothing done")
        self.assertTrue(os.path.exists(os.path.join(out, GRAPH_JSON)))
        written = onnx.load(os.path.join(out, GRAPH_ONNX))
        original = onnx.load(self.path)
        self.assertEqual({p.key: p.value for p in written.metadata_props},
                         {"xflowrl.optimized": "nothing done"})
        theirs = {t.name: numpy_helper.to_array(t) for t in original.graph.initializer}
        ours = {t.name: numpy_helper.to_array(t) for t in written.graph.initializer}
        kept = set(ours) & set(theirs)
        self.assertNotEmpty(kept)
        for name in kept:
            np.testing.assert_array_equal(ours[name], theirs[name])


class RunSettingsWithModelTest(absltest.TestCase):

    def test_env_and_results_folder(self):
        path = _write_model(tempfile.mkdtemp(), "my_net.onnx")
        settings = RunSettings(graph=model_name(path), onnx=path, rules="builtin",
                               max_steps=7, results_dir="/tmp/r")
        env = settings.make_env()
        self.assertEqual(env.initial_graph.hash(), load_model(path).graph.hash())
        self.assertEqual(env.xfers.names, XferSet.from_name("builtin").names)
        self.assertEqual(env.config.max_steps, 7)
        self.assertEqual(settings.results_folder("taso_search"),
                         os.path.join("/tmp/r", "my_net", "taso_search"))
        self.assertIs(settings.source(), settings.source())

    def test_missing_model(self):
        with self.assertRaisesRegex(BadInput, "no such file"):
            RunSettings(graph="x", onnx="/nonexistent/x.onnx").make_env()


if __name__ == "__main__":
    absltest.main()
