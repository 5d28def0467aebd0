"""A trained policy, zero-shot, on graphs of your choice: beside one-step
greedy, TASO's search and a random agent, estimated and measured.

    python experiments/evaluate_policy.py                        # the shipped policy on the zoo's models
    python experiments/evaluate_policy.py --graphs=held_out      # ... on the corpus' held-out graphs
    python experiments/evaluate_policy.py --policy=DIR --graphs=bert,inception/a1c1w16
    python experiments/evaluate_policy.py --policy=DIR1,DIR2     # several policies, side by side
    python experiments/evaluate_policy.py --nomeasure            # estimated changes only

The generalist's own evaluation (`experiments/train_generalist.py`) plays
the corpus' held-out graphs, each small enough to train on; this plays a
policy folder (default: the shipped generalist, `xflowrl.policy.
shipped_policy()`) on any graphs: the zoo's models at their published
sizes (`zoo`, the default, or zoo names), a corpus split (`held_out`,
`validation`, `train`, `all`) or corpus names. The policy acts as
`xflowrl optimize --method=policy` has it act (its greedy episode, in NumPy where the
folder has `policy.npz`, for at least 1.5 x one-step greedy's steps) and
is credited with the cheapest graph it passes through; unlike the
command, this does not hand over greedy's graph where that is cheaper:
the table compares the policy itself with greedy (`xflowrl.policy.
evaluate`: TASO's search at --taso_budget, the random agent's mean over
--random_episodes). With --measure (the default) every graph's initial,
greedy and policy variants are also timed end to end in onnxruntime
(one thread, CPU time, random weights, interleaved rounds;
`xflowrl.generalist.measured`), beside the estimated changes. Several
policies (`--policy=DIR1,DIR2,...`) get a table each, named p1, p2, ...,
and one measured table with a column each (distinct graphs timed once,
all in the same interleaved rounds); the baselines run once per graph
for all of them, so the policies must share L (`max_locations`).

Writes --out (default results/evaluate_policy/<cost model>.json, and the
tables as .md beside it).
"""

from __future__ import annotations

import dataclasses
import os
import sys

from absl import app, flags

from xflowrl import corpus, zoo
from xflowrl.engine import XferSet
from xflowrl.engine.cost import GPU_COST_SPEC
from xflowrl.engine.xfers import TASO_BUDGET
from xflowrl.entry_points import cost_model_from_spec, write_json
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.generalist import evaluate, measured
from xflowrl.policy import has_arrays, load_numpy_policy, load_policy, read_info, shipped_policy
from xflowrl.results.records import to_plain

FLAGS = flags.FLAGS
flags.DEFINE_list("policy", [], "Policy folders (default: the shipped generalist).")
flags.DEFINE_list("graphs", ["zoo"], "zoo, a corpus split (held_out, validation, train, "
                  "all), or zoo / corpus graph names.")
flags.DEFINE_string("cost_model", GPU_COST_SPEC, "Cost model (the policy's training one).")
flags.DEFINE_integer("taso_budget", TASO_BUDGET, "TASO's budget.")
flags.DEFINE_integer("random_episodes", 5, "Random-agent episodes per graph.")
flags.DEFINE_integer("seed", 0, "Seed of the random agent and of the measured weights.")
flags.DEFINE_bool("measure", True, "Also time the graphs end to end in onnxruntime.")
flags.DEFINE_integer("measure_rounds", 5, "Interleaved timing rounds of --measure.")
flags.DEFINE_string("out", "", "JSON to write (default results/evaluate_policy/<cost model>.json).")


def graph_sources(items):
    """name -> builder for `--graphs` items: "zoo" (every zoo model), a
    corpus split, or zoo / corpus graph names. ValueError for an unknown one."""
    out = {}
    for item in items:
        if item == "zoo":
            out.update({name: (lambda n=name: zoo.get_graph(n)) for name in zoo.GRAPHS})
        elif item in corpus.SPLITS:
            out.update({s.name: s.build for s in corpus.specs(item)})
        elif item in zoo.GRAPHS:
            out[item] = lambda n=item: zoo.get_graph(n)
        elif item in corpus.CORPUS.names("all"):
            out[item] = lambda n=item: corpus.get(n)
        else:
            raise ValueError(f"--graphs: {item!r} is neither 'zoo', a corpus split, a zoo "
                             f"model ({', '.join(zoo.GRAPHS)}) nor a corpus graph")
    return out


def _agent(folder, env):
    """The policy of `folder`: in NumPy where it has `policy.npz` (as
    `xflowrl optimize` acts), else the TensorFlow network."""
    return (load_numpy_policy(folder, env) if has_arrays(folder)
            else load_policy(folder, env, seed=FLAGS.seed))


def main(argv):
    del argv
    folders = FLAGS.policy or [shipped_policy()]
    infos = [read_info(folder) for folder in folders]
    for folder, info in zip(folders, infos):
        if info is None:
            sys.exit(f"--policy: {folder} is not a policy folder (no policy.json)")
    if len({info.max_locations for info in infos}) > 1:
        sys.exit("--policy: the policies have different L (max_locations); evaluate them "
                 "separately")
    try:
        graphs = graph_sources(FLAGS.graphs)
    except ValueError as e:
        sys.exit(str(e))
    xfers, cost_model = XferSet.default(), cost_model_from_spec(FLAGS.cost_model)
    config = EnvConfig(max_locations=infos[0].max_locations)
    probe = GraphEnv(next(iter(graphs.values()))(), xfers, cost_model, config)
    labels = ["policy"] if len(folders) == 1 else [f"p{i}" for i in range(1, len(folders) + 1)]
    # The baselines once per graph, for every policy.
    rows_of = evaluate.compare(
        {label: _agent(folder, probe) for label, folder in zip(labels, folders)}, graphs,
        xfers, cost_model, config, taso_budget=FLAGS.taso_budget,
        random_episodes=FLAGS.random_episodes, seed=FLAGS.seed,
        progress=lambda line: print(line, file=sys.stderr, flush=True))
    text, out = [], {"cost_model": FLAGS.cost_model, "taso_budget": FLAGS.taso_budget,
                     "policies": {}}
    for label, folder, info in zip(labels, folders, infos):
        rows = rows_of[label]
        summary = evaluate.summary(rows)
        # The policy's and greedy's cost reached, as a share of the initial
        # cost, averaged over the graphs (a ranking of policies on them).
        summary["mean_cost_vs_initial"] = sum(r.policy_ms / r.initial_ms for r in rows) / len(rows)
        summary["greedy_mean_cost_vs_initial"] = sum(
            r.greedy_ms / r.initial_ms for r in rows) / len(rows)
        text += [f"{label}: policy {folder} on {len(rows)} graphs under {FLAGS.cost_model}, "
                 "zero-shot.", "", evaluate.markdown(rows), "", "| summary | |", "|---|---|"]
        text += [f"| {key} | {value:.4f} |" for key, value in summary.items()] + [""]
        out["policies"][label] = {"folder": folder, "seed": info.seed, "commit": info.commit,
                                  "command": info.command, "episodes": info.episodes,
                                  "rows": [dataclasses.asdict(r) for r in rows],
                                  "summary": summary}
    if FLAGS.measure:
        runs = {label: [measured.HandedOver(0, rows_of[label])] for label in labels}
        timed = measured.measure_held_out(
            runs, graphs, xfers, cost_model, rounds=FLAGS.measure_rounds, seed=FLAGS.seed,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
            max_locations=config.max_locations)
        out["measured"] = to_plain(timed)
        text += [measured.markdown(timed, agents=labels)]
    path = FLAGS.out or os.path.join("results", "evaluate_policy",
                                     FLAGS.cost_model.replace("/", "_") + ".json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_json(path, out)
    with open(os.path.splitext(path)[0] + ".md", "w") as f:
        f.write("\n".join(text) + "\n")
    print("\n".join(text))
    print(f"\nwrote {path}", file=sys.stderr)


if __name__ == "__main__":
    app.run(main)
