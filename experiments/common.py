"""Flags shared by the entry points, and their typed settings.

Only experiments import this module (library code never reads flags): it
defines the shared flags and turns their values into the library's typed
settings (`xflowrl.runs.RunSettings`, `BaselineSettings`), which build the
environment and name the results folder.
"""

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping

from absl import flags

from xflowrl.env import GraphEnv, rewards
from xflowrl import zoo
from xflowrl.engine import BACKENDS
from xflowrl.engine.xfers import RULE_SETS
from xflowrl.runs import BaselineSettings, RunSettings

if TYPE_CHECKING:
    from xflowrl.world_model import WorldModelConfig

FLAGS = flags.FLAGS


def define_env_flags(default_graph: str, flag_values: flags.FlagValues = FLAGS,
                     default_profile: str = "cpu") -> None:
    """--graph, --rules, --cost_model, --profile, --cost_cache, --max_steps,
    --max_locations, --reward, --results_dir (in `flag_values`)."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_string("graph", default_graph, f"Graph to optimise; one of {zoo.GRAPHS}.",
                        **fv)
    flags.DEFINE_enum("rules", "default", list(RULE_SETS), "Rule set (xflowrl.engine.xfers."
                      "RULE_SETS): default = built-ins + generated; builtin+taso = the thesis'.",
                      **fv)
    flags.DEFINE_enum("cost_model", "analytic", BACKENDS, "Cost backend.", **fv)
    flags.DEFINE_string("profile", default_profile, "Device profile of the analytic backend "
                        "(cpu: this kind of CPU; v100: GPU-like, the stand-in for the thesis' "
                        "GPU).", **fv)
    flags.DEFINE_string("cost_cache", "results/cost_cache.tsv", "Cache of measured op costs; "
                        "'reference': onednn's shipped table, read-only (docs/engine.md).", **fv)
    flags.DEFINE_integer("max_steps", 50, "Step limit per episode.", **fv)
    flags.DEFINE_integer("max_locations", 200, "L, locations per xfer.", **fv)
    flags.DEFINE_enum("reward", "relative", sorted(rewards.REWARDS), "Reward function.", **fv)
    flags.DEFINE_string("results_dir", "results", "Where results are written.", **fv)


def define_baseline_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """--taso_budget, --taso_alpha, --random_episodes (in `flag_values`)."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_integer("taso_budget", 1000, "Budget of the TASO search baseline (0: skip).",
                         **fv)
    flags.DEFINE_float("taso_alpha", 1.05, "Alpha of the TASO search baseline.", **fv)
    flags.DEFINE_integer("random_episodes", 20, "Episodes of the random-agent baseline.", **fv)


def define_world_model_flags(flag_values: flags.FlagValues = FLAGS) -> None:
    """--rounds, --episodes_per_round, --train_steps_per_round, --encoder_steps
    (in `flag_values`)."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_integer("rounds", 8, "Online collection rounds of the world model.", **fv)
    flags.DEFINE_integer("episodes_per_round", 50, "Random-agent episodes per round.", **fv)
    flags.DEFINE_integer("train_steps_per_round", 150, "World-model steps per round.", **fv)
    flags.DEFINE_integer("encoder_steps", 300, "Steps that train the latent encoder.", **fv)


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


def run_settings(values: Any = FLAGS, cost_features: str = "full") -> RunSettings:
    """The typed settings of the flags `define_env_flags` defines.

    Args:
      values: where the flag values are read (FLAGS, or a `PresetFlags`).
      cost_features: the observation's cost features (`EnvConfig.cost_features`).
    """
    return RunSettings(graph=values.graph, rules=values.rules, cost_model=values.cost_model,
                       profile=values.profile, cost_cache=values.cost_cache,
                       max_steps=values.max_steps, max_locations=values.max_locations,
                       reward=values.reward, cost_features=cost_features,
                       results_dir=values.results_dir)


def baseline_settings(values: Any = FLAGS) -> BaselineSettings:
    """The typed settings of the flags `define_baseline_flags` defines."""
    return BaselineSettings(taso_alpha=values.taso_alpha, taso_budget=values.taso_budget,
                            random_episodes=values.random_episodes)


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
                            **fields)


def with_full_observation(env: GraphEnv) -> GraphEnv:
    """`env` with every cost feature in its observations: the baselines run
    on it, since one-step greedy reads the candidates' cost changes (which
    an ablated environment withholds from the agent)."""
    if env.config.cost_features == "full":
        return env
    return GraphEnv(env.initial_graph, env.xfers, env.cost_model,
                    dataclasses.replace(env.config, cost_features="full"))
