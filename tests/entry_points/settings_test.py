"""`RunSettings` builds the environment its fields describe and names the
results folder; `BaselineSettings` runs the baselines with its values;
`cost_model_from_spec` reads `backend[/profile]`."""

import dataclasses
import os

from absl.testing import absltest, parameterized

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.entry_points import BaselineSettings, RunSettings, cost_model_from_spec
from xflowrl.env import EnvConfig
from xflowrl.search import run_baselines


class RunSettingsTest(absltest.TestCase):

    def test_defaults_are_the_environment_defaults(self):
        settings = RunSettings(graph="small_cnn")
        self.assertEqual(settings.env_config(), EnvConfig())
        self.assertIsNone(settings.cost_cache)

    def test_env_is_the_one_described(self):
        settings = RunSettings(graph="small_cnn", rules="builtin", max_steps=7,
                               max_locations=5, reward="terminal", cost_features="no_deltas")
        env = settings.make_env()
        self.assertEqual(env.config, EnvConfig(max_steps=7, max_locations=5, reward="terminal",
                                               cost_features="no_deltas"))
        self.assertEqual(env.xfers.names, XferSet.from_name("builtin").names)
        self.assertEqual(env.initial_graph.hash(), zoo.get_graph("small_cnn").hash())
        self.assertEqual(env.cost_model.name, CostModel("analytic").name)
        self.assertAlmostEqual(env.initial_cost,
                               zoo.get_graph("small_cnn").cost(CostModel("analytic")))

    def test_results_folder(self):
        settings = RunSettings(graph="bert", results_dir="/tmp/r")
        self.assertEqual(settings.results_folder("train_mb"),
                         os.path.join("/tmp/r", "bert", "train_mb"))
        self.assertFalse(os.path.exists(settings.results_folder("train_mb")))

    def test_frozen(self):
        with self.assertRaises(dataclasses.FrozenInstanceError):
            RunSettings(graph="bert").graph = "vit"  # type: ignore[misc]

    def test_invalid_fields_fail_when_the_env_is_built(self):
        with self.assertRaisesRegex(ValueError, "cost_features"):
            RunSettings(graph="small_cnn", cost_features="some").env_config()
        with self.assertRaisesRegex(ValueError, "unknown rule set"):
            RunSettings(graph="small_cnn", rules="nope").make_env()


class BaselineSettingsTest(absltest.TestCase):

    def test_runs_the_baselines_with_its_values(self):
        env = RunSettings(graph="small_cnn", max_steps=10).make_env()
        settings = BaselineSettings(taso_alpha=1.0, taso_budget=5, random_episodes=2,
                                    eqsat_time_limit=0)
        got = settings.run(env, seed=3)
        want = run_baselines(env, 1.0, 5, 2, 3, eqsat_time_limit=0)
        self.assertEqual(got.greedy.cost_ms, want.greedy.cost_ms)
        self.assertEqual(got.taso.budget, 5)
        self.assertEqual(got.taso.cost_ms, want.taso.cost_ms)
        self.assertEqual(got.random.cost_ms, want.random.cost_ms)

    def test_zero_budget_skips_taso(self):
        env = RunSettings(graph="small_cnn", max_steps=10).make_env()
        got = BaselineSettings(taso_budget=0, random_episodes=0, eqsat_time_limit=0).run(env, seed=0)
        self.assertIsNone(got.taso)
        self.assertIsNone(got.random)


class CostModelFromSpecTest(parameterized.TestCase):

    @parameterized.parameters(("analytic", "analytic"), ("analytic/cpu", "analytic"),
                              ("fitted/cpu", "fitted"))
    def test_spec(self, spec, backend):
        model = cost_model_from_spec(spec, cost_cache="ignored.tsv")
        self.assertEqual(model.backend, backend)
        graph = zoo.get_graph("small_cnn")
        profile = spec.partition("/")[2] or "cpu"
        self.assertEqual(graph.cost(model), graph.cost(CostModel(backend, profile=profile)))

    def test_unknown_backend(self):
        with self.assertRaisesRegex(ValueError, "unknown cost backend 'nope'"):
            cost_model_from_spec("nope/cpu")


if __name__ == "__main__":
    absltest.main()
