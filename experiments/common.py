"""Flags and wiring shared by the training entry points (train_mf.py, train_mb.py).

Only experiments import this module (library code never reads flags).
"""

import dataclasses

from absl import flags

from xflowrl.env import EnvConfig, GraphEnv, make_env, rewards
from xflowrl.graphs import BACKENDS, zoo
from xflowrl.graphs.xfers import RULE_SETS

FLAGS = flags.FLAGS


def define_env_flags(default_graph: str) -> None:
    """--graph, --rules, --cost_model, --profile, --cost_cache, --max_steps,
    --max_locations, --reward, --results_dir."""
    flags.DEFINE_string("graph", default_graph, f"Graph to optimise; one of {zoo.GRAPHS}.")
    flags.DEFINE_enum("rules", "default", list(RULE_SETS), "Rule set (xflowrl.graphs.xfers."
                      "RULE_SETS): default = built-ins + generated; builtin+taso = the thesis'.")
    flags.DEFINE_enum("cost_model", "analytic", BACKENDS, "Cost backend.")
    flags.DEFINE_string("profile", "cpu", "Device profile of the analytic backend.")
    flags.DEFINE_string("cost_cache", "results/cost_cache.tsv", "Cache of measured op costs; "
                        "'reference': onednn's shipped table, read-only (docs/engine.md).")
    flags.DEFINE_integer("max_steps", 50, "Step limit per episode.")
    flags.DEFINE_integer("max_locations", 200, "L, locations per xfer.")
    flags.DEFINE_enum("reward", "relative", sorted(rewards.REWARDS), "Reward function.")
    flags.DEFINE_string("results_dir", "results", "Where results are written.")


def define_baseline_flags() -> None:
    """--taso_budget, --taso_alpha, --random_episodes."""
    flags.DEFINE_integer("taso_budget", 1000, "Budget of the TASO search baseline (0: skip).")
    flags.DEFINE_float("taso_alpha", 1.05, "Alpha of the TASO search baseline.")
    flags.DEFINE_integer("random_episodes", 20, "Episodes of the random-agent baseline.")


def env_from_flags(graph_name: str, max_steps: int, cost_features: str = "full") -> GraphEnv:
    """The real environment the flags describe (graph, step limit and the
    observation's cost features, `EnvConfig.cost_features`, given)."""
    return make_env(graph_name, FLAGS.rules, FLAGS.cost_model, FLAGS.profile, FLAGS.cost_cache,
                    EnvConfig(max_steps=max_steps, max_locations=FLAGS.max_locations,
                              reward=FLAGS.reward, cost_features=cost_features))


def with_full_observation(env: GraphEnv) -> GraphEnv:
    """`env` with every cost feature in its observations: the baselines run
    on it, since one-step greedy reads the candidates' cost changes (which
    an ablated environment withholds from the agent)."""
    if env.config.cost_features == "full":
        return env
    return GraphEnv(env.initial_graph, env.xfers, env.cost_model,
                    dataclasses.replace(env.config, cost_features="full"))
