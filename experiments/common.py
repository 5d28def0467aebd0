"""Flags shared by the entry points, and their typed settings.

Only experiments import this module (library code never reads flags): it
defines the shared flags and turns their values into the library's typed
settings (`xflowrl.runs.RunSettings`, `BaselineSettings`), which build the
environment and name the results folder.

The graph is a zoo graph (--graph) or a user's ONNX file (--onnx, with
--input_shape for inputs of dynamic dimensions): its results folder is named
by the file's stem, and what a run writes or times of it uses the model's
own weights. Input a user can fix (both --graph and --onnx; a missing,
unreadable or unsupported model file) is a `BadInput`; an entry point run
through `exit_on_bad_input` ends with one line naming the problem and exit
status 2, not a traceback (`xflowrl.runs.entry`).
"""

from typing import Any, Dict, Mapping, Optional, Sequence, TYPE_CHECKING

from absl import flags

from xflowrl import zoo
from xflowrl.engine import BACKENDS
from xflowrl.engine.cost import DEFAULT_BACKEND, DEFAULT_PROFILE
from xflowrl.engine.xfers import (
    DEFAULT_MAX_LOCATIONS,
    TASO_ALPHA,
    TASO_BUDGET,
)
from xflowrl.env import DEFAULT_MAX_STEPS, GraphEnv, rewards
from xflowrl.optimize.model_io import BadInput, parse_input_shapes
from xflowrl.rules.sets import DEFAULT_RULE_SET, RULE_SETS
from xflowrl.runs import (
    BaselineSettings,
    RunSettings,
    exit_on_bad_input,  # noqa: F401
    input_shapes_key,
    model_name,
)

# Re-exported: the entry points call common.exit_on_bad_input.
from xflowrl.search import EQSAT_TIME_LIMIT
from xflowrl.search.settings import get_setting

if TYPE_CHECKING:
    from xflowrl.world_model import WorldModelConfig

FLAGS = flags.FLAGS


def define_model_flags(flag_values: flags.FlagValues = FLAGS, several: bool = False) -> None:
    """--onnx and --input_shape (in `flag_values`): a user's ONNX file to
    optimise instead of a zoo graph (`several`: a list of files, each one
    more graph)."""
    fv = {"flag_values": flag_values}
    if several:
        flags.DEFINE_list("onnx", [], "Your own ONNX files, each one more graph named by its "
                          "file name without .onnx (results_dir/<name>/...), optimised with "
                          "its own weights.", **fv)
    else:
        flags.DEFINE_string("onnx", None, "Your own ONNX file to optimise instead of --graph "
                            "(not both): the results folder is named by its file name without "
                            ".onnx, and graph.onnx keeps its weights, input/output names, "
                            "opset and metadata.", **fv)
    flags.DEFINE_multi_string("input_shape", [], "With --onnx: NAME=D1,D2,... the static shape "
                              "of an input declared with dynamic dimensions (repeat for "
                              "several inputs), e.g. --input_shape=input_ids=1,128.", **fv)


def define_rules_flag(flag_values: flags.FlagValues = FLAGS,
                      help_text: str = "Rule set (xflowrl.rules.sets.RULE_SETS): default = "
                      "built-ins + generated; builtin+taso = the thesis'.") -> None:
    """--rules (in `flag_values`): a named rule set, by default `DEFAULT_RULE_SET`."""
    flags.DEFINE_enum("rules", DEFAULT_RULE_SET, list(RULE_SETS), help_text,
                      flag_values=flag_values)


def define_cost_model_flags(flag_values: flags.FlagValues = FLAGS,
                            default_profile: str = DEFAULT_PROFILE,
                            cost_model_help: str = "Cost backend.",
                            profile_help: str = "Device profile of the analytic backend (cpu: "
                            "this kind of CPU; v100: GPU-like, the stand-in for the thesis' "
                            "GPU).") -> None:
    """--cost_model (a backend, by default `DEFAULT_BACKEND`) and --profile
    (in `flag_values`)."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_enum("cost_model", DEFAULT_BACKEND, BACKENDS, cost_model_help, **fv)
    flags.DEFINE_string("profile", default_profile, profile_help, **fv)


def define_taso_flags(flag_values: flags.FlagValues = FLAGS, alpha: bool = True,
                      budget_help: str = "Budget of the TASO search baseline (0: skip).") -> None:
    """--taso_budget and (with `alpha`) --taso_alpha (in `flag_values`),
    by default `TASO_BUDGET` and `TASO_ALPHA`."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_integer("taso_budget", TASO_BUDGET, budget_help, **fv)
    if alpha:
        flags.DEFINE_float("taso_alpha", TASO_ALPHA, "Alpha of the TASO search baseline.", **fv)


def define_env_flags(default_graph: str, flag_values: flags.FlagValues = FLAGS,
                     default_profile: str = DEFAULT_PROFILE, several_models: bool = False) -> None:
    """--graph, --onnx, --input_shape, --setting, --rules, --cost_model,
    --profile, --cost_cache, --max_steps, --max_locations, --reward,
    --results_dir (in `flag_values`; `several_models`: --onnx is a list,
    `define_model_flags`)."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_string("graph", default_graph, f"Graph to optimise; one of {zoo.GRAPHS}.",
                        **fv)
    flags.DEFINE_string("setting", "", "A setting where looking ahead pays, by name "
                        "(xflowrl.search.settings, e.g. squeezenet1_1/generated/analytic-v100): "
                        "sets --graph, --rules, --cost_model and --profile, which are then not "
                        "to be given.", **fv)
    define_model_flags(flag_values, several_models)
    define_rules_flag(flag_values)
    define_cost_model_flags(flag_values, default_profile)
    flags.DEFINE_string("cost_cache", "results/cost_cache.tsv", "Cache of measured op costs; "
                        "'reference': onednn's shipped table, read-only (docs/engine.md).", **fv)
    flags.DEFINE_integer("max_steps", DEFAULT_MAX_STEPS, "Step limit per episode.", **fv)
    flags.DEFINE_integer("max_locations", DEFAULT_MAX_LOCATIONS, "L, locations per xfer.", **fv)
    flags.DEFINE_enum("reward", "relative", sorted(rewards.REWARDS), "Reward function.", **fv)
    flags.DEFINE_string("results_dir", "results", "Where results are written.", **fv)


def define_baseline_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """--taso_budget, --taso_alpha, --random_episodes, --eqsat_time_limit (in
    `flag_values`)."""
    define_taso_flags(flag_values)
    flags.DEFINE_integer("random_episodes", 20, "Episodes of the random-agent baseline.",
                         flag_values=flag_values)
    flags.DEFINE_float("eqsat_time_limit", EQSAT_TIME_LIMIT,
                       "Seconds of saturation of the equality-saturation baseline "
                       "(xflowrl.search.eqsat; its ILP extraction adds up to 15 s); 0 skips it.",
                       flag_values=flag_values)


def define_world_model_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """--rounds, --episodes_per_round, --train_steps_per_round, --encoder_steps,
    --real_episodes_per_round (in `flag_values`)."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_integer("rounds", 8, "Online collection rounds of the world model.", **fv)
    flags.DEFINE_integer("episodes_per_round", 50, "Random-agent episodes per round.", **fv)
    flags.DEFINE_integer("train_steps_per_round", 150, "World-model steps per round.", **fv)
    flags.DEFINE_integer("encoder_steps", 300, "Steps that train the latent encoder.", **fv)
    flags.DEFINE_integer("real_episodes_per_round", 0, "Real episodes the controller plays "
                         "and learns from (PPO) before each round's dream stretch, as Dyna's "
                         "controller learns from real and imagined experience; 0: the dream "
                         "only (the thesis).", **fv)


def define_disagreement_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """--disagreement_penalty, --disagreement_limit: how the dream treats the
    reward ensemble's disagreement (`DreamConfig`; in `flag_values`)."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_float("disagreement_penalty", 1.0, "Imagined rewards lose this times the "
                       "reward ensemble's standard deviation (0: off).", **fv)
    flags.DEFINE_float("disagreement_limit", None, "Cut imagined episodes where the "
                       "ensemble's standard deviation exceeds this many first-round reward "
                       "stds.", **fv)


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


def define_quick_flag(summary: str, flag_values: flags.FlagValues = FLAGS) -> None:
    """--quick: a small run for a first look (`summary` says what it sets).
    Its values replace only defaults (`quick_values`), which the help says."""
    flags.DEFINE_bool("quick", False, f"{summary} These replace only the defaults: a flag "
                      "given on the command line keeps its value (--quick --graph=resnet18: "
                      "resnet18 with the quick budgets).", flag_values=flag_values)


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


def with_full_observation(env: GraphEnv) -> GraphEnv:
    """`env` with every cost feature in its observations: the baselines run
    on it, since one-step greedy reads the candidates' cost changes (which
    an ablated environment withholds from the agent)."""
    if env.config.cost_features == "full":
        return env
    return env.with_config(cost_features="full")
