"""Flags of the generalist's entry points, and the run config they describe.

train_generalist.py and trace_generalist.py take every flag of
`define_training_flags` (a trace trains the agent first where its folder
holds no finished run); generalist_report.py and measure_generalist.py take
those of `define_folder_flags`, which name the results folder
(`xflowrl.generalist.pipeline.results_folder`). `config()` turns the flags
into a `GeneralistConfig`, --quick's values where a flag was not given.
"""

from absl import flags
import common

from xflowrl.engine.cost import GPU_PROFILE
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
from xflowrl.generalist.finetune import FinetuneConfig
from xflowrl.generalist.pipeline import GeneralistConfig, results_folder

FLAGS = flags.FLAGS

# --quick's values for the flags the user does not give.
QUICK = {"episodes": 300, "eval_limit": 8, "taso_budget": 100, "rounds": 2,
         "episodes_per_round": 30, "train_steps_per_round": 100, "encoder_steps": 150}


def define_folder_flags() -> None:
    """--cost_model, --profile (GPU-like by default), --rules, --results_dir."""
    common.define_cost_model_flags(default_profile=GPU_PROFILE,
                                   cost_model_help="Cost backend of training and evaluation.")
    common.define_rules_flag()
    flags.DEFINE_string("results_dir", "results", "Where results are written.")


def folder() -> str:
    """--results_dir/generalist/<cost model>_<profile>[-<rules>]."""
    return results_folder(FLAGS.results_dir, FLAGS.cost_model, FLAGS.profile, FLAGS.rules)


def define_training_flags() -> None:
    """The folder's flags, the agent, its budgets, the evaluation and
    fine-tuning, and --quick."""
    define_folder_flags()
    flags.DEFINE_enum("agent", "mf", ["mf", "mb"], "The model-free PPO agent or the "
                      "model-based agent (world model + dream-trained controller).")
    flags.DEFINE_integer("episodes", 1500, "Model-free: training episodes over the training "
                         "split.")
    common.define_world_model_flags()
    flags.DEFINE_integer("dream_episodes", 64, "Model-based: imagined episodes the controller "
                         "trains on (3200: the main job's; over many graphs the controller "
                         "transfers better with a token share, docs/agents.md).")
    # Over many graphs the controller learns mostly from its own real episodes
    # (docs/agents.md, "The model-based agent over the distribution").
    FLAGS.set_default("real_episodes_per_round", 200)
    common.define_disagreement_flags()
    flags.DEFINE_bool("ranked_locations", False, "Model-based: locations named by their rank "
                      "among the xfer's candidates, cheapest first, not by the engine's order.")
    flags.DEFINE_bool("xfer_summaries", False, "Model-based: the world model predicts each "
                      "xfer's best and mean cost change and the controller reads them (the "
                      "real environment's in the real one); off: it sees [z, h] and the masks "
                      "only.")
    flags.DEFINE_float("mask_threshold", 0.3, "Model-based: predicted probability above which "
                       "the dream offers an xfer. Lower than one graph's 0.8: over many graphs "
                       "the mask decoder is less sure, and at 0.8 the dream offers no xfer at "
                       "most starts (benchmarks/dream_masks_bench.py).")
    flags.DEFINE_integer("max_steps", 30, "Step limit per episode (raised to 1.5 x greedy's "
                         "steps on a graph where that is more).")
    flags.DEFINE_integer("max_locations", DEFAULT_MAX_LOCATIONS, "L, locations per xfer.")
    flags.DEFINE_integer("seed", 0, "Seed of the policy, its sampling and the graph draws.")
    common.define_taso_flags(alpha=False, budget_help="TASO's search budget in the evaluation.")
    flags.DEFINE_integer("random_episodes", 5, "Random-agent episodes per evaluated graph.")
    flags.DEFINE_integer("eval_limit", 0, "Evaluate only the first N held-out graphs (0: all).")
    flags.DEFINE_list("finetune", [], "Held-out graphs on which to compare fine-tuning the "
                      "generalist with a per-graph agent trained from scratch.")
    flags.DEFINE_integer("scratch_episodes", 300, "Episodes of the per-graph agent from "
                         "scratch.")
    flags.DEFINE_list("finetune_fractions", ["0.1", "0.03"], "Fine-tuning episodes as "
                      "fractions of --scratch_episodes (one fine-tuning run each).")
    flags.DEFINE_float("finetune_lr_scale", 1.0, "Fine-tuning's learning rates (policy and "
                       "value) as a multiple of those the generalist trained with; runs of "
                       "another scale than 1 go to their own folders beside the others.")
    flags.DEFINE_bool("relative_location_cost", False, "Model-free: the location head also "
                      "reads where each candidate's cost change lies between its xfer's "
                      "cheapest and costliest (PPOConfig.relative_location_cost), for the "
                      "generalist and the per-graph agents of --finetune alike.")
    common.define_quick_flag("300 episodes (model-based: 2 rounds of 30), 8 held-out graphs, "
                             "TASO budget 100: a first look in a few minutes.")


def config() -> GeneralistConfig:
    """The run the flags describe (--quick's values where a flag was not given)."""
    values = common.quick_values(QUICK)
    world_model = dream = None
    if FLAGS.agent == "mb":
        # Imported here: the model-free runs skip TF Probability.
        from xflowrl.world_model import DreamConfig  # pylint: disable=import-outside-toplevel
        world_model = common.world_model_config(values, xfer_summaries=FLAGS.xfer_summaries,
                                                ranked_locations=FLAGS.ranked_locations)
        dream = DreamConfig(episodes=FLAGS.dream_episodes, mask_threshold=FLAGS.mask_threshold,
                            disagreement_penalty=FLAGS.disagreement_penalty,
                            disagreement_limit=FLAGS.disagreement_limit)
    finetune = FinetuneConfig(graphs=tuple(FLAGS.finetune),
                              scratch_episodes=FLAGS.scratch_episodes,
                              fractions=tuple(float(f) for f in FLAGS.finetune_fractions),
                              lr_scale=FLAGS.finetune_lr_scale)
    return GeneralistConfig(
        agent=FLAGS.agent, rules=FLAGS.rules, cost_model=FLAGS.cost_model,
        profile=FLAGS.profile, max_steps=FLAGS.max_steps, max_locations=FLAGS.max_locations,
        seed=FLAGS.seed, episodes=values.episodes, eval_limit=values.eval_limit,
        taso_budget=values.taso_budget, random_episodes=FLAGS.random_episodes,
        relative_location_cost=FLAGS.relative_location_cost, finetune=finetune,
        world_model=world_model, dream=dream, results_dir=FLAGS.results_dir)
