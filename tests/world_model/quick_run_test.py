"""End to end: `experiments/train_mb.py --quick` trains the world model and the
controller, beats the initial graph for real, saves valid ONNX, and runs the
world-model planner beside them on the same real episodes.

A rerun of the entry point resumes its world model (tests/experiments/
reproduce_test.py kills and resumes train_mb.py's job); the agent resumes to
the bit (tests/world_model/agent_test.py), and the planner plans alike from
the episodes kept on disk (tests/planning/model_episodes_test.py)."""

import json
import math
import os
import sys
import tempfile

from absl.testing import absltest
import onnx

from tests import entry_point
from xflowrl import zoo
from xflowrl.agents.ppo.training import replay
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.executor.weights import random_weights
from xflowrl.onnx_io import to_onnx
from xflowrl.planning.model_search import replay_steps
from xflowrl.planning.simulator import Step

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# The evaluation after training: baselines, sampled episodes, timing.
_EVALUATION = ("--taso_budget=100", "--random_episodes=5", "--eqsat_time_limit=2",
               "--eval_episodes=4", "--measure_rounds=1")


def _run(results):
    return entry_point.run(
        [sys.executable, os.path.join(_REPO, "experiments", "train_mb.py"), "--quick",
         f"--results_dir={results}", *_EVALUATION],
        capture_output=True, text=True, timeout=900)


class QuickRunTest(absltest.TestCase):

    def test_quick_run_learns_beats_initial_and_plans_beside(self):
        results = tempfile.mkdtemp()
        proc = _run(results)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("world model round 2/2", proc.stderr)
        self.assertIn("dream episode 512/512", proc.stderr)
        out = os.path.join(results, "small_cnn", "train_mb")
        with open(os.path.join(out, "result.json")) as f:
            result = json.load(f)
        # The world model learned: its loss fell from the first step.
        rounds = result["world_model"]["rounds"]
        with open(os.path.join(out, "world_model", "state.json")) as f:
            first_loss = json.load(f)["first_loss"]
        self.assertLess(rounds[-1]["train_total"], first_loss - 1.0)
        self.assertGreater(rounds[-1]["held_out_xfer_mask_accuracy"], 0.0)
        # The controller, trained only in the dream, lowers the real cost.
        self.assertLess(result["controller_cheapest_cost_ms"], result["initial_cost_ms"])
        self.assertEqual(result["dream_episodes"], 512)
        self.assertGreater(result["real_steps"]["world_model_rollouts"], 0)
        # Optimising is timed on a second greedy episode, after one that traces;
        # both are real steps, as are the sampled evaluations.
        self.assertGreater(result["seconds"]["optimize"], 0.0)
        self.assertGreater(result["seconds"]["optimize_first_call"], 0.0)
        greedy_steps = result["controller"]["greedy"]["steps"]
        self.assertEqual(result["real_steps"]["evaluation"],
                         2 * greedy_steps + result["controller"]["greedy_model_masks"]["steps"]
                         + sum(e["steps"] for e in result["sampled"]))
        # On the real environment's masks the controller never acts invalidly.
        self.assertEqual(result["eval_masks"], "real")
        for e in [result["controller"]["greedy"]] + result["sampled"]:
            self.assertEqual(e["invalid_actions"], 0)
        # Iterative training: the second round was collected by the controller,
        # and every round reports the controller's real, predicted and imagined
        # returns.
        self.assertEqual([r["collection"] for r in rounds], ["random", "controller"])
        for r in rounds:
            for key in ("controller_real_return", "controller_predicted_return",
                        "controller_imagined_return"):
                self.assertTrue(math.isfinite(r[key]), (key, r))
        # The deployed agent is the round whose greedy real episode reached the
        # cheapest graph (the later of equal ones).
        best = [r["controller_cheapest_cost_ms"] for r in rounds]
        chosen = max(i for i, c in enumerate(best) if c <= min(best) * (1 + 1e-9)) + 1
        self.assertEqual(result["selected_round"]["round"], chosen)
        self.assertEqual(result["selected_round"]["cost_ms"], best[chosen - 1])
        # Equal budgets: the step limit covers 1.5x greedy's steps.
        self.assertGreaterEqual(result["max_steps"], 1.5 * result["greedy_steps"])
        self.assertEqual(result["cost_model"], "analytic/v100")
        for key in ("greedy", "taso", "random"):
            self.assertIsNotNone(result["baselines"][key])
        # Estimated gains come with measured end-to-end times of the same graphs.
        measured = result["measured"]
        for name in ("initial", "controller", "greedy"):
            self.assertGreater(measured[name]["median_ms"], 0.0)
        self.assertAlmostEqual(measured["controller"]["estimated_ms"],
                               result["controller_cheapest_cost_ms"])
        self.assertAlmostEqual(measured["greedy"]["estimated_ms"],
                               result["baselines"]["greedy"]["cost_ms"])
        # The saved ONNX is valid and is the best episode's graph.
        model = onnx.load(os.path.join(out, "graph.onnx"))
        onnx.checker.check_model(model, full_check=True)
        env = GraphEnv(zoo.get_graph("small_cnn"), XferSet.default(),
                       CostModel("analytic", profile="v100"),
                       EnvConfig(max_steps=result["max_steps"]))
        graph = replay(env, [tuple(s) for s in result["controller_cheapest_applied"]])
        self.assertAlmostEqual(graph.cost(env.cost_model), result["controller_cheapest_cost_ms"])
        want = to_onnx(graph, random_weights(zoo.get_graph("small_cnn")))
        self.assertEqual([n.op_type for n in model.graph.node],
                         [n.op_type for n in want.graph.node])
        # The world-model planner beside the controller: its model learnt from
        # the same real episodes (the world model's rollouts and held-out
        # ones) and nothing else; its own real steps are counted apart.
        planner = result["model_planner"]
        steps = result["real_steps"]
        self.assertEqual(planner["data_real_steps"],
                         steps["world_model_rollouts"] + steps["held_out_rollouts"])
        self.assertEqual(planner["real_steps_elsewhere"], 0)
        self.assertGreaterEqual(planner["real_steps"], planner["planner_real_steps"])
        self.assertGreaterEqual(planner["planner_real_steps"], 1)
        self.assertGreater(planner["model_steps"], 0)
        self.assertEqual(planner["train_steps"], 50)
        self.assertGreater(result["imagined_steps"], 512)
        # Its graph: never worse than greedy, rebuilt by its route, computing
        # the original's outputs, written beside the agent's.
        self.assertLessEqual(planner["cost_ms"],
                             result["baselines"]["greedy"]["cost_ms"] * (1 + 1e-9))
        self.assertTrue(planner["replayed"])
        self.assertIs(planner["same_outputs"], True)
        names = {name: i for i, name in enumerate(env.xfers.names)}
        planned = replay_steps(env, [Step(names[n], loc, after)
                                     for n, loc, after in planner["route"]])
        self.assertAlmostEqual(planned.cost(env.cost_model), planner["cost_ms"])
        self.assertTrue(os.path.exists(os.path.join(out, "model_planner", "graph.json")))
        with open(os.path.join(out, "result.md")) as f:
            text = f.read()
        self.assertIn("| world-model planner | ", text)
        self.assertIn("| model-based controller (dream) | ", text)


if __name__ == "__main__":
    absltest.main()
