"""The model-based agent's changes, each switched off, over seeds: one table.

    python experiments/mb_ablation.py --graph=bert --seeds=3          # every variant
    python experiments/mb_ablation.py --variants=full,thesis --seeds=3

Each variant is `train_mb.py` with flags (`VARIANTS`): the agent as it is
("full"), each change of the model-based issue switched off on its own, and
the thesis' configuration (random data only, imagined episodes from the
initial graph only, no reward ensemble, a fixed vocabulary, the world
model's masks in the real environment, the 50-step limit). Runs go to
--results_dir/<graph>/mb_ablation/<variant>/seed_<k>/ and are resumed or
reused when rerun (train_mb.py resumes; a finished run is read back). They
run as Ray tasks (`xflowrl.ray_jobs.run_jobs`): on a local instance of --jobs
CPUs (two at a time by default), or on the cluster at --ray_address; a run
that fails is run again once (--retries), and one whose worker or node is
lost resumes. The table shows every finished seed of each
variant in the folder, so `--variants=full --seeds=3` then
`--variants=... --seeds=1` gives three seeds of the agent and one of each
ablation.

Prints one JSON object (and writes it with a markdown table beside the
runs, `ablation.json` / `ablation.md`; a `ModelBasedAblation` record,
xflowrl/results/ablation.py): per variant, the median and range
over seeds of the controller's real cost change (its greedy episode and the
best of its evaluation episodes), one-step greedy's, TASO's and the random
agent's change under the same cost model, the measured onnxruntime change
on this CPU of the graph each run hands over and of greedy's (timed
together with the original, `--measure_rounds`), the invalid actions of the
evaluation episodes, the real environment steps and the wall time. A variant is "within 1 point of
greedy" when its median best change is no more than 1 point of the initial
cost above greedy's.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Dict, List, Optional

from absl import app, flags
import numpy as np

from xflowrl.engine.cost import DEFAULT_BACKEND, GPU_PROFILE
from xflowrl.entry_points import write_text
from xflowrl.ray_jobs import Job, failed_jobs, run_jobs
from xflowrl.results.ablation import (
    AblationVariant,
    BaselineMs,
    ModelBasedAblation,
    Spread,
    summarize_variant,
)
from xflowrl.results.runs import ModelBasedRun
from xflowrl.rules.sets import DEFAULT_RULE_SET
from xflowrl.search.record import Baselines

FLAGS = flags.FLAGS
flags.DEFINE_string("graph", "bert", "Zoo graph.")
flags.DEFINE_string("cost_model", DEFAULT_BACKEND, "Cost backend (as train_mb.py).")
flags.DEFINE_string("profile", GPU_PROFILE, "Profile (as train_mb.py).")
flags.DEFINE_string("rules", DEFAULT_RULE_SET, "Rule set (as train_mb.py).")
flags.DEFINE_integer("seeds", 3, "Seeds 0..K-1 per variant.")
flags.DEFINE_list("variants", None, "Variants to run (default: all of VARIANTS).")
flags.DEFINE_integer("jobs", 2, "CPUs of the local Ray instance: runs at a time.")
flags.DEFINE_string("ray_address", "", "A Ray cluster to run on ('': a local instance of "
                    "--jobs CPUs).")
flags.DEFINE_integer("retries", 1, "Reruns of a run that exits with an error (after 30 s, "
                     "from a fresh folder).")
flags.DEFINE_string("results_dir", "results", "Root of the runs.")
flags.DEFINE_list("extra", [], "Flags passed to every train_mb.py run (e.g. --rounds=4).")
flags.DEFINE_integer("measure_rounds", 2, "Interleaved onnxruntime rounds that time the "
                     "original, greedy's and every run's handed-over graph on this CPU "
                     "(0: skip).")

_THESIS = ["--collection=random", "--real_starts=0", "--reward_ensemble=0",
           "--disagreement_penalty=0", "--vocabulary_headroom=0", "--eval_masks=model",
           "--noequal_budget"]

# name -> (what it is, the flags of train_mb.py that make it)
VARIANTS: Dict[str, tuple] = {
    "full": ("the model-based agent (every change on)", []),
    "random_collection": ("every round collected by a random agent (thesis)",
                          ["--collection=random"]),
    "initial_starts": ("imagined episodes only from the initial graph (thesis)",
                       ["--real_starts=0"]),
    "no_penalty": ("no disagreement penalty (ensemble trained, unused)",
                   ["--disagreement_penalty=0"]),
    "fixed_vocabulary": ("vocabulary fixed after the first round",
                         ["--vocabulary_headroom=0"]),
    "model_masks": ("the world model's masks in the real environment (thesis)",
                    ["--eval_masks=model"]),
    "thesis": ("the thesis' configuration: all of the above off, 50-step limit", _THESIS),
}


def run_folder(variant: str, seed: int) -> str:
    return os.path.join(FLAGS.results_dir, FLAGS.graph, "mb_ablation", variant, f"seed_{seed}")


def result_file(variant: str, seed: int) -> str:
    return os.path.join(run_folder(variant, seed), FLAGS.graph, "train_mb", "result.json")


def command(variant: str, seed: int) -> List[str]:
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_mb.py")
    return ([sys.executable, script, f"--graph={FLAGS.graph}", f"--rules={FLAGS.rules}",
             f"--cost_model={FLAGS.cost_model}", f"--profile={FLAGS.profile}",
             f"--seed={seed}", f"--results_dir={run_folder(variant, seed)}",
             "--measure_rounds=0", "--noplan_with_model"]  # the table is the controller's
            + VARIANTS[variant][1] + list(FLAGS.extra))


def job(variant: str, seed: int) -> Job:
    """One run as a job; a result file placed in its folder without a job
    marker (a run copied in from elsewhere) counts as finished."""
    argv = command(variant, seed)
    return Job(f"{variant} seed {seed}", tuple(argv), run_folder(variant, seed),
               result_file=os.path.join(FLAGS.graph, "train_mb", "result.json"),
               key=tuple(argv[2:]), trust_result=True)


def finished_seeds(variant: str) -> List[int]:
    """Every seed of `variant` with a finished run in the folder (the table
    shows them all, also those of an earlier invocation with more --seeds)."""
    root = os.path.dirname(run_folder(variant, 0))
    if not os.path.isdir(root):
        return []
    seeds = [int(d[len("seed_"):]) for d in os.listdir(root)
             if d.startswith("seed_") and d[len("seed_"):].isdigit()]
    return sorted(s for s in seeds if os.path.exists(result_file(variant, s)))


def finished(variant: str, seed: int) -> Optional[ModelBasedRun]:
    """The run's record (`ModelBasedRun`), None where it has no result file."""
    return ModelBasedRun.load(result_file(variant, seed))


def measure(summary: Dict[str, AblationVariant], runs: Dict[str, List[ModelBasedRun]]) -> None:
    """Adds to each variant the measured ort/cpu change (%) of its runs'
    handed-over graphs against the original, and greedy's, all timed in
    the same interleaved rounds (equal graphs once; random weights)."""
    # pylint: disable=import-outside-toplevel
    from xflowrl import zoo
    from xflowrl.agents.ppo.training import replay
    from xflowrl.entry_points import RunSettings
    from xflowrl.env import NO_STEP_LIMIT
    from xflowrl.executor.weights import random_inputs, random_weights
    from xflowrl.measure.compare import time_models
    from xflowrl.onnx_io import to_onnx
    env = RunSettings(graph=FLAGS.graph, rules=FLAGS.rules, cost_model=FLAGS.cost_model,
                      profile=FLAGS.profile, max_steps=NO_STEP_LIMIT).make_env()
    original = env.initial_graph
    first = next(iter(runs.values()))[0]
    graphs = {"original": original,
              "greedy": replay(env, [(str(n), int(loc)) for n, loc in
                                     Baselines.from_json(first.baselines).greedy.applied])}
    for v, results in runs.items():
        for r in results:
            graphs[f"{v}/{r.seed}"] = replay(env, [(str(n), int(loc)) for n, loc
                                                   in r.controller_cheapest_applied])
    key = {name: f"{g.hash():x}" for name, g in graphs.items()}
    weights = random_weights(original, 0, gain=zoo.weight_gain(FLAGS.graph))
    models = {key[name]: to_onnx(g, weights, check=False) for name, g in graphs.items()}
    times = time_models(models, random_inputs(original, 0), ["ort"], FLAGS.measure_rounds,
                        2, 10, np.random.default_rng(0))
    ms = {name: times[key[name]]["ort/cpu"]["median_ms"] for name in graphs}

    def pct(name: str) -> float:
        return 100.0 * (ms[name] / ms["original"] - 1.0)

    for v, results in runs.items():
        summary[v].measured_ort_cpu_change_pct = Spread.of(
            [pct(f"{v}/{r.seed}") for r in results])
        summary[v].measured_greedy_ort_cpu_change_pct = pct("greedy")


def main(argv):
    del argv
    variants = FLAGS.variants or list(VARIANTS)
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise app.UsageError(f"unknown variants {unknown}; choose from {sorted(VARIANTS)}")
    jobs = [job(v, s) for s in range(FLAGS.seeds) for v in variants]
    results = run_jobs(jobs, address=FLAGS.ray_address, num_cpus=FLAGS.jobs,
                       retries=FLAGS.retries, raise_on_failure=False)
    summary: Dict[str, AblationVariant] = {}
    runs: Dict[str, List[ModelBasedRun]] = {}
    for v in variants:
        got = [r for r in (finished(v, s) for s in finished_seeds(v)) if r is not None]
        if got:
            summary[v] = summarize_variant(
                VARIANTS[v][0], VARIANTS[v][1], got,
                [BaselineMs.of(Baselines.from_json(r.baselines)) for r in got])
            runs[v] = got
    if FLAGS.measure_rounds > 0 and runs:
        measure(summary, runs)
    out = ModelBasedAblation(graph=FLAGS.graph, cost_model=f"{FLAGS.cost_model}/{FLAGS.profile}",
                             rules=FLAGS.rules, extra=FLAGS.extra, variants=summary)
    folder = os.path.join(FLAGS.results_dir, FLAGS.graph, "mb_ablation")
    out.save(os.path.join(folder, "ablation.json"))
    write_text(os.path.join(folder, "ablation.md"), out.markdown())
    print(json.dumps(out.to_json(), indent=2))
    failed = failed_jobs(results)
    if failed:
        print(f"failed: {', '.join(failed)} (see their .log beside the runs)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
