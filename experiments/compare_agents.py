"""Model-based vs model-free vs the baselines on several graphs, with sample efficiency.

    python experiments/compare_agents.py --graphs=squeezenet1_1,resnet18,resnet50,inception_v3,bert

For each graph it runs `train_mf.py` and `train_mb.py` (each in its own
process, both under --cost_model and --profile, at their defaults unless
flags below say otherwise; a graph whose
result.json already exists is reused with --reuse, and an interrupted run
resumes from its checkpoints), then writes to --results_dir/compare_agents/:

- result.md / result.json: per graph the initial cost, the agents' step
  limit, the model-based controller's real cost (its greedy episode on the
  real masks, and the best of its evaluation episodes), the model-free agent's,
  one-step greedy (without a step limit; its number of steps is shown),
  TASO's search and a random agent (computed here for every graph, with the
  agents' step limit), all under the same cost model, and which agents only
  match greedy;
- the sample efficiency: real environment steps the model-based agent used
  (all of its rollouts) against those the model-free agent took until its
  greedy evaluation first reached its final cost, and their ratio, with a
  flag saying whether the final costs are equal (the ratio only means
  something at equal cost);
- compare_agents.png: the cost change of every agent on every graph.

The agents' step limit on a graph is --max_steps, raised to 1.5 x greedy's
steps on that graph where that is more (both scripts raise it themselves;
issue 24): an agent capped below what greedy needs would compare unequal
budgets. A
reused result whose agent ran with another limit (from before that rule, or
of another --max_steps) is refused, for the same reason.
"""

import os
import subprocess
import sys
import time
from typing import Type, Union

from absl import app, flags, logging
import common

from xflowrl.env import DEFAULT_MAX_STEPS
from xflowrl.results import ModelBasedRun, ModelFreeRun, RecordError
from xflowrl.runs import RunSettings, result_path, save_result
from xflowrl.search import EQUAL_BUDGET_FACTOR, run_baselines, versus_greedy, with_equal_step_limit

FLAGS = flags.FLAGS
flags.DEFINE_list("graphs", ["squeezenet1_1", "resnet18", "resnet50", "inception_v3", "bert"],
                  "Graphs to compare on.")
flags.DEFINE_integer("mf_episodes", 200, "Training episodes of the model-free agent.")
flags.DEFINE_integer("seed", 0, "Seed of both agents.")
common.define_cost_model_flags(
    cost_model_help="Cost backend of both agents and the baselines.",
    profile_help="Device profile of both agents and the baselines (the scripts' defaults "
    "differ: named here, every row has one setting).")
flags.DEFINE_integer("max_steps", DEFAULT_MAX_STEPS, "The agents' step limit, passed to both "
                     f"scripts; each raises it to {EQUAL_BUDGET_FACTOR} x one-step greedy's "
                     "steps on a graph where that is more.")
flags.DEFINE_bool("reuse", True, "Reuse a graph's existing result.json instead of rerunning.")
flags.DEFINE_string("results_dir", "results", "Where results are written.")

_HERE = os.path.dirname(os.path.abspath(__file__))


def _run(script: str, graph: str, max_steps: int, extra) -> Union[ModelFreeRun, ModelBasedRun]:
    """`script`'s result on `graph` (run unless reused; its record), whose
    agent must have had the step limit `max_steps`."""
    kind = "train_mf" if script == "train_mf.py" else "train_mb"
    record: Type[Union[ModelFreeRun, ModelBasedRun]] = (
        ModelFreeRun if kind == "train_mf" else ModelBasedRun)
    path = result_path(FLAGS.results_dir, graph, kind)
    if not (FLAGS.reuse and os.path.exists(path)):
        cmd = [sys.executable, os.path.join(_HERE, script), f"--graph={graph}",
               f"--seed={FLAGS.seed}", f"--results_dir={FLAGS.results_dir}",
               f"--cost_model={FLAGS.cost_model}", f"--profile={FLAGS.profile}",
               f"--max_steps={FLAGS.max_steps}"] + extra
        logging.info("running %s", " ".join(cmd))
        start = time.time()
        subprocess.run(cmd, check=True)
        logging.info("%s on %s: %.0f s", script, graph, time.time() - start)
    try:
        result = record.load(path)
    except RecordError as e:  # e.g. a run from before the step limit was recorded
        raise ValueError(f"{e}; remove {os.path.dirname(path)} to rerun it") from None
    if result is None:
        raise FileNotFoundError(f"{script} wrote no {path}")
    if result.max_steps != max_steps:
        raise ValueError(f"{path}: its agent had step limit {result.max_steps}"
                         f", not {max_steps} (--max_steps={FLAGS.max_steps}, at least "
                         f"{EQUAL_BUDGET_FACTOR} x greedy's steps); remove "
                         f"{os.path.dirname(path)} to rerun it")
    return result


def _pct(cost: float, initial: float) -> float:
    return 100.0 * (cost / initial - 1.0)


def _plot(path, rows):
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    names = ["model-based", "model-free", "greedy", "TASO", "random"]
    keys = ["mb", "mf", "greedy", "taso", "random"]
    x = np.arange(len(rows))
    width = 0.16
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for i, (name, key) in enumerate(zip(names, keys)):
        ax.bar(x + (i - 2) * width, [r[f"{key}_change"] for r in rows], width, label=name)
    ax.set_xticks(x, [r["graph"] for r in rows])
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_ylabel("estimated runtime change (%)")
    ax.legend(fontsize=8, ncol=5)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv):
    del argv
    rows = []
    for graph in FLAGS.graphs:
        # Baselines computed here, with this checkout's code, for every graph
        # alike; the random agent has the agents' step limit.
        env = with_equal_step_limit(
            RunSettings(graph=graph, cost_model=FLAGS.cost_model, profile=FLAGS.profile,
                        max_steps=FLAGS.max_steps).make_env())
        max_steps = env.config.max_steps
        mf = _run("train_mf.py", graph, max_steps, [f"--episodes={FLAGS.mf_episodes}"])
        mb = _run("train_mb.py", graph, max_steps, [])
        assert isinstance(mf, ModelFreeRun) and isinstance(mb, ModelBasedRun)
        initial = mb.initial_cost_ms
        base = run_baselines(env, seed=FLAGS.seed)
        mb_steps = mb.real_steps.world_model_rollouts + mb.real_steps.held_out_rollouts
        mf_steps = mf.steps_to_final_cost
        row = {
            "graph": graph, "initial_ms": initial, "max_steps": max_steps,
            "mb_ms": mb.controller_cost_ms, "mb_best_ms": mb.controller_best_cost_ms,
            "mf_ms": mf.agent_cost_ms, "greedy_ms": base.greedy.cost_ms,
            "taso_ms": base.taso.cost_ms, "random_ms": base.random.cost_ms,
            "mb_vs_greedy": versus_greedy(mb.controller_best_cost_ms, base.greedy.cost_ms),
            "mf_vs_greedy": versus_greedy(mf.agent_cost_ms, base.greedy.cost_ms),
            "greedy_steps": base.greedy.steps,
            "mb_real_steps": mb_steps, "mf_steps_to_final": mf_steps,
            "mf_real_steps": mf.interactions,
            "steps_ratio_mf_over_mb": mf_steps / max(mb_steps, 1),
            "equal_final_cost": abs(mb.controller_best_cost_ms - mf.agent_cost_ms)
            <= 1e-6 * initial,
            "mb_seconds": mb.seconds.total, "mf_seconds": mf.train_seconds,
        }
        for key in ("mb", "mf", "greedy", "taso", "random"):
            row[f"{key}_change"] = _pct(row[f"{key}_ms"], initial)
        rows.append(row)
    out_dir = os.path.join(FLAGS.results_dir, "compare_agents")
    cost_table = "\n".join(
        f"| {r['graph']} | {r['initial_ms']:.3f} | {r['max_steps']} | "
        f"{r['mb_ms']:.3f} ({r['mb_change']:+.2f}%) | "
        f"{r['mb_best_ms']:.3f} | {r['mf_ms']:.3f} ({r['mf_change']:+.2f}%) | "
        f"{r['greedy_ms']:.3f} ({r['greedy_change']:+.2f}%, {r['greedy_steps']} steps) | "
        f"{r['taso_ms']:.3f} ({r['taso_change']:+.2f}%) | "
        f"{r['random_ms']:.3f} ({r['random_change']:+.2f}%) |" for r in rows)
    steps_table = "\n".join(
        f"| {r['graph']} | {r['mb_real_steps']} | {r['mf_steps_to_final']} "
        f"({r['mf_real_steps']} in all) | {r['steps_ratio_mf_over_mb']:.2f}x | "
        f"{'yes' if r['equal_final_cost'] else 'no'} | {r['mb_seconds']:.0f} / "
        f"{r['mf_seconds']:.0f} |" for r in rows)
    verdicts = "\n".join(f"- {r['graph']}: the model-based agent {r['mb_vs_greedy']}; the "
                         f"model-free agent {r['mf_vs_greedy']}." for r in rows)
    text = (
        f"# Model-based vs model-free vs baselines ({FLAGS.cost_model}/{FLAGS.profile} "
        "estimated cost, ms)\n\n"
        "| graph | initial | agents' step limit | model-based (greedy) | model-based (best "
        "eval) | model-free | one-step greedy | TASO search | random (mean) |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
        f"{cost_table}\n\nThe agents' step limit is --max_steps ({FLAGS.max_steps}) or "
        f"{EQUAL_BUDGET_FACTOR} x one-step greedy's steps, whichever is more.\n\n"
        f"{verdicts}\n\n"
        "## Sample efficiency (real environment steps)\n\n"
        "| graph | model-based (rollouts) | model-free (to its final cost) | ratio | equal "
        "final cost | seconds MB / MF |\n|---|---|---|---|---|---|\n"
        f"{steps_table}\n")
    save_result(out_dir, rows, markdown=text)
    _plot(os.path.join(out_dir, "compare_agents.png"), rows)
    print(text)
    print(f"results in {out_dir}")


if __name__ == "__main__":
    app.run(main)
