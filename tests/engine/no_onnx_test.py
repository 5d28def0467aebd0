"""The engine, rules, executor and zoo work where `onnx` cannot be imported.

Only `xflowrl.onnx_io` needs ONNX; the package facades import lazily. Each
check runs in a fresh interpreter whose `import onnx` raises ImportError.
"""

import subprocess
import sys
import textwrap

from absl.testing import absltest

_BLOCK_ONNX = "import sys; sys.modules['onnx'] = None  # import onnx -> ImportError\n"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _BLOCK_ONNX + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120, check=False)


class NoOnnxTest(absltest.TestCase):

    def test_engine_builds_costs_and_rewrites_a_zoo_graph(self):
        proc = _run("""
            import sys
            from xflowrl.engine import CostModel, XferSet
            from xflowrl import zoo
            from xflowrl.executor import reference, weights
            graph = zoo.get_graph("small_cnn")
            cost = graph.cost(CostModel("analytic"))
            locations = XferSet.default().locations(graph)
            values = reference.execute(graph, {**weights.random_inputs(graph),
                                               **weights.random_weights(graph)})
            loaded = sorted(m for m in sys.modules if m.startswith("onnx"))
            print(cost, int(locations.location_mask().sum()), len(values), loaded)
        """)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        cost, n_locations, n_values, loaded = proc.stdout.split(maxsplit=3)
        self.assertGreater(float(cost), 0.0)
        self.assertGreater(int(n_locations), 0)
        self.assertGreater(int(n_values), 0)
        self.assertEqual(loaded.strip(), "['onnx']")  # only the blocking entry

    def test_onnx_io_says_onnx_is_missing_only_when_used(self):
        proc = _run("""
            import xflowrl.onnx_io as onnx_io
            try:
                onnx_io.load_onnx
            except ImportError as e:
                print("ImportError", e.name)
        """)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split(), ["ImportError", "onnx"])


if __name__ == "__main__":
    absltest.main()
