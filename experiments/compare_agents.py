"""Model-based vs model-free vs the baselines on several graphs, with sample efficiency.

    python experiments/compare_agents.py --graphs=squeezenet1_1,resnet18,resnet50,inception_v3,bert

For each graph it runs `train_mf.py` and `train_mb.py` (each in its own
process, both under --cost_model and --profile, at their defaults unless
flags below say otherwise; a graph whose
result.json already exists is reused with --reuse, and an interrupted run
resumes from its checkpoints), then writes to --results_dir/compare_agents/:

- result.md / result.json (an `AgentComparison` record,
  xflowrl/results/comparison.py): per graph the initial cost, the agents' step
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
steps on that graph where that is more (both scripts raise it themselves): an agent capped below what greedy needs would compare unequal
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

from xflowrl.entry_points import RESULT_JSON, RESULT_MD, RunSettings, result_path, write_text
from xflowrl.env import DEFAULT_MAX_STEPS
from xflowrl.results import ModelBasedRun, ModelFreeRun, RecordError
from xflowrl.results.comparison import AGENT_LABELS, AgentComparison, ComparisonRow
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
        if kind == "train_mb":
            cmd.append("--noplan_with_model")  # the table compares the two agents
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


def _plot(path, rows):
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel
    x = np.arange(len(rows))
    width = 0.16
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for i, name in enumerate(AGENT_LABELS):
        ax.bar(x + (i - 2) * width, [r.changes[i] for r in rows], width, label=name)
    ax.set_xticks(x, [r.graph for r in rows])
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
        # The table has no equality-saturation column: it is not run.
        base = run_baselines(env, seed=FLAGS.seed, eqsat_time_limit=0)
        rows.append(ComparisonRow.of(
            graph, max_steps, mf, mb, greedy_ms=base.greedy.cost_ms,
            greedy_steps=base.greedy.steps, taso_ms=base.taso.cost_ms,
            random_ms=base.random.cost_ms, versus_greedy=versus_greedy))
    result = AgentComparison(cost_model=f"{FLAGS.cost_model}/{FLAGS.profile}",
                             max_steps=FLAGS.max_steps,
                             equal_budget_factor=EQUAL_BUDGET_FACTOR, rows=rows)
    out_dir = os.path.join(FLAGS.results_dir, "compare_agents")
    text = result.markdown()
    result.save(os.path.join(out_dir, RESULT_JSON))
    write_text(os.path.join(out_dir, RESULT_MD), text)
    _plot(os.path.join(out_dir, "compare_agents.png"), rows)
    print(text)
    print(f"results in {out_dir}")


if __name__ == "__main__":
    app.run(main)
