"""Trains the model-free hierarchical PPO agent in the real environment.

    python experiments/train_mf.py --graph=squeezenet1_1 --episodes=500
    python experiments/train_mf.py --quick          # small_cnn, about a minute
    python experiments/train_mf.py --quick --graph=resnet18   # --quick's budgets, resnet18
    python experiments/train_mf.py --cost_features=no_deltas   # observation ablation
    python experiments/train_mf.py --noequal_budget   # keep --max_steps below greedy's steps
    python experiments/train_mf.py --quick --onnx=my_model.onnx   # your own model
    python experiments/train_mf.py --rollout_actors=2   # Ray actors play the episodes

--onnx=PATH trains on a user's ONNX file instead of a zoo graph (--input_shape
NAME=D1,D2,... fixes inputs of dynamic dimensions); <graph> below is then the
file's name without .onnx, and graph.onnx carries the model's own weights,
input/output names, opset and metadata. A file that cannot be read or
imported ends the script with one error line (exit status 2).

The agent is compared with one-step greedy, so its episode step limit is
--max_steps raised to 1.5 x greedy's steps on the graph where that is more
(`xflowrl.search.with_equal_step_limit`): an agent capped below
what greedy needs would lose by its budget, not its policy.

Writes to --results_dir/<graph>/train_mf/: TensorBoard logs, checkpoints and
progress.json (rerun with the same flags to resume after an interruption),
and at the end result.json / result.md (the trained agent's greedy episode:
its substitution sequence and estimated cost; the best episode seen in
training; one-step greedy, TASO's search and a random agent's average under
the same cost model; the step limit used and greedy's steps; the real
environment steps taken until the agent's greedy evaluation first reached
its final cost) and the graph handed over (graph.json, and graph.onnx: a
zoo graph with random weights, a --onnx model with its own): the cheapest
graph the greedy or the best training episode passed through, by its
shortest prefix (`xflowrl.optimize.handover.hand_over_model_free`, as
`xflowrl optimize --method=mf` hands over).

--rollout_actors=K has K Ray actors (one CPU each) play the training
episodes, each with its own environment and policy copy (xflowrl.agents.
ppo.rollouts); on a local Ray instance by default, on a cluster with
--ray_address. It samples other episodes than a run without actors, so a
run resumes with the value it started with.
"""

import dataclasses
import functools
import time

from absl import app, flags, logging
import common

from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.agents.ppo.training import TrainConfig, replay, train
from xflowrl.entry_points import BaselineSettings, RunSettings, change_table, save_result
from xflowrl.env.environment import COST_FEATURES
from xflowrl.optimize.handover import hand_over_model_free
from xflowrl.results import ModelFreeRun
from xflowrl.search import EQUAL_BUDGET_FACTOR, versus_greedy, with_equal_step_limit

FLAGS = flags.FLAGS
common.define_env_flags("squeezenet1_1")
common.define_baseline_flags()
flags.DEFINE_integer("episodes", 500, "Training episodes.")
flags.DEFINE_integer("seed", 0, "Seed of the agent's networks and sampling.")
flags.DEFINE_enum("ppo", "xrlflow", ["thesis", "xrlflow"],
                  "PPO preset (docs/agents.md): X-RLflow/CleanRL (default; learns in far "
                  "fewer episodes) or the thesis code's.")
flags.DEFINE_integer("episodes_per_update", None, "Override the preset's value.")
flags.DEFINE_integer("parallel_envs", None, "Episodes played at once, the policy acting for "
                     "all in one batch (TrainConfig.parallel_envs; default: the episodes per "
                     "update; 1: one at a time).")
flags.DEFINE_enum("cost_features", "full", list(COST_FEATURES),
                  "Cost information in the agent's observations (EnvConfig.cost_features, "
                  "an ablation; docs/agents.md): full; no_deltas (no candidate cost changes); "
                  "none (no cost at all). Baselines always see full observations.")
flags.DEFINE_bool("equal_budget", True,
                  f"Raise the episode step limit to {EQUAL_BUDGET_FACTOR} x one-step greedy's "
                  "steps on the graph where that exceeds --max_steps, so that the comparison "
                  "with greedy gives both the same budget; --noequal_budget keeps --max_steps "
                  "as given (an ablation).")
flags.DEFINE_integer("rollout_actors", 0, "Ray actors that play the training episodes (one CPU "
                     "each; docs/agents.md, 'Rollouts in Ray actors'); 0: this process plays "
                     "them.")
flags.DEFINE_string("ray_address", "", "With --rollout_actors: a Ray cluster's address; empty: a "
                    "local Ray instance of --rollout_actors CPUs.")
# --quick's values for the flags the user does not give.
QUICK = {"graph": "small_cnn", "episodes": 100, "ppo": "xrlflow", "episodes_per_update": 5,
         "eqsat_time_limit": 4,
         "max_steps": 20}
common.define_quick_flag("small_cnn, 100 episodes, X-RLflow PPO, 5 episodes per update, "
                         "20 steps: trains in about a minute.")


@dataclasses.dataclass(frozen=True)
class Settings:
    """One training run: the environment and results folder, the baselines,
    the training loop, the PPO preset, the seed, and whether the step limit
    is raised to greedy's budget (--equal_budget)."""
    run: RunSettings
    baselines: BaselineSettings
    train: TrainConfig
    ppo: PPOConfig
    seed: int
    equal_budget: bool


def settings_from_flags() -> Settings:
    """The run the flags describe (--quick's values where a flag was not given)."""
    values = common.quick_values(QUICK)
    ppo = PPOConfig.named(values.ppo)
    if values.episodes_per_update:
        ppo = dataclasses.replace(ppo, episodes_per_update=values.episodes_per_update)
    return Settings(run=common.run_settings(values, FLAGS.cost_features),
                    baselines=common.baseline_settings(),
                    train=TrainConfig(episodes=values.episodes,
                                      parallel_envs=FLAGS.parallel_envs
                                      or ppo.episodes_per_update),
                    ppo=ppo, seed=FLAGS.seed,
                    equal_budget=FLAGS.equal_budget)


def training_env(run: RunSettings, equal_budget: bool):
    """The run's environment; with `equal_budget` its step limit raised to
    greedy's budget (deterministic: greedy's steps on this graph and
    setting, so a resumed run, or an actor, gets the same limit)."""
    env = run.make_env()
    return with_equal_step_limit(env) if equal_budget else env


def start_actors(settings: Settings, agent):
    """--rollout_actors Ray actors on the agent's policy, or None."""
    if not FLAGS.rollout_actors:
        return None
    import ray  # pylint: disable=import-outside-toplevel

    from xflowrl.agents.ppo.rollouts import (  # pylint: disable=import-outside-toplevel
        RolloutActors,
    )
    agent.build(training_env(settings.run, settings.equal_budget))  # the weights to send
    if not ray.is_initialized():
        if FLAGS.ray_address:
            ray.init(address=FLAGS.ray_address, log_to_driver=False)
        else:
            ray.init(num_cpus=FLAGS.rollout_actors, include_dashboard=False,
                     log_to_driver=False, object_store_memory=500 * 2**20)
    return RolloutActors(functools.partial(training_env, settings.run, settings.equal_budget),
                         agent, FLAGS.rollout_actors, seed=settings.seed)


def main(argv):
    del argv
    settings = settings_from_flags()
    graph_name, ppo, seed = settings.run.graph, settings.ppo, settings.seed
    source = settings.run.source()
    env = training_env(settings.run, settings.equal_budget)
    graph, xfers, cost_model = env.initial_graph, env.xfers, env.cost_model
    out_dir = settings.run.results_folder("train_mf")
    logging.info("graph %s: %d ops, %d xfers, initial cost %.4f ms (%s), step limit %d; "
                 "results in %s", graph_name, graph.num_ops(), len(xfers), env.initial_cost,
                 cost_model.name, env.config.max_steps, out_dir)
    agent = PPOAgent(len(xfers), ppo, seed=seed)
    actors = start_actors(settings, agent)
    try:
        result = train(env, agent, settings.train, out_dir, actors=actors)
    finally:
        if actors is not None:
            actors.close()

    start = time.time()  # optimising a graph with the trained policy (vs TASO's search time)
    greedy = agent.run_episode(env, greedy=True, learn=False)
    optimize_seconds = time.time() - start
    baselines = settings.baselines.run(common.with_full_observation(env), seed)
    best_graph = replay(env, result.best_sequence)
    # The graph handed over: the cheapest the greedy or the best training
    # episode passed through (its shortest prefix), not where one ended.
    handed = hand_over_model_free(env, greedy, result)
    # Sample efficiency: real steps until a greedy evaluation first reached
    # the final greedy cost (evaluations run every few updates).
    reached = [row["interactions"] for row in result.history
               if row.get("greedy_cost", float("inf")) <= greedy.final_cost + 1e-9]
    steps_to_final = reached[0] if reached else result.interactions
    max_steps, greedy_steps = env.config.max_steps, baselines.greedy.steps
    if settings.equal_budget:
        limit_sentence = (f"Step limit per episode: {max_steps}, the larger of --max_steps "
                          f"({settings.run.max_steps}) and {EQUAL_BUDGET_FACTOR} x one-step "
                          f"greedy's {greedy_steps} steps (equal budgets).")
    else:
        limit_sentence = (f"Step limit per episode: {max_steps} (--noequal_budget: "
                          f"--max_steps as given; one-step greedy takes {greedy_steps} steps).")

    summary = ModelFreeRun(
        graph=graph_name, cost_model=cost_model.name, rules=settings.run.rules,
        max_locations=settings.run.max_locations, ppo=dataclasses.asdict(ppo),
        cost_features=env.config.cost_features, seed=seed,
        equal_budget=settings.equal_budget, max_steps=max_steps,
        requested_max_steps=settings.run.max_steps, greedy_steps=greedy_steps,
        episodes=result.episodes, interactions=result.interactions,
        train_seconds=result.seconds, optimize_seconds=optimize_seconds,
        initial_cost_ms=env.initial_cost,
        agent_cost_ms=greedy.final_cost, agent_applied=greedy.applied,
        best_training_cost_ms=best_graph.cost(cost_model),
        best_training_applied=result.best_sequence,
        steps_to_final_cost=steps_to_final,
        agent_vs_greedy=versus_greedy(greedy.final_cost, baselines.greedy.cost_ms),
        random_mean_cost_ms=baselines.random.cost_ms if baselines.random else None,
        taso=baselines.to_json()["taso"], baselines=baselines.to_json(), history=result.history,
        onnx=source.model.path if source.model is not None else None,
        handed_over_cost_ms=handed.cost, handed_over_applied=handed.applied)
    # Zoo graphs carry no trained weights: the ONNX file holds random ones
    # under the original weight names (folded weights precomputed); a user's
    # model keeps its own.
    source.save_graph(out_dir, handed.graph, seed, provenance=(
        f"{len(handed.applied)} substitutions by the model-free PPO agent under "
        f"{cost_model.name} ({settings.run.rules} rules)"))
    rows = [("initial", env.initial_cost), ("PPO agent (greedy)", greedy.final_cost),
            ("best episode in training", summary.best_training_cost_ms),
            ("handed over (the cheapest graph of the two)", handed.cost)]
    rows += baselines.rows()
    table = change_table(rows, env.initial_cost)
    save_result(out_dir, summary.to_json(), markdown=(
        f"# Model-free PPO on {graph_name} ({cost_model.name} cost)\n\n"
        f"Cost features in the observation: {env.config.cost_features}.\n\n"
        f"{limit_sentence}\n\n"
        f"{result.episodes} episodes, {result.interactions} environment steps, "
        f"{result.seconds:.0f} s of training; the greedy evaluation first reached its "
        f"final cost after {steps_to_final} steps.\n\n| | cost (ms) | change |\n"
        f"|---|---|---|\n{table}\n\nThe agent {summary.agent_vs_greedy}.\n\n"
        f"Agent's substitutions: "
        f"{', '.join(f'{n}@{l}' for n, l in greedy.applied) or 'none'}\n\n"
        f"Handed over (graph.json, graph.onnx): "
        f"{', '.join(f'{n}@{l}' for n, l in handed.applied) or 'none'}\n"))
    print(table)
    print(f"results in {out_dir}")


if __name__ == "__main__":
    app.run(common.exit_on_bad_input(main))
