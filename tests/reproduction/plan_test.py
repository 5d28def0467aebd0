"""xflowrl.reproduction.plan: the entry-point runs a reproduction starts."""

import os

from absl.testing import absltest

from xflowrl.reproduction import BUDGETS, Plan, all_jobs, reportable_graphs
from xflowrl.reproduction.plan import setting_jobs
from xflowrl.results.layout import SETTINGS


def _plan(**changes):
    fields = dict(mode="quick", budget=BUDGETS["quick"], budget_scale=1.0,
                  graphs=["bert", "inception_v3"], settings=["cpu", "gpu"], seed=3,
                  seeds=[3, 4], results_dir="R", separate_reward_graphs=["bert"],
                  sweep_graph="bert", sweep_settings=["gpu"], cpus_per_job=2.0,
                  scripts_dir="/x/experiments", python="py")
    fields.update(changes)
    return Plan(**fields)


class PlanTest(absltest.TestCase):

    def test_every_run_once_shared_first_settings_interleaved(self):
        jobs = all_jobs(_plan())
        names = [j.name for j in jobs]
        self.assertLen(set(names), len(names))
        self.assertEqual(names[:4], ["graph_properties", "temperature_sweep gpu",
                                     "cpu/baselines", "gpu/baselines"])
        # Per setting: baselines, then per seed 2 graphs x 2 agents + the
        # separate reward network.
        self.assertLen(jobs, 2 + 2 * (1 + 2 * (2 * 2 + 1)))
        # The longest graph first; the first seed's runs unsuffixed.
        self.assertEqual(names[4:8], ["cpu/inception_v3/train_mf", "gpu/inception_v3/train_mf",
                                      "cpu/inception_v3/train_mb", "gpu/inception_v3/train_mb"])
        self.assertIn("gpu/bert/train_mb separate seed 4", names)

    def test_an_agent_s_command_is_its_budget_and_folder(self):
        plan = _plan()
        job = next(j for j in setting_jobs(plan, SETTINGS["gpu"])
                   if j.name == "gpu/bert/train_mf seed 4")
        b = plan.budget
        self.assertEqual(job.argv[:2], ("py", "/x/experiments/train_mf.py"))
        self.assertEqual(job.key, job.argv[2:])  # the flags decide reuse, not the paths
        self.assertEqual(list(job.argv[2:]), [
            "--cost_model=analytic", "--profile=v100", "--results_dir=R/gpu/seed_4",
            "--seed=4", f"--max_steps={b.max_steps}", "--taso_budget=0",
            "--eqsat_time_limit=0", f"--random_episodes={b.random_episodes}", "--graph=bert",
            f"--episodes={b.mf_episodes}"])
        self.assertEqual(job.out_dir, os.path.join("R", "gpu", "seed_4", "bert", "train_mf"))
        self.assertEqual(job.num_cpus, 2.0)

    def test_the_sweep_trains_its_world_models_as_the_agent_s(self):
        for mode in ("quick", "full", "thesis"):
            plan = _plan(mode=mode, budget=BUDGETS[mode])
            b = plan.budget
            sweep = next(j for j in all_jobs(plan) if j.name == "temperature_sweep gpu")
            agent = next(j for j in all_jobs(plan) if j.name == "gpu/bert/train_mb")
            for flag in (f"--encoder_steps={b.mb_encoder_steps}",
                         f"--train_steps_per_round={b.mb_train_steps}"):
                self.assertIn(flag, sweep.argv, mode)
                self.assertIn(flag, agent.argv, mode)

    def test_a_graph_is_reportable_once_every_setting_has_its_runs(self):
        plan = _plan()
        done = ["cpu/baselines", "gpu/baselines", "cpu/bert/train_mf", "gpu/bert/train_mf",
                "cpu/bert/train_mb", "gpu/bert/train_mb seed 4", "cpu/inception_v3/train_mf"]
        self.assertEqual(reportable_graphs(plan, done), ["bert"])
        self.assertEqual(reportable_graphs(plan, done[1:]), [])


if __name__ == "__main__":
    absltest.main()
