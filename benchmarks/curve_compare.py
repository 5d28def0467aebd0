"""Learning curves of model-free runs side by side (faster
training must not learn worse).

    python benchmarks/curve_compare.py --runs=before=DIR_A,after=DIR_B \
        [--graphs=squeezenet1_1,bert] [--seeds=0,1] [--out=curves.png]

Each DIR is a `--results_dir` of `experiments/train_mf.py` runs laid out as
DIR/seed<s>/<graph>/train_mf/result.json (one train_mf.py run per graph and
seed, e.g. `--results_dir=DIR/seed0 --seed=0`). Per graph and label it
prints one JSON object: per seed, the mean final cost of each update's
episodes (relative to the initial cost, in %) against episodes, its mean
over the last quarter of training, the trained agent's greedy cost change
and the real steps taken; and a figure with one panel per graph (the
median over seeds of the per-update curves, the range shaded).
"""

import json
import os

from absl import app, flags
import numpy as np

FLAGS = flags.FLAGS
flags.DEFINE_list("runs", [], "label=results_dir pairs, in plotting order.")
flags.DEFINE_list("graphs", ["squeezenet1_1", "bert"], "Graphs.")
flags.DEFINE_list("seeds", ["0", "1"], "Seeds (folders seed<s>).")
flags.DEFINE_string("out", "", "Figure path (PNG); empty: no figure.")


def load(root, seed, graph):
    path = os.path.join(root, f"seed{seed}", graph, "train_mf", "result.json")
    with open(path) as f:
        return json.load(f)


def curve(result):
    """(episodes, mean final cost change in % of the initial cost) per update."""
    initial = result["initial_cost_ms"]
    rows = result["history"]
    return (np.array([r["episode"] for r in rows]),
            np.array([100 * (r["mean_final_cost"] - initial) / initial for r in rows]))


def summarise(result):
    episodes, change = curve(result)
    tail = change[episodes > 0.75 * episodes.max()]
    initial = result["initial_cost_ms"]
    return {"last_quarter_mean_change_pct": float(tail.mean()),
            "agent_change_pct": 100 * (result["agent_cost_ms"] - initial) / initial,
            "greedy_change_pct": 100 * (result["baselines"]["greedy"]["cost_ms"] - initial)
            / initial,
            "interactions": result["interactions"], "train_seconds": result["train_seconds"],
            "steps_per_s": result["interactions"] / max(result["train_seconds"], 1e-9)}


def main(argv):
    del argv
    runs = [pair.split("=", 1) for pair in FLAGS.runs]
    if not runs or any(len(p) != 2 for p in runs):
        raise app.UsageError("--runs takes label=results_dir pairs")
    report = {}
    for graph in FLAGS.graphs:
        report[graph] = {label: {s: summarise(load(root, s, graph)) for s in FLAGS.seeds}
                         for label, root in runs}
    print(json.dumps(report, indent=1))
    if not FLAGS.out:
        return
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    fig, axes = plt.subplots(1, len(FLAGS.graphs), figsize=(5 * len(FLAGS.graphs), 3.6),
                             squeeze=False)
    for ax, graph in zip(axes[0], FLAGS.graphs):
        for label, root in runs:
            curves = [curve(load(root, s, graph)) for s in FLAGS.seeds]
            length = min(len(c[0]) for c in curves)
            episodes = curves[0][0][:length]
            values = np.stack([c[1][:length] for c in curves])
            line, = ax.plot(episodes, np.median(values, axis=0), label=label)
            ax.fill_between(episodes, values.min(axis=0), values.max(axis=0),
                            color=line.get_color(), alpha=0.2)
        ax.set_title(graph)
        ax.set_xlabel("episodes")
        ax.set_ylabel("mean final cost change (%)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(FLAGS.out, dpi=120)
    print(f"figure in {FLAGS.out}")


if __name__ == "__main__":
    app.run(main)
