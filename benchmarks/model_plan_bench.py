"""The world-model planner beside the engine planner; prints JSON.

    python benchmarks/model_plan_bench.py [--settings=squeezenet1_1/generated/analytic-v100]
        [--seeds=0,1,2] [--corpus_families=all] [--corpus_real_steps=300]
        [--train_steps=1500] [--simulations=32] [--engine_prior=xfer] [--single_actions]
        [--rows=results/model_plan_bench/rows.jsonl]

Per seed and rule set, once: the engine planner (`xflowrl.planning.plan`,
multi-location actions on, that seed) runs on every training member of the
corpus (`xflowrl.corpus`, split "train"; `--corpus_families` narrows it),
at most `--corpus_real_steps` real steps each, and its trees are the
training data (`xflowrl.planning.model_learning.harvest`) of a latent
model (`xflowrl.planning.model`; `--single_actions`: with the
cheapest-location actions) trained with that seed. The target graphs
(the settings, from `xflowrl.search.settings`) are never among them: the
model plans on them zero-shot. Then per setting:

- the model planner (`xflowrl.planning.model_search.plan_with_model`,
  greedy's floor on), its route replayed to check the graph it hands over;
- the engine planner in the same action space (multi-location actions on,
  identical ops not merged), and the real steps at which it first reaches
  its final cost: the smallest budget `max_real_steps` with which it ends
  there (a bisection; a run's route translation, one real step per
  rewrite of a route with multi-location actions, is inside its count).

`--engine_prior` is the engine planner's prior in both of its roles (the
corpus data and the comparison); `cost` is the prior of the rows measured
before `xfer` became `PlanConfig`'s default.

Real steps on the target graph are counted apart from those on the corpus
graphs (`corpus_real_steps_total`). A row per (setting, seed) is appended
to `--rows` as it finishes; rows of another configuration are kept apart.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
import time
from typing import Any, Dict, List

from absl import app, flags
import tensorflow as tf

from model_plan_table import reaches_engine, within_a_tenth  # benchmarks/, beside this file
from xflowrl.corpus import registry
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.planning import PlanConfig, Planner, plan
from xflowrl.planning.model import LatentModel, ModelConfig
from xflowrl.planning.model_learning import TrainConfig, Transitions, harvest, train
from xflowrl.planning.model_search import ModelPlanConfig, plan_with_model, replay_steps
from xflowrl.search.settings import LookaheadSetting, get_setting

FLAGS = flags.FLAGS
flags.DEFINE_string("settings", "squeezenet1_1/generated/analytic-v100",
                    "comma-separated setting names of the shipped list")
flags.DEFINE_string("seeds", "0,1,2", "comma-separated seeds")
flags.DEFINE_string("corpus_families", "all", "'all' or comma-separated corpus families")
flags.DEFINE_integer("corpus_real_steps", 300, "engine planner's real steps per corpus graph")
flags.DEFINE_integer("train_steps", TrainConfig.steps, "gradient steps")
flags.DEFINE_integer("unroll", TrainConfig.unroll, "K, model steps unrolled in training")
flags.DEFINE_integer("simulations", ModelPlanConfig.simulations, "per decision")
flags.DEFINE_integer("root_actions", ModelPlanConfig.root_actions, "Gumbel-top-k at the root")
flags.DEFINE_integer("max_depth", ModelPlanConfig.max_depth, "model steps per simulation")
flags.DEFINE_float("stop_below", ModelPlanConfig.stop_below, "points")
flags.DEFINE_integer("max_decisions", ModelPlanConfig.max_decisions, "real actions at most")
flags.DEFINE_bool("real_root_rewards", ModelPlanConfig.real_root_rewards,
                  "the root's rewards from the real step (else the model's)")
flags.DEFINE_integer("check_simulations", ModelPlanConfig.check_simulations,
                     "simulations valuing a checked action's real graph (0: value head)")
flags.DEFINE_bool("single_actions", ModelConfig.single_actions,
                  "the model's actions also each xfer at its cheapest location")
flags.DEFINE_integer("engine_real_steps", 1000, "the engine planner's budget")
flags.DEFINE_string("engine_prior", PlanConfig.prior,
                    "the engine planner's prior (make_prior's spec), on the corpus and the target")
flags.DEFINE_string("rows", "results/model_plan_bench/rows.jsonl", "the rows, appended (resume)")
flags.DEFINE_bool("verbose", False, "print the model planner's decisions to stderr")


def _cost_model(setting: LookaheadSetting) -> CostModel:
    backend, profile = setting.cost_model.split("/")
    return CostModel(backend, profile=profile)


def collect_corpus(setting: LookaheadSetting, seed: int) -> Dict[str, Any]:
    """The engine planner's trees on the corpus' training graphs, under the
    setting's rules and cost model."""
    xfers, cost_model = XferSet.from_name(setting.rules), _cost_model(setting)
    families = None if FLAGS.corpus_families == "all" else set(FLAGS.corpus_families.split(","))
    data, steps, graphs = Transitions(), 0, 0
    start = time.monotonic()
    for spec in registry.specs():
        if spec.split != "train" or (families is not None and spec.family not in families):
            continue
        env = GraphEnv(spec.build(), xfers, cost_model, EnvConfig(max_steps=NO_STEP_LIMIT))
        planner = Planner(env, PlanConfig(prior=FLAGS.engine_prior, everywhere=True,
                                          max_real_steps=FLAGS.corpus_real_steps,
                                          time_limit_s=600.0, seed=seed))
        steps += planner.run().real_steps
        harvest(planner, env, data, spec.name, single_actions=FLAGS.single_actions)
        graphs += 1
    return {"data": data, "real_steps": steps, "graphs": graphs,
            "seconds": time.monotonic() - start}


def engine_steps_to_best(env: GraphEnv, seed: int) -> Dict[str, Any]:
    """The engine planner at `--engine_real_steps`, and the smallest budget
    with which it ends at the same cost (module docstring)."""
    config = PlanConfig(prior=FLAGS.engine_prior, everywhere=True,
                        max_real_steps=FLAGS.engine_real_steps, time_limit_s=600.0, seed=seed)
    full = plan(env, config)
    low, high = 1, full.real_steps
    while low < high:
        middle = (low + high) // 2
        result = plan(env, dataclasses.replace(config, max_real_steps=middle))
        if result.cost <= full.cost * (1 + 1e-9):
            high = middle
        else:
            low = middle + 1
    return {"engine_change_pct": full.change_pct, "engine_real_steps": full.real_steps,
            "engine_real_steps_to_best": high, "engine_seconds": full.seconds,
            "engine_route_length": len(full.applied)}


def _config_key() -> Dict[str, Any]:
    return {name: getattr(FLAGS, name) for name in (
        "corpus_families", "corpus_real_steps", "train_steps", "unroll", "simulations",
        "root_actions", "max_depth", "stop_below", "max_decisions", "real_root_rewards",
        "check_simulations", "single_actions", "engine_real_steps", "engine_prior")}


# Fields added to the configuration since the first rows: how those rows ran.
_BEFORE_FIELDS = {"real_root_rewards": True, "check_simulations": 0, "engine_prior": "cost",
                  "single_actions": False}


def _read_rows(path: str) -> List[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in rows:
        row["config"] = {**_BEFORE_FIELDS, **row["config"]}
    return rows


def summarise(setting: LookaheadSetting, rows: List[dict]) -> Dict[str, Any]:
    """The setting's line of the printed JSON: medians and ranges over seeds."""
    def spread(key):
        values = [r[key] for r in rows]
        return {"median": round(statistics.median(values), 3),
                "range": [round(min(values), 3), round(max(values), 3)]}
    out: Dict[str, Any] = {"setting": setting.name, "seeds": [r["seed"] for r in rows],
                           **{m: round(setting.change_pct(m), 3) for m in setting.costs_ms}}
    for key in ("change_pct", "planner_change_pct", "real_steps", "real_steps_to_best",
                "planner_real_steps", "model_steps", "decisions", "seconds",
                "corpus_real_steps_total", "train_seconds", "engine_change_pct",
                "engine_real_steps", "engine_real_steps_to_best"):
        out[key] = spread(key)
    out["from_greedy"] = [r["from_greedy"] for r in rows]
    out["replayed"] = all(r["replayed"] for r in rows)
    out["reaches_engine"] = [reaches_engine(r) for r in rows]
    out["tenth_of_engine_steps"] = [within_a_tenth(r) for r in rows]
    out["not_worse_than_greedy"] = all(r["change_pct"] <= setting.change_pct("greedy") + 1e-6
                                       for r in rows)
    return out


def main(argv):
    del argv
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    settings = [get_setting(name) for name in FLAGS.settings.split(",")]
    seeds = [int(s) for s in FLAGS.seeds.split(",")]
    key = _config_key()
    done = {(r["setting"], r["seed"]) for r in _read_rows(FLAGS.rows) if r["config"] == key}
    # The engine planner's figures do not depend on the model: reused from
    # any row of the same setting, seed, engine budget and prior.
    engine = {(r["setting"], r["seed"]): {k: v for k, v in r.items() if k.startswith("engine_")}
              for r in _read_rows(FLAGS.rows)
              if r["config"]["engine_real_steps"] == FLAGS.engine_real_steps
              and r["config"]["engine_prior"] == FLAGS.engine_prior}
    os.makedirs(os.path.dirname(FLAGS.rows) or ".", exist_ok=True)
    for seed in seeds:
        models: Dict[tuple, Any] = {}
        for setting in settings:
            if (setting.name, seed) in done:
                continue
            group = (setting.rules, setting.cost_model)
            if group not in models:
                corpus = collect_corpus(setting, seed)
                data = corpus["data"]
                model = LatentModel(ModelConfig(num_xfers=len(XferSet.from_name(setting.rules)),
                                                seed=seed, single_actions=FLAGS.single_actions))
                trained = train(model, data, TrainConfig(steps=FLAGS.train_steps,
                                                         unroll=FLAGS.unroll, seed=seed),
                                progress=(lambda line: print(line, file=sys.stderr))
                                if FLAGS.verbose else None)
                models[group] = (model, corpus, trained)
                print(f"seed {seed} {group}: {len(data)} states, {data.transitions()} "
                      f"transitions from {corpus['graphs']} corpus graphs "
                      f"({corpus['real_steps']} real steps, {corpus['seconds']:.0f} s); "
                      f"trained in {trained.seconds:.0f} s: {trained.losses}", file=sys.stderr)
            model, corpus, trained = models[group]
            env = setting.environment()
            progress = (lambda line: print(line, file=sys.stderr)) if FLAGS.verbose else None
            result = plan_with_model(env, model, ModelPlanConfig(
                simulations=FLAGS.simulations, root_actions=FLAGS.root_actions,
                max_depth=FLAGS.max_depth, stop_below=FLAGS.stop_below,
                max_decisions=FLAGS.max_decisions, real_root_rewards=FLAGS.real_root_rewards,
                check_simulations=FLAGS.check_simulations,
                seed=seed), progress=progress)
            replayed = replay_steps(env, result.route).hash() == result.graph.hash()
            row = {"setting": setting.name, "seed": seed, "config": key,
                   "change_pct": result.change_pct,
                   "planner_change_pct": 100.0 * (result.planner_cost / result.initial_cost - 1),
                   "real_steps": result.real_steps,
                   "real_steps_to_best": result.real_steps_to_best,
                   "planner_real_steps": result.planner_real_steps,
                   "model_steps": result.model_steps, "representations": result.representations,
                   "rule_enumerations": result.rule_enumerations, "checked": result.checked,
                   "decisions": result.decisions, "seconds": result.seconds,
                   "stopped": result.stopped, "from_greedy": result.from_greedy,
                   "replayed": replayed, "route_length": len(result.route),
                   "corpus_graphs": corpus["graphs"],
                   "corpus_real_steps_total": corpus["real_steps"],
                   "corpus_seconds": corpus["seconds"], "states": len(corpus["data"]),
                   "transitions": corpus["data"].transitions(),
                   "train_seconds": trained.seconds, "train_losses": trained.losses,
                   **(engine.get((setting.name, seed)) or engine_steps_to_best(env, seed))}
            with open(FLAGS.rows, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{setting.name} seed {seed}: model {row['change_pct']:+.2f}% "
                  f"({row['real_steps_to_best']} real steps to it, {row['real_steps']} in all, "
                  f"{row['model_steps']} model steps); engine {row['engine_change_pct']:+.2f}% "
                  f"({row['engine_real_steps_to_best']} to it)", file=sys.stderr)
    rows = [r for r in _read_rows(FLAGS.rows) if r["config"] == key]
    print(json.dumps([summarise(s, [r for r in rows if r["setting"] == s.name
                                    and r["seed"] in seeds]) for s in settings], indent=1))


if __name__ == "__main__":
    app.run(main)
