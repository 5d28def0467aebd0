"""`xflowrl optimize` and `measure` on a GPU target, tested on this machine.

The GPU path (outputs checked and both models timed in PyTorch,
`xflowrl.optimize.on_device`) runs here on its CPU stand-in: PyTorch on the
CPU (`--device=torch-cpu`, or a `runtime` handed to `optimize_file`). The
decisions are tested with stand-ins whose programs report chosen times or
outputs: a slower optimised model makes `optimize` hand back the original,
a faster one is written, other outputs are refused. Bad input: `--device=cuda`
without PyTorch or a GPU is exit 2 with one line saying what is missing; an
op the GPU runtime lacks is named in the report and the CPU path decides.
Tests that need PyTorch skip where it is not installed.
"""

import importlib.util
import json
import os
import subprocess
import sys
import types
from unittest import mock

from absl.testing import absltest
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.optimize.cli_test import make_tempdir, run_cli, same_function, write_zoo_model
from xflowrl.measure import devices
from xflowrl.measure.ort_runtime import run_onnx
from xflowrl.optimize import OptimizeOptions, Refused, optimize_file, pipeline, target

HAS_TORCH = importlib.util.find_spec("torch") is not None


def conv_model(path, batch="N", softmax=False):
    """conv 3x3 + ReLU, conv 1x1 + ReLU (greedy fuses both ReLUs), then an
    optional Softmax (an op the engine keeps opaque and PyTorch's runtime
    lacks); input x [batch, 4, 8, 8] (a string: a dynamic dimension)."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.normal(0, 0.3, (8, 4, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(0, 0.3, (8, 8, 1, 1)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"]),
             helper.make_node("Relu", ["c2"], ["r2" if softmax else "y"])]
    if softmax:
        nodes.append(helper.make_node("Softmax", ["r2"], ["y"], axis=1))
    graph = helper.make_graph(
        nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 8, 8, 8])], [w1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, path)
    return model


class DevicesTest(absltest.TestCase):

    def test_no_pytorch_is_named(self):
        with mock.patch.object(devices.importlib.util, "find_spec", return_value=None):
            self.assertIn("PyTorch is not installed", devices.cuda_missing())
            self.assertEqual(devices.resolve("auto").name, "cpu")
            self.assertIn("PyTorch is not installed", devices.resolve("auto").why)
            with self.assertRaisesRegex(devices.DeviceUnavailable,
                                        r"--device=cuda: PyTorch is not installed"):
                devices.resolve("cuda")
            with self.assertRaisesRegex(devices.DeviceUnavailable, "torch-cpu"):
                devices.resolve("torch-cpu")

    @absltest.skipUnless(sys.platform.startswith("linux"), "the driver check is Linux's")
    def test_no_gpu_driver_is_named_without_importing_pytorch(self):
        # PyTorch found but made unimportable: a message naming its import
        # would mean it was asked.
        found = mock.patch.object(devices, "_torch_found", return_value=True)
        with found, mock.patch.object(devices, "_GPU_DRIVER_PATHS", ("/no/such/driver",)), \
                mock.patch.dict(sys.modules, {"torch": None}):
            missing = devices.cuda_missing()
            self.assertEqual(missing, "PyTorch sees no CUDA GPU: no GPU driver is loaded "
                                      "(none of /no/such/driver exists)")
            self.assertEqual(devices.resolve("auto").why, f"no GPU path: {missing}")
        with found, mock.patch.object(devices, "_GPU_DRIVER_PATHS", (__file__,)), \
                mock.patch.dict(sys.modules, {"torch": None}):
            self.assertStartsWith(devices.cuda_missing(), "PyTorch does not import")

    def test_xflowrl_works_without_pytorch(self):
        """With PyTorch made unimportable, the command's modules import and
        "auto" is the CPU, saying why."""
        code = ("import sys; sys.modules['torch'] = None\n"
                "import xflowrl.cli, xflowrl.optimize, xflowrl.measure.torch_runtime\n"
                "from xflowrl.measure import devices\n"
                "d = devices.resolve('auto'); print(d.name, '|', d.why)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=False, timeout=300)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(),
                         "cpu | no GPU path: PyTorch is not installed (pip install xflowrl[gpu])")

    def test_unknown_device(self):
        with self.assertRaisesRegex(ValueError, "choose from"):
            devices.resolve("tpu")

    @absltest.skipUnless(HAS_TORCH, "needs PyTorch")
    def test_auto_follows_cuda(self):
        missing = devices.cuda_missing()
        resolved = devices.resolve("auto")
        self.assertEqual(resolved.name, "cpu" if missing else "cuda")
        self.assertEqual(resolved.torch_device, None if missing else "cuda")
        self.assertEqual(devices.resolve("torch-cpu").torch_device, "cpu")

    def test_default_cost_model_by_device(self):
        self.assertEqual(target.default_cost_model("cpu"), target.DEFAULT_COST_MODEL)
        self.assertEqual(target.default_cost_model("torch-cpu"),
                         target.DEFAULT_GPU_COST_MODEL)
        with mock.patch.object(target, "learned_for_card", return_value="learned/h200"):
            self.assertEqual(target.default_cost_model("cuda"), "learned/h200")
        with mock.patch.object(target, "learned_for_card", return_value=""):
            self.assertEqual(target.default_cost_model("cuda"), "analytic/v100")

    def test_the_learned_model_of_the_card_is_the_default_and_falls_back(self):
        from xflowrl.engine import cost  # pylint: disable=import-outside-toplevel
        from xflowrl.entry_points import (  # pylint: disable=import-outside-toplevel
            cost_model_from_spec,
        )
        cards = getattr(cost, "learned_cards", lambda: [])()
        if "h200" not in cards:
            self.skipTest("no learned h200 profile in this engine")
        with mock.patch.object(devices, "card_name", return_value="NVIDIA H200"):
            self.assertEqual(target.default_cost_model("cuda"), "learned/h200")
        with mock.patch.object(devices, "card_name", return_value="NVIDIA A100-SXM4-80GB"):
            self.assertEqual(target.default_cost_model("cuda"), "analytic/v100")
        model, how = target.priced_cost_model(
            "learned/h200", "float32", cost_model_from_spec)
        self.assertIn("learned", model.name)
        self.assertEqual(how, "float32")
        # A precision the profile has no coefficients for: its default, said so.
        def without_bfloat16(spec):
            if spec.endswith(":bfloat16"):
                raise ValueError("no bfloat16 coefficients")
            return cost_model_from_spec(spec)

        model, how = target.priced_cost_model(
            "learned/h200", "bfloat16", without_bfloat16)
        self.assertIn("learned", model.name)
        self.assertIn("no bfloat16 coefficients", how)

    def test_a_learned_cost_model_prices_in_the_asked_precision(self):
        self.assertEqual(target.cost_spec_for_dtype("learned/h200", "bfloat16"),
                         ("learned/h200:bfloat16", "bfloat16"))
        spec, how = target.cost_spec_for_dtype("analytic/v100", "bfloat16")
        self.assertEqual(spec, "analytic/v100")
        self.assertIn("takes no precision", how)


class BadInputTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = make_tempdir(self)
        self.model = os.path.join(self.dir, "m.onnx")
        conv_model(self.model, batch=1)
        self.out = os.path.join(self.dir, "out.onnx")

    def _refused(self, *args, says):
        code, stdout, stderr = run_cli("optimize", self.model, "-o", self.out, "--quiet", *args)
        self.assertEqual(code, 2, stdout + stderr)
        self.assertLen(stderr.strip().splitlines(), 1, stderr)
        self.assertRegex(stderr, says)
        self.assertFalse(os.path.exists(self.out))
        return stderr

    def test_cuda_without_pytorch(self):
        with mock.patch.object(devices, "cuda_missing",
                               return_value="PyTorch is not installed (pip install xflowrl[gpu])"):
            self._refused("--device=cuda", says=r"--device=cuda: PyTorch is not installed")

    def test_cuda_without_a_gpu(self):
        with mock.patch.object(devices, "cuda_missing",
                               return_value="PyTorch 2.13.0 sees no CUDA GPU"):
            self._refused("--device=cuda", says="sees no CUDA GPU")

    def test_cuda_here_says_what_is_missing(self):
        # Asked here, not when the file is collected (that imports PyTorch).
        if devices.cuda_missing() is None:
            self.skipTest("a GPU is here")
        self._refused("--device=cuda", says=r"--device=cuda: PyTorch")

    def test_reduced_precision_on_the_cpu(self):
        self._refused("--device=cpu", "--dtype=bfloat16", says="float32 only")

    def test_a_static_batch_other_than_asked(self):
        self._refused("--device=cpu", "--batch=4", says="static batch of 1, not --batch=4")

    def test_measure_on_cuda_without_a_gpu(self):
        with mock.patch.object(devices, "cuda_missing", return_value="PyTorch is not installed"):
            code, _, stderr = run_cli("measure", self.model, self.model, "--device=cuda")
        self.assertEqual(code, 2)
        self.assertIn("--device=cuda: PyTorch is not installed", stderr)

    def test_calibrate_on_cuda_without_a_gpu(self):
        with mock.patch.object(devices, "cuda_missing", return_value="PyTorch is not installed"):
            code, _, stderr = run_cli("calibrate", "--device=cuda",
                                      "-o", os.path.join(self.dir, "p.json"))
        self.assertEqual(code, 2)
        self.assertLen(stderr.strip().splitlines(), 1)
        self.assertIn("--device=cuda: PyTorch is not installed", stderr)


class CalibrateCudaTest(absltest.TestCase):

    def test_the_flags_reach_calibrate_cuda(self):
        """With a GPU (mocked), `calibrate --device=cuda` calls the library's
        `calibrate_cuda` with the batches, precisions and budget given."""
        calls = []

        def calibrate_cuda(output=None, *, batch=(1, 8, 32), dtype=("float32",),
                           budget="quick", progress=None, data_dir=None, seed=0):
            del progress, data_dir, seed
            calls.append((output, list(batch), list(dtype), budget))
            return {"card": "h200", "path": output or "learned_h200.json", "data": "h200.jsonl",
                    "records": 12, "records_total": 40, "seconds": 3.0}

        fake = types.ModuleType("xflowrl.measure.gpu_calibration")
        fake.calibrate_cuda = calibrate_cuda  # type: ignore[attr-defined]
        folder = make_tempdir(self)
        out = os.path.join(folder, "learned_h200.json")
        with mock.patch.object(devices, "cuda_missing", return_value=None), \
                mock.patch.dict(sys.modules, {"xflowrl.measure.gpu_calibration": fake}):
            code, stdout, stderr = run_cli("calibrate", "--device=cuda", "--batch=1,16",
                                           "--dtype=bfloat16", "--budget=full", "-o", out)
        self.assertEqual(code, 0, stderr)
        self.assertEqual(calls, [(out, [1, 16], ["bfloat16"], "full")])
        self.assertIn("12 new timings on h200", stdout)
        self.assertIn("--cost_model=learned/h200", stdout)

    def test_a_bad_batch_list(self):
        with mock.patch.object(devices, "cuda_missing", return_value=None):
            code, _, stderr = run_cli("calibrate", "--device=cuda", "--batch=1,x")
        self.assertEqual(code, 2)
        self.assertIn("--batch=1,x", stderr)


class _TimedProgram:
    """A real program whose `time` reports `ms` and whose outputs are
    scaled by `scale` (a stand-in's chosen figures)."""

    def __init__(self, program, ms, scale=1.0):
        self.program, self.ms, self.scale = program, ms, scale

    def outputs(self):
        return [out * self.scale for out in self.program.outputs()]

    def time(self, mode, warmup=0, repeats=1):
        del mode, warmup
        return {"median_ms": self.ms, "min_ms": self.ms, "max_ms": self.ms, "repeats": repeats}


class StandIn:
    """The GPU runtime's stand-in: PyTorch on the CPU for the outputs, and
    chosen times: `original_ms` for the graph with `original_ops` ops,
    `optimized_ms` for any other; `scale` multiplies the optimised graph's
    outputs."""

    def __init__(self, original_ops, original_ms, optimized_ms, scale=1.0):
        from xflowrl.optimize.on_device import (
            TorchRuntime,  # pylint: disable=import-outside-toplevel
        )
        self.real = TorchRuntime("cpu")
        self.device, self.mode, self.name = "cpu", "eager", "the stand-in"
        self.original_ops = original_ops
        self.original_ms, self.optimized_ms, self.scale = original_ms, optimized_ms, scale
        self.built = []

    def environment(self):
        return {"device": "stand-in"}

    def program(self, graph, feeds, dtype):
        original = graph.num_ops() == self.original_ops
        self.built.append(("original" if original else "optimized", dtype))
        program = self.real.program(graph, feeds, dtype)
        if original:
            return _TimedProgram(program, self.original_ms)
        return _TimedProgram(program, self.optimized_ms, self.scale)


@absltest.skipUnless(HAS_TORCH, "needs PyTorch (the GPU path's CPU stand-in)")
class GpuPathTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = make_tempdir(self)
        self.model = os.path.join(self.dir, "cnn.onnx")
        self.original = write_zoo_model(self.model)
        self.out = os.path.join(self.dir, "out.onnx")
        from xflowrl.optimize import load_model  # pylint: disable=import-outside-toplevel
        self.ops = load_model(self.model).graph.num_ops()

    def _optimize(self, runtime, **kwargs):
        options = OptimizeOptions(self.model, self.out, rounds=3, **kwargs)
        return optimize_file(options, runtime=runtime)

    def test_slower_on_the_device_hands_back_the_original(self):
        stand_in = StandIn(self.ops, original_ms=10.0, optimized_ms=12.0)
        report = self._optimize(stand_in)
        self.assertEqual(report.written, "original")
        self.assertIn("not faster on torch-cpu: the stand-in", report.reason)
        with open(self.model, "rb") as a, open(self.out, "rb") as b:
            self.assertEqual(a.read(), b.read())
        self.assertFalse(report.measured["faster"])
        self.assertAlmostEqual(report.measured["change"], 20.0)
        self.assertEqual(report.device["decided_by"], "torch-cpu: the stand-in, float32")
        self.assertIsNone(report.device["fallback"])
        self.assertTrue(report.device_outputs["same"])

    def test_slower_allowed_writes_it_and_says_so(self):
        report = self._optimize(StandIn(self.ops, 10.0, 12.0), allow_slower=True)
        self.assertEqual(report.written, "optimized, slower allowed")

    def test_faster_on_the_device_is_written_and_computes_the_same(self):
        stand_in = StandIn(self.ops, original_ms=10.0, optimized_ms=5.0)
        report = self._optimize(stand_in)
        self.assertEqual(report.written, "optimized")
        self.assertAlmostEqual(report.measured["change"], -50.0)
        self.assertTrue(report.measured["confirmation"]["faster"])
        same_function(self, self.original, onnx.load(self.out))
        saved = json.loads(open(report_path(self.out)).read())
        self.assertEqual(saved["version"], pipeline.REPORT_VERSION)
        self.assertEqual(saved["device"]["device"], "torch-cpu")
        self.assertEqual(saved["device"]["batch"], 1)

    def test_other_outputs_on_the_device_are_refused(self):
        stand_in = StandIn(self.ops, 10.0, 5.0, scale=1.01)
        with self.assertRaisesRegex(Refused, "on torch-cpu the optimised model's outputs"):
            self._optimize(stand_in)
        self.assertFalse(os.path.exists(self.out))

    def test_reduced_precision_checks_against_float32(self):
        stand_in = StandIn(self.ops, 10.0, 5.0)
        report = self._optimize(stand_in, dtype="bfloat16")
        self.assertEqual(report.written, "optimized")
        check = report.device_outputs
        self.assertEqual(check["dtype"], "bfloat16")
        self.assertGreater(check["error_original"], 0.0)  # bfloat16 rounds
        self.assertLessEqual(check["error_optimized"], check["bound"])
        self.assertIn(("original", "float32"), stand_in.built)
        self.assertIn(("optimized", "bfloat16"), stand_in.built)

    def test_unstable_in_reduced_precision_is_refused(self):
        # Exact in float32 (scale 1 there would pass); 5% off in float16 only.
        class Unstable(StandIn):
            def program(self, graph, feeds, dtype):
                program = super().program(graph, feeds, dtype)
                if dtype == "float16" and graph.num_ops() != self.original_ops:
                    program.scale = 1.05
                return program
        with self.assertRaisesRegex(Refused, "in float16 its error"):
            self._optimize(Unstable(self.ops, 10.0, 5.0), dtype="float16")
        self.assertFalse(os.path.exists(self.out))

    def test_a_timing_the_gpu_refuses_falls_back_to_the_cpu_path(self):
        class Refusing(StandIn):
            def program(self, graph, feeds, dtype):
                program = super().program(graph, feeds, dtype)
                program.time = mock.Mock(side_effect=RuntimeError("capture refused"))
                return program
        report = self._optimize(Refusing(self.ops, 10.0, 5.0))
        self.assertIn("timing on the GPU failed (RuntimeError: capture refused)",
                      report.device["fallback"])
        self.assertTrue(report.device["decided_by"].startswith("cpu: onnxruntime"))
        self.assertIn("onnxruntime", report.measured["runtime"])
        self.assertTrue(report.device_outputs["same"])  # the GPU's output check still ran

    def test_nothing_timed_says_so(self):
        report = self._optimize(StandIn(self.ops, 10.0, 5.0), verify_speed=False)
        self.assertEqual(report.written, "optimized")
        self.assertEqual(report.device["decided_by"], "torch-cpu: outputs only")
        self.assertIsNone(report.measured)

    def test_an_op_the_gpu_runtime_lacks_falls_back_to_the_cpu_path(self):
        model = os.path.join(self.dir, "softmax.onnx")
        conv_model(model, batch=1, softmax=True)
        code, stdout, stderr = run_cli("optimize", model, "-o", self.out, "--quiet",
                                       "--device=torch-cpu", "--rounds=2")
        self.assertEqual(code, 0, stderr)
        report = json.loads(open(report_path(self.out)).read())
        self.assertIn("Softmax", report["device"]["fallback"])
        self.assertIn("onnxruntime", report["device"]["fallback"])
        self.assertTrue(report["device"]["decided_by"].startswith("cpu: onnxruntime"))
        self.assertIn("onnxruntime", report["measured"]["runtime"])
        self.assertIsNone(report["device_outputs"])
        self.assertIn("note: ", stdout)

    def test_the_real_stand_in_from_the_command(self):
        model = os.path.join(self.dir, "dyn.onnx")
        conv_model(model, batch="N")
        code, stdout, stderr = run_cli("optimize", model, "-o", self.out, "--quiet",
                                       "--device=torch-cpu", "--batch=3", "--rounds=2",
                                       "--dtype=bfloat16")
        self.assertEqual(code, 0, stderr)
        report = json.loads(open(report_path(self.out)).read())
        self.assertEqual(report["device"]["batch"], 3)
        self.assertEqual(report["device"]["dtype"], "bfloat16")
        self.assertEqual(report["cost_model"], "analytic/v100")
        self.assertIn("PyTorch", report["measured"]["runtime"])
        self.assertTrue(report["device_outputs"]["same"])
        self.assertIn("decided by: torch-cpu: PyTorch", stdout)
        # Whichever was written computes what the original computes at batch 3.
        written = onnx.load(self.out)
        feeds = {"x": np.random.default_rng(1).uniform(-1, 1, (3, 4, 8, 8)).astype(np.float32)}
        want, got = run_onnx(onnx.load(model), feeds), run_onnx(written, feeds)
        np.testing.assert_allclose(got["y"], want["y"], rtol=1e-4, atol=1e-5)

    def test_measure_on_the_stand_in(self):
        a = os.path.join(self.dir, "a.onnx")
        conv_model(a, batch="N")
        code, stdout, stderr = run_cli("measure", a, a,
                                       "--device=torch-cpu", "--batch=2", "--rounds=2",
                                       "--repeats=2", "--json")
        self.assertEqual(code, 0, stderr)
        result = json.loads(stdout)
        self.assertEqual(result["device"]["device"], "torch-cpu")
        self.assertEqual(result["inputs"]["x"], [2, 4, 8, 8])
        for path in result["models"]:
            self.assertLen(result["times"][path]["torch-eager"]["rounds_ms"], 2)

    def test_measure_names_an_op_the_gpu_runtime_lacks(self):
        a, b = os.path.join(self.dir, "a.onnx"), os.path.join(self.dir, "b.onnx")
        conv_model(a, batch=1)
        conv_model(b, batch=1, softmax=True)
        code, stdout, stderr = run_cli("measure", a, b, "--device=torch-cpu", "--rounds=1",
                                       "--repeats=1", "--json")
        self.assertEqual(code, 0, stderr)
        result = json.loads(stdout)
        self.assertIn("median_ms", result["times"][a]["torch-eager"])
        self.assertIn("Softmax", result["times"][b]["torch-eager"]["error"])


def report_path(out):
    return out[:-5] + ".report.json"


if __name__ == "__main__":
    absltest.main()
