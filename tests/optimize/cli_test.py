"""The `xflowrl` command end to end: optimize, inspect, measure, and the
refusals of bad input (exit 2, one message, nothing written).

The command runs in-process (`xflowrl.cli.main`, what the console script
calls) on small models: a zoo CNN with its weights, and the exporter
fixtures of `tests/onnx_io/exporter_models.py` (the TorchScript exporter's
Hugging Face BERT, the dynamo exporter's opset-18 layer, tf2onnx's Keras
block). `console_script_test` checks that the installed command exists.
"""

import contextlib
import dataclasses
import functools
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

from absl.testing import absltest
import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.onnx_io import exporter_models
from xflowrl import cli, zoo
from xflowrl.entry_points import zoo_weights
from xflowrl.measure.ort_runtime import run_onnx
from xflowrl.onnx_io import save_onnx
from xflowrl.optimize import pipeline, verify


@functools.lru_cache(maxsize=None)
def _keras_block_bytes():
    return exporter_models.keras_transformer_block().SerializeToString()


def keras_block():
    """`exporter_models.keras_transformer_block()`, a fresh copy each call.

    Building it (TensorFlow, Keras, tf2onnx) takes seconds each time, and it
    is the same model every time (seeded), so it is built once per process."""
    return onnx.load_from_string(_keras_block_bytes())


def make_tempdir(test):
    """A fresh folder, removed after `test`."""
    folder = tempfile.mkdtemp(prefix="xflowrl-cli-test-")
    test.addCleanup(shutil.rmtree, folder, True)
    return folder


def run_cli(*argv):
    """(exit code, stdout, stderr) of `xflowrl ARGV...` run in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(a) for a in argv])
        except SystemExit as e:  # argparse: --help, usage errors
            code = e.code
    return code, out.getvalue(), err.getvalue()


def write_zoo_model(path, name="small_cnn", metadata=True):
    graph = zoo.get_graph(name)
    model = save_onnx(graph, zoo_weights(name, graph, 0), path)
    if metadata:
        model.producer_name, model.producer_version = "test-exporter", "9.9"
        model.doc_string = "a model with metadata"
        model.metadata_props.add(key="author", value="tests")
        onnx.save(model, path)
    return onnx.load(path)


def same_function(test, original, optimized, rtol=1e-4):
    feeds = verify.random_feeds(original, seed=3)
    want, got = run_onnx(original, feeds), run_onnx(optimized, feeds)
    test.assertEqual(sorted(want), sorted(got))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=1e-5 * max(
            1.0, float(np.abs(want[name]).max())))


class OptimizeTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = make_tempdir(self)
        self.model_path = os.path.join(self.dir, "cnn.onnx")
        self.original = write_zoo_model(self.model_path)
        self.out = os.path.join(self.dir, "out.onnx")

    def test_greedy_writes_a_model_that_computes_the_same_with_a_report(self):
        # --allow_slower: the optimised model is written whatever the timing
        # says, so the test checks the rewritten model itself.
        code, stdout, stderr = run_cli("optimize", self.model_path, "-o", self.out,
                                       "--cost_model=analytic/cpu", "--allow_slower",
                                       "--rounds=2", "--quiet")
        self.assertEqual(code, 0, stderr)
        report = json.load(open(os.path.join(self.dir, "out.report.json")))
        self.assertEqual(report["version"], pipeline.REPORT_VERSION)
        self.assertGreater(len(report["applied"]), 0)
        self.assertEqual(report["found_by"], "greedy")
        self.assertTrue(report["written"].startswith("optimized"))
        self.assertLess(report["estimated"]["after_ms"], report["estimated"]["before_ms"])
        self.assertTrue(report["outputs"]["same"])
        for key in ("before", "after", "change", "faster"):
            self.assertIn(key, report["measured"])
        self.assertIn("| estimated cost (analytic/cpu) |", stdout)
        self.assertIn("| measured, onnxruntime", stdout)
        optimized = onnx.load(self.out)
        onnx.checker.check_model(optimized)
        same_function(self, self.original, optimized)
        # The interface and metadata are the original's.
        self.assertEqual([i.name for i in optimized.graph.input],
                         [i.name for i in self.original.graph.input
                          if i.name not in {t.name for t in self.original.graph.initializer}])
        self.assertEqual([o.name for o in optimized.graph.output],
                         [o.name for o in self.original.graph.output])
        self.assertEqual(optimized.opset_import, self.original.opset_import)
        self.assertEqual((optimized.producer_name, optimized.producer_version,
                          optimized.doc_string),
                         ("test-exporter", "9.9", "a model with metadata"))
        props = {p.key: p.value for p in optimized.metadata_props}
        self.assertEqual(props["author"], "tests")
        self.assertIn("substitutions by greedy", props["xflowrl.optimized"])

    def test_equality_saturation_writes_an_extracted_graph(self):
        # --budget: 2000 e-nodes, not the default 10k (most of the test's
        # time). The first iteration on this graph (560 e-nodes) completes,
        # so the e-graph holds every graph one substitution away, greedy's
        # first step among them: the extracted graph is still cheaper.
        code, stdout, stderr = run_cli("optimize", self.model_path, "-o", self.out,
                                       "--method=eqsat", "--budget=2000",
                                       "--cost_model=analytic/cpu",
                                       "--allow_slower", "--rounds=1", "--quiet")
        self.assertEqual(code, 0, stderr)
        report = json.load(open(os.path.join(self.dir, "out.report.json")))
        self.assertEqual((report["method"], report["found_by"]), ("eqsat", "eqsat"))
        self.assertEqual(report["applied"], [])  # extracted, not stepped to
        self.assertTrue(report["written"].startswith("optimized"))
        self.assertLess(report["estimated"]["after_ms"], report["estimated"]["before_ms"])
        self.assertTrue(report["outputs"]["same"])
        self.assertIn("an extracted graph", stdout)
        same_function(self, self.original, onnx.load(self.out))

    def test_planning_writes_a_model_that_computes_the_same(self):
        code, _, stderr = run_cli("optimize", self.model_path, "-o", self.out, "--method=plan",
                                  "--budget=200", "--cost_model=analytic/cpu", "--allow_slower",
                                  "--rounds=1", "--quiet")
        self.assertEqual(code, 0, stderr)
        report = json.load(open(os.path.join(self.dir, "out.report.json")))
        self.assertEqual((report["method"], report["found_by"]), ("plan", "plan"))
        self.assertGreater(len(report["applied"]), 0)
        self.assertLess(report["estimated"]["after_ms"], report["estimated"]["before_ms"])
        self.assertTrue(report["outputs"]["same"])
        same_function(self, self.original, onnx.load(self.out))

    def test_not_faster_writes_the_original_unchanged(self):
        slower = verify.SpeedCheck("ort", {"median_ms": 1.0, "min_ms": 0.9, "max_ms": 1.1},
                                   {"median_ms": 1.0, "min_ms": 0.95, "max_ms": 1.2},
                                   False, 0.0)
        with mock.patch.object(pipeline.verify, "faster", return_value=slower):
            code, stdout, stderr = run_cli("optimize", self.model_path, "-o", self.out,
                                           "--cost_model=analytic/cpu", "--quiet")
        self.assertEqual(code, 0, stderr)
        with open(self.out, "rb") as a, open(self.model_path, "rb") as b:
            self.assertEqual(a.read(), b.read())
        report = json.load(open(os.path.join(self.dir, "out.report.json")))
        self.assertEqual(report["written"], "original")
        self.assertIn("not faster", report["reason"])
        self.assertIn("original", stdout)

    def test_faster_beyond_the_spread_writes_the_optimised_model(self):
        quicker = verify.SpeedCheck("ort", {"median_ms": 2.0, "min_ms": 1.9, "max_ms": 2.1},
                                    {"median_ms": 1.0, "min_ms": 0.9, "max_ms": 1.1},
                                    True, -50.0)
        with mock.patch.object(pipeline.verify, "faster", return_value=quicker):
            code, _, stderr = run_cli("optimize", self.model_path, "-o", self.out,
                                      "--cost_model=analytic/cpu", "--quiet")
        self.assertEqual(code, 0, stderr)
        report = json.load(open(os.path.join(self.dir, "out.report.json")))
        self.assertEqual(report["written"], "optimized")
        same_function(self, self.original, onnx.load(self.out))

    def test_a_speed_up_the_second_pass_does_not_confirm_writes_the_original(self):
        quicker = verify.SpeedCheck("ort", {"median_ms": 2.0, "min_ms": 1.9, "max_ms": 2.1},
                                    {"median_ms": 1.0, "min_ms": 0.9, "max_ms": 1.1},
                                    True, -50.0)
        same = dataclasses.replace(quicker, optimized=quicker.original, faster=False,
                                   change=0.0)
        with mock.patch.object(pipeline.verify, "faster", side_effect=[quicker, same]):
            code, _, stderr = run_cli("optimize", self.model_path, "-o", self.out,
                                      "--cost_model=analytic/cpu", "--quiet")
        self.assertEqual(code, 0, stderr)
        report = json.load(open(os.path.join(self.dir, "out.report.json")))
        self.assertEqual(report["written"], "original")
        self.assertFalse(report["measured"]["faster"])
        self.assertFalse(report["measured"]["confirmation"]["faster"])
        with open(self.out, "rb") as a, open(self.model_path, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_different_outputs_are_refused_and_nothing_is_written(self):
        real_to_model = pipeline.model_io.to_model

        def wrong(*args, **kwargs):  # a broken rewrite: one weight doubled
            model = real_to_model(*args, **kwargs)
            init = model.graph.initializer[0]
            value = onnx.numpy_helper.to_array(init) * 2 + 1
            init.CopyFrom(onnx.numpy_helper.from_array(value, init.name))
            return model

        with mock.patch.object(pipeline.model_io, "to_model", wrong):
            code, _, stderr = run_cli("optimize", self.model_path, "-o", self.out,
                                      "--cost_model=analytic/cpu", "--quiet")
        self.assertEqual(code, cli.EXIT_REFUSED)
        self.assertIn("differ", stderr)
        self.assertEqual(sorted(os.listdir(self.dir)), ["cnn.onnx"])

    def test_nothing_to_do_writes_the_original(self):
        # One Relu: no rule matches it, so no method finds a substitution.
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
        model = helper.make_model(
            helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
            opset_imports=[helper.make_opsetid("", 13)])
        path = os.path.join(self.dir, "relu.onnx")
        onnx.save(model, path)
        for method in ("greedy", "taso", "eqsat"):
            with self.subTest(method):
                code, stdout, stderr = run_cli("optimize", path, "-o", self.out, "--quiet",
                                               f"--method={method}", "--cost_model=analytic/cpu")
                self.assertEqual(code, 0, stderr)
                self.assertIn("| engine ops | 1 | 1 | no substitution |", stdout)
                report = json.load(open(os.path.join(self.dir, "out.report.json")))
                self.assertEqual(report["applied"], [])
                self.assertEqual(report["written"], "original")
                self.assertIsNone(report["measured"])  # nothing to time
                with open(self.out, "rb") as a, open(path, "rb") as b:
                    self.assertEqual(a.read(), b.read())

    def test_external_data_is_written_beside_the_output(self):
        ext = os.path.join(self.dir, "ext")
        os.mkdir(ext)
        path = os.path.join(ext, "big.onnx")
        copy = onnx.ModelProto()
        copy.CopyFrom(self.original)  # saving with external data rewrites the proto
        onnx.save_model(copy, path, save_as_external_data=True,
                        all_tensors_to_one_file=True, location="big.onnx.data",
                        size_threshold=1024)
        out = os.path.join(ext, "opt.onnx")
        code, _, stderr = run_cli("optimize", path, "-o", out, "--cost_model=analytic/cpu",
                                  "--allow_slower", "--rounds=1", "--quiet")
        self.assertEqual(code, 0, stderr)
        self.assertTrue(os.path.exists(out + ".data"))
        header = onnx.load(out, load_external_data=False)
        self.assertTrue(any(t.data_location == TensorProto.EXTERNAL
                            for t in header.graph.initializer))
        same_function(self, self.original, onnx.load(out))
        self.assertEqual(sorted(f for f in os.listdir(ext) if f.startswith(".")), [])


class LearnedMethodsTest(absltest.TestCase):
    """mf trains on the model; policy:DIR reuses what it trained, without training."""

    def test_model_free_then_its_policy(self):
        root = make_tempdir(self)
        path = os.path.join(root, "cnn.onnx")
        original = write_zoo_model(path, metadata=False)
        work = os.path.join(root, "work")
        code, stdout, stderr = run_cli("optimize", path, "-o", os.path.join(root, "mf.onnx"),
                                       "--method=mf", "--budget=3", "--workdir", work,
                                       "--cost_model=analytic/cpu", "--no_timing", "--quiet")
        self.assertEqual(code, 0, stderr)
        report = json.load(open(os.path.join(root, "mf.report.json")))
        self.assertLessEqual(report["estimated"]["after_ms"], report["estimated"]["before_ms"])
        same_function(self, original, onnx.load(os.path.join(root, "mf.onnx")))
        self.assertTrue(os.listdir(os.path.join(work, "checkpoints")))

        code, _, stderr = run_cli("optimize", path, "-o", os.path.join(root, "p.onnx"),
                                  f"--method=policy:{work}", "--cost_model=analytic/cpu",
                                  "--no_timing", "--quiet")
        self.assertEqual(code, 0, stderr)
        report = json.load(open(os.path.join(root, "p.report.json")))
        self.assertLessEqual(report["estimated"]["after_ms"], report["estimated"]["before_ms"])
        same_function(self, original, onnx.load(os.path.join(root, "p.onnx")))

        code, _, stderr = run_cli("optimize", path, "-o", os.path.join(root, "q.onnx"),
                                  f"--method=policy:{root}", "--quiet")
        self.assertEqual(code, cli.EXIT_BAD_INPUT)
        self.assertIn("no policy checkpoint", stderr)


class ExporterFixturesTest(absltest.TestCase):
    """The exporters' transformers: optimised, checked and written."""

    def test_each_fixture_optimises_to_a_model_computing_the_same(self):
        root = make_tempdir(self)
        for name, model in (("hf_bert", exporter_models.hf_bert_torchscript()),
                            ("dynamo", exporter_models.torch_dynamo_transformer()),
                            ("keras", keras_block())):
            with self.subTest(name):
                path, out = os.path.join(root, f"{name}.onnx"), os.path.join(root, f"{name}.o.onnx")
                onnx.save(model, path)
                code, _, stderr = run_cli("optimize", path, "-o", out, "--quiet",
                                          "--cost_model=analytic/v100", "--allow_slower",
                                          "--rounds=1")
                self.assertEqual(code, 0, stderr)
                report = json.load(open(os.path.join(root, f"{name}.o.report.json")))
                if report["applied"]:
                    self.assertTrue(report["outputs"]["same"])
                same_function(self, onnx.load(path), onnx.load(out))


class BadInputTest(absltest.TestCase):
    """Exit code 2, one clear message naming the file, nothing written."""

    def setUp(self):
        super().setUp()
        self.dir = make_tempdir(self)
        self.good = os.path.join(self.dir, "good.onnx")
        write_zoo_model(self.good, metadata=False)
        self.out_dir = os.path.join(self.dir, "out")
        os.mkdir(self.out_dir)
        self.out = os.path.join(self.out_dir, "o.onnx")

    def assert_refused(self, args, *needles):
        code, stdout, stderr = run_cli(*args)
        self.assertEqual(code, cli.EXIT_BAD_INPUT, stderr)
        lines = [line for line in stderr.splitlines() if line.strip()]
        self.assertLen(lines, 1, stderr)
        self.assertIn("error:", lines[0])
        for needle in needles:
            self.assertIn(needle, lines[0])
        self.assertNotIn("Traceback", stderr + stdout)
        self.assertEqual(os.listdir(self.out_dir), [])

    def test_missing_file(self):
        missing = os.path.join(self.dir, "nope.onnx")
        self.assert_refused(["optimize", missing, "-o", self.out, "--quiet"], missing,
                            "no such file")

    def test_not_onnx(self):
        path = os.path.join(self.dir, "notes.onnx")
        with open(path, "w") as f:
            f.write("this is not a model\n" * 20)
        self.assert_refused(["optimize", path, "-o", self.out, "--quiet"], path)

    def test_truncated_file(self):
        path = os.path.join(self.dir, "cut.onnx")
        with open(self.good, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:len(data) // 2])
        self.assert_refused(["optimize", path, "-o", self.out, "--quiet"], path)

    def test_unsupported_op_with_dynamic_shapes(self):
        # NonZero's output shape depends on the data: no static shape to cost.
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
        y = helper.make_tensor_value_info("y", TensorProto.INT64, [2, "n"])
        node = helper.make_node("NonZero", ["x"], ["y"], name="find")
        model = helper.make_model(helper.make_graph([node], "g", [x], [y]),
                                  opset_imports=[helper.make_opsetid("", 13)])
        path = os.path.join(self.dir, "nonzero.onnx")
        onnx.save(model, path)
        self.assert_refused(["optimize", path, "-o", self.out, "--quiet"], path, "NonZero")

    def test_dynamic_input_says_how_to_fix_it(self):
        model = keras_block()
        # The static shape, read before its first dimension is made dynamic.
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        dim = model.graph.input[0].type.tensor_type.shape.dim[0]
        dim.Clear()
        dim.dim_param = "batch"
        path = os.path.join(self.dir, "dyn.onnx")
        onnx.save(model, path)
        name = model.graph.input[0].name
        self.assert_refused(["optimize", path, "-o", self.out, "--quiet"], path,
                            "--input_shape")
        # ... and fixing it works.
        code, stdout, stderr = run_cli("optimize", path, "-o", self.out, "--quiet",
                                       "--no_timing", "--input_shape",
                                       f"{name}={','.join(map(str, shape))}")
        self.assertEqual(code, 0, stderr)
        self.assertIn("static shapes", stdout)

    def test_a_dynamic_input_original_written_unchanged_says_so(self):
        # One Relu: nothing to rewrite, so the original is written as it is,
        # its dynamic dimension kept, and the note must not claim otherwise.
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
        node = helper.make_node("Relu", ["x"], ["y"], name="relu")
        model = helper.make_model(helper.make_graph([node], "g", [x], [y]),
                                  opset_imports=[helper.make_opsetid("", 13)])
        path = os.path.join(self.dir, "dyn_relu.onnx")
        onnx.save(model, path)
        code, stdout, stderr = run_cli("optimize", path, "-o", self.out, "--quiet",
                                       "--no_timing", "--input_shape", "x=2,4")
        self.assertEqual(code, 0, stderr)
        self.assertIn(f"wrote {self.out}: original", stdout)
        self.assertIn("the original was written unchanged, with its dynamic dimensions", stdout)
        self.assertNotIn("static shapes", stdout)
        written = onnx.load(self.out).graph.input[0].type.tensor_type.shape.dim[0]
        self.assertEqual(written.dim_param, "batch")

    def test_output_folder_missing(self):
        out = os.path.join(self.out_dir, "no_such_folder", "o.onnx")
        self.assert_refused(["optimize", self.good, "-o", out, "--quiet"], "does not exist")

    def test_output_is_a_folder(self):
        sub = os.path.join(self.dir, "a_folder.onnx")
        os.mkdir(sub)
        code, _, stderr = run_cli("optimize", self.good, "-o", sub, "--quiet")
        self.assertEqual(code, cli.EXIT_BAD_INPUT)
        self.assertIn("is a folder", stderr)
        self.assertEqual(os.listdir(sub), [])

    def test_output_not_writable(self):
        if os.geteuid() == 0:  # root writes anywhere: a read-only file system instead
            out = "/proc/xflowrl_out.onnx"
        else:
            os.chmod(self.out_dir, 0o500)
            self.addCleanup(os.chmod, self.out_dir, 0o700)
            out = self.out
        code, _, stderr = run_cli("optimize", self.good, "-o", out, "--quiet")
        self.assertEqual(code, cli.EXIT_BAD_INPUT, stderr)
        self.assertIn(out, stderr)
        self.assertFalse(os.path.exists(out))

    def test_bad_options(self):
        self.assert_refused(["optimize", self.good, "-o", self.out, "--method=magic"],
                            "unknown method")
        self.assert_refused(["optimize", self.good, "-o", self.out,
                             "--cost_model=nonsense"], "--cost_model=nonsense")
        self.assert_refused(["optimize", self.good, "-o", self.out, "--input_shape=x"],
                            "NAME=D1,D2")
        self.assert_refused(["optimize", self.good, "-o", self.good], "overwrite the input")
        self.assert_refused(["inspect", os.path.join(self.dir, "nope.onnx")], "no such file")
        self.assert_refused(["measure", self.good], "at least two models")


class InspectMeasureTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp()
        cls.path = os.path.join(cls.dir, "bert.onnx")
        onnx.save(exporter_models.hf_bert_torchscript(), cls.path)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)
        super().tearDownClass()

    def test_inspect_names_ops_opaque_ops_and_xfers(self):
        code, stdout, stderr = run_cli("inspect", self.path, "--json")
        self.assertEqual(code, 0, stderr)
        info = json.loads(stdout)
        self.assertGreater(info["engine_ops"]["matmul"], 0)
        self.assertIn("Softmax", info["opaque_ops"])
        self.assertIn("no engine operator", info["opaque_ops"]["Softmax"]["why"])
        self.assertEqual(set(info["estimated_cost_ms"]),
                         {"analytic/cpu", "analytic/v100", "fitted/cpu"})
        self.assertTrue(info["valid_xfers"])
        for row in info["valid_xfers"]:
            self.assertGreater(row["locations"], 0)
        code, text, _ = run_cli("inspect", self.path)
        self.assertEqual(code, 0)
        self.assertIn("opaque ops", text)
        self.assertIn("xfers with locations", text)

    def test_measure_times_both_models_interleaved(self):
        code, stdout, stderr = run_cli("measure", self.path, self.path, "--runtimes=ort",
                                       "--rounds=2", "--repeats=2", "--json")
        self.assertEqual(code, 0, stderr)
        result = json.loads(stdout)
        self.assertEqual(result["rounds"], 2)
        for path in result["models"]:
            self.assertLen(result["times"][path]["ort"]["rounds_ms"], 2)

    def test_every_subcommand_has_help(self):
        for command in ("optimize", "inspect", "measure", "calibrate"):
            code, stdout, _ = run_cli(command, "--help")
            self.assertEqual(code, 0)
            self.assertIn("usage: xflowrl " + command, stdout)


class ConsoleScriptTest(absltest.TestCase):

    def test_the_installed_command_runs(self):
        script = os.path.join(os.path.dirname(sys.executable), "xflowrl")
        self.assertTrue(os.path.exists(script),
                        f"{script} missing: `pip install -e .` (scripts/bootstrap.sh) "
                        f"installs the console script")
        done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120,
                              check=False)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("optimize", done.stdout)


if __name__ == "__main__":
    absltest.main()
