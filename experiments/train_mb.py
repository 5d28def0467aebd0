"""Trains the model-based agent and hands over the graph it optimised.

    python experiments/train_mb.py --graph=bert            # the main job
    python experiments/train_mb.py --quick                 # small_cnn, about a minute
    python experiments/train_mb.py --quick --rounds=4      # --quick, with 4 rounds
    python experiments/train_mb.py --quick --onnx=my_model.onnx   # your own model

--onnx=PATH trains on a user's ONNX file (--input_shape NAME=D1,D2,... fixes
dynamic dimensions; <graph> below is then its name without .onnx).

Train, select, hand over (thesis §3.4; `xflowrl.optimize.handover`): the
world model's rounds (random, then the controller's episodes; after each,
the controller trains in the dream and plays one greedy real episode); the
round whose episode reached the cheapest graph is deployed and evaluated on
the real masks (greedy, sampled; greedy on the world model's beside); the
cheapest graph any of those episodes passed through is handed over.

Beside the agent (--plan_with_model, default): the world-model planner
(MuZero-style: a deterministic latent model and a search in its latent
space, acting on the real graph; `xflowrl.planning.model_episodes`), its
model trained on the same real episodes the agent's world model learnt
from and on nothing else, plans on the same graph; its result (greedy's
floor included), real steps (the episodes' and its own engine calls on
the graph, apart), model steps and wall time stand beside the
controller's. Its graph is replayed and run against the original's
outputs before it is called a result; the graph handed over stays the
agent's.

Writes to --results_dir/<graph>/train_mb/: TensorBoard logs, checkpoints
(rerun to resume), result.json (`ModelBasedRun`, beside the baselines and
results/<graph>/train_mf/ where it exists), result.md and training.png
(`xflowrl.results.model_based`), the graph handed over (graph.json;
graph.onnx: a zoo graph with random weights, a --onnx model with its own);
model_planner/: the planner's data (a file per batch of episodes, kept for a
resumed run) and its graph (graph.json).
"""

import dataclasses

from absl import app, flags
import common

from xflowrl.engine.cost import GPU_PROFILE
from xflowrl.entry_points.model_based import (
    ModelBasedSettings,
    run_model_based,
    save_model_based,
)
from xflowrl.optimize.handover import SAMPLED_EPISODES
from xflowrl.world_model import DreamConfig, controller_ppo_config

FLAGS = flags.FLAGS
# The thesis' experiments ran on a GPU: the GPU-like analytic profile is the
# default setting (--profile=cpu or --cost_model=fitted: this CPU).
common.define_env_flags("bert", default_profile=GPU_PROFILE)
common.define_baseline_flags()
flags.DEFINE_integer("seed", 0, "Seed of rollouts, networks and sampling.")
# World model.
common.define_world_model_flags()
flags.DEFINE_bool("replay", True, "Train on all rollouts so far (else the latest round's).")
flags.DEFINE_enum("collection", "controller", ["controller", "random"],
                  "Who collects after the first random round: the controller (it trains in "
                  "the dream after every round; iterative training) or a random agent (the "
                  "thesis).")
flags.DEFINE_float("explore", 0.1, "Controller collection: probability per step of a random "
                   "valid action instead of the policy's.")
flags.DEFINE_integer("vocabulary_headroom", 16, "Free xfer slots the vocabulary fills when "
                     "later rounds find xfers the first did not (0: fixed after round 1).")
flags.DEFINE_enum("reward_model", "mdn", ["mdn", "separate"],
                  "Reward from the MDN-RNN or from the separate network of thesis §4.3.4.")
# Controller.
flags.DEFINE_float("temperature", 1.0, "tau of the dream's mixture sampling.")
flags.DEFINE_integer("dream_episodes", 3200, "Imagined episodes the controller trains on.")
flags.DEFINE_integer("dream_batch", 64, "Imagined episodes per dream call (and per update).")
flags.DEFINE_float("real_starts", 0.5, "Fraction of imagined episodes that start from real "
                   "collected states (0: all from the initial graph, the thesis).")
flags.DEFINE_integer("start_horizon", 10, "Step limit of imagined episodes from real states "
                     "(the value function bootstraps the rest).")
flags.DEFINE_integer("reward_ensemble", 5, "Reward heads whose disagreement measures the "
                     "world model's error (0: none).")
common.define_disagreement_flags()
flags.DEFINE_enum("eval_masks", "real", ["real", "model"], "Masks the controller acts on in "
                  "the real environment: the real environment's (part of its observation) or, "
                  "as an ablation, the world model's predictions (the thesis).")
flags.DEFINE_bool("select_round", True, "Deploy the controller and world model of the round "
                  "whose greedy real episode (the per-round evaluation, real steps counted) "
                  "reached the cheapest graph; --noselect_round: the last round's.")
flags.DEFINE_bool("equal_budget", True, "Raise the step limit to 1.5x one-step greedy's steps "
                  "on this graph and setting where --max_steps is less (equal budgets).")
flags.DEFINE_bool("lockstep", False, "Ablation: real environments supply the dream's masks "
                  "and terminal flags (the thesis code's mode).")
flags.DEFINE_float("entropy_coef", 0.1, "PPO entropy bonus of the controller. Higher than "
                   "X-RLflow's 0.01: in the dream, the first random actions are net negative "
                   "and at 0.01 PPO collapses onto NO-OP (BERT: 0% instead of -0.043%).")
flags.DEFINE_float("mask_threshold", 0.8, "Predicted probability above which the dream "
                   "offers an xfer (docs/world_model.md).")
flags.DEFINE_float("count_margin", None, "Log-space margin below the predicted location "
                   "counts (default: twice the world model's held-out RMSE).")
flags.DEFINE_bool("predict_noop_reward", False, "Let the world model predict NO-OP's reward "
                  "instead of using the environment's 0 (an ablation).")
flags.DEFINE_integer("measure_rounds", 2, "Interleaved rounds of end-to-end TensorFlow "
                     "timing (onnx-tf) of the initial, the controller's and greedy's graphs "
                     "(0: skip).")
flags.DEFINE_integer("eval_episodes", SAMPLED_EPISODES, "Sampled evaluation episodes in the "
                     "real environment.")
flags.DEFINE_bool("plan_with_model", True, "Also run the world-model planner on the graph, "
                  "its latent model trained on the agent's real episodes, and report it "
                  "beside the controller (--noplan_with_model: the agent alone).")
flags.DEFINE_integer("model_train_steps", 500, "Gradient steps of the world-model planner's "
                     "latent model (batches of 32 unrolls of 3 model steps).")
# --quick's values for the flags the user does not give (and, always under
# --quick, 10 held-out episodes instead of WorldModelConfig's default).
QUICK = {"graph": "small_cnn", "max_steps": 20, "rounds": 2, "episodes_per_round": 30,
         "eqsat_time_limit": 4, "train_steps_per_round": 100, "encoder_steps": 150,
         "dream_episodes": 512, "model_train_steps": 50}
common.define_quick_flag("small_cnn, 20-step episodes, 2 rounds of 30 episodes, 512 "
                         "imagined episodes: end to end in about a minute.")


def settings_from_flags() -> ModelBasedSettings:
    """The run the flags describe (--quick's values where a flag was not given)."""
    values = common.quick_values(QUICK)
    wm = common.world_model_config(values, replay=FLAGS.replay,
                                   reward_model=FLAGS.reward_model, collection=FLAGS.collection,
                                   explore=FLAGS.explore, reward_ensemble=FLAGS.reward_ensemble,
                                   vocabulary_headroom=FLAGS.vocabulary_headroom)
    if FLAGS.quick:
        wm = dataclasses.replace(wm, held_out_episodes=10)
    # NO-OP leaves the graph unchanged: every per-step reward gives it 0.
    noop_reward = None if FLAGS.reward == "terminal" or FLAGS.predict_noop_reward else 0.0
    dream = DreamConfig(temperature=FLAGS.temperature, batch_size=FLAGS.dream_batch,
                        episodes=values.dream_episodes, lockstep=FLAGS.lockstep,
                        noop_reward=noop_reward, mask_threshold=FLAGS.mask_threshold,
                        count_margin=FLAGS.count_margin, real_starts=FLAGS.real_starts,
                        start_horizon=FLAGS.start_horizon,
                        disagreement_penalty=FLAGS.disagreement_penalty,
                        disagreement_limit=FLAGS.disagreement_limit)
    return ModelBasedSettings(
        run=common.run_settings(values), baselines=common.baseline_settings(),
        world_model=wm, dream=dream,
        ppo=controller_ppo_config(dream.batch_size, FLAGS.entropy_coef), seed=FLAGS.seed,
        plan_with_model=FLAGS.plan_with_model, model_train_steps=values.model_train_steps,
        eval_masks=FLAGS.eval_masks, eval_episodes=FLAGS.eval_episodes,
        select_round=FLAGS.select_round, equal_budget=FLAGS.equal_budget,
        measure_rounds=FLAGS.measure_rounds)


def main(argv):
    del argv
    outcome = run_model_based(settings_from_flags())
    print(save_model_based(outcome))
    print(f"results in {outcome.out_dir}")


if __name__ == "__main__":
    app.run(common.exit_on_bad_input(main))
