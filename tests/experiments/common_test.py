"""`experiments/common.py`: the shared flags become typed settings, and a
preset (--quick) replaces only the defaults of flags the user did not give."""

import contextlib
import importlib.util
import inspect
import io
import os
import sys

from absl import flags
from absl.testing import absltest

from xflowrl import cli, zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.engine.cost import DEFAULT_BACKEND, DEFAULT_PROFILE
from xflowrl.engine.xfers import (
    DEFAULT_MAX_LOCATIONS,
    TASO_ALPHA,
    TASO_BUDGET,
)
from xflowrl.entry_points import BaselineSettings, RunSettings
from xflowrl.env import DEFAULT_MAX_STEPS, EnvConfig, make_env
from xflowrl.optimize import BadInput, OptimizeOptions
from xflowrl.optimize.inspection import inspect_model
from xflowrl.optimize.methods import DEFAULT_BUDGET, make_environment
from xflowrl.rules.sets import DEFAULT_RULE_SET
from xflowrl.search import run_baselines, run_taso
from xflowrl.search.settings import load_settings
from xflowrl.world_model import WorldModelConfig

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_common():
    # common.py imports its sibling flag_settings.py, as the entry points do.
    experiments = os.path.join(_REPO, "experiments")
    if experiments not in sys.path:
        sys.path.insert(0, experiments)
    spec = importlib.util.spec_from_file_location(
        "experiments_common", os.path.join(_REPO, "experiments", "common.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


common = _load_common()


def _flag_values(*argv: str) -> flags.FlagValues:
    values = flags.FlagValues()
    common.define_env_flags("resnet50", values)
    common.define_baseline_flags(values)
    common.define_world_model_flags(values)
    common.define_quick_flag("A small run.", values)
    values(["prog", *argv])
    return values


class RunSettingsFromFlagsTest(absltest.TestCase):

    def test_defaults(self):
        values = _flag_values()
        settings = common.run_settings(values)
        self.assertEqual(settings, RunSettings(graph="resnet50",
                                               cost_cache="results/cost_cache.tsv"))
        self.assertEqual(common.baseline_settings(values), BaselineSettings())
        self.assertEqual(common.world_model_config(values), WorldModelConfig())

    def test_given_flags(self):
        values = _flag_values("--graph=bert", "--rules=builtin+taso", "--cost_model=fitted",
                              "--profile=x", "--cost_cache=c.tsv", "--max_steps=9",
                              "--max_locations=3", "--reward=terminal", "--results_dir=r",
                              "--taso_budget=0", "--taso_alpha=1.2", "--random_episodes=4",
                              "--rounds=3", "--train_steps_per_round=10")
        self.assertEqual(common.run_settings(values, cost_features="none"),
                         RunSettings(graph="bert", rules="builtin+taso", cost_model="fitted",
                                     profile="x", cost_cache="c.tsv", max_steps=9,
                                     max_locations=3, reward="terminal",
                                     cost_features="none", results_dir="r"))
        self.assertEqual(common.baseline_settings(values),
                         BaselineSettings(taso_alpha=1.2, taso_budget=0, random_episodes=4))
        wm = common.world_model_config(values, replay=False)
        self.assertEqual((wm.rounds, wm.train_steps_per_round, wm.decay_steps, wm.replay),
                         (3, 10, 30, False))


    def test_a_lookahead_setting_names_graph_rules_and_cost_model(self):
        setting = load_settings()[0]
        got = common.run_settings(_flag_values(f"--setting={setting.name}", "--max_steps=7"))
        self.assertEqual((got.graph, got.rules, f"{got.cost_model}/{got.profile}",
                          got.max_steps),
                         (setting.graph, setting.rules, setting.cost_model, 7))
        with self.assertRaisesRegex(BadInput, "--graph cannot be given"):
            common.run_settings(_flag_values(f"--setting={setting.name}", "--graph=bert"))
        with self.assertRaisesRegex(BadInput, "no lookahead setting 'nope'"):
            common.run_settings(_flag_values("--setting=nope"))

    def test_a_setting_at_another_batch_runs_its_graph_at_that_batch(self):
        batched = [s for s in load_settings() if s.batch != 1]
        if not batched:
            self.skipTest("the shipped list has no setting at a batch other than 1")
        setting = batched[0]
        got = common.run_settings(_flag_values(f"--setting={setting.name}"))
        self.assertEqual(got.batch, setting.batch)
        self.assertEqual(got.source().graph.hash(),
                         zoo.get_graph(setting.graph, batch_size=setting.batch).hash())
        self.assertTrue(got.results_folder("train_mb").endswith(
            f"{setting.graph}@b{setting.batch}/train_mb"))


class DefaultsTest(absltest.TestCase):
    """Each default has one home (`xflowrl.engine.xfers`, `.cost`,
    `xflowrl.env`); the flags, the settings, the CLI and the library read it."""

    _EXPECTED = {"rules": DEFAULT_RULE_SET, "cost_model": DEFAULT_BACKEND,
                 "profile": DEFAULT_PROFILE, "max_steps": DEFAULT_MAX_STEPS,
                 "max_locations": DEFAULT_MAX_LOCATIONS, "taso_budget": TASO_BUDGET,
                 "taso_alpha": TASO_ALPHA}

    def test_the_values(self):
        # What every published result ran with: changing one is a new setting.
        self.assertEqual((DEFAULT_RULE_SET, DEFAULT_BACKEND, DEFAULT_PROFILE, DEFAULT_MAX_STEPS,
                          DEFAULT_MAX_LOCATIONS, TASO_ALPHA, TASO_BUDGET),
                         ("default", "analytic", "cpu", 50, 200, 1.05, 1000))

    def test_flags_default_to_the_library_constants(self):
        values = _flag_values()
        for name, expected in self._EXPECTED.items():
            self.assertEqual(values[name].default, expected, name)

    def test_flag_helpers_default_to_the_library_constants(self):
        values = flags.FlagValues()
        common.define_rules_flag(values)
        common.define_cost_model_flags(values)
        common.define_taso_flags(values)
        for name in ("rules", "cost_model", "profile", "taso_budget", "taso_alpha"):
            self.assertEqual(values[name].default, self._EXPECTED[name], name)
        alone = flags.FlagValues()
        common.define_taso_flags(alone, alpha=False)
        self.assertNotIn("taso_alpha", alone)

    def test_library_defaults_are_the_constants(self):
        self.assertEqual((EnvConfig().max_steps, EnvConfig().max_locations),
                         (DEFAULT_MAX_STEPS, DEFAULT_MAX_LOCATIONS))
        run = RunSettings(graph="small_cnn")
        self.assertEqual((run.rules, run.cost_model, run.profile, run.max_steps,
                          run.max_locations),
                         (DEFAULT_RULE_SET, DEFAULT_BACKEND, DEFAULT_PROFILE, DEFAULT_MAX_STEPS,
                          DEFAULT_MAX_LOCATIONS))
        self.assertEqual((BaselineSettings().taso_alpha, BaselineSettings().taso_budget),
                         (TASO_ALPHA, TASO_BUDGET))
        self.assertEqual(DEFAULT_BUDGET["taso"], TASO_BUDGET)
        self.assertEqual(OptimizeOptions(model="m", output="o").rules, DEFAULT_RULE_SET)
        cost = CostModel()
        self.assertEqual(cost.name, CostModel(DEFAULT_BACKEND, profile=DEFAULT_PROFILE).name)
        defaults = {
            "XferSet.search": (XferSet.search, {"alpha": TASO_ALPHA, "budget": TASO_BUDGET,
                                                "max_locations": DEFAULT_MAX_LOCATIONS}),
            "XferSet.replay": (XferSet.replay, {"max_locations": DEFAULT_MAX_LOCATIONS}),
            "run_taso": (run_taso, {"alpha": TASO_ALPHA, "budget": TASO_BUDGET}),
            "XferSet.locations": (XferSet.locations, {"max_locations": DEFAULT_MAX_LOCATIONS}),
            "run_baselines": (run_baselines, {"taso_alpha": TASO_ALPHA,
                                              "taso_budget": TASO_BUDGET}),
            "make_env": (make_env, {"rules": DEFAULT_RULE_SET, "cost_model": DEFAULT_BACKEND,
                                    "profile": DEFAULT_PROFILE}),
            "make_environment": (make_environment, {"max_locations": DEFAULT_MAX_LOCATIONS}),
            "inspect_model": (inspect_model, {"rules": DEFAULT_RULE_SET,
                                              "max_locations": DEFAULT_MAX_LOCATIONS}),
        }
        for name, (fn, expected) in defaults.items():
            params = inspect.signature(fn).parameters
            for arg, value in expected.items():
                self.assertEqual(params[arg].default, value, f"{name}({arg}=)")

    def test_cli_defaults_are_the_constants(self):
        args = cli._parser().parse_args(["optimize", "m.onnx", "-o", "o.onnx"])
        self.assertEqual(args.rules, DEFAULT_RULE_SET)
        args = cli._parser().parse_args(["inspect", "m.onnx"])
        self.assertEqual(args.rules, DEFAULT_RULE_SET)


class PresetFlagsTest(absltest.TestCase):

    def test_preset_replaces_defaults_only(self):
        values = _flag_values("--max_steps=7", "--graph=resnet50")
        preset = common.PresetFlags({"graph": "small_cnn", "max_steps": 20, "rounds": 2},
                                    values)
        # Given on the command line (even at its default value): the user's.
        self.assertEqual(preset.graph, "resnet50")
        self.assertEqual(preset.max_steps, 7)
        # Not given: the preset's; not in the preset: the flag's default.
        self.assertEqual(preset.rounds, 2)
        self.assertEqual(preset.max_locations, 200)
        settings = common.run_settings(preset)
        self.assertEqual((settings.graph, settings.max_steps), ("resnet50", 7))

    def test_empty_preset_reads_the_flags(self):
        values = _flag_values("--rounds=5")
        preset = common.PresetFlags({}, values)
        self.assertEqual(common.world_model_config(preset), common.world_model_config(values))

    def test_quick_values_apply_only_with_quick(self):
        preset = {"graph": "small_cnn", "max_steps": 20}
        self.assertEqual(common.run_settings(common.quick_values(preset, _flag_values())).graph,
                         "resnet50")
        quick = common.quick_values(preset, _flag_values("--quick", "--max_steps=9"))
        self.assertEqual((quick.graph, quick.max_steps), ("small_cnn", 9))

    def test_quick_help_states_the_rule(self):
        values = _flag_values()
        self.assertIn("A small run.", values["quick"].help)
        self.assertIn("a flag given on the command line keeps its value", values["quick"].help)

    def test_unknown_preset_flag(self):
        with self.assertRaisesRegex(ValueError, r"undefined flags \['episodes'\]"):
            common.PresetFlags({"episodes": 3}, _flag_values())


class DeprecatedCostSpecTest(absltest.TestCase):

    def test_one_backend_profile_string_becomes_both_flags(self):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            argv = common.split_cost_spec(["prog", "--cost_model=onednn/cpu", "--seed=1",
                                           "--cost_model", "analytic/v100"])
        self.assertEqual(argv, ["prog", "--cost_model=onednn", "--profile=cpu", "--seed=1",
                                "--cost_model=analytic", "--profile=v100"])
        self.assertIn("--cost_model=onednn/cpu is deprecated: give --cost_model=onednn "
                      "--profile=cpu", stderr.getvalue())
        values = flags.FlagValues()
        common.define_cost_model_flags(values)
        values(argv[:3])
        self.assertEqual((values.cost_model, values.profile), ("onednn", "cpu"))

    def test_today_s_spelling_is_left_alone(self):
        stderr = io.StringIO()
        argv = ["prog", "--cost_model=analytic", "--profile=cpu", "--cost_model", "onednn",
                "--results_dir=a/b"]
        with contextlib.redirect_stderr(stderr):
            self.assertEqual(common.split_cost_spec(argv), argv)
        self.assertEqual(stderr.getvalue(), "")


class ModelFlagsTest(absltest.TestCase):
    """--onnx and --input_shape: the graph is the model file, named by its stem."""

    def test_onnx_names_the_graph_by_its_stem(self):
        values = _flag_values("--onnx=models/my_net.onnx", "--input_shape=ids=1,64",
                              "--input_shape=mask=1,64", "--max_steps=9")
        settings = common.run_settings(values)
        self.assertEqual(settings, RunSettings(graph="my_net", onnx="models/my_net.onnx",
                                               input_shapes=(("ids", (1, 64)),
                                                             ("mask", (1, 64))),
                                               max_steps=9,
                                               cost_cache="results/cost_cache.tsv"))
        self.assertEqual(settings.results_folder("train_mf"),
                         os.path.join("results", "my_net", "train_mf"))

    def test_onnx_under_quick_replaces_the_preset_graph(self):
        values = _flag_values("--quick", "--onnx=m.onnx")
        settings = common.run_settings(common.quick_values({"graph": "small_cnn"}, values))
        self.assertEqual((settings.graph, settings.onnx), ("m", "m.onnx"))

    def test_graph_and_onnx_together(self):
        values = _flag_values("--graph=bert", "--onnx=m.onnx")
        with self.assertRaisesRegex(BadInput, r"^--graph=bert and --onnx=m.onnx both name the "
                                              r"graph to optimise; give one of them$"):
            common.run_settings(values)
        # Given explicitly, even at its default value.
        with self.assertRaisesRegex(BadInput, "both name the graph"):
            common.run_settings(_flag_values("--graph=resnet50", "--onnx=m.onnx"))

    def test_bad_input_shapes(self):
        with self.assertRaisesRegex(BadInput, "--input_shape 'ids=1,x'"):
            common.run_settings(_flag_values("--onnx=m.onnx", "--input_shape=ids=1,x"))
        with self.assertRaisesRegex(BadInput, "no --onnx given"):
            common.run_settings(_flag_values("--input_shape=ids=1,64"))

    def test_several_models(self):
        values = flags.FlagValues()
        common.define_env_flags("resnet50", values, several_models=True)
        values(["prog", "--onnx=a.onnx,dir/b.onnx"])
        self.assertEqual(values.onnx, ["a.onnx", "dir/b.onnx"])
        self.assertEqual(common.run_settings(values, graph=common.model_fields("dir/b.onnx")),
                         RunSettings(graph="b", onnx="dir/b.onnx",
                                     cost_cache="results/cost_cache.tsv"))


if __name__ == "__main__":
    absltest.main()
