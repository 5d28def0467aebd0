"""--onnx=PATH in the entry points: a user's model is optimised with its own
weights, its results folder is named by the file's stem, the graph.onnx
written computes what the original computes and keeps its interface; bad
input ends the script with one error line (exit status 2). train_mf.py
runs here on one Ray rollout actor (`--rollout_actors`)."""

import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest
import numpy as np
import onnx
from onnx import numpy_helper

from tests import entry_point
from tests.onnx_io.models import torch_style_cnn
from xflowrl.measure.ort_runtime import run_onnx

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SHAPE = (1, 3, 16, 16)


def _write_fixture(folder: str) -> str:
    """A small torch.onnx-style CNN (conv + BN blocks, a Gemm classifier; its
    own seeded weights) with a dynamic batch dimension and metadata, as
    folder/tiny_cnn.onnx."""
    model = torch_style_cnn(size=_SHAPE[-1])
    for info in (model.graph.input[0], model.graph.output[0]):
        dim = info.type.tensor_type.shape.dim[0]
        dim.Clear()
        dim.dim_param = "batch"
    model.metadata_props.add(key="owner", value="onnx_flag_test")
    path = os.path.join(folder, "tiny_cnn.onnx")
    onnx.save(model, path)
    return path


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    return entry_point.run([sys.executable, os.path.join(_REPO, "experiments", script), *args],
                           capture_output=True, text=True, timeout=300, cwd=_REPO)


def _initializers(model: onnx.ModelProto):
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


class OnnxFlagTest(absltest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = tempfile.mkdtemp()
        cls.model_path = _write_fixture(cls.folder)
        cls.original = onnx.load(cls.model_path)

    def assert_own_model(self, out_dir: str) -> None:
        """out_dir/graph.onnx: the original's weights where not rewritten, its
        input/output names, opset and metadata, and the same outputs."""
        optimized = onnx.load(os.path.join(out_dir, "graph.onnx"))
        ours, theirs = _initializers(optimized), _initializers(self.original)
        kept = sorted(set(ours) & set(theirs))
        self.assertNotEmpty(kept)
        for name in kept:
            np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
        self.assertEqual([i.name for i in optimized.graph.input],
                         [i.name for i in self.original.graph.input])
        self.assertEqual([o.name for o in optimized.graph.output],
                         [o.name for o in self.original.graph.output])
        self.assertEqual([(o.domain, o.version) for o in optimized.opset_import],
                         [(o.domain, o.version) for o in self.original.opset_import])
        props = {p.key: p.value for p in optimized.metadata_props}
        self.assertEqual(props["owner"], "onnx_flag_test")
        self.assertIn("xflowrl.optimized", props)
        self.assertEqual(optimized.producer_name, self.original.producer_name)
        feeds = {"input": np.random.default_rng(3).uniform(-1, 1, _SHAPE).astype(np.float32)}
        want, got = run_onnx(self.original, feeds), run_onnx(optimized, feeds)
        self.assertEqual(sorted(got), sorted(want))
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5, err_msg=name)

    def test_taso_search(self):
        results = tempfile.mkdtemp()
        proc = _run("taso_search.py", f"--onnx={self.model_path}", "--input_shape=input=1,3,16,16",
                    "--budget=20", f"--results_dir={results}")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertEqual(os.listdir(results), ["tiny_cnn"])
        out = os.path.join(results, "tiny_cnn", "taso_search")
        with open(os.path.join(out, "result.json")) as f:
            result = json.load(f)
        self.assertEqual(result["graph"], "tiny_cnn")
        self.assertEqual(result["onnx"], self.model_path)
        self.assertLess(result["final_cost_ms"], result["initial_cost_ms"])
        self.assert_own_model(out)

    def test_train_mf_on_rollout_actors(self):
        # A Ray actor plays the episodes: the entry point starts its own
        # local Ray and pickles its environment factory (the user's model)
        # into it. (Episodes shared out among several actors:
        # tests/agents/ppo/rollouts_test.py.)
        results = tempfile.mkdtemp()
        proc = _run("train_mf.py", "--quick", f"--onnx={self.model_path}",
                    "--input_shape=input=1,3,16,16", "--episodes=6", "--episodes_per_update=3",
                    "--rollout_actors=1", "--max_steps=4", "--noequal_budget", "--taso_budget=5",
                    "--eqsat_time_limit=2", "--random_episodes=1", f"--results_dir={results}")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("episode 6/6", proc.stderr)
        out = os.path.join(results, "tiny_cnn", "train_mf")
        with open(os.path.join(out, "result.json")) as f:
            result = json.load(f)
        self.assertEqual(result["graph"], "tiny_cnn")
        self.assertEqual(result["episodes"], 6)
        with open(os.path.join(out, "progress.json")) as f:
            self.assertLen(json.load(f)["actor_generators"], 1)
        self.assert_own_model(out)

    def test_baselines_time_only_the_model_file(self):
        results = tempfile.mkdtemp()
        proc = _run("baselines.py", f"--onnx={self.model_path}", "--input_shape=input=1,3,16,16",
                    "--taso_budget=5", "--eqsat_time_limit=2", "--runtimes=ort", "--rounds=1", "--warmup=1",
                    "--repeats=1", f"--results_dir={results}")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertEqual(sorted(os.listdir(results)), ["baselines", "tiny_cnn"])
        with open(os.path.join(results, "tiny_cnn", "baselines", "result.json")) as f:
            result = json.load(f)
        self.assertEqual(result["settings"]["onnx"], self.model_path)
        self.assertIsNone(result["thesis_gpu_ms"])
        for variant in result["variants"].values():
            self.assertGreater(variant["measured"]["ort/wall"]["median_ms"], 0)
        with open(os.path.join(results, "baselines", "baselines.json")) as f:
            self.assertEqual(json.load(f)["graphs"], ["tiny_cnn"])

    def test_graph_and_onnx_together_fail_clearly(self):
        proc = _run("taso_search.py", "--graph=small_cnn", f"--onnx={self.model_path}",
                    f"--results_dir={tempfile.mkdtemp()}")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr.strip().splitlines()[-1],
                         f"taso_search.py: error: --graph=small_cnn and --onnx={self.model_path} "
                         f"both name the graph to optimise; give one of them")
        self.assertNotIn("Traceback", proc.stderr)

    def test_missing_file_fails_clearly(self):
        missing = os.path.join(self.folder, "no_such_model.onnx")
        results = tempfile.mkdtemp()
        proc = _run("train_mf.py", "--quick", f"--onnx={missing}", f"--results_dir={results}")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stderr.strip().splitlines()[-1],
                         f"train_mf.py: error: {missing}: no such file")
        self.assertNotIn("Traceback", proc.stderr)
        self.assertEmpty(os.listdir(results))

    def test_dynamic_input_without_shape_fails_clearly(self):
        proc = _run("taso_search.py", f"--onnx={self.model_path}",
                    f"--results_dir={tempfile.mkdtemp()}")
        self.assertEqual(proc.returncode, 2)
        last = proc.stderr.strip().splitlines()[-1]
        self.assertStartsWith(last, f"taso_search.py: error: {self.model_path}: ")
        self.assertIn("--input_shape", last)
        self.assertNotIn("Traceback", proc.stderr)


if __name__ == "__main__":
    absltest.main()
