"""experiments/observation_ablation.py: the per-graph table from its runs.

A finished run is written here as train_mf.py leaves it (its record,
`ModelFreeRun`, and a TensorBoard log of every episode's final cost and
steps), so the script reuses it and only reads: no training. A saved run
the strict reader refuses is not reused (the script says why) but trained
again, here by a real train_mf.py run of two episodes on SmallCNN without
the equality-saturation baseline (about 10 s of CPU).
"""

import dataclasses
import json
import os
import shutil
import sys
import tempfile

from absl.testing import absltest
import tensorflow as tf

from tests import entry_point
from tests.results import fixtures
from xflowrl.results import ModelFreeRun
from xflowrl.search.record import Baselines, GreedyResult, RandomResult

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCRIPT = os.path.join(_ROOT, "experiments", "observation_ablation.py")
GRAPH = "small_cnn"
# Per training episode: its final cost (ms) and steps.
EPISODES = [(3.9, 4), (3.5, 5), (3.0, 6), (3.2, 5)]


def _train_mf_folder(results, variant, seed):
    return os.path.join(results, GRAPH, "observation_ablation", "runs", f"{variant}_seed{seed}",
                        GRAPH, "train_mf")


def _write_run(results, variant, seed) -> ModelFreeRun:
    """A finished train_mf.py run of `variant` and `seed`: its record and log."""
    folder = _train_mf_folder(results, variant, seed)
    baselines = Baselines(
        greedy=GreedyResult(cost_ms=3.2, seconds=0.1, steps=4, applied=[("fuse", 1)]),
        random=RandomResult(cost_ms=4.5, std_ms=0.1, best_ms=4.2, episodes=1),
        max_locations=50)
    run = dataclasses.replace(
        fixtures.mf_run(seed, 3.2, GRAPH), cost_features=variant, episodes=len(EPISODES),
        initial_cost_ms=4.0, best_training_cost_ms=3.0, steps_to_final_cost=15,
        interactions=20, train_seconds=5.0, baselines=baselines.to_json())
    run.save(os.path.join(folder, "result.json"))
    writer = tf.summary.create_file_writer(os.path.join(folder, "tensorboard"))
    with writer.as_default():
        for episode, (cost, steps) in enumerate(EPISODES, start=1):
            tf.summary.scalar("episode/final_cost", cost, step=episode)
            tf.summary.scalar("episode/steps", steps, step=episode)
    writer.close()
    return run


class ObservationAblationTest(absltest.TestCase):

    def setUp(self):
        super().setUp()
        self.results = tempfile.mkdtemp(prefix="observation_ablation_test_")
        self.addCleanup(shutil.rmtree, self.results, ignore_errors=True)

    def _run(self, variants, episodes):
        return entry_point.run(
            [sys.executable, _SCRIPT, f"--graphs={GRAPH}", f"--variants={variants}",
             "--seeds=0", f"--episodes={episodes}", "--taso_budget=0", "--random_episodes=1",
             "--eqsat_time_limit=0",
             f"--results_dir={self.results}"],
            cwd=_ROOT, capture_output=True, text=True, timeout=600,
            env=dict(os.environ, PYTHONPATH=_ROOT))

    def test_reuses_the_runs_and_writes_the_table(self):
        run = _write_run(self.results, "full", 0)
        proc = self._run("full", len(EPISODES))
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("reusing", proc.stderr)
        self.assertNotIn("running", proc.stderr)
        out = os.path.join(self.results, GRAPH, "observation_ablation")
        with open(os.path.join(out, "result.json")) as f:
            result = json.load(f)
        self.assertEqual(result["graph"], GRAPH)
        self.assertEqual(result["episodes"], len(EPISODES))
        self.assertEqual(result["initial_cost_ms"], 4.0)
        self.assertEqual(result["baselines"], run.baselines)
        self.assertIn("--graphs=small_cnn --variants=full --seeds=0", result["command"])
        [row] = result["runs"]
        self.assertEqual((row["cost_features"], row["seed"]), ("full", 0))
        self.assertEqual(row["agent_cost_ms"], 3.2)
        self.assertAlmostEqual(row["agent_change_pct"], -20.0)
        self.assertAlmostEqual(row["best_training_change_pct"], -25.0)
        self.assertEqual(row["steps_to_final_cost"], 15)
        # From the log: every episode's final cost (mean 3.4) and steps; the
        # best cost (3.0) first at episode 3 (15 steps), greedy's (3.2) too.
        self.assertEqual(row["last_episodes"], len(EPISODES))
        self.assertAlmostEqual(row["last_mean_cost_ms"], 3.4, places=5)
        self.assertEqual(row["to_best"], {"episode": 3, "interactions": 15})
        self.assertEqual(row["to_greedy"], {"episode": 3, "interactions": 15})
        self.assertEqual(row["agent_applied"], run.agent_applied)
        with open(os.path.join(out, "result.md")) as f:
            text = f.read()
        self.assertIn("| full | 0 | 3.2000 | -20.00% | -25.00% | -15.00% | 15 | 3 (15) | "
                      "3 (15) | 5 |", text)
        self.assertIn("| full | 1 | -20.00% | -15.00% | 1/1 | 1/1 |", text)
        self.assertIn("| greedy | 3.2000 | -20.00% |", text)
        self.assertIn("| random | 4.5000 | +12.50% |", text)

    def test_a_run_the_reader_refuses_is_trained_again(self):
        folder = _train_mf_folder(self.results, "none", 0)
        path = os.path.join(folder, "result.json")
        refused = dict(dataclasses.replace(fixtures.mf_run(0, 3.2, GRAPH),
                                           cost_features="none", episodes=2).to_json(),
                       extra=1)
        fixtures.write_json(path, refused)
        proc = self._run("none", 2)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn(f"not reusing {path}: {path}: ModelFreeRun has no fields ['extra']",
                      proc.stderr)
        self.assertIn("running", proc.stderr)
        run = ModelFreeRun.load(path)   # train_mf.py's own record, read strictly
        self.assertEqual((run.cost_features, run.episodes, run.seed), ("none", 2, 0))
        self.assertIsNotNone(run.wall_seconds)
        self.assertIsNone(run.baselines["eqsat"])  # --eqsat_time_limit=0 reached train_mf.py
        with open(os.path.join(self.results, GRAPH, "observation_ablation", "result.json")) as f:
            [row] = json.load(f)["runs"]
        self.assertEqual(row["agent_cost_ms"], run.agent_cost_ms)
        self.assertEqual(row["episodes"], 2)


if __name__ == "__main__":
    absltest.main()
