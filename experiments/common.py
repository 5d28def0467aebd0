"""Flags shared by the entry points, and their typed settings.

Only experiments import this module (library code never reads flags): it
defines the shared flags, and re-exports what turns their values into the
library's typed settings (experiments/flag_settings.py: `run_settings`,
`baseline_settings`, `world_model_config`, --quick's `quick_values`), which
build the environment and name the results folder. `split_cost_spec` accepts
the deprecated --cost_model=BACKEND/PROFILE.

The graph is a zoo graph (--graph) or a user's ONNX file (--onnx, with
--input_shape for inputs of dynamic dimensions): its results folder is named
by the file's stem, and what a run writes or times of it uses the model's
own weights. Input a user can fix (both --graph and --onnx; a missing,
unreadable or unsupported model file) is a `BadInput`; an entry point run
through `exit_on_bad_input` ends with one line naming the problem and exit
status 2, not a traceback (`xflowrl.entry_points.entry`).
"""

import sys
from typing import List, Sequence

from absl import flags

# Re-exported: the entry points call common.run_settings, common.quick_values, ...
from flag_settings import (  # noqa: F401
    PresetFlags,
    baseline_settings,
    graph_fields,
    model_fields,
    quick_values,
    run_settings,
    world_model_config,
)

from xflowrl import zoo
from xflowrl.engine import BACKENDS
from xflowrl.engine.cost import DEFAULT_BACKEND, DEFAULT_PROFILE
from xflowrl.engine.xfers import (
    DEFAULT_MAX_LOCATIONS,
    TASO_ALPHA,
    TASO_BUDGET,
)

# Re-exported: the entry points call common.exit_on_bad_input and
# common.with_full_observation.
from xflowrl.entry_points import exit_on_bad_input  # noqa: F401
from xflowrl.env import DEFAULT_MAX_STEPS, rewards
from xflowrl.rules.sets import DEFAULT_RULE_SET, RULE_SETS
from xflowrl.search import EQSAT_TIME_LIMIT
from xflowrl.search.baselines import with_full_observation  # noqa: F401

FLAGS = flags.FLAGS


def define_model_flags(flag_values: flags.FlagValues = FLAGS, several: bool = False) -> None:
    """--onnx and --input_shape (in `flag_values`): a user's ONNX file to
    optimise instead of a zoo graph (`several`: a list of files, each one
    more graph)."""
    if several:
        flags.DEFINE_list("onnx", [], "Your own ONNX files, each one more graph named by its "
                          "file name without .onnx (results_dir/<name>/...), optimised with "
                          "its own weights.", flag_values=flag_values)
    else:
        flags.DEFINE_string("onnx", None, "Your own ONNX file to optimise instead of --graph "
                            "(not both): the results folder is named by its file name without "
                            ".onnx, and graph.onnx keeps its weights, input/output names, "
                            "opset and metadata.", flag_values=flag_values)
    flags.DEFINE_multi_string("input_shape", [], "With --onnx: NAME=D1,D2,... the static shape "
                              "of an input declared with dynamic dimensions (repeat for "
                              "several inputs), e.g. --input_shape=input_ids=1,128.", flag_values=flag_values)


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
    flags.DEFINE_enum("cost_model", DEFAULT_BACKEND, BACKENDS, cost_model_help, flag_values=flag_values)
    flags.DEFINE_string("profile", default_profile, profile_help, flag_values=flag_values)


def split_cost_spec(argv: Sequence[str]) -> List[str]:
    """`argv` with the deprecated spelling --cost_model=BACKEND/PROFILE (one
    string, as `xflowrl.entry_points.cost_model_from_spec` reads it) split into
    --cost_model=BACKEND --profile=PROFILE, saying so on stderr; for entry
    points whose --cost_model is `define_cost_model_flags`'."""
    out: List[str] = []
    args = iter(argv)
    for arg in args:
        value = None
        if arg.startswith("--cost_model="):
            value = arg.split("=", 1)[1]
        elif arg == "--cost_model":
            value = next(args, "")
            if "/" not in value:
                out += [arg, value]
                continue
        if value is None or "/" not in value:
            out.append(arg)
            continue
        backend, _, profile = value.partition("/")
        print(f"--cost_model={value} is deprecated: give --cost_model={backend} "
              f"--profile={profile}", file=sys.stderr, flush=True)
        out += [f"--cost_model={backend}", f"--profile={profile}"]
    return out


def define_taso_flags(flag_values: flags.FlagValues = FLAGS, alpha: bool = True,
                      budget_help: str = "Budget of the TASO search baseline (0: skip).") -> None:
    """--taso_budget and (with `alpha`) --taso_alpha (in `flag_values`),
    by default `TASO_BUDGET` and `TASO_ALPHA`."""
    flags.DEFINE_integer("taso_budget", TASO_BUDGET, budget_help, flag_values=flag_values)
    if alpha:
        flags.DEFINE_float("taso_alpha", TASO_ALPHA, "Alpha of the TASO search baseline.", flag_values=flag_values)


def define_env_flags(default_graph: str, flag_values: flags.FlagValues = FLAGS,
                     default_profile: str = DEFAULT_PROFILE, several_models: bool = False) -> None:
    """--graph, --onnx, --input_shape, --setting, --rules, --cost_model,
    --profile, --cost_cache, --max_steps, --max_locations, --reward,
    --results_dir (in `flag_values`; `several_models`: --onnx is a list,
    `define_model_flags`)."""
    flags.DEFINE_string("graph", default_graph, f"Graph to optimise; one of {zoo.GRAPHS}.",
                        flag_values=flag_values)
    flags.DEFINE_string("setting", "", "A setting where looking ahead pays, by name "
                        "(xflowrl.search.settings, e.g. squeezenet1_1/generated/analytic-v100): "
                        "sets --graph, --rules, --cost_model and --profile, which are then not "
                        "to be given.", flag_values=flag_values)
    define_model_flags(flag_values, several_models)
    define_rules_flag(flag_values)
    define_cost_model_flags(flag_values, default_profile)
    flags.DEFINE_string("cost_cache", "results/cost_cache.tsv", "Cache of measured op costs; "
                        "'reference': onednn's shipped table, read-only (docs/engine.md).", flag_values=flag_values)
    flags.DEFINE_integer("max_steps", DEFAULT_MAX_STEPS, "Step limit per episode.", flag_values=flag_values)
    flags.DEFINE_integer("max_locations", DEFAULT_MAX_LOCATIONS, "L, locations per xfer.", flag_values=flag_values)
    flags.DEFINE_enum("reward", "relative", sorted(rewards.REWARDS), "Reward function.", flag_values=flag_values)
    flags.DEFINE_string("results_dir", "results", "Where results are written.", flag_values=flag_values)


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
    flags.DEFINE_integer("rounds", 8, "Online collection rounds of the world model.", flag_values=flag_values)
    flags.DEFINE_integer("episodes_per_round", 50, "Random-agent episodes per round.", flag_values=flag_values)
    flags.DEFINE_integer("train_steps_per_round", 150, "World-model steps per round.", flag_values=flag_values)
    flags.DEFINE_integer("encoder_steps", 300, "Steps that train the latent encoder.", flag_values=flag_values)
    flags.DEFINE_integer("real_episodes_per_round", 0, "Real episodes the controller plays "
                         "and learns from (PPO) before each round's dream stretch, as Dyna's "
                         "controller learns from real and imagined experience; 0: the dream "
                         "only (the thesis).", flag_values=flag_values)


def define_disagreement_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """--disagreement_penalty, --disagreement_limit: how the dream treats the
    reward ensemble's disagreement (`DreamConfig`; in `flag_values`)."""
    flags.DEFINE_float("disagreement_penalty", 1.0, "Imagined rewards lose this times the "
                       "reward ensemble's standard deviation (0: off).", flag_values=flag_values)
    flags.DEFINE_float("disagreement_limit", None, "Cut imagined episodes where the "
                       "ensemble's standard deviation exceeds this many first-round reward "
                       "stds.", flag_values=flag_values)


def define_quick_flag(summary: str, flag_values: flags.FlagValues = FLAGS) -> None:
    """--quick: a small run for a first look (`summary` says what it sets).
    Its values replace only defaults (`quick_values`), which the help says."""
    flags.DEFINE_bool("quick", False, f"{summary} These replace only the defaults: a flag "
                      "given on the command line keeps its value (--quick --graph=resnet18: "
                      "resnet18 with the quick budgets).", flag_values=flag_values)
