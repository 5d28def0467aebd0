"""The shared flags' values as the library's typed settings.

Only experiments import this module (library code never reads flags):
`run_settings`, `baseline_settings` and `world_model_config` turn the values
of the flags experiments/common.py defines into `xflowrl.entry_points.RunSettings`,
`BaselineSettings` and `xflowrl.world_model.WorldModelConfig`; `graph_fields`
and `model_fields` choose the graph (a zoo graph, or a user's ONNX file);
`PresetFlags` and `quick_values` read flags with an entry point's --quick
values in place of their defaults. experiments/common.py re-exports them.
"""

from typing import Any, Dict, Mapping, Optional, Sequence, TYPE_CHECKING

from absl import flags

from xflowrl.entry_points import BaselineSettings, RunSettings, input_shapes_key, model_name
from xflowrl.optimize.model_io import BadInput, parse_input_shapes
from xflowrl.search.settings import get_setting

if TYPE_CHECKING:
    from xflowrl.world_model import WorldModelConfig

FLAGS = flags.FLAGS


class PresetFlags:
    """Reads flags like FLAGS, with a preset (e.g. --quick's) in place of
    their defaults: a flag given on the command line keeps the user's value,
    one not given takes the preset's (if the preset names it).

        values = PresetFlags({"graph": "small_cnn"})
        values.graph   # "small_cnn", unless --graph was given
    """

    def __init__(self, preset: Mapping[str, Any], flag_values: flags.FlagValues = FLAGS):
        unknown = sorted(set(preset) - set(flag_values))
        if unknown:
            raise ValueError(f"preset names undefined flags {unknown}")
        self._preset = dict(preset)
        self._flags = flag_values

    def __getattr__(self, name: str) -> Any:
        flag = self._flags[name]
        if name in self._preset and not flag.present:
            return self._preset[name]
        return flag.value

    def __getitem__(self, name: str) -> flags.Flag:
        """The flag `name` itself (as `FLAGS[name]`: `.present`, `.value`)."""
        return self._flags[name]


def quick_values(preset: Mapping[str, Any], flag_values: flags.FlagValues = FLAGS) -> PresetFlags:
    """The flag values, with `preset` (an entry point's --quick values) for
    the flags the user did not give when --quick is set."""
    return PresetFlags(preset if flag_values.quick else {}, flag_values)


def model_fields(path: str, input_shapes: Sequence[str] = ()) -> Dict[str, Any]:
    """The `RunSettings` fields of a user's ONNX file: `graph` (its stem),
    `onnx` and `input_shapes` (parsed from NAME=D1,D2,... specs).

    Raises:
      BadInput: a spec is malformed.
    """
    return {"graph": model_name(path), "onnx": path,
            "input_shapes": input_shapes_key(parse_input_shapes(input_shapes))}


def graph_fields(values: Any = FLAGS) -> Dict[str, Any]:
    """The `RunSettings` fields that choose the graph, from --graph, --onnx
    and --input_shape (`values`: FLAGS or a `PresetFlags`).

    Raises:
      BadInput: --graph and --onnx both given; a malformed --input_shape;
        --input_shape without --onnx.
    """
    if not values.onnx:
        if values.input_shape:
            raise BadInput("--input_shape applies to an --onnx model; no --onnx given")
        return {"graph": values.graph}
    if values["graph"].present:
        raise BadInput(f"--graph={values.graph} and --onnx={values.onnx} both name the graph "
                       f"to optimise; give one of them")
    return model_fields(values.onnx, values.input_shape)


def run_settings(values: Any = FLAGS, cost_features: str = "full",
                 graph: Optional[Mapping[str, Any]] = None) -> RunSettings:
    """The typed settings of the flags `define_env_flags` defines.

    Args:
      values: where the flag values are read (FLAGS, or a `PresetFlags`).
      cost_features: the observation's cost features (`EnvConfig.cost_features`).
      graph: the fields that choose the graph (`graph`, and `onnx`,
        `input_shapes` for a model file); None: the flags' (`graph_fields`).

    Raises:
      BadInput: see `graph_fields`.
    """
    rules, cost_model, profile = values.rules, values.cost_model, values.profile
    setting = getattr(values, "setting", "")
    if setting:
        given = [f"--{k}" for k in ("graph", "onnx", "rules", "cost_model", "profile")
                 if values[k].present]
        if given:
            raise BadInput(f"--setting={setting} sets the graph, rules and cost model; "
                           f"{', '.join(given)} cannot be given with it")
        try:
            chosen = get_setting(setting)
        except ValueError as e:
            raise BadInput(str(e)) from None
        graph = {"graph": chosen.graph, "batch": chosen.batch}
        rules = chosen.rules
        cost_model, _, profile = chosen.cost_model.partition("/")
    graph = graph_fields(values) if graph is None else graph
    return RunSettings(**graph, rules=rules, cost_model=cost_model,
                       profile=profile, cost_cache=values.cost_cache,
                       max_steps=values.max_steps, max_locations=values.max_locations,
                       reward=values.reward, cost_features=cost_features,
                       results_dir=values.results_dir)


def baseline_settings(values: Any = FLAGS) -> BaselineSettings:
    """The typed settings of the flags `define_baseline_flags` defines."""
    return BaselineSettings(taso_alpha=values.taso_alpha, taso_budget=values.taso_budget,
                            random_episodes=values.random_episodes,
                            eqsat_time_limit=values.eqsat_time_limit)


def world_model_config(values: Any = FLAGS, **fields: Any) -> "WorldModelConfig":
    """The world model's config from the flags `define_world_model_flags`
    defines (its learning rate decays over all training steps) and `fields`
    (other `WorldModelConfig` fields)."""
    # Imported here: the entry points without a world model skip TF Probability.
    from xflowrl.world_model import WorldModelConfig  # pylint: disable=import-outside-toplevel
    return WorldModelConfig(rounds=values.rounds, episodes_per_round=values.episodes_per_round,
                            train_steps_per_round=values.train_steps_per_round,
                            encoder_steps=values.encoder_steps,
                            decay_steps=max(values.rounds * values.train_steps_per_round, 1),
                            real_episodes_per_round=values.real_episodes_per_round, **fields)
