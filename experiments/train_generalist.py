"""Trains one model-free policy over a distribution of graphs and evaluates
it zero-shot on graphs it never saw.

    python experiments/train_generalist.py                       # GPU-like profile, seed 0
    python experiments/train_generalist.py --quick               # a first look in minutes
    python experiments/train_generalist.py --finetune=NAME,...   # + fine-tuning vs scratch
    python experiments/train_generalist.py --ship                # + writes the shipped policy
    python experiments/train_generalist.py --report              # the seeds' results, one table
    python experiments/train_generalist.py --agent=mb            # the model-based agent
    python experiments/train_generalist.py --measure             # + measured, in onnxruntime
    python experiments/train_generalist.py --agent=mb --trace=inception/a1c1w16   # one episode, step by step

Every episode draws a graph from the corpus' training split
(`xflowrl.corpus`, docs/zoo.md "The training distribution"; a family
uniformly, then one of its members) and plays it in
that graph's real environment (`xflowrl.env.sampled.SampledGraphEnv`: the
same rules and cost model for all; step limit at least 1.5 x one-step
greedy's steps on the drawn graph). The policy is the hierarchical PPO
agent (X-RLflow's settings); nothing in it is indexed by node identity or
candidate position, so it acts on any graph. With --agent=mb, the
model-based agent instead: its latent encoder and world model learn from
real episodes on the training graphs, its controller acts on their latent
state and learns from 200 of its own real episodes a round besides a token
64 imagined episodes in all (`ModelBasedAgent` over the
`SampledGraphEnv`), and it acts zero-shot on the real environment's masks.
Over many graphs the controller transfers the better the less it learns in
the dream (docs/agents.md, "The model-based agent over the distribution");
`--real_episodes_per_round=0 --dream_episodes=3200` is the thesis'
controller, trained in the dream only.

Evaluation, zero-shot (no training on them): every graph of the held-out
split (whole families never seen, and larger sizes of seen ones), the
policy's greedy episode beside one-step greedy, TASO's search and a random
agent under the same rules and cost model (`xflowrl.transfer.evaluate`).
With --finetune: per named held-out graph, a per-graph agent trained from
scratch for --scratch_episodes against the generalist fine-tuned for
each of --finetune_fractions of that.

Writes to --results_dir/generalist/<cost model>/seed<seed>/ (<cost
model>-<rules> with another rule set than the default): checkpoints and
progress.json of the training (rerun with the same flags to resume),
policy/ (the trained policy: `xflowrl.transfer.save_policy`, loadable by
`xflowrl optimize --method=policy:DIR`; its policy.json names the commit
and command that trained it, which a resumed finished run keeps),
result.json and result.md; the
model-based agent's under <profile>/mb/seed<seed>/ (its checkpoints, which
resume, in place of policy/). --ship
also copies the policy to the package's shipped folder
(`xflowrl/transfer/shipped/generalist/`), recording the command, the
commit and the training graphs.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import shutil
import sys
import time

from absl import app, flags, logging
import common

from xflowrl import corpus
from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.agents.ppo.training import TrainConfig, train
from xflowrl.engine import XferSet
from xflowrl.engine.cost import GPU_PROFILE
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.env.replay import trace
from xflowrl.env.sampled import SampledGraphEnv
from xflowrl.optimize.handover import train_model_based
from xflowrl.rules.sets import DEFAULT_RULE_SET
from xflowrl.runs import cost_model_from_spec, save_result, write_json
from xflowrl.search import greedy_search, with_equal_step_limit
from xflowrl.transfer import PolicyInfo, evaluate, load_policy, measured, report, save_policy
from xflowrl.transfer.distribution import training_env
from xflowrl.transfer.policy import (
    SHIPPED,
    current_commit,
    has_arrays,
    load_numpy_policy,
    read_info,
)
from xflowrl.world_model import DreamConfig, ModelBasedAgent
from xflowrl.world_model.config import controller_ppo_config

FLAGS = flags.FLAGS
common.define_cost_model_flags(default_profile=GPU_PROFILE,
                               cost_model_help="Cost backend of training and evaluation.")
common.define_rules_flag()
flags.DEFINE_enum("agent", "mf", ["mf", "mb"], "The model-free PPO agent or the model-based "
                  "agent (world model + dream-trained controller).")
flags.DEFINE_integer("episodes", 1500, "Model-free: training episodes over the training "
                     "split.")
common.define_world_model_flags()
flags.DEFINE_integer("dream_episodes", 64, "Model-based: imagined episodes the controller "
                     "trains on (3200: the main job's; over many graphs the controller "
                     "transfers better with a token share, docs/agents.md).")
# Over many graphs the controller learns mostly from its own real episodes
# (measured: docs/agents.md, "The model-based agent over the distribution").
FLAGS.set_default("real_episodes_per_round", 200)
flags.DEFINE_list("trace", [], "Only play the trained agent's greedy episode on these corpus "
                  "graphs and print it step by step (xfer, location, the cost after it); "
                  "trains the agent first if --results_dir has no finished run.")
common.define_disagreement_flags()
flags.DEFINE_bool("ranked_locations", False, "Model-based: locations named by their rank "
                  "among the xfer's candidates, cheapest first, not by the engine's order.")
flags.DEFINE_bool("xfer_summaries", False, "Model-based: the world model predicts each xfer's "
                  "best and mean cost change and the controller reads them (the real "
                  "environment's in the real one); off: it sees [z, h] and the masks only.")
flags.DEFINE_float("mask_threshold", 0.3, "Model-based: predicted probability above which the "
                   "dream offers an xfer. Lower than one graph's 0.8: over many graphs the "
                   "mask decoder is less sure, and at 0.8 the dream offers no xfer at most "
                   "starts (benchmarks/dream_masks_bench.py).")
flags.DEFINE_integer("max_steps", 30, "Step limit per episode (raised to 1.5 x greedy's "
                     "steps on a graph where that is more).")
flags.DEFINE_integer("max_locations", DEFAULT_MAX_LOCATIONS, "L, locations per xfer.")
flags.DEFINE_integer("seed", 0, "Seed of the policy, its sampling and the graph draws.")
common.define_taso_flags(alpha=False, budget_help="TASO's search budget in the evaluation.")
flags.DEFINE_integer("random_episodes", 5, "Random-agent episodes per evaluated graph.")
flags.DEFINE_integer("eval_limit", 0, "Evaluate only the first N held-out graphs (0: all).")
flags.DEFINE_list("finetune", [], "Held-out graphs on which to compare fine-tuning the "
                  "generalist with a per-graph agent trained from scratch.")
flags.DEFINE_integer("scratch_episodes", 300, "Episodes of the per-graph agent from scratch.")
flags.DEFINE_list("finetune_fractions", ["0.1", "0.03"], "Fine-tuning episodes as "
                  "fractions of --scratch_episodes (one fine-tuning run each).")
flags.DEFINE_float("finetune_lr_scale", 1.0, "Fine-tuning's learning rates (policy and "
                   "value) as a multiple of those the generalist trained with; runs of "
                   "another scale than 1 go to their own folders beside the others.")
flags.DEFINE_bool("relative_location_cost", False, "Model-free: the location head also reads "
                  "where each candidate's cost change lies between its xfer's cheapest and "
                  "costliest (PPOConfig.relative_location_cost), for the generalist and the "
                  "per-graph agents of --finetune alike.")
flags.DEFINE_bool("ship", False, "Copy the trained policy to the package's shipped folder.")
flags.DEFINE_string("results_dir", "results", "Where results are written.")
flags.DEFINE_bool("report", False, "Only print (and write as report.md beside the seeds) the "
                  "table of every seed's results under --results_dir/generalist/<cost model>/.")
flags.DEFINE_bool("measure", False, "Only time end to end (onnxruntime, interleaved) the "
                  "held-out graphs every seed's agents handed over, beside the initial and "
                  "greedy's graphs; writes measured.json beside the seeds, which --report adds "
                  "as a table of estimated and measured changes.")
flags.DEFINE_integer("measure_rounds", 5, "Interleaved timing rounds of --measure.")
# --quick's values for the flags the user does not give.
QUICK = {"episodes": 300, "eval_limit": 8, "taso_budget": 100, "rounds": 2,
         "episodes_per_round": 30, "train_steps_per_round": 100, "encoder_steps": 150}
common.define_quick_flag("300 episodes (model-based: 2 rounds of 30), 8 held-out graphs, "
                         "TASO budget 100: a first look in a few minutes.")


def _cost_spec() -> str:
    """The cost model as one string, backend/profile (--cost_model, --profile)."""
    return f"{FLAGS.cost_model}/{FLAGS.profile}"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _finetune_rows(generalist_dir, names, xfers, cost_model, config, seed, out_dir):
    """Per graph: scratch for --scratch_episodes vs the generalist fine-tuned
    for each of --finetune_fractions of that."""
    rows = []
    scratch_episodes = FLAGS.scratch_episodes
    tune = sorted({max(1, int(round(float(f) * scratch_episodes)))
                   for f in FLAGS.finetune_fractions}, reverse=True)
    ppo = _ppo_config()
    for name in names:
        env = with_equal_step_limit(GraphEnv(corpus.get(name), xfers, cost_model, config))
        out = {"graph": name, "initial_ms": env.initial_cost, "finetuned": []}
        scale = FLAGS.finetune_lr_scale
        suffix = "" if scale == 1.0 else f"_lr{scale:g}"
        runs = [("scratch", scratch_episodes)] + [(f"finetuned_{n}{suffix}", n) for n in tune]
        for label, episodes in runs:
            if label == "scratch":
                agent = PPOAgent(len(xfers), ppo, seed=seed)
            else:
                # The generalist trained with `ppo` too (main).
                agent = load_policy(generalist_dir, env, seed=seed, config_changes=dict(
                    policy_learning_rate=scale * ppo.policy_learning_rate,
                    value_learning_rate=scale * ppo.value_learning_rate))
                agent.learner.build()
                zero_shot = agent.run_episode(env, greedy=True, learn=False)
            # Under the generalist's own folder: a resumed fine-tuning run
            # must have started from this generalist.
            with_dir = os.path.join(out_dir, "finetune", name.replace("/", "_"), label)
            result = train(env, agent, TrainConfig(episodes=episodes,
                                                   parallel_envs=ppo.episodes_per_update),
                           with_dir, progress=lambda line, n=name, lab=label: _say(
                               f"{n} {lab}: {line}"))
            final = agent.run_episode(env, greedy=True, learn=False)
            # Counted two ways, the same for both agents: by final graphs
            # (the cheapest final graph of a training episode or of the
            # greedy evaluation), and by the cheapest graph any of those
            # episodes passed through (what `xflowrl optimize` hands over).
            lowest = min(final.lowest_cost, result.best_graph_cost)
            run = {"episodes": episodes, "interactions": result.interactions,
                   **({} if label == "scratch" else {"lr_scale": scale}),
                   "greedy_cost_ms": final.final_cost,
                   "best_training_cost_ms": result.best_cost,
                   "change": 100.0 * (min(final.final_cost, result.best_cost)
                                      / env.initial_cost - 1.0),
                   "cheapest_graph_ms": lowest,
                   "cheapest_graph_change": 100.0 * (lowest / env.initial_cost - 1.0)}
            # The run's updates, then its final greedy evaluation.
            history = result.history + [{"interactions": result.interactions + final.steps,
                                         "greedy_cost": final.final_cost,
                                         "greedy_lowest_cost": final.lowest_cost}]
            if label == "scratch":
                out["scratch"] = run
                target = min(final.final_cost, result.best_cost)
                target_lowest = lowest
                # When the per-graph agent itself first reached its result:
                # how much of its run the target's tenth would have to match.
                run["steps_to_own_result"] = evaluate.steps_to_reach(
                    target, math.inf, 0, history)
                run["steps_to_own_cheapest_graph"] = evaluate.steps_to_reach(
                    target_lowest, math.inf, 0, history, evaluate.CHEAPEST_GRAPH_KEYS)
                # How likely the generalist's sampling is to follow the route
                # to that result, which fine-tuning from it has to find.
                route = _route_under(generalist_dir, env, final.applied
                                     if final.final_cost <= result.best_cost
                                     else result.best_sequence)
                if route is not None:
                    run["generalist_route"] = route
            else:
                # When it first reached the per-graph agent's result.
                run["steps_to_reach"] = evaluate.steps_to_reach(
                    target, zero_shot.final_cost, zero_shot.steps, history)
                run["steps_to_reach_cheapest_graph"] = evaluate.steps_to_reach(
                    target_lowest, zero_shot.lowest_cost, zero_shot.steps, history,
                    evaluate.CHEAPEST_GRAPH_KEYS)
                out["finetuned"].append(run)
        rows.append(out)
    return rows


def _route_under(generalist_dir, env, applied):
    """`evaluate.route_against` under the generalist of `generalist_dir`;
    None for one saved without its NumPy arrays."""
    if not has_arrays(generalist_dir):
        return None
    return evaluate.route_against(load_numpy_policy(generalist_dir, env), env, applied)


def _trace(agent, names, xfers, cost_model, config) -> None:
    """The agent's greedy episode on each graph (the zero-shot evaluation's
    episode), step by step; then the rewrites one-step greedy applies there,
    counted, and (model-based) those outside the agent's vocabulary, which
    it can never choose."""
    vocab = getattr(agent, "vocab", None)
    for name in names:
        env = with_equal_step_limit(GraphEnv(corpus.get(name), xfers, cost_model, config))
        episode = agent.run_episode(env, greedy=True, learn=False)
        initial = env.initial_cost
        print(f"{name}: initial {initial:.4f} ms, step limit {env.config.max_steps}")
        for k, (xfer, location, cost) in enumerate(trace(env, episode.applied), 1):
            print(f"  {k:3d}  {xfer:<28} location {location:<4} {cost:.4f} ms "
                  f"({100.0 * (cost / initial - 1.0):+.2f}%)")
        greedy = greedy_search(env.with_config(max_steps=NO_STEP_LIMIT))
        used = collections.Counter(xfer for xfer, _ in greedy.applied)
        print(f"  greedy: {100.0 * (greedy.final_cost / initial - 1.0):+.2f}% with "
              + ", ".join(f"{xfer} x{n}" for xfer, n in used.most_common()))
        if vocab is not None:
            index = {n: i for i, n in enumerate(xfers.names)}
            outside = [x for x in used if vocab.to_compact(index[x]) < 0]
            print(f"  of those outside the agent's vocabulary: {', '.join(outside) or 'none'}")


def _train_model_based(env: SampledGraphEnv, out_dir: str, seed: int):
    """The model-based agent over the training graphs (resumes from
    `out_dir`), trained and selected as every entry point does
    (`xflowrl.optimize.handover.train_model_based`): world-model rounds
    with the controller in the dream after each, then the round whose
    greedy real episodes on the training graphs reached the cheapest graphs
    on average. Returns the agent and what its training took."""
    wm = common.world_model_config(common.quick_values(QUICK),
                                   xfer_summaries=FLAGS.xfer_summaries,
                                   ranked_locations=FLAGS.ranked_locations)
    dream = DreamConfig(episodes=FLAGS.dream_episodes, mask_threshold=FLAGS.mask_threshold,
                        disagreement_penalty=FLAGS.disagreement_penalty,
                        disagreement_limit=FLAGS.disagreement_limit)
    start = time.time()
    agent = ModelBasedAgent(env, out_dir, wm, dream, controller_ppo_config(dream.batch_size),
                            seed=seed, progress=_say)
    state = train_model_based(agent).world_model
    steps = (state.real_steps + state.held_out_steps + state.evaluation_steps
             + agent.controller_real_steps)
    return agent, {"episodes": int(agent.controller.episodes.numpy()),
                   "interactions": int(steps), "seconds": time.time() - start,
                   "history": state.to_state()["rounds"]}


def _ppo_config() -> PPOConfig:
    """The model-free agents' PPO settings (X-RLflow's), the generalist's and
    the per-graph agents' of --finetune alike."""
    return dataclasses.replace(PPOConfig.xrlflow(),
                               relative_location_cost=FLAGS.relative_location_cost)


def _report_folder() -> str:
    """--results_dir/generalist/<cost model>[-<rules>] (the rule set named
    where it is not the default)."""
    setting = _cost_spec().replace("/", "_")
    if FLAGS.rules != DEFAULT_RULE_SET:
        setting += f"-{FLAGS.rules}"
    return os.path.join(FLAGS.results_dir, "generalist", setting)


def main(argv):
    del argv
    folder = _report_folder()
    runs = {"policy": report.seed_results(folder),
            "model-based": report.seed_results(os.path.join(folder, "mb"))}
    measured_path = os.path.join(folder, "measured.json")
    if FLAGS.measure:
        rows = measured.measure_held_out(runs, {s.name: s.build for s in corpus.specs("all")},
                                         XferSet.from_name(FLAGS.rules),
                                         cost_model_from_spec(_cost_spec()),
                                         rounds=FLAGS.measure_rounds, seed=FLAGS.seed,
                                         progress=_say)
        write_json(measured_path, rows)
        print(measured.markdown(rows))
        return
    if FLAGS.report:
        if runs["policy"]:
            text = report.markdown(runs["policy"], model_based=runs["model-based"])
        else:  # the model-based agent's seeds alone
            text = "Model-based agent.\n\n" + report.markdown(runs["model-based"])
        if os.path.exists(measured_path):
            with open(measured_path) as f:
                text += ("\n\n## Estimated and measured\n\n"
                         + measured.markdown(json.load(f)))
        with open(os.path.join(folder, "report.md"), "w") as f:
            f.write(text + "\n")
        print(text)
        return
    model_based = FLAGS.agent == "mb"
    if model_based and (FLAGS.ship or FLAGS.finetune):
        raise app.UsageError("--ship and --finetune are for the model-free agent (--agent=mf)")
    values = common.quick_values(QUICK)
    seed, episodes = FLAGS.seed, values.episodes
    cost_model = cost_model_from_spec(_cost_spec())
    xfers = XferSet.from_name(FLAGS.rules)
    config = EnvConfig(max_steps=FLAGS.max_steps, max_locations=FLAGS.max_locations)
    out_dir = os.path.join(_report_folder(), *(["mb"] if model_based else []), f"seed{seed}")
    train_specs = corpus.specs("train")
    held_out = corpus.specs("held_out")
    if values.eval_limit:
        held_out = held_out[:values.eval_limit]
    logging.info("%d training graphs, %d held-out graphs; results in %s", len(train_specs),
                 len(held_out), out_dir)
    env = training_env(xfers, cost_model, config, seed)
    if model_based:
        agent, trained = _train_model_based(env, out_dir, seed)
        policy_dir = out_dir
    else:
        ppo = _ppo_config()
        agent = PPOAgent(len(xfers), ppo, seed=seed, max_locations=FLAGS.max_locations)
        result = train(env, agent, TrainConfig(episodes=episodes,
                                               parallel_envs=ppo.episodes_per_update), out_dir)
        trained = {"episodes": result.episodes, "interactions": result.interactions,
                   "seconds": result.seconds, "history": result.history}
        policy_dir = os.path.join(out_dir, "policy")
        commit = current_commit()
        command = "python experiments/train_generalist.py " + " ".join(sys.argv[1:])
        previous = read_info(policy_dir)
        if previous is not None and (previous.seed, previous.episodes) == (seed, result.episodes):
            # A finished run resumed (to evaluate or fine-tune again): the
            # policy is the one trained then, by that commit and command.
            commit, command = previous.commit, previous.command
        info = PolicyInfo(ppo=dataclasses.asdict(ppo), rules=FLAGS.rules,
                          num_xfers=len(xfers), max_locations=FLAGS.max_locations,
                          cost_model=cost_model.name, graphs=[s.name for s in train_specs],
                          episodes=result.episodes, seed=seed, commit=commit,
                          command=command)
        save_policy(agent, policy_dir, info)

    if FLAGS.trace:
        _trace(agent, FLAGS.trace, xfers, cost_model, config)
        return
    start = time.time()
    rows = evaluate.zero_shot(agent, {s.name: s.build for s in held_out}, xfers, cost_model,
                              config, taso_budget=values.taso_budget,
                              random_episodes=FLAGS.random_episodes, seed=seed, progress=_say)
    eval_seconds = time.time() - start
    finetune = (_finetune_rows(policy_dir, FLAGS.finetune, xfers, cost_model, config, seed,
                               out_dir)
                if FLAGS.finetune else [])
    summary = {
        "agent": FLAGS.agent, "cost_model": cost_model.name, "rules": FLAGS.rules,
        "seed": seed, "episodes": trained["episodes"], "interactions": trained["interactions"],
        "train_seconds": trained["seconds"], "eval_seconds": eval_seconds,
        "training_graphs": [s.name for s in train_specs],
        "held_out": [dataclasses.asdict(r) for r in rows],
        "zero_shot": evaluate.summary(rows), "finetune": finetune,
        "policy": policy_dir, "commit": current_commit(), "history": trained["history"],
    }
    what = "imagined episodes of the controller" if model_based else "episodes"
    text = (f"# One {'model-based agent' if model_based else 'policy'} for many graphs "
            f"({cost_model.name}, seed {seed})\n\n"
            f"Trained {trained['episodes']} {what} ({trained['interactions']} real steps, "
            f"{trained['seconds']:.0f} s) over {len(train_specs)} training graphs; zero-shot "
            f"on {len(rows)} held-out graphs:\n\n{evaluate.markdown(rows)}\n\n"
            f"Summary: {summary['zero_shot']}\n")
    if finetune:
        text += ("\n## Fine-tuning vs from scratch\n\n| graph | scratch | fine-tuned |\n"
                 "|---|---|---|\n")
        for row in finetune:
            tuned = ", ".join(f"{t['change']:+.2f}% ({t['episodes']} episodes, "
                              f"{t['interactions']} steps)" for t in row["finetuned"])
            text += (f"| {row['graph']} | {row['scratch']['change']:+.2f}% "
                     f"({row['scratch']['interactions']} steps) | {tuned} |\n")
    save_result(out_dir, summary, markdown=text)
    print(text)
    if FLAGS.ship:
        if os.path.isdir(SHIPPED):
            shutil.rmtree(SHIPPED)
        shutil.copytree(policy_dir, SHIPPED)
        _say(f"shipped the policy to {SHIPPED}")


if __name__ == "__main__":
    app.run(main)
