"""One model-based run end to end: train, select, hand over, report.

`experiments/train_mb.py` (the main job) turns its flags into
`ModelBasedSettings` and calls `run_model_based`, then `save_model_based`:
flags, config, call, save. Between them:

1. the model-based agent trains (`xflowrl.optimize.handover.train_model_based`:
   the world model's rounds, the controller in the dream, the round whose
   greedy real episode reached the cheapest graph deployed);
2. the deployed controller plays in the real environment on the real masks
   (greedy, sampled; greedy on the world model's masks beside), and the
   cheapest graph any of those episodes passed through is handed over;
3. the baselines run on the same environment (`BaselineSettings`);
4. the world-model planner, where asked, plans beside the agent from the
   same real episodes (`xflowrl.planning.model_episodes.PlannerBeside`);
5. the initial, the handed-over and greedy's graphs are timed end to end in
   TensorFlow on this CPU (`measure_rounds` > 0);
6. all of it becomes one `ModelBasedRun` record.

`save_model_based` writes the record (result.json), the graph handed over
(graph.json, and graph.onnx with weights), the planner's graph, the
TensorBoard scalars, training.png and result.md.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Optional

import tensorflow as tf

from xflowrl.agents.ppo import PPOConfig
from xflowrl.engine import Graph
from xflowrl.entry_points.outputs import result_path, save_graph, save_result, write_text
from xflowrl.entry_points.settings import BaselineSettings, RunSettings
from xflowrl.entry_points.source import GraphSource
from xflowrl.env import NO_STEP_LIMIT
from xflowrl.env.replay import replay
from xflowrl.optimize.handover import (
    HandOver,
    SAMPLED_EPISODES,
    evaluate_model_based,
    hand_over_evaluations,
    train_model_based,
)
from xflowrl.planning.model_episodes import BesideConfig, PlannerBeside
from xflowrl.results import ModelBasedRun, ModelBasedSeconds, RealSteps, WorldModelSummary
from xflowrl.results.model_based import (
    OTHER_MASKS,
    figure_model_based_training,
    imagined_steps,
    model_based_markdown,
    model_free_beside,
)
from xflowrl.search import versus_greedy, with_equal_step_limit
from xflowrl.world_model import DreamConfig, ModelBasedAgent, WorldModelConfig

# The world-model planner's folder in the run's results folder.
PLANNER_DIR = "model_planner"
# The run's folder in <results_dir>/<graph>/.
RUN_FOLDER = "train_mb"


@dataclasses.dataclass(frozen=True)
class ModelBasedSettings:
    """One model-based run.

    Attributes:
      run: the environment and the results folder.
      baselines: the baselines run beside the agent.
      world_model, dream, ppo: the world model's, the dream's and the
        controller's configs.
      seed: seeds rollouts, networks and sampling.
      plan_with_model: also run the world-model planner beside the agent.
      model_train_steps: gradient steps of the planner's latent model.
      eval_masks: the masks the controller acts on in the real environment
        ("real", or "model": the world model's predictions, an ablation).
      eval_episodes: sampled evaluation episodes beside the greedy one.
      select_round: deploy the round whose greedy real episode reached the
        cheapest graph (False: the last round).
      equal_budget: raise the step limit to 1.5x one-step greedy's steps
        where the requested one is less.
      measure_rounds: interleaved rounds of end-to-end TensorFlow timing of
        the initial, the handed-over and greedy's graphs (0: none).
    """
    run: RunSettings
    baselines: BaselineSettings
    world_model: WorldModelConfig
    dream: DreamConfig
    ppo: PPOConfig
    seed: int
    plan_with_model: bool = True
    model_train_steps: int = 500
    eval_masks: str = "real"
    eval_episodes: int = SAMPLED_EPISODES
    select_round: bool = True
    equal_budget: bool = True
    measure_rounds: int = 2


@dataclasses.dataclass
class ModelBasedOutcome:
    """What `run_model_based` leaves for `save_model_based`: the record, the
    graph handed over, the planner's graph (None where it did not plan),
    the baselines' Markdown rows, the trained agent (its TensorBoard writer
    and dream history) and the graph's source."""
    record: ModelBasedRun
    handed: HandOver
    planner_graph: Optional[Graph]
    baseline_rows: list
    agent: ModelBasedAgent
    source: GraphSource
    out_dir: str


def run_model_based(settings: ModelBasedSettings) -> ModelBasedOutcome:
    """Trains, selects and hands over; runs the baselines and, where asked,
    the world-model planner beside; returns the run's record (saved by
    `save_model_based`). A rerun on the same results folder resumes from the
    agent's checkpoints and the planner's stored episodes."""
    run, seed = settings.run, settings.seed
    source = run.source()
    env = run.make_env()
    requested_steps = env.config.max_steps
    env = with_equal_step_limit(env) if settings.equal_budget else env
    cost_model, out_dir = env.cost_model, run.results_folder(RUN_FOLDER)
    logging.info("graph %s: %d ops, %d xfers, initial cost %.4f ms (%s), step limit %d; "
                 "results in %s", run.graph, env.initial_graph.num_ops(), len(env.xfers),
                 env.initial_cost, cost_model.name, env.config.max_steps, out_dir)
    start = time.time()
    planner = PlannerBeside(os.path.join(out_dir, PLANNER_DIR), env, settings.plan_with_model)
    agent = ModelBasedAgent(env, out_dir, settings.world_model, settings.dream, settings.ppo,
                            seed=seed, on_rollouts=planner.on_rollouts)
    trained = train_model_based(agent, select_round=settings.select_round)
    # The controller in the real environment (optimising a graph is timed on
    # the greedy episode after the warm-up's, which traces).
    masks, ablation = settings.eval_masks, OTHER_MASKS[settings.eval_masks]
    evaluation_start = time.time()
    evaluations = evaluate_model_based(agent, masks, settings.eval_episodes,
                                       ablation_masks=ablation, warm_up=True)
    greedy, handed = evaluations.greedy, hand_over_evaluations(env, evaluations)
    baselines_start = time.time()
    baselines = settings.baselines.run(env, seed)
    baselines_seconds = time.time() - baselines_start
    beside = planner.plan(env, len(trained.world_model.rounds),
                          BesideConfig.of(env, seed, settings.model_train_steps),
                          progress=lambda line: agent.reporter.say(f"world-model planner: {line}"))
    if planner.note:
        logging.warning("world-model planner not run: %s", planner.note)
    measured = None
    if settings.measure_rounds > 0:
        greedy_graph = replay(env.with_config(max_steps=NO_STEP_LIMIT), baselines.greedy.applied)
        measured = source.time_in_tensorflow(
            {"initial": env.initial_graph, "controller": handed.graph, "greedy": greedy_graph},
            cost_model, settings.measure_rounds, seed)
    controller_episodes = int(trained.controller.episodes.numpy())
    assert agent.vocab is not None, "a trained agent has its vocabulary"
    learned = trained.world_model   # the world model's rounds, steps and encoder
    record = ModelBasedRun(
        graph=run.graph, cost_model=cost_model.name, rules=run.rules,
        max_locations=run.max_locations, seed=seed,
        max_steps=env.config.max_steps, requested_max_steps=requested_steps,
        greedy_steps=baselines.greedy.steps, eval_masks=masks,
        selected_round=trained.selected_round, initial_cost_ms=env.initial_cost,
        controller_cost_ms=greedy.final_cost, controller_cheapest_cost_ms=handed.cost,
        controller_cheapest_applied=handed.applied,
        controller={k: e for k, e in (
            ("greedy", greedy), (f"greedy_{ablation}_masks", evaluations.ablation))
            if e is not None},
        sampled=list(evaluations.sampled),
        controller_vs_greedy=versus_greedy(handed.cost, baselines.greedy.cost_ms),
        baselines=baselines.to_json(),
        real_steps=RealSteps(world_model_rollouts=learned.real_steps,
                             held_out_rollouts=learned.held_out_steps,
                             round_evaluations=learned.evaluation_steps,
                             evaluation=evaluations.steps,
                             # Lockstep only: the real engine stepped inside the "dream"
                             # (counted for this process's training, not a resumed part).
                             lockstep_dream=agent.lockstep_real_steps,
                             controller_learning=agent.controller_real_steps,
                             model_free=model_free_beside(result_path(
                                 run.results_dir, run.graph, "train_mf"))),
        world_model=WorldModelSummary(
            vocabulary=agent.vocab.size, vocabulary_known=agent.vocab.known,
            rounds=learned.rounds, encoder=learned.encoder,
            config=dataclasses.asdict(settings.world_model)),
        dream=dataclasses.asdict(agent.resolve(settings.dream)),
        ppo=dataclasses.asdict(settings.ppo),
        measured=measured,
        seconds=ModelBasedSeconds(world_model=trained.world_model_seconds,
                                  controller=trained.controller_seconds,
                                  total=time.time() - start, optimize=evaluations.seconds,
                                  optimize_first_call=evaluations.first_call_seconds,
                                  evaluation=baselines_start - evaluation_start,
                                  baselines=baselines_seconds),
        dream_episodes=controller_episodes,
        onnx=source.model.path if source.model is not None else None,
        imagined_steps=imagined_steps(agent.dream_history, controller_episodes),
        model_planner=beside.run if beside is not None else None,
        model_planner_note=planner.note)
    return ModelBasedOutcome(record=record, handed=handed,
                             planner_graph=beside.graph if beside is not None else None,
                             baseline_rows=baselines.rows(), agent=agent, source=source,
                             out_dir=out_dir)


def save_model_based(outcome: ModelBasedOutcome) -> str:
    """Writes the run's files to its results folder (see the module's
    docstring) and returns result.md's text."""
    record, out_dir, agent = outcome.record, outcome.out_dir, outcome.agent
    if outcome.planner_graph is not None:
        # Its op list only: the graph handed over (with weights, as ONNX) is the agent's.
        save_graph(os.path.join(out_dir, PLANNER_DIR), outcome.planner_graph)
    save_result(out_dir, record.to_json())
    outcome.source.save_graph(out_dir, outcome.handed.graph, record.seed, provenance=(
        f"{len(record.controller_cheapest_applied)} substitutions by the model-based agent "
        f"under {record.cost_model} ({record.rules} rules)"))
    greedy = record.controller["greedy"]
    with agent.writer.as_default(step=0):
        tf.summary.scalar("real/controller_cost", record.controller_cost_ms)
        tf.summary.scalar("real/controller_cheapest_cost", record.controller_cheapest_cost_ms)
        tf.summary.scalar("real/predicted_return", greedy.predicted_return)
        tf.summary.scalar("real/real_return", greedy.real_return)
    figure_model_based_training(os.path.join(out_dir, "training.png"), record,
                                agent.dream_history)
    text = model_based_markdown(record, outcome.baseline_rows)
    write_text(os.path.join(out_dir, "result.md"), text)
    return text
