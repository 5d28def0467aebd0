"""Records and results folders written here by hand, of the entry points'
shape, for the report's tests: no training."""

import json
import os
import re
import shutil
import tempfile
from typing import Sequence

from xflowrl.results import (
    Evaluation,
    GraphRow,
    ModelBasedRun,
    ModelBasedSeconds,
    ModelFreeRun,
    RealSteps,
    RecordError,
    ReproductionReport,
    RoundController,
    WorldModelRound,
    WorldModelSummary,
    seed_root,
)

GRAPH = "bert"


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f)


def baselines(greedy_ms=90.0, initial_ms=100.0):
    """A baseline run's result (baselines.py's result.json, the fields read)."""
    return {"cost_model": "analytic/v100", "ops": 10, "initial_cost_ms": initial_ms,
            "greedy": {"cost_ms": greedy_ms, "steps": 4, "seconds": 0.1,
                       "applied": [["fuse", 1]]},
            "taso": {"cost_ms": greedy_ms, "budget": 20, "expansions": 20, "seconds": 1.0,
                     "initial_cost_ms": initial_ms, "applied": [],
                     "trace": [{"expansions": 1, "seconds": 0.1, "best_cost_ms": initial_ms},
                               {"expansions": 5, "seconds": 0.5, "best_cost_ms": greedy_ms}]},
            "eqsat": None}


def eqsat(cost_ms=85.0):
    """Equality saturation's record in a baseline run's result
    (`xflowrl.search.EqsatResult` as JSON; its graph left empty: not read)."""
    return {"cost_ms": cost_ms, "seconds": 17.0, "handed_over": "ilp",
            "greedy_extraction_ms": cost_ms + 1.0, "ilp_ms": cost_ms, "ilp_status": "optimal",
            "stop_reason": "time_limit", "iterations": 3, "e_nodes": 7288, "time_limit_s": 1.0,
            "graph": {}}


def agent_baselines(greedy_ms=90.0):
    """The baselines inside an agent's run (xflowrl.search.run_baselines)."""
    return {"greedy": {"cost_ms": greedy_ms, "seconds": 0.1, "steps": 4,
                       "applied": [["fuse", 1]]},
            "taso": None, "random": {"cost_ms": 101.0, "std_ms": 1.0}}


def mf_run(seed=0, cost=95.0, graph=GRAPH) -> ModelFreeRun:
    return ModelFreeRun(
        graph=graph, cost_model="analytic/v100", rules="default", max_locations=50,
        ppo={"learning_rate": 3e-4}, cost_features="full", seed=seed, equal_budget=True,
        max_steps=20, requested_max_steps=20, greedy_steps=4, episodes=10,
        interactions=100 + seed, train_seconds=10.0 + seed, optimize_seconds=0.1,
        initial_cost_ms=100.0, agent_cost_ms=cost, agent_applied=[["mf", seed]],
        best_training_cost_ms=cost, best_training_applied=[["mf", seed]],
        steps_to_final_cost=50, agent_vs_greedy="worse than greedy",
        random_mean_cost_ms=101.0, taso=None, baselines=agent_baselines(),
        history=[{"episode": 1, "mean_reward": 0.0}, {"episode": 2, "mean_reward": 1.0}])


def world_round(r=1, real_steps=100, controller=True) -> WorldModelRound:
    return WorldModelRound(
        round=r, real_steps=real_steps, collection="random", collected_return=0.5,
        vocabulary_known=3, vocabulary_full=False, train_total=2.0, train_latent_nll=1.5,
        held_out={"latent_nll": 1.0, "reward_mse": 0.5, "xfer_mask_accuracy": 0.9,
                  "location_mask_accuracy": 0.8},
        controller=RoundController(episodes=64, real_return=0.2, predicted_return=0.1,
                                   imagined_return=0.3, relative_cost=0.905, cost_ms=91.0,
                                   cheapest_cost_ms=90.5) if controller else None)


def episode(cost, applied) -> Evaluation:
    return Evaluation(final_cost=cost + 1.0, real_return=0.2, predicted_return=0.1,
                      invalid_actions=0, steps=3, applied=applied, cheapest_cost=cost,
                      cheapest_prefix_length=len(applied))


def mb_run(seed=0, cost=85.0, graph=GRAPH) -> ModelBasedRun:
    applied = [["mb", seed]]
    return ModelBasedRun(
        graph=graph, cost_model="analytic/v100", rules="default", max_locations=50,
        seed=seed, max_steps=20, requested_max_steps=20, greedy_steps=4, eval_masks="real",
        selected_round=None, initial_cost_ms=100.0, controller_cost_ms=cost + 1.0,
        controller_cheapest_cost_ms=cost, controller_cheapest_applied=applied,
        controller={"greedy": episode(cost, applied),
                    "greedy_model_masks": episode(cost + 2.0, applied)},
        sampled=[episode(cost + 3.0, applied)], controller_vs_greedy="better than greedy",
        baselines=agent_baselines(),
        real_steps=RealSteps(world_model_rollouts=100 * (seed + 1), held_out_rollouts=10,
                             round_evaluations=0, evaluation=5, lockstep_dream=0,
                             model_free=None),
        world_model=WorldModelSummary(vocabulary=8, vocabulary_known=3,
                                      rounds=[world_round()], encoder={"first": 1.0,
                                                                       "last": 0.5},
                                      config={"rounds": 1}),
        dream={"temperature": 1.0}, ppo={"learning_rate": 3e-4}, measured=None,
        seconds=ModelBasedSeconds(world_model=10.0, controller=10.0 + seed, total=20.0 + seed,
                                  optimize=0.2, optimize_first_call=0.5),
        dream_episodes=64)


def write_runs(root: str, seeds: Sequence[int], mf_costs, mb_costs, separate_costs=(),
               graph=GRAPH):
    """A setting's folder `root` with baselines and, per seed, the agents."""
    write_json(os.path.join(root, graph, "baselines", "result.json"), baselines())
    for i, seed in enumerate(seeds):
        d = seed_root(root, seeds, seed)
        mf_run(seed, mf_costs[i], graph).save(os.path.join(d, graph, "train_mf", "result.json"))
        mb_run(seed, mb_costs[i], graph).save(os.path.join(d, graph, "train_mb", "result.json"))
        if separate_costs:
            mb_run(seed, separate_costs[i], graph).save(
                os.path.join(d, "separate_reward", graph, "train_mb", "result.json"))


def graph_row(**fields) -> GraphRow:
    """A report row of one graph, `fields` replacing the defaults."""
    row = dict(
        graph=GRAPH, setting="gpu", cost_model="analytic/v100", ops=10, initial_ms=2.0,
        greedy_ms=1.0, greedy_steps=7, greedy_seconds=0.1, taso_ms=0.9, taso_budget=20,
        taso_expansions=20, taso_seconds=1.0, random_ms=2.5, mf_ms=1.5, mb_ms=1.02,
        mb_greedy_ms=1.1, mb_separate_ms=None, mf_vs_greedy="worse than greedy",
        mb_vs_greedy="worse than greedy", mf_interactions=400, mf_steps_to_final=120,
        mf_episodes=10, mb_real_steps=900, mf_train_seconds=10.0, mb_train_seconds=20.0,
        mf_optimize_seconds=0.1, mb_optimize_seconds=0.2, mf_applied=[], mb_applied=[],
        taso_applied=[], greedy_applied=[], measured={}, measured_iqr={}, same_graph={},
        seeds=[0], mf_range=[1.5, 1.5], mb_range=[1.02, 1.02], mb_separate_range=None,
        mf_seed_ms={"0": 1.5}, mb_seed_ms={"0": 1.02}, mf_seed=0, mb_seed=0,
        mb_vs_mf="better than model-free")
    row.update(fields)
    return GraphRow(**row)


def report(rows, **meta) -> ReproductionReport:
    """A report of `rows` (setting -> graph -> GraphRow) and `meta`."""
    return ReproductionReport(meta=meta, settings={}, rows=rows, table_4_1=None,
                              table_4_3={}, table_4_3_measured_ort_cpu_change={},
                              separate_reward_run={}, figures={}, summary=[])


def assert_legacy_refused(test, record, legacy, *parts):
    """`record.load` refuses the file `legacy` (one of before the record: no
    schema or version) under `parts`, naming the file, its version 0 and
    that the run is to be run again."""
    tmp = tempfile.mkdtemp(prefix="records_test_")
    test.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
    path = os.path.join(tmp, *parts)
    write_json(path, legacy)
    with test.assertRaisesRegex(RecordError, f"^{re.escape(path)}: no 'schema' or "
                                "'schema_version' \\(version 0, written before versioned "
                                f"records\\); this code reads {record.SCHEMA} version "
                                f"{record.VERSION} only: run again to write it anew$"):
        record.load(path)


def assert_refuses_other_schema_and_newer_version(test, record, value, other_schema):
    """`record.from_json` refuses `value` (a JSON object of the record, at
    its current version) under `other_schema`'s name, at version 0 and at
    the next version, each with the message that says so."""
    with test.assertRaisesRegex(RecordError, f"a '{other_schema}' record, not "
                                f"'{record.SCHEMA}'"):
        record.from_json(dict(value, schema=other_schema))
    for version in (0, record.VERSION + 1):
        with test.assertRaisesRegex(RecordError, f"^r.json: {record.SCHEMA} version {version}; "
                                    f"this code reads version {record.VERSION} only: run again "
                                    "to write it anew$"):
            record.from_json(dict(value, schema_version=version), where="r.json")
