"""`experiments/taso_search.py` reports one-step greedy beside the search, under
the same rules and cost model, and says which of the two won."""

import json
import os
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point
from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.search import greedy_search

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class TasoSearchScriptTest(absltest.TestCase):

    def test_greedy_row_beside_the_search(self):
        results = tempfile.mkdtemp()
        proc = entry_point.run(
            [sys.executable, os.path.join(_REPO, "experiments", "taso_search.py"),
             "--graph=small_cnn", "--budget=50", f"--results_dir={results}"],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        out = os.path.join(results, "small_cnn", "taso_search")
        with open(os.path.join(out, "result.json")) as f:
            result = json.load(f)
        # The greedy row is the real greedy episode under the same setting.
        env = GraphEnv(zoo.get_graph("small_cnn"), XferSet.from_name("default"),
                       CostModel("analytic"), EnvConfig(max_steps=NO_STEP_LIMIT))
        episode = greedy_search(env)
        self.assertAlmostEqual(result["greedy"]["cost_ms"], episode.final_cost, places=9)
        self.assertEqual(result["greedy"]["steps"], len(episode.applied))
        self.assertLess(result["greedy"]["cost_ms"], result["initial_cost_ms"])
        self.assertAlmostEqual(result["search_vs_greedy_pct"],
                               100 * (result["final_cost_ms"] / episode.final_cost - 1))
        with open(os.path.join(out, "result.md")) as f:
            report = f.read()
        self.assertIn("one-step greedy", report)
        self.assertRegex(report, r"The search (only matches|beats) one-step greedy|"
                                 r"One-step greedy beats the search")


if __name__ == "__main__":
    absltest.main()
