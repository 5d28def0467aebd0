"""`experiments/common.py`: the shared flags become typed settings, and a
preset (--quick) replaces only the defaults of flags the user did not give."""

import importlib.util
import os

from absl import flags
from absl.testing import absltest

from xflowrl.optimize import BadInput
from xflowrl.runs import BaselineSettings, RunSettings
from xflowrl.world_model import WorldModelConfig

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_common():
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
