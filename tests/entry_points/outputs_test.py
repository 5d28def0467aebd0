"""The results folder's files: where they go, what they hold, and that they
read back (result.json, result.md, graph.json, graph.onnx)."""

import json
import os
import tempfile

from absl.testing import absltest
import numpy as np
import onnx

from xflowrl import zoo
from xflowrl.entry_points import (
    GRAPH_JSON,
    GRAPH_ONNX,
    RESULT_JSON,
    RESULT_MD,
    change_table,
    load_result,
    result_path,
    results_folder,
    save_graph,
    save_result,
    write_json,
    zoo_weights,
)
from xflowrl.executor.weights import random_weights
from xflowrl.onnx_io import to_onnx


class PathsTest(absltest.TestCase):

    def test_layout(self):
        self.assertEqual(results_folder("results", "bert", "train_mb"),
                         os.path.join("results", "bert", "train_mb"))
        self.assertEqual(result_path("results", "bert", "train_mf"),
                         os.path.join("results", "bert", "train_mf", "result.json"))


class SaveResultTest(absltest.TestCase):

    def test_json_and_markdown_in_a_new_folder(self):
        out = os.path.join(tempfile.mkdtemp(), "g", "entry")
        summary = {"cost_ms": 1.5, "applied": [["x", 0]], "none": None}
        path = save_result(out, summary, markdown="# title\n")
        self.assertEqual(path, os.path.join(out, RESULT_JSON))
        self.assertEqual(load_result(path), summary)
        with open(path) as f:
            self.assertEqual(f.read(), json.dumps(summary, indent=2))
        with open(os.path.join(out, RESULT_MD)) as f:
            self.assertEqual(f.read(), "# title\n")

    def test_without_markdown_and_with_indent(self):
        out = tempfile.mkdtemp()
        save_result(out, [1, 2], indent=1)
        self.assertFalse(os.path.exists(os.path.join(out, RESULT_MD)))
        with open(os.path.join(out, RESULT_JSON)) as f:
            self.assertEqual(f.read(), "[\n 1,\n 2\n]")

    def test_numpy_scalars_are_written_as_floats(self):
        path = os.path.join(tempfile.mkdtemp(), "x.json")
        write_json(path, {"a": np.float32(0.5), "b": np.int64(3)})
        self.assertEqual(load_result(path), {"a": 0.5, "b": 3.0})

    def test_objects_json_does_not_know_are_refused(self):
        path = os.path.join(tempfile.mkdtemp(), "x.json")
        with self.assertRaises(TypeError):
            write_json(path, {"a": object()})

    def test_missing_result_is_none(self):
        self.assertIsNone(load_result(os.path.join(tempfile.mkdtemp(), RESULT_JSON)))


class SaveGraphTest(absltest.TestCase):

    def test_op_list_only(self):
        out = tempfile.mkdtemp()
        graph = zoo.get_graph("small_cnn")
        save_graph(out, graph)
        with open(os.path.join(out, GRAPH_JSON)) as f:
            ops = json.load(f)
        self.assertEqual(ops, json.loads(json.dumps([op._asdict() for op in graph.ops()])))
        self.assertEqual(ops[0]["type"], "input")
        self.assertFalse(os.path.exists(os.path.join(out, GRAPH_ONNX)))

    def test_onnx_with_zoo_weights(self):
        out = tempfile.mkdtemp()
        graph = zoo.get_graph("small_cnn")
        weights = zoo_weights("small_cnn", graph, seed=4)
        save_graph(out, graph, weights)
        model = onnx.load(os.path.join(out, GRAPH_ONNX))
        onnx.checker.check_model(model, full_check=True)
        want = to_onnx(graph, weights)
        self.assertEqual([n.op_type for n in model.graph.node],
                         [n.op_type for n in want.graph.node])

    def test_zoo_weights_are_the_scaled_random_weights(self):
        graph = zoo.get_graph("small_cnn")
        got = zoo_weights("small_cnn", graph, seed=2)
        want = random_weights(graph, seed=2, gain=zoo.weight_gain("small_cnn"))
        self.assertEqual(sorted(got), sorted(want))
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


class ChangeTableTest(absltest.TestCase):

    def test_rows(self):
        table = change_table([("initial", 2.0), ("agent", 1.5, "3", "")], 2.0)
        self.assertEqual(table, "| initial | 2.0000 | +0.00% |\n"
                                "| agent | 1.5000 | -25.00% | 3 |  |")

    def test_digits(self):
        self.assertEqual(change_table([("a", 1.0)], 3.0, change_digits=3),
                         "| a | 1.0000 | -66.667% |")


if __name__ == "__main__":
    absltest.main()
