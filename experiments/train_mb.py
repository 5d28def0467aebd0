"""Trains the model-based agent: world model from random rollouts, PPO in the dream.

    python experiments/train_mb.py --graph=bert            # the main job
    python experiments/train_mb.py --quick                 # small_cnn, about a minute
    python experiments/train_mb.py --quick --rounds=4      # --quick, with 4 rounds
    python experiments/train_mb.py --quick --onnx=my_model.onnx   # your own model

--onnx=PATH trains on a user's ONNX file instead of a zoo graph (--input_shape
NAME=D1,D2,... fixes inputs of dynamic dimensions); <graph> below is then the
file's name without .onnx, and the model's own weights are what graph.onnx
carries and what the end-to-end timing runs. A file that cannot be read or
imported ends the script with one error line (exit status 2).

Phases (thesis §3.4; xflowrl.world_model.agent): online random-agent rollouts
train a latent encoder (then frozen) and the MDN-RNN world model; a PPO
controller trains on [z_t, h_t] inside the dream only; it is then evaluated
in the real environment (greedy and sampled, with the world model's masks,
and for comparison with the real engine's masks).

Writes to --results_dir/<graph>/train_mb/: TensorBoard logs (world-model
loss terms and held-out accuracy, imagined returns, the real evaluation),
checkpoints of both phases (rerun the same command to resume), and at the
end result.json / result.md: the initial cost, the controller's real cost,
one-step greedy, TASO's search and a random agent under the same cost model,
the real environment steps used (beside the model-free agent's, when
results/<graph>/train_mf/result.json exists), predicted vs real returns and
mask errors; plus the optimised graph (graph.json, and graph.onnx: a zoo graph
with random weights, a --onnx model with its own).
"""

import dataclasses
import os
import time
from typing import List

from absl import app, flags, logging
import common
import numpy as np
import tensorflow as tf

from xflowrl.agents.ppo import PPOConfig
from xflowrl.agents.ppo.training import replay
from xflowrl.engine.cost import GPU_COST_SPEC, GPU_PROFILE
from xflowrl.env import NO_STEP_LIMIT
from xflowrl.results import (
    EvaluationEpisode,
    ModelBasedRun,
    ModelBasedSeconds,
    ModelFreeRun,
    RealSteps,
    RecordError,
    WorldModelRound,
    WorldModelState,
    WorldModelSummary,
)
from xflowrl.runs import (
    BaselineSettings,
    GraphSource,
    RunSettings,
    change_table,
    result_path,
    save_result,
    write_text,
)
from xflowrl.search import versus_greedy, with_equal_step_limit
from xflowrl.world_model import (
    DreamConfig,
    ModelBasedAgent,
    WorldModelConfig,
    controller_ppo_config,
)

FLAGS = flags.FLAGS
# The masks of the evaluation beside the chosen one (--eval_masks).
OTHER_MASKS = {"real": "model", "model": "real"}
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
flags.DEFINE_integer("eval_episodes", 10, "Sampled evaluation episodes in the real env.")
# --quick's values for the flags the user does not give (and, always under
# --quick, 10 held-out episodes instead of WorldModelConfig's default).
QUICK = {"graph": "small_cnn", "max_steps": 20, "rounds": 2, "episodes_per_round": 30,
         "eqsat_time_limit": 4,
         "train_steps_per_round": 100, "encoder_steps": 150, "dream_episodes": 512}
common.define_quick_flag("small_cnn, 20-step episodes, 2 rounds of 30 episodes, 512 "
                         "imagined episodes: end to end in about a minute.")


@dataclasses.dataclass(frozen=True)
class Settings:
    """One model-based run: the environment and results folder, the
    baselines, the world model's, the dream's and the controller's configs,
    and the seed."""
    run: RunSettings
    baselines: BaselineSettings
    world_model: WorldModelConfig
    dream: DreamConfig
    ppo: PPOConfig
    seed: int


def settings_from_flags() -> Settings:
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
    return Settings(run=common.run_settings(values), baselines=common.baseline_settings(),
                    world_model=wm, dream=dream,
                    ppo=controller_ppo_config(dream.batch_size, FLAGS.entropy_coef),
                    seed=FLAGS.seed)


def _model_free_steps(results_dir: str, graph_name: str):
    path = result_path(results_dir, graph_name, "train_mf")
    try:
        mf = ModelFreeRun.load(path)
    except RecordError as e:
        logging.warning("not beside the model-free run: %s", e)
        return None
    if mf is None:
        return None
    return {"interactions": mf.interactions, "agent_cost_ms": mf.agent_cost_ms,
            "episodes": mf.episodes, "source": path}


def main(argv):
    del argv
    settings = settings_from_flags()
    graph_name, wm, dream, ppo, seed = (settings.run.graph, settings.world_model,
                                        settings.dream, settings.ppo, settings.seed)
    source = settings.run.source()
    env = settings.run.make_env()
    requested_steps = env.config.max_steps
    if FLAGS.equal_budget:
        env = with_equal_step_limit(env)
    graph, xfers, cost_model = env.initial_graph, env.xfers, env.cost_model
    out_dir = settings.run.results_folder("train_mb")
    logging.info("graph %s: %d ops, %d xfers, initial cost %.4f ms (%s), step limit %d; "
                 "results in %s", graph_name, graph.num_ops(), len(xfers), env.initial_cost,
                 cost_model.name, env.config.max_steps, out_dir)
    start = time.time()
    agent = ModelBasedAgent(env, out_dir, wm, dream, ppo, seed=seed)
    wm_state = WorldModelState.from_state(agent.learn_world_model())
    wm_seconds = time.time() - start
    controller = agent.train_controller()
    dream_seconds = time.time() - start - wm_seconds
    selected = agent.select_best_round() if FLAGS.select_round else None

    # The controller in the real environment. Optimising a graph with it is
    # timed on a second greedy episode: the first traces the real-environment
    # path's tf.functions (the episodes are the same, greedy being
    # deterministic; both count as real steps).
    masks, ablation = FLAGS.eval_masks, OTHER_MASKS[FLAGS.eval_masks]
    optimize_start = time.time()
    warm_up = agent.evaluate(masks=masks, greedy=True)
    first_call_seconds = time.time() - optimize_start
    optimize_start = time.time()
    evaluations = {"greedy": agent.evaluate(masks=masks, greedy=True)}
    optimize_seconds = time.time() - optimize_start
    if warm_up.applied != evaluations["greedy"].applied:
        logging.warning("two greedy episodes of the controller differ: %s vs %s",
                        warm_up.applied, evaluations["greedy"].applied)
    evaluations.update({f"greedy_{ablation}_masks": agent.evaluate(masks=ablation,
                                                                   greedy=True)})
    sampled = [agent.evaluate(masks=masks, greedy=False) for _ in range(FLAGS.eval_episodes)]
    # The graph handed over: the cheapest one any evaluation episode passed
    # through (its shortest prefix), not where the episode happened to end.
    best = min([evaluations["greedy"]] + sampled, key=lambda e: (e.best_cost, e.best_prefix))
    best_graph = replay(env, best.applied[:best.best_prefix])
    baselines = settings.baselines.run(env, seed)
    eval_steps = (warm_up.steps + sum(e.steps for e in evaluations.values())
                  + sum(e.steps for e in sampled))
    summary = ModelBasedRun(
        graph=graph_name, cost_model=cost_model.name, rules=settings.run.rules,
        max_locations=settings.run.max_locations, seed=seed,
        max_steps=env.config.max_steps, requested_max_steps=requested_steps,
        greedy_steps=baselines.greedy.steps, eval_masks=masks,
        selected_round=selected,
        initial_cost_ms=env.initial_cost,
        controller_cost_ms=evaluations["greedy"].final_cost,
        controller_best_cost_ms=best.best_cost,
        controller_best_applied=best.applied[:best.best_prefix],
        controller={k: EvaluationEpisode(**e._asdict()) for k, e in evaluations.items()},
        sampled=[EvaluationEpisode(**e._asdict()) for e in sampled],
        controller_vs_greedy=versus_greedy(best.best_cost, baselines.greedy.cost_ms),
        baselines=baselines.to_json(),
        real_steps=RealSteps(world_model_rollouts=wm_state.real_steps,
                             held_out_rollouts=wm_state.held_out_steps,
                             round_evaluations=wm_state.evaluation_steps,
                             evaluation=eval_steps,
                             # --lockstep only: the real engine stepped inside the "dream"
                             # (counted for this process's training, not a resumed part).
                             lockstep_dream=agent.lockstep_real_steps,
                             controller_learning=agent.controller_real_steps,
                             model_free=_model_free_steps(settings.run.results_dir,
                                                          graph_name)),
        world_model=WorldModelSummary(
            vocabulary=agent.vocab.size, vocabulary_known=agent.vocab.known,
            rounds=wm_state.rounds, encoder=wm_state.encoder, config=dataclasses.asdict(wm)),
        dream=dataclasses.asdict(agent.resolve(dream)), ppo=dataclasses.asdict(ppo),
        measured=_measure(env, source, best_graph, baselines, FLAGS.measure_rounds, seed),
        seconds=ModelBasedSeconds(world_model=wm_seconds, controller=dream_seconds,
                                  total=time.time() - start, optimize=optimize_seconds,
                                  optimize_first_call=first_call_seconds),
        dream_episodes=int(controller.episodes.numpy()),
        onnx=source.model.path if source.model is not None else None)
    save_result(out_dir, summary.to_json())
    # Zoo graphs carry no trained weights: the ONNX file holds random ones
    # under the original weight names (folded weights precomputed); a user's
    # model keeps its own.
    source.save_graph(out_dir, best_graph, seed, provenance=(
        f"{len(summary.controller_best_applied)} substitutions by the model-based agent "
        f"under {cost_model.name} ({settings.run.rules} rules)"))
    with agent.writer.as_default(step=0):
        tf.summary.scalar("real/controller_cost", evaluations["greedy"].final_cost)
        tf.summary.scalar("real/controller_best_cost", best.best_cost)
        tf.summary.scalar("real/predicted_return", evaluations["greedy"].predicted_return)
        tf.summary.scalar("real/real_return", evaluations["greedy"].real_return)
    _plot(os.path.join(out_dir, "training.png"), summary, agent.dream_history)
    _write_markdown(out_dir, summary, evaluations, sampled, baselines)


def _plot(path, summary: ModelBasedRun, dream_history):
    """World-model held-out NLL and reward MSE per round; imagined return per update."""
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    rounds = summary.world_model.rounds
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    steps = [r.real_steps for r in rounds]
    axes[0].plot(steps, [r.held_out["latent_nll"] for r in rounds], marker="o", label="held out")
    axes[0].plot(steps, [r.train_latent_nll for r in rounds], marker="s", label="train")
    axes[0].set(xlabel="real environment steps", ylabel="latent NLL / (Z+2)",
                title="world model")
    axes[0].legend()
    axes[1].semilogy(steps, [r.held_out["reward_mse"] for r in rounds], marker="o",
                     label="reward MSE")
    axes[1].plot(steps, [1 - r.held_out["xfer_mask_accuracy"] for r in rounds], marker="s",
                 label="xfer-mask error")
    axes[1].set(xlabel="real environment steps", title="held-out errors")
    axes[1].legend()
    if dream_history:
        axes[2].plot([r["episodes"] for r in dream_history],
                     [r["dream_return"] for r in dream_history])
    # The real speed-up, not the real return: that includes the penalty of a
    # final invalid action (a mask error), which the graph does not pay.
    real = 100.0 * (1.0 - summary.controller_cost_ms / summary.initial_cost_ms)
    axes[2].axhline(real, color="C1", linestyle="--", label=f"real speed-up (greedy) {real:+.3f}")
    axes[2].set(xlabel="imagined episodes", ylabel="return (% speed-up)",
                title="controller in the dream")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _measure(env, source: GraphSource, best_graph, baselines, rounds: int, seed: int):
    """End-to-end TensorFlow time (ms) of the initial, the controller's and
    greedy's graphs, the same weights and inputs for all (`source`'s: a zoo
    graph's random `zoo_weights`, scaled so values stay finite; a user's
    model's own weights and inputs of its types), measured in `rounds`
    interleaved rounds (each: median of 10 calls after 2 warm-up calls)."""
    if rounds <= 0:
        return None
    from xflowrl.measure.tf_runtime import measure_graph  # pylint: disable=import-outside-toplevel
    greedy_env = env.with_config(max_steps=NO_STEP_LIMIT)
    graphs = {"initial": env.initial_graph, "controller": best_graph,
              "greedy": replay(greedy_env, baselines.greedy.applied)}
    weights = source.weights(seed)
    # Zoo graphs: measure_graph's own random inputs (as before); a model: its
    # inputs' element types and names.
    feeds = None if source.model is None else source.inputs(seed)
    times = {name: [] for name in graphs}
    for _ in range(rounds):
        for name, graph in graphs.items():
            times[name].append(measure_graph(graph, weights, feeds, seed=seed, warmup=2,
                                             repeats=10).median_ms)
    out = {name: {"median_ms": float(np.median(t)), "min_ms": min(t), "max_ms": max(t),
                  "estimated_ms": graphs[name].cost(env.cost_model)}
           for name, t in times.items()}
    out["rounds"] = rounds
    return out


def _selected(summary: ModelBasedRun) -> str:
    """Which round's agent was deployed, when one was chosen."""
    chosen = summary.selected_round
    if not chosen:
        return ""
    return (f"; the deployed agent is round {chosen['round']}'s of "
            f"{len(summary.world_model.rounds)} (its greedy real episode reached the "
            f"cheapest graph, {chosen['cost_ms']:.4f} ms)")


def _setting(cost_model: str) -> str:
    """The cost model's name, saying which stands for a GPU."""
    if cost_model == GPU_COST_SPEC:
        return f"GPU-like profile: {GPU_COST_SPEC} cost"
    return f"{cost_model} cost"


def _rounds_table(rounds: List[WorldModelRound]) -> str:
    """Per round: who collected, real steps, held-out accuracy, and (with
    controller collection) the controller's imagined, predicted and real
    returns: the gap between them should shrink over rounds."""
    if not rounds or rounds[0].controller is None:
        return ""
    lines = ["| round | collected by | real steps | held-out NLL | location-mask acc | "
             "imagined return | predicted return | real return | gap |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rounds:
        c = r.controller
        if c is None:
            continue
        gap = c.imagined_return - c.real_return
        lines.append(
            f"| {r.round} | {r.collection} | {r.real_steps} | "
            f"{r.held_out['latent_nll']:.3f} | {r.held_out['location_mask_accuracy']:.3f} | "
            f"{c.imagined_return:+.3f} | {c.predicted_return:+.3f} | "
            f"{c.real_return:+.3f} | {gap:+.3f} |")
    return ("The controller after each round (greedy; imagined: from the initial graph in "
            "the dream; predicted: the world model's rewards along its real episode):\n\n"
            + "\n".join(lines) + "\n\n")


def _write_markdown(out_dir, summary: ModelBasedRun, evaluations, sampled, baselines):
    initial = summary.initial_cost_ms
    masks = summary.eval_masks
    ablation = OTHER_MASKS[masks]
    note = "" if masks == "real" else ", the world model's masks: ablation"
    rows = [("initial", initial),
            (f"model-based (greedy episode{note})", evaluations["greedy"].final_cost),
            (f"model-based (best of greedy + {len(sampled)} sampled{note})",
             summary.controller_best_cost_ms),
            (f"model-based, greedy on the {ablation} masks"
             f"{' (ablation: the thesis)' if ablation == 'model' else ''}",
             evaluations[f"greedy_{ablation}_masks"].final_cost)]
    rows += baselines.rows()
    mf = summary.real_steps.model_free
    if mf and mf.get("agent_cost_ms") is not None:
        rows.append(("model-free PPO (from train_mf.py)", mf["agent_cost_ms"]))
    table = change_table(rows, initial, change_digits=3)
    steps = summary.real_steps
    ev = [(f"greedy, {masks} masks", evaluations["greedy"]),
          (f"greedy, {ablation} masks", evaluations[f"greedy_{ablation}_masks"])] + [
        (f"sampled {i + 1}", e) for i, e in enumerate(sampled)]
    ev_table = "\n".join(f"| {n} | {e.final_cost:.4f} | {e.best_cost:.4f} ({e.best_prefix}) | "
                         f"{e.real_return:+.4f} | "
                         f"{e.predicted_return:+.4f} | {e.invalid_actions} | {e.steps} |"
                         for n, e in ev)
    measured = ""
    if summary.measured:
        m = summary.measured
        base_ms, base_est = m["initial"]["median_ms"], m["initial"]["estimated_ms"]
        measured = "\n".join(
            f"| {name} | {m[name]['estimated_ms']:.4f} "
            f"({100 * (m[name]['estimated_ms'] / base_est - 1):+.3f}%) | "
            f"{m[name]['median_ms']:.2f} [{m[name]['min_ms']:.2f}, {m[name]['max_ms']:.2f}] "
            f"({100 * (m[name]['median_ms'] / base_ms - 1):+.2f}%) |"
            for name in ("initial", "controller", "greedy"))
        weights = "the model's own weights" if summary.onnx else "random weights"
        measured = (f"Estimated vs measured end to end in TensorFlow (onnx-tf, 1 process, "
                    f"{weights}; median of {m['rounds']} interleaved rounds [min, max]; "
                    f"the controller's graph is its best evaluation episode's):\n\n| graph | "
                    f"estimated ms | measured ms |\n|---|---|---|\n{measured}\n\n")
    last = summary.world_model.rounds[-1]
    lockstep = (f" + {steps.lockstep_dream} stepped in lockstep by the dream"
                if steps.lockstep_dream else "") + (
        f" + {steps.controller_learning} in the controller's own episodes it learned from"
        if steps.controller_learning else "")
    rounds = _rounds_table(summary.world_model.rounds)
    text = (
        f"# Model-based agent on {summary.graph} ({_setting(summary.cost_model)})\n\n"
        f"World model: {len(summary.world_model.rounds)} rounds, vocabulary of "
        f"{summary.world_model.vocabulary_known} xfers (of "
        f"{summary.world_model.vocabulary} slots), held-out latent NLL "
        f"{last.held_out['latent_nll']:.3f}, reward MSE {last.held_out['reward_mse']:.3e}, "
        f"xfer-mask accuracy {last.held_out['xfer_mask_accuracy']:.3f}, location-mask accuracy "
        f"{last.held_out['location_mask_accuracy']:.3f}. Controller: "
        f"{summary.dream_episodes} imagined episodes at temperature "
        f"{summary.dream['temperature']}. {summary.seconds.total:.0f} s in all.\n\n"
        f"Step limit {summary.max_steps} (one-step greedy takes "
        f"{summary.greedy_steps} steps; --max_steps={summary.requested_max_steps}). The "
        f"controller acts on the {masks} environment's masks"
        f"{'' if masks == 'real' else ' as predicted by the world model'}"
        f"{_selected(summary)}.\n\n"
        f"| | cost (ms) | change |\n|---|---|---|\n{table}\n\n"
        f"The controller (best episode) {summary.controller_vs_greedy}.\n\n{measured}"
        f"Real environment steps: {steps.world_model_rollouts} for the world model's "
        f"rollouts + {steps.held_out_rollouts} held out + {steps.evaluation} in "
        f"evaluation{lockstep}; model-free agent: "
        f"{mf['interactions'] if mf else 'not run (train_mf.py writes it)'}.\n\n"
        f"{rounds}"
        f"| evaluation episode | final cost | best cost (after k rewrites) | real return | "
        f"predicted return | invalid actions | steps |\n|---|---|---|---|---|---|---|\n"
        f"{ev_table}\n\n"
        f"Controller's substitutions (best episode): "
        f"{', '.join(f'{n}@{l}' for n, l in summary.controller_best_applied) or 'none'}\n")
    write_text(os.path.join(out_dir, "result.md"), text)
    print(text)
    print(f"results in {out_dir}")


if __name__ == "__main__":
    app.run(common.exit_on_bad_input(main))
