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

The entry-point runs are Ray tasks (`xflowrl.jobs.run_jobs`): on a local Ray
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
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

from absl import app, flags, logging
import numpy as np
from reproduce_budgets import BUDGETS, Budget, scaled

from xflowrl.jobs import Job, job_state, results_lock, run_jobs
from xflowrl.results import layout
from xflowrl.results.layout import SEPARATE, SETTINGS, Setting
from xflowrl.results.measurement import ClockTiming, Measurement, SweepTiming, TimedGraph
from xflowrl.results.report import write_report
from xflowrl.results.sweep import SweepResult
from xflowrl.results.thesis import THESIS_GRAPHS

FLAGS = flags.FLAGS
flags.DEFINE_enum("budget", "full", list(BUDGETS), "The budgets (reproduce_budgets.py): quick "
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

_HERE = os.path.dirname(os.path.abspath(__file__))


# Longest first, so that two workers finish together.
_ORDER = ("inception_v3", "resnet50", "squeezenet1_1", "resnet18", "vit", "bert")


def job(name: str, script: str, flags_: List[str], out_dir: str,
        result_file: str = "result.json", num_cpus: Optional[float] = None) -> Job:
    """An entry point of experiments/ as a job reserving `num_cpus` (None:
    --cpus_per_job); its flags, not the interpreter's path, decide reuse."""
    return Job(name, (sys.executable, os.path.join(_HERE, script), *flags_), out_dir,
               result_file=result_file,
               num_cpus=FLAGS.cpus_per_job if num_cpus is None else num_cpus,
               key=tuple(flags_))


def budget_name() -> str:
    """--budget, or quick under --quick."""
    if FLAGS.quick and FLAGS["budget"].present and FLAGS.budget != "quick":
        raise app.UsageError(f"--quick is --budget=quick, not --budget={FLAGS.budget}")
    return "quick" if FLAGS.quick else FLAGS.budget


def agent_seeds() -> List[int]:
    if FLAGS.seeds < 1:
        raise app.UsageError(f"--seeds must be at least 1, not {FLAGS.seeds}")
    return [FLAGS.seed + i for i in range(FLAGS.seeds)]


def env_flags(setting: Setting, results_dir: str, seed: int) -> List[str]:
    return [f"--cost_model={setting.cost_model}", f"--profile={setting.profile}",
            f"--results_dir={results_dir}", f"--seed={seed}"]


def setting_jobs(setting: Setting, graphs: Sequence[str], b: Budget,
                 seeds: Sequence[int]) -> List[Job]:
    """baselines, and per seed train_mf, train_mb (and the separate reward
    network) of one setting."""
    root = os.path.join(FLAGS.results_dir, setting.key)
    # baselines.py: its searches and traces are used; the timing is the
    # measure step's (all variants interleaved), so it times once, cheaply.
    jobs = [job(f"{setting.key}/baselines", "baselines.py",
                env_flags(setting, root, FLAGS.seed) + [
                    f"--graphs={','.join(graphs)}", f"--taso_budget={b.taso_budget}",
                    f"--taso_budget_for={b.taso_budget_for}",
                    f"--eqsat_time_limit={b.eqsat_time_limit:g}", "--runtimes=ort",
                    "--rounds=1", "--warmup=0", "--repeats=1"],
                os.path.join(root, "baselines"), "baselines.json")]
    ordered = sorted(graphs, key=lambda g: _ORDER.index(g) if g in _ORDER else -1)
    for seed in seeds:
        seed_dir = layout.seed_root(root, seeds, seed)
        suffix = "" if seed == seeds[0] else f" seed {seed}"
        # --max_steps is a floor: the agents raise it to greedy's budget themselves.
        agent = env_flags(setting, seed_dir, seed) + [
            f"--max_steps={b.max_steps}", "--taso_budget=0", "--eqsat_time_limit=0",
            f"--random_episodes={b.random_episodes}"]
        mb = agent + [f"--rounds={b.mb_rounds}",
                      f"--episodes_per_round={b.mb_episodes_per_round}",
                      f"--train_steps_per_round={b.mb_train_steps}",
                      f"--encoder_steps={b.mb_encoder_steps}",
                      f"--dream_episodes={b.mb_dream_episodes}", "--measure_rounds=0",
                      f"--eval_episodes={b.mb_eval_episodes}"]
        for g in ordered:
            jobs.append(job(f"{setting.key}/{g}/train_mf{suffix}", "train_mf.py",
                            agent + [f"--graph={g}", f"--episodes={b.mf_episodes}"],
                            os.path.join(seed_dir, g, "train_mf")))
            jobs.append(job(f"{setting.key}/{g}/train_mb{suffix}", "train_mb.py",
                            mb + [f"--graph={g}"], os.path.join(seed_dir, g, "train_mb")))
        for g in FLAGS.separate_reward_graphs:
            sep_root = os.path.join(seed_dir, "separate_reward")
            flags_ = [f if not f.startswith("--results_dir=") else f"--results_dir={sep_root}"
                      for f in mb]
            jobs.append(job(f"{setting.key}/{g}/train_mb separate{suffix}", "train_mb.py",
                            flags_ + [f"--graph={g}", "--reward_model=separate"],
                            os.path.join(sep_root, g, "train_mb")))
    return jobs


def shared_jobs(graphs: Sequence[str], b: Budget) -> List[Job]:
    """Table 4.1 (graph properties) and Table 4.3 (temperature sweep)."""
    cpu = SETTINGS["cpu"]
    props_dir = os.path.join(FLAGS.results_dir, "graph_properties")
    jobs = [job("graph_properties", "graph_properties.py",
                [f"--graphs={','.join(graphs)}", f"--cost_model={cpu.cost_model}",
                 f"--profile={cpu.profile}", f"--repeats={b.props_repeats}",
                 f"--warmup={max(1, min(3, b.props_repeats))}", f"--seed={FLAGS.seed}",
                 f"--output_dir={props_dir}"], props_dir, "table_4_1.json")]
    for key in FLAGS.sweep_settings if FLAGS.sweep_graph else []:
        setting = SETTINGS[key]
        root = os.path.join(FLAGS.results_dir, layout.sweep_folder(key))
        # The script's default profile is cpu: only other profiles are named.
        profile = [f"--profile={setting.profile}"] if setting.profile != "cpu" else []
        # The sweep runs its seeds as tasks of this cluster (it joins it
        # through $RAY_ADDRESS): it reserves no CPU itself while it waits.
        jobs.append(job(f"temperature_sweep {key}", "temperature_sweep.py",
                        [f"--graph={FLAGS.sweep_graph}", f"--cost_model={setting.cost_model}"]
                        + profile + [
                         f"--seeds={b.sweep_seeds}",
                         f"--temperatures={b.sweep_temperatures}",
                         f"--max_steps={b.max_steps}", f"--rounds={b.sweep_rounds}",
                         f"--episodes_per_round={b.sweep_episodes_per_round}",
                         f"--train_steps_per_round={b.mb_train_steps}",
                         f"--dream_episodes={b.sweep_dream_episodes}",
                         f"--results_dir={root}"],
                        os.path.join(root, FLAGS.sweep_graph, "temperature_sweep"),
                        num_cpus=0))
    return jobs


# -- the measure step --------------------------------------------------------

def variant_graphs(setting: Setting, graph_name: str, root: str,
                   seeds: Sequence[int]):
    """The engine graphs to time, by variant name: original, greedy, TASO
    (replayed from baselines.py's record, `xflowrl.search.Baselines`, whose
    steps keep their locations; the cost must equal the record's, checked),
    model-free, model-based and, where it ran, the model-based agent with
    the separate reward network (replayed; of each agent, the median seed's
    run, `layout.median_seed`)."""
    from xflowrl.agents.ppo.training import replay  # pylint: disable=import-outside-toplevel
    from xflowrl.engine.xfers import (  # pylint: disable=import-outside-toplevel
        DEFAULT_MAX_LOCATIONS,
    )
    from xflowrl.env import (  # pylint: disable=import-outside-toplevel
        EnvConfig,
        NO_STEP_LIMIT,
        make_env,
    )
    from xflowrl.rules.sets import DEFAULT_RULE_SET  # pylint: disable=import-outside-toplevel
    from xflowrl.search import (  # pylint: disable=import-outside-toplevel
        Baselines,
        replay_result,
    )
    runs = layout.load_runs(root, graph_name, seeds)
    baselines = Baselines.from_json(runs.baselines)
    env = make_env(graph_name, DEFAULT_RULE_SET, setting.cost_model, setting.profile,
                   "results/cost_cache.tsv",
                   EnvConfig(max_steps=NO_STEP_LIMIT,
                             max_locations=baselines.max_locations or DEFAULT_MAX_LOCATIONS))
    graphs = {"original": env.initial_graph, "greedy": replay(env, baselines.greedy.applied)}
    if baselines.taso:
        graphs["taso"] = replay_result(env, baselines.taso)
        cost = graphs["taso"].cost(env.cost_model)
        if not np.isclose(cost, baselines.taso.cost_ms, rtol=1e-9):
            raise RuntimeError(f"{graph_name}: TASO's steps replayed cost {cost} ms, "
                               f"baselines.py recorded {baselines.taso.cost_ms} ms")
    agents = [("model-free", runs.mf, runs.mf.agent_applied),
              ("model-based", runs.mb, runs.mb.controller_best_applied)]
    if runs.mb_separate:
        agents.append((SEPARATE, runs.mb_separate, runs.mb_separate.controller_best_applied))
    for name, run, applied in agents:
        run_config = EnvConfig(max_steps=NO_STEP_LIMIT, max_locations=run.max_locations)
        run_env = make_env(graph_name, run.rules, setting.cost_model, setting.profile,
                           "results/cost_cache.tsv", run_config)
        graphs[name] = replay(run_env, [tuple(a) for a in applied])
    return graphs, env.cost_model


def sweep_result(setting: Setting, graph_name: str) -> Optional[SweepResult]:
    """The temperature sweep's result under `setting`, if the sweep ran on
    `graph_name` there."""
    if graph_name != FLAGS.sweep_graph or setting.key not in FLAGS.sweep_settings:
        return None
    return layout.load_sweep(FLAGS.results_dir, setting.key, graph_name)


def sweep_graphs(setting: Setting, sweep: SweepResult):
    """Per row of the sweep (a temperature), the graph of each seed's real
    episode, replayed from its applied steps."""
    from xflowrl.agents.ppo.training import replay  # pylint: disable=import-outside-toplevel
    from xflowrl.env import (  # pylint: disable=import-outside-toplevel
        EnvConfig,
        NO_STEP_LIMIT,
        make_env,
    )
    env = make_env(sweep.graph, sweep.rules, setting.cost_model,
                   setting.profile, "results/cost_cache.tsv",
                   EnvConfig(max_steps=NO_STEP_LIMIT, max_locations=sweep.max_locations))
    return [[replay(env, [tuple(a) for a in applied]) for applied in row.applied]
            for row in sweep.rows]


def measure(setting: Setting, graph_name: str, b: Budget, rerun: bool,
            seeds: Sequence[int]) -> Measurement:
    """Times every variant of one graph (one timing per distinct graph; of
    the agents, the median seed's graph); writes and returns
    <root>/<graph>/measured/result.json, a `Measurement` (reused when its
    settings match)."""
    from xflowrl import zoo  # pylint: disable=import-outside-toplevel
    from xflowrl.executor.weights import (  # pylint: disable=import-outside-toplevel
        random_inputs,
        random_weights,
    )
    from xflowrl.measure.compare import time_models  # pylint: disable=import-outside-toplevel
    from xflowrl.onnx_io import to_onnx
    root = os.path.join(FLAGS.results_dir, setting.key)
    out_dir = os.path.join(root, graph_name, "measured")
    path = os.path.join(out_dir, "result.json")
    sweep = sweep_result(setting, graph_name)
    settings = {"runtimes": b.measure_runtimes, "rounds": b.measure_rounds,
                "warmup": b.measure_warmup, "repeats": b.measure_repeats, "seed": FLAGS.seed,
                "inputs": layout.run_stamps(root, graph_name, seeds)}
    if sweep:
        settings["inputs"]["sweep"] = [row.applied for row in sweep.rows]
    if not rerun:
        saved = Measurement.load(path)
        if saved is not None and saved.settings == settings:
            return saved
    graphs, cost_model = variant_graphs(setting, graph_name, root, seeds)
    original = graphs["original"]
    weights = random_weights(original, FLAGS.seed, gain=zoo.weight_gain(graph_name))
    def key(g) -> str:  # equal graphs are timed once
        return f"{g.hash():x}"
    # The sweep's graphs (Table 4.3) are timed in the same rounds as the
    # original, so that their changes share its baseline.
    swept = sweep_graphs(setting, sweep) if sweep else []
    models = {}
    for g in list(graphs.values()) + [g for row in swept for g in row]:
        if key(g) not in models:
            models[key(g)] = to_onnx(g, weights, check=False)
    logging.info("%s/%s: timing %d distinct graphs", setting.key, graph_name, len(models))
    start = time.time()
    times = time_models(models, random_inputs(original, FLAGS.seed),
                        b.measure_runtimes.split(","), b.measure_rounds, b.measure_warmup,
                        b.measure_repeats, np.random.default_rng(FLAGS.seed))
    def timed(g) -> TimedGraph:
        return TimedGraph(graph_key=key(g), ops=g.num_ops(), estimated_ms=g.cost(cost_model),
                          measured={clock: ClockTiming(**t) for clock, t in times[key(g)].items()})
    result = Measurement(
        graph=graph_name, setting=setting.key, cost_model=cost_model.name, settings=settings,
        seconds=time.time() - start, variants={name: timed(g) for name, g in graphs.items()},
        sweep=[SweepTiming(temperature=row.temperature, seeds=[timed(g) for g in by_seed])
               for row, by_seed in zip(sweep.rows, swept)] if sweep else None)
    result.save(path, indent=1)
    return result


def machine() -> str:
    """The CPU model and core count (lscpu), for the report."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return (f"{fields.get('Model name', '?').strip()}, {fields.get('CPU(s)', '?').strip()} "
            f"CPU(s)")


def command_line() -> str:
    """This invocation as a command, for the report (and the report file
    `experiments/publish_results.py` writes from it)."""
    return " ".join(["python", *(shlex.quote(a) for a in sys.argv)])


def commit() -> str:
    """The project's git commit, "+local changes" when its tree differs."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=_HERE, capture_output=True, text=True,
                              check=False).stdout.strip()
    head = git("rev-parse", "--short=10", "HEAD") or "unknown"
    return head + (" +local changes" if git("status", "--porcelain", "--untracked-files=no")
                   else "")


def main(argv):
    del argv
    if FLAGS.report_only:
        report_so_far()
        return
    with results_lock(FLAGS.results_dir):
        run_all()


def all_jobs(b: Budget, seeds: Sequence[int]) -> List[Job]:
    """Every entry-point run of the invocation, in the order they start."""
    jobs = shared_jobs(FLAGS.graphs, b)
    per_setting = [setting_jobs(SETTINGS[k], FLAGS.graphs, b, seeds) for k in FLAGS.settings]
    # Interleave the settings, so the long graphs of both run first.
    for i in range(max(len(j) for j in per_setting)):
        jobs += [j[i] for j in per_setting if i < len(j)]
    return jobs


def reportable_graphs(finished: Sequence[str]) -> List[str]:
    """The graphs of --graphs whose every setting has a finished baseline
    run and, for each agent, a finished run in at least one seed (`finished`:
    the finished jobs' names)."""
    done = {name.split(" seed ")[0] for name in finished}
    return [g for g in FLAGS.graphs
            if all(f"{k}/baselines" in done and f"{k}/{g}/train_mf" in done
                   and f"{k}/{g}/train_mb" in done for k in FLAGS.settings)]


def report_so_far() -> None:
    """--report_only: the report of the finished runs, nothing started."""
    mode = budget_name()
    b = scaled(BUDGETS[mode], FLAGS.budget_scale)
    seeds = agent_seeds()
    jobs = all_jobs(b, seeds)
    state = {j.name: job_state(j) for j in jobs}
    finished = [n for n, s in state.items() if s == "finished"]
    unfinished = [n for n, s in state.items() if s != "finished"]
    graphs = reportable_graphs(finished)
    if not graphs:
        sys.exit(f"reproduce.py --report_only: no graph has finished runs of both agents and "
                 f"the baselines in every setting under {FLAGS.results_dir} yet "
                 f"({len(finished)} of {len(jobs)} jobs finished; a run counts only under "
                 f"the flags it was started with, --results_dir spelled the same)")
    sweep = FLAGS.sweep_graph if all(
        state.get(f"temperature_sweep {k}") == "finished" for k in FLAGS.sweep_settings) else ""
    report_dir = FLAGS.report_dir or os.path.join(FLAGS.results_dir, "report_partial")
    left_out = [g for g in FLAGS.graphs if g not in graphs]
    out = write_report(FLAGS.results_dir, report_dir, graphs, list(FLAGS.settings),
                       [g for g in FLAGS.separate_reward_graphs if g in graphs], sweep,
                       FLAGS.sweep_settings,
                       meta={"mode": mode, "budget_scale": FLAGS.budget_scale, "seeds": seeds,
                             "machine": machine(), "commit": commit(),
                             "command": command_line(),
                             "jobs": max(1, int(FLAGS.jobs // FLAGS.cpus_per_job)),
                             "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                             "budget": dataclasses.asdict(b),
                             "partial": {"finished_jobs": len(finished), "jobs": len(jobs),
                                         "unfinished": unfinished,
                                         "graphs_left_out": left_out}},
                       seeds=seeds)
    print(f"partial report in {out}: {len(finished)} of {len(jobs)} jobs finished; "
          f"graphs {', '.join(graphs)}" + (f" (left out: {', '.join(left_out)})"
                                           if left_out else ""))


def run_all():
    mode = budget_name()
    b = scaled(BUDGETS[mode], FLAGS.budget_scale)
    seeds = agent_seeds()
    start = time.time()
    steps: Dict[str, float] = {}
    settings = [SETTINGS[k] for k in FLAGS.settings]
    jobs = all_jobs(b, seeds)
    runs = run_jobs(jobs, address=FLAGS.ray_address, num_cpus=FLAGS.jobs, rerun=FLAGS.rerun,
                    retries=FLAGS.retries, retry_delay=30.0, max_retries=FLAGS.max_retries)
    steps.update({name: r["seconds"] for name, r in runs.items()})
    for setting in settings:
        for g in FLAGS.graphs:
            t = time.time()
            measure(setting, g, b, FLAGS.rerun, seeds)
            steps[f"{setting.key}/{g}/measure"] = time.time() - t
    report_dir = FLAGS.report_dir or os.path.join(FLAGS.results_dir, "report")
    nodes = sorted({s["node_id"] or s["host"] for r in runs.values() for s in r["starts"]})
    out = write_report(FLAGS.results_dir, report_dir, FLAGS.graphs,
                              [s.key for s in settings], FLAGS.separate_reward_graphs,
                              FLAGS.sweep_graph, FLAGS.sweep_settings,
                              meta={"mode": mode, "budget_scale": FLAGS.budget_scale,
                                    "seeds": seeds,
                                    "machine": machine(),
                                    "jobs": (max(1, int(FLAGS.jobs // FLAGS.cpus_per_job))
                                             if not FLAGS.ray_address else None),
                                    "ray_address": FLAGS.ray_address or None,
                                    "ray_nodes": nodes,
                                    "commit": commit(),
                                    "command": command_line(),
                                    "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                                    "budget": dataclasses.asdict(b),
                                    "step_seconds": steps,
                                    # per run: how often it started, where, and
                                    # whether a start resumed a lost one
                                    "job_starts": {n: r["starts"] for n, r in runs.items()
                                                   if r["starts"]},
                                    "wall_seconds": time.time() - start},
                              seeds=seeds)
    print(f"report in {out} ({time.time() - start:.0f} s)")


if __name__ == "__main__":
    app.run(main)
