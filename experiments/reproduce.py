"""The thesis' evaluation (Chapter 4) from one command: runs, then a report folder.

    python experiments/reproduce.py                   # full mode (30-40 minutes here)
    python experiments/reproduce.py --quick           # every step on tiny budgets (under 10 minutes)
    python experiments/reproduce.py --budget=thesis   # the thesis' training budgets (about 41 h
                                                      # here: an estimate, docs/reproduce.md)
    python experiments/reproduce.py --seeds=3         # every agent cell over seeds 0, 1, 2
    python experiments/reproduce.py --ray_address=HOST:6379   # on a Ray cluster
    python experiments/reproduce.py --budget=thesis --seeds=3 --report_only
                                                      # the report of what has finished so far

Two cost settings, each in its own results folder, each labelled as what it is:

- "this CPU" (`cpu`): `--cost_model=fitted --profile=cpu`, the cost model
  calibrated on this machine's onnxruntime timings (docs/runtime.md);
- "GPU-like" (`gpu`): `--cost_model=analytic --profile=v100`, an analytic
  stand-in for the thesis' GPU (there is no GPU here).

Per setting it runs, as subprocesses of the project's entry points with
flags (results under --results_dir/<setting>/<graph>/<run>/):
`baselines.py` (one-step greedy, TASO's search and its trace),
`train_mf.py` and `train_mb.py` on each graph of --graphs, and
`train_mb.py --reward_model=separate` on --separate_reward_graphs (under
--results_dir/<setting>/separate_reward/); the agents once per seed of
--seeds (the first seed's runs there, the others' under
--results_dir/<setting>/seed_<s>/ in the same layout). Once:
`graph_properties.py` (Table 4.1); and `temperature_sweep.py` (Table 4.3)
under each setting of --sweep_settings (folders `temperature/` for "this
CPU", `temperature_gpu/` for "GPU-like"). Then, in this process, the measure
step times every variant of every graph (original, greedy, TASO,
model-free, model-based, and the separate reward network's where it ran;
of the agents, the median seed's graph) end to end on this CPU, interleaved
(onnxruntime and TensorFlow through onnx-tf;
`xflowrl.measure.compare.time_models`; a `xflowrl.results.Measurement`
record per graph), and `xflowrl.results.write_report` writes the tables and
figures to --report_dir.

The entry-point runs are Ray tasks (`xflowrl.ray_jobs.run_jobs`): on a local Ray
instance of --jobs CPUs started here (one entry point per CPU), or on the
cluster at --ray_address, whose CPUs then decide how many run at once (its
nodes must see --results_dir at the same path: docs/reproduce.md). A
temperature sweep runs its seeds as tasks of the same cluster.

Reuse: a run whose folder holds `reproduce_job.json` with the same command
line, marked finished (and its result file, holding the keys the job names:
an agent's records its step limit), is reused; one marked unfinished (its
worker or node was lost, or an earlier invocation stopped) resumes in its
folder from the entry point's checkpoints; a folder with another command is
deleted first, so a resumable entry point never resumes a run of other
budgets. `--rerun` redoes everything. Each run's stdout/stderr go to
`<run folder>.log`; a line per finished run goes to stderr. One invocation
at a time per results folder: a second one exits at once (a lock file,
`<results_dir>/.reproduce.lock`). The report records the commit it ran at,
and whether the tree had local changes.

A long run can be read before it ends: `--report_only`, with the same flags
as the run, starts nothing (no Ray, no lock, no measure step) and writes
the report of the runs finished so far to --report_dir (default
`<results_dir>/report_partial`). It leaves out each graph that lacks, in
some setting, a finished baseline run or a finished run of either agent in
at least one seed; a cell shows the seeds finished so far; the report says
which jobs have not finished. The measured runtimes come from an earlier
measure step where one ran, else the tables say "not measured".

The agents run with `--taso_budget=0`: TASO's search comes from
baselines.py (one search per graph and setting, with Inception-v3's budget
capped as there), the agents' files keep greedy and the random agent.
They get the budget's `--max_steps` as a floor: train_mf.py and train_mb.py
raise it to 1.5 x one-step greedy's steps on the graph and setting where
that is more, since the report compares them with greedy. A
saved agent run whose result records no step limit ("max_steps") predates
that rule and is run again.

Flags -> `xflowrl.reproduction.Plan` -> `xflowrl.reproduction.reproduce`
(or `report_so_far`): the jobs, the measure step and the report are the
library's (`xflowrl/reproduction/`).
"""

from __future__ import annotations

import os
import sys
import time

from absl import app, flags

from xflowrl.ray_jobs import results_lock
from xflowrl.reproduction import (
    BUDGETS,
    NothingToReport,
    Options,
    Plan,
    report_so_far,
    reproduce,
    scaled,
)
from xflowrl.reproduction.runner import command_line
from xflowrl.results.layout import SETTINGS
from xflowrl.results.thesis import THESIS_GRAPHS

FLAGS = flags.FLAGS
flags.DEFINE_enum("budget", "full", list(BUDGETS), "The budgets (xflowrl.reproduction.budgets): quick "
                  "(every step on tiny budgets, under 10 minutes), full (about 30 minutes "
                  "here), thesis (the thesis' training budgets: about 41 h here, estimated in "
                  "docs/reproduce.md).")
flags.DEFINE_bool("quick", False, "The same as --budget=quick.")
flags.DEFINE_list("graphs", list(THESIS_GRAPHS), "Zoo graphs to evaluate.")
flags.DEFINE_list("settings", list(SETTINGS), "Cost settings (cpu, gpu).")
flags.DEFINE_string("results_dir", "results/reproduce", "Where the runs are written.")
flags.DEFINE_string("report_dir", "", "Where the report goes (default <results_dir>/report).")
flags.DEFINE_list("separate_reward_graphs", ["bert"],
                  "Graphs on which train_mb also runs with --reward_model=separate.")
flags.DEFINE_string("sweep_graph", "bert", "Graph of the temperature sweep ('' to skip).")
flags.DEFINE_list("sweep_settings", ["cpu", "gpu"], "Cost settings of the temperature sweep.")
flags.DEFINE_integer("seed", 0, "Seed of every run; the agents' first seed.")
flags.DEFINE_integer("seeds", 1, "Seeds of every agent cell (model-free, model-based, separate "
                     "reward): --seed, --seed+1, ...; the tables show the median and range.")
flags.DEFINE_float("budget_scale", 1.0, "Multiplies the agents' training budgets (model-free "
                   "episodes; world-model episodes per round and training steps; imagined "
                   "episodes), to see what more training changes; searches, timing and the "
                   "sweep keep theirs. Use another --results_dir.")
flags.DEFINE_bool("rerun", False, "Ignore saved runs.")
flags.DEFINE_bool("report_only", False, "Run nothing: the report of the runs finished so far "
                  "(with the same flags as the run; to --report_dir, default "
                  "<results_dir>/report_partial), e.g. beside a long run.")
flags.DEFINE_integer("jobs", 2, "CPUs of the local Ray instance: entry-point runs at a time "
                     "at --cpus_per_job=1 (their training wall times are reported: with more "
                     "than one they share the cores). Ignored with --ray_address.")
flags.DEFINE_float("cpus_per_job", 1.0, "CPUs each entry-point run reserves (more on nodes "
                   "with many cores, where TensorFlow's threads would otherwise crowd each "
                   "other): runs at a time = a node's CPUs / this.")
flags.DEFINE_string("ray_address", "", "A Ray cluster to run the entry points on (its head's "
                    "address, or 'auto' for one started on this machine by `ray start`); '': "
                    "a local instance of --jobs CPUs.")
flags.DEFINE_integer("retries", 1, "Reruns of an entry point that exits with an error (after "
                     "30 s, from a fresh folder): a checkpoint, or a change to the checkout while "
                     "it ran, may be why it failed.")
flags.DEFINE_integer("max_retries", 3, "Reruns of an entry point whose Ray worker or node was "
                     "lost (it resumes from its checkpoints).")



def budget_name() -> str:
    """--budget, or quick under --quick."""
    if FLAGS.quick and FLAGS["budget"].present and FLAGS.budget != "quick":
        raise app.UsageError(f"--quick is --budget=quick, not --budget={FLAGS.budget}")
    return "quick" if FLAGS.quick else FLAGS.budget


def plan() -> Plan:
    """The reproduction the flags describe."""
    if FLAGS.seeds < 1:
        raise app.UsageError(f"--seeds must be at least 1, not {FLAGS.seeds}")
    mode = budget_name()
    return Plan(mode=mode, budget=scaled(BUDGETS[mode], FLAGS.budget_scale),
                budget_scale=FLAGS.budget_scale, graphs=list(FLAGS.graphs),
                settings=list(FLAGS.settings), seed=FLAGS.seed,
                seeds=[FLAGS.seed + i for i in range(FLAGS.seeds)],
                results_dir=FLAGS.results_dir,
                separate_reward_graphs=list(FLAGS.separate_reward_graphs),
                sweep_graph=FLAGS.sweep_graph, sweep_settings=list(FLAGS.sweep_settings),
                cpus_per_job=FLAGS.cpus_per_job,
                scripts_dir=os.path.dirname(os.path.abspath(__file__)))


def main(argv):
    del argv
    options = Options(jobs=FLAGS.jobs, ray_address=FLAGS.ray_address, rerun=FLAGS.rerun,
                      retries=FLAGS.retries, max_retries=FLAGS.max_retries,
                      report_dir=FLAGS.report_dir)
    command = command_line(sys.argv)
    if FLAGS.report_only:
        try:
            out = report_so_far(plan(), options, command)
        except NothingToReport as e:
            sys.exit(f"reproduce.py --report_only: {e}")
        print(f"partial report in {out.folder}: {out.finished} of {out.jobs} jobs finished; "
              f"graphs {', '.join(out.graphs)}" + (f" (left out: {', '.join(out.left_out)})"
                                                   if out.left_out else ""))
        return
    with results_lock(FLAGS.results_dir):
        start = time.time()
        out = reproduce(plan(), options, command)
    print(f"report in {out} ({time.time() - start:.0f} s)")


if __name__ == "__main__":
    app.run(main)
