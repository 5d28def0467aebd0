"""experiments/reproduce.py --quick on a two-node Ray cluster, one worker killed.

A real cluster on this machine (`ray.cluster_utils.Cluster`): a head of one
CPU and a second node of one CPU with a resource of its own. reproduce.py
joins it (--ray_address) with one small graph, one setting, no temperature
sweep and no separate reward network: graph properties, baselines and the
two agents, four entry-point runs on two nodes. Once the model-based agent
has finished its world model's round, the Ray worker running it is killed
(SIGKILL): the test checks that Ray ran the job again, that the new start
resumed the world model from the checkpoint in the job's folder, that the
killed worker's entry point died with it, that both nodes ran jobs and that
the report is complete. About 2-3 minutes on this 2-core machine.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from absl.testing import absltest

from xflowrl.results.figures import FIGURES
from xflowrl.results.layout import SEPARATE, VARIANTS

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

GRAPH = "small_cnn"


def _load(*parts):
    with open(os.path.join(*parts)) as f:
        return json.load(f)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class ReproduceOnClusterTest(absltest.TestCase):

    def test_two_nodes_a_killed_worker_and_a_complete_report(self):
        from ray.cluster_utils import Cluster  # pylint: disable=import-outside-toplevel
        small = {"object_store_memory": 100 * 2**20}
        cluster = Cluster(initialize_head=True,
                          head_node_args=dict(small, num_cpus=1, include_dashboard=False))
        self.addCleanup(cluster.shutdown)
        cluster.add_node(num_cpus=1, resources={"second_node": 1}, **small)
        cluster.wait_for_nodes()
        tmp = tempfile.mkdtemp(prefix="reproduce_cluster_test_")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        results = os.path.join(tmp, "reproduce")
        log_path = os.path.join(tmp, "reproduce.log")
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [sys.executable, os.path.join(_ROOT, "experiments", "reproduce.py"), "--quick",
                 f"--graphs={GRAPH}", "--settings=gpu", "--separate_reward_graphs=",
                 "--sweep_graph=", f"--ray_address={cluster.address}", "--retries=0",
                 # The agents' budgets of --quick, a quarter: what is checked is
                 # where the jobs ran and that the killed one resumed.
                 "--budget_scale=0.25",
                 f"--results_dir={results}"], cwd=_ROOT, stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())

        # The model-based agent, once its world model's round is checkpointed.
        run = os.path.join(results, "gpu", GRAPH, "train_mb")
        deadline = time.time() + 400
        while time.time() < deadline and proc.poll() is None:
            if os.path.exists(run + ".log"):
                with open(run + ".log") as f:
                    if "world model round 1/1" in f.read():
                        break
            time.sleep(0.2)
        self.assertIsNone(proc.poll(), "reproduce.py ended before the kill")
        marker = _load(run, "reproduce_job.json")
        self.assertFalse(marker["finished"])
        worker = marker["starts"][-1]["pid"]
        entry_point = subprocess.run(["pgrep", "-P", str(worker)], capture_output=True,
                                     text=True, check=False).stdout.split()
        os.kill(worker, signal.SIGKILL)

        self.assertEqual(proc.wait(timeout=400), 0, open(log_path).read()[-5000:])
        with open(log_path) as f:
            driver = f.read()
        self.assertIn("4 jobs: 0 reused, 4 to run on Ray", driver)
        self.assertIn("[4/4 jobs done, 0 reused, 0 failed", driver)
        self.assertIn(f"gpu/{GRAPH}/train_mb: ran", driver)
        self.assertIn("(2 starts)", driver)
        # The killed worker's entry point died with it.
        self.assertTrue(entry_point)
        for pid in entry_point:
            self.assertFalse(_alive(int(pid)), pid)
        # Ray ran the job again on a new worker, which resumed the run.
        marker = _load(run, "reproduce_job.json")
        self.assertTrue(marker["finished"])
        self.assertLen(marker["starts"], 2)
        self.assertTrue(marker["starts"][1]["resumed"])
        self.assertNotEqual(marker["starts"][1]["pid"], worker)
        with open(run + ".log") as f:
            log = f.read()
        self.assertIn(f"=== gpu/{GRAPH}/train_mb: resumed on", log)
        self.assertIn("world model: resumed after round 1", log)

        # The report is complete, and names the cluster and both its nodes.
        report = _load(results, "report", "report.json")
        self.assertEqual(report["meta"]["ray_address"], cluster.address)
        self.assertLen(report["meta"]["ray_nodes"], 2)
        self.assertLen(report["meta"]["job_starts"][f"gpu/{GRAPH}/train_mb"], 2)
        row = report["rows"]["gpu"][GRAPH]
        mb = _load(run, "result.json")
        self.assertEqual(row["mb_ms"], mb["controller_cheapest_cost_ms"])
        self.assertEqual(row["mf_ms"], _load(results, "gpu", GRAPH, "train_mf",
                                             "result.json")["agent_cost_ms"])
        self.assertEqual(set(row["measured"]),
                         set(VARIANTS) - {SEPARATE})
        for name in FIGURES.values():
            self.assertTrue(os.path.exists(os.path.join(results, "report", name)), name)
        with open(os.path.join(results, "report", "report.md")) as f:
            text = f.read()
        self.assertIn(f"entry points on the Ray cluster at {cluster.address} (2 node(s) ran "
                      "them)", text)
        self.assertIn(f"| {GRAPH} |", text)


if __name__ == "__main__":
    absltest.main()
