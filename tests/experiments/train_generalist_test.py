"""experiments/train_generalist.py end to end with tiny budgets: the
model-based agent over the corpus' training graphs, zero-shot on one
held-out graph, measured (measure_generalist.py), traced
(trace_generalist.py), and the report with both tables
(generalist_report.py). (The deprecated --cost_model=BACKEND/PROFILE
spelling is common_test's.)"""

import json
import os
import subprocess
import sys
import tempfile

from absl.testing import absltest

from tests import entry_point
from xflowrl import corpus
from xflowrl.engine import XferSet
from xflowrl.engine.cost import GPU_COST_SPEC
from xflowrl.entry_points import cost_model_from_spec
from xflowrl.results.generalist import GeneralistRun, HeldOutTimings

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCRIPT = os.path.join(_REPO, "experiments", "train_generalist.py")
_MEASURE = os.path.join(_REPO, "experiments", "measure_generalist.py")
_REPORT = os.path.join(_REPO, "experiments", "generalist_report.py")
_TRACE = os.path.join(_REPO, "experiments", "trace_generalist.py")
_TINY = ["--agent=mb", "--quick", "--rounds=1", "--episodes_per_round=2", "--dream_episodes=8",
         "--eval_limit=1", "--taso_budget=5", "--random_episodes=1", "--encoder_steps=2",
         "--train_steps_per_round=2", "--real_episodes_per_round=3"]


def _run(results: str, *args: str, script: str = _SCRIPT) -> subprocess.CompletedProcess:
    proc = entry_point.run([sys.executable, script, f"--results_dir={results}", *args],
                           capture_output=True, text=True, timeout=600, cwd=_REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


class TrainGeneralistTest(absltest.TestCase):

    cost_model = cost_model_from_spec(GPU_COST_SPEC)

    def test_the_model_based_generalist_trains_evaluates_measures_and_reports(self):
        results = tempfile.mkdtemp()
        _run(results, *_TINY)
        folder = os.path.join(results, "generalist", "analytic_v100")
        result = GeneralistRun.load(os.path.join(folder, "mb", "seed0", "result.json"))
        self.assertEqual(result.agent, "mb")
        self.assertLen(result.training_graphs, 63)
        (row,) = result.held_out
        self.assertEqual(row.graph, "resnet/d32w16")
        # The recorded substitutions rebuild the graph whose cost is reported.
        graph = corpus.get(row.graph)
        self.assertAlmostEqual(graph.cost(self.cost_model), row.initial_ms, places=9)
        handed_over = XferSet.default().replay(
            graph, [(x, int(loc)) for x, loc in row.policy_applied])
        self.assertAlmostEqual(handed_over.cost(self.cost_model), row.policy_ms, places=9)
        # Real steps: the rounds' collection, the held-out episodes, the
        # per-round evaluation on 8 training graphs and the controller's own
        # real episodes (3 before the round's dream stretch).
        with open(os.path.join(folder, "mb", "seed0", "controller", "real.json")) as f:
            (learned,) = json.load(f)
        self.assertEqual((learned["round"], learned["real_episodes"]), (1, 3))
        with open(os.path.join(folder, "mb", "seed0", "world_model", "state.json")) as f:
            state = json.load(f)
        self.assertEqual(result.interactions,
                         state["real_steps"] + state["held_out_steps"]
                         + state["evaluation_steps"] + learned["real_steps"])
        # The per-round controller's returns, as the report reads them.
        (round_,) = result.rounds()
        self.assertEqual(round_.controller.episodes, 8)

        _run(results, "--measure_rounds=1", script=_MEASURE)
        (measured,) = HeldOutTimings.load(os.path.join(folder, "measured.json")).graphs
        self.assertEqual(set(measured.variants), {"initial", "greedy", "model-based/0"})

        report = _run(results, script=_REPORT).stdout
        self.assertIn("Model-based agent.", report)
        self.assertIn("| resnet/d32w16 |", report)
        self.assertIn("## Estimated and measured", report)
        with open(os.path.join(folder, "report.md")) as f:
            self.assertEqual(f.read(), report)

        # The finished run resumed, its greedy episode step by step.
        trace = _run(results, *_TINY, "--graphs=resnet/d32w16", script=_TRACE).stdout
        lines = trace.splitlines()
        self.assertTrue(lines[0].startswith("resnet/d32w16: initial "), trace)
        steps = [(x.split()[1], int(x.split()[3])) for x in lines if " location " in x]
        # The evaluation's episode: what it handed over is a prefix of it.
        self.assertEqual(steps[:len(row.policy_applied)],
                         [(x, int(loc)) for x, loc in row.policy_applied])
        self.assertTrue(lines[-2].startswith("  greedy: -"), trace)
        self.assertTrue(lines[-1].startswith("  of those outside the agent's vocabulary: "),
                        trace)

    def test_a_resumed_finished_run_keeps_the_policy_s_training_commit_and_command(self):
        results = tempfile.mkdtemp()
        tiny = ["--episodes=10", "--eval_limit=1", "--taso_budget=5", "--random_episodes=1"]
        policy = os.path.join(results, "generalist", "analytic_v100", "seed0", "policy",
                              "policy.json")

        def recorded():
            with open(policy) as f:
                info = json.load(f)
            return info["episodes"], info["command"].split()[2:]

        _run(results, *tiny)
        self.assertEqual(recorded(), (10, [f"--results_dir={results}", *tiny]))
        # Resumed with other evaluation flags: nothing trained, the record stays.
        _run(results, *tiny[:-1], "--random_episodes=2")
        self.assertEqual(recorded(), (10, [f"--results_dir={results}", *tiny]))
        # Trained further: the policy is this run's.
        _run(results, "--episodes=20", *tiny[1:])
        self.assertEqual(recorded(), (20, [f"--results_dir={results}", "--episodes=20",
                                           *tiny[1:]]))

    def test_ship_and_finetune_are_for_the_model_free_agent(self):
        proc = entry_point.run([sys.executable, _SCRIPT, "--agent=mb", "--ship"],
                               capture_output=True, text=True, timeout=300, cwd=_REPO)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("--agent=mf", proc.stderr)


if __name__ == "__main__":
    absltest.main()
