"""The native binding (`xflowrl._engine`) called directly with bad arguments
raises a Python exception and never aborts the process.

The cases run in a child process, so that a regression (a segfault or an
abort in native code) fails the test, naming the case, instead of killing
the suite: the child prints the exception type each case raised; the test
checks them and the exit status.
"""

import os
import subprocess
import sys
import textwrap

from absl.testing import absltest

import xflowrl

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(xflowrl.__file__)))

# Builds a small valid graph `g` (GraphHandle), a backend `cost` and the
# locations `locs` of the default rules, for the cases below.
_SETUP = """
import numpy as np
import xflowrl._engine as e
from xflowrl.engine import CostModel, GraphBuilder, XferSet
b = GraphBuilder()
x = b.input(shape=(1, 8, 16, 16), name="x")
w = b.weight(shape=(8, 8, 3, 3), name="w")
g = b.build([b.relu(input=b.conv2d(input=x, weight=w))]).handle
cost = e.analytic_backend("cpu")
rules = XferSet.default()._handle
locs = rules.locations(g, 10, 100)
"""

CASES = {
    "empty_graph_num_ops": "e.GraphHandle().num_ops()",
    "empty_graph_ops": "e.GraphHandle().ops()",
    "empty_graph_structure": "e.GraphHandle().structure()",
    "empty_graph_hash": "e.GraphHandle().hash()",
    "empty_graph_memory": "e.GraphHandle().memory()",
    "empty_graph_cost": "e.GraphHandle().cost(cost)",
    "empty_backend_name": "e.CostBackendHandle().name",
    "empty_backend_op_cost": "e.CostBackendHandle().op_cost(1, {}, [])",
    "cost_none": "g.cost(None)",
    "op_costs_empty_backend": "g.op_costs(e.CostBackendHandle())",
    "op_config_key_high": "g.op_config_key(99)",
    "op_config_key_negative": "g.op_config_key(-1)",
    "locations_graph_bad_xfer": "locs.graph(10 ** 6, 0)",
    "locations_graph_bad_location": "locs.graph(0, 10 ** 6)",
    "locations_graph_negative": "locs.graph(-1, 0)",
    "locations_matched_bad_xfer": "locs.matched(10 ** 6)",
    "locations_costs_none": "locs.costs(None)",
    "matched_nodes_none": "locs.matched_nodes(None, np.zeros((9999, 10, 8), np.int32))",
    "matched_nodes_few_rows": (
        "locs.matched_nodes(np.zeros(99, np.int32), np.zeros((1, 10, 8), np.int32))"),
    "matched_nodes_few_slots": (
        "locs.matched_nodes(np.zeros(99, np.int32), np.zeros((9999, 10, 0), np.int32))"),
    "matched_nodes_short_map": (
        "locs.matched_nodes(np.zeros(0, np.int32), np.zeros((9999, 10, 8), np.int32))"),
    "matched_nodes_int64_out": (
        "locs.matched_nodes(np.zeros(99, np.int32), np.zeros((9999, 10, 8), np.int64))"),
    "rules_locations_none": "rules.locations(None, 10, 100)",
    "rules_locations_empty_graph": "rules.locations(e.GraphHandle(), 10, 100)",
    "rules_search_empty_backend": "rules.search(g, e.CostBackendHandle(), 1.05, 1, 0, 0.0)",
    "rules_none": "e.RuleSetHandle(None)",
    "builder_overflowing_input": "e.BuilderHandle().input('x', (2 ** 31, 2 ** 31, 2 ** 31))",
    "builder_int64_overflow": "e.BuilderHandle().input('x', (2 ** 64,))",
    "builder_none_name": "e.BuilderHandle().input(None, (1,))",
    "builder_unknown_input": "e.BuilderHandle().add(e.op_type_id('relu'), {}, [(99, 0)])",
    "builder_bad_output_index": (
        "bb = e.BuilderHandle(); t = bb.input('x', (2, 3)); "
        "bb.add(e.op_type_id('relu'), {}, [(t[0], 5)])"),
    "builder_unknown_type": "e.BuilderHandle().add(10 ** 6, {}, [])",
    "builder_bad_param": "e.BuilderHandle().add(e.op_type_id('relu'), {'stride_h': 2 ** 40}, [])",
    "opaque_overflowing_output": (
        "bb = e.BuilderHandle(); t = bb.input('x', (1, 4)); "
        "bb.add(e.op_type_id('opaque'), {'opaque_type': 'z', "
        "'opaque_shapes': [(2 ** 40, 2 ** 40)]}, [t])"),
    "reshape_negative_target": (
        "bb = e.BuilderHandle(); t = bb.input('x', (2, 3)); "
        "bb.add(e.op_type_id('reshape'), {'shape': (-2, -3)}, [t])"),
}

EXPECTED = {name: "ValueError" for name in CASES}
EXPECTED.update({
    "cost_none": "TypeError", "locations_costs_none": "TypeError",
    "rules_locations_none": "TypeError", "rules_none": "TypeError",
    "builder_none_name": "TypeError",
    "op_config_key_high": "IndexError", "op_config_key_negative": "IndexError",
    "locations_graph_bad_xfer": "IndexError", "locations_graph_bad_location": "IndexError",
    "locations_graph_negative": "IndexError", "locations_matched_bad_xfer": "IndexError",
    "matched_nodes_none": "TypeError", "matched_nodes_short_map": "IndexError",
})


def _run_cases(cases) -> subprocess.CompletedProcess:
    """Runs each (name, statement) in one child process, in order; prints
    "START name" before and "RAISED name Type" / "NO_ERROR name" after each
    (flushed: a death shows which case it hit)."""
    lines = [_SETUP]
    for name, statement in cases:
        lines.append(textwrap.dedent(f"""
            print("START {name}", flush=True)
            try:
                {statement}
            except Exception as exc:
                print("RAISED {name}", type(exc).__name__, flush=True)
            else:
                print("NO_ERROR {name}", flush=True)
            """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.run([sys.executable, "-c", "".join(lines)], capture_output=True,
                          text=True, env=env, timeout=300)


class BindingTest(absltest.TestCase):

    def test_bad_arguments_raise(self):
        done = _run_cases(sorted(CASES.items()))
        started = [line.split()[1] for line in done.stdout.splitlines()
                   if line.startswith("START")]
        self.assertEqual(done.returncode, 0,
                         f"the process died (status {done.returncode}) in case "
                         f"{started[-1] if started else None}: {done.stderr[-2000:]}")
        raised = {}
        for line in done.stdout.splitlines():
            if line.startswith(("RAISED", "NO_ERROR")):
                parts = line.split()
                raised[parts[1]] = parts[2] if parts[0] == "RAISED" else "nothing"
        for name in CASES:
            with self.subTest(name):
                self.assertEqual(raised.get(name), EXPECTED[name])

    def test_valid_calls_still_work(self):
        done = _run_cases([("valid", "print('OK', g.num_ops(), g.cost(cost) > 0, "
                                     "len(locs.counts()) > 0, g.op_config_key(2)[:6])")])
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        self.assertIn("OK 2 True True conv2d", done.stdout)
        self.assertIn("NO_ERROR valid", done.stdout)


if __name__ == "__main__":
    absltest.main()
