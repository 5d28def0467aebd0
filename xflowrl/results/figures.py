"""Figures 4.1-4.8 (PNG, matplotlib imported on use), with the thesis'
figures beside ours: the report's, from its rows
(`xflowrl.results.rows.GraphRow`) and runs (`xflowrl.results.layout.Runs`),
`write_figures`; and experiments/baselines.py's Figures 4.1 and 4.2, from
its baseline runs (`xflowrl.results.layout.BaselineRuntimes`,
`BaselineCosts`): `figure_baseline_runtimes` and `figure_taso`, the one
drawing of TASO's search, which the report's Figure 4.2 uses too.

Each figure function returns the data it plotted (`RuntimeBars`, the
curves of `taso_curve`), so that what a PNG shows can be checked."""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from xflowrl.results.layout import (
    BASELINE_VARIANTS,
    BaselineCosts,
    BaselineRuntimes,
    Runs,
    baseline_costs,
    pct,
    setting_label,
)
from xflowrl.results.rows import GraphRow
from xflowrl.results.thesis import THESIS_MS

# A line of a figure: its x and y values.
Curve = Tuple[List[float], List[float]]


def _pyplot():
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    return plt


def _save(plt, fig, title: str, path: str, dpi: int = 110) -> None:
    """Titles `fig`, lays it out, writes it as the PNG `path` and closes it."""
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def figure_runtimes(rows: Dict[str, Dict[str, GraphRow]], variants: Sequence[str],
                    thesis_variant: str, path: str, title: str) -> None:
    """The report's Figures 4.1, 4.3 and 4.5 (`write_figures`), per setting:
    the estimated change of each variant (and the random agent) and its
    measured change on this CPU (ort/cpu, tf/cpu), with the thesis' change
    against TensorFlow (its GPU) as black diamonds. (experiments/baselines.py's
    Figure 4.1 is `figure_baseline_runtimes`: the baselines' measured
    runtimes with their spread.)"""
    plt = _pyplot()
    fig, axes = plt.subplots(len(rows), 2, figsize=(13, 3.6 * len(rows)), squeeze=False)
    width = 0.8 / (len(variants) + 1)
    for (setting, by_graph), (ax_est, ax_meas) in zip(rows.items(), axes):
        names = list(by_graph)
        x = np.arange(len(names))
        est_of = {"greedy": "greedy_ms", "taso": "taso_ms", "model-free": "mf_ms",
                  "model-based": "mb_ms", "random": "random_ms"}
        for i, v in enumerate(list(variants) + ["random"]):
            ax_est.bar(x + (i - len(variants) / 2) * width,
                       [pct(getattr(by_graph[n], est_of[v]), by_graph[n].initial_ms) or 0.0
                        for n in names], width, label=v)
        for i, v in enumerate(variants):
            for j, clock in enumerate(("ort/cpu", "tf/cpu")):
                vals = [pct(by_graph[n].measured.get(v, {}).get(clock),
                            by_graph[n].measured.get("original", {}).get(clock))
                        for n in names]
                if all(val is None for val in vals):
                    continue
                pos = x + (i - len(variants) / 2 + 0.5 * j) * width
                ax_meas.bar(pos, [np.nan if val is None else val for val in vals], width / 2,
                            label=f"{v} {clock}", hatch="//" if j else None,
                            color=f"C{i}", alpha=0.6 if j else 1.0)
                for p, val in zip(pos, vals):
                    if val == 0.0:  # the original graph itself: no bar to see
                        ax_meas.text(p, 0.0, "=", ha="center", va="bottom", fontsize=7,
                                     color=f"C{i}")
        thesis = [pct(THESIS_MS[n][thesis_variant], THESIS_MS[n]["tf"]) if n in THESIS_MS
                  else np.nan for n in names]
        ax_meas.scatter(x, thesis, marker="D", color="black", zorder=3,
                        label=f"thesis {thesis_variant} vs TF (GPU)")
        for ax, what in ((ax_est, "estimated"), (ax_meas, "measured, this CPU")):
            ax.axhline(0.0, color="grey", linewidth=0.8)
            ax.set_xticks(x)
            ax.set_xticklabels(names, rotation=15, fontsize=8)
            ax.set_ylabel("change vs original (%)")
            ax.set_title(f"{what}; optimised under {setting_label(setting)}", fontsize=9)
            ax.legend(fontsize=6, ncol=2)
    _save(plt, fig, title, path)


def taso_curve(b: BaselineCosts, by: str = "expansions") -> Tuple[List[float], List[float]]:
    """TASO's search in a baseline run as a step function: x (`by`: the
    "expansions" or "seconds" of each improvement, then of the search's
    end) and the best estimated cost / initial there (holding to the end).
    ([], []) where TASO's search did not run or kept no trace."""
    if b.taso_ms is None or not b.taso_trace:
        return [], []
    end = b.taso_expansions if by == "expansions" else b.taso_seconds
    x = [p[by] for p in b.taso_trace] + [end]
    cost = [p["best_cost_ms"] / b.taso_initial_ms  # type: ignore[operator]
            for p in b.taso_trace]
    return x, cost + cost[-1:]  # type: ignore[return-value]


# The axes `figure_taso` draws TASO's search against, and their labels.
TASO_AXES = {"expansions": "graphs expanded", "seconds": "seconds (this CPU)"}


def figure_taso(panels: Mapping[str, Mapping[str, BaselineCosts]], path: str, title: str,
                by: Sequence[str] = ("expansions",)) -> Dict[str, Dict[str, Dict[str, Curve]]]:
    """Figure 4.2: TASO's search, its best estimated cost / initial
    (`taso_curve`, a step function) against each of `by` (`TASO_AXES`:
    "expansions", "seconds"), one line per graph labelled with the search's
    seconds. One row of panels: per entry of `panels` (graph -> its baseline
    run; titled by the key: the report's cost settings), one per `by`.
    Graphs whose search did not run or kept no trace have no line.

    Returns:
      The lines drawn: per panel key, per `by`, per graph, (x, y).
    """
    plt = _pyplot()
    cells = [(key, axis) for key in panels for axis in by]
    fig, axes = plt.subplots(1, len(cells), figsize=(6 * len(cells), 3.8), squeeze=False)
    drawn: Dict[str, Dict[str, Dict[str, Curve]]] = {}
    for ax, (key, axis) in zip(axes[0], cells):
        lines = drawn.setdefault(key, {}).setdefault(axis, {})
        for g, b in panels[key].items():
            x, cost = taso_curve(b, axis)
            if not x:
                continue
            ax.step(x, cost, where="post", label=f"{g} ({b.taso_seconds:.1f} s)")
            lines[g] = (x, cost)
        ax.set(xlabel=TASO_AXES[axis], ylabel="best estimated cost / initial", title=key)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    _save(plt, fig, title, path)
    return drawn


# The clocks of `figure_baseline_runtimes`, where timed: TensorFlow's wall
# time (the thesis' runtime) and onnxruntime's inference-thread CPU time.
RUNTIME_CLOCKS = ("tf/wall", "ort/cpu")


@dataclasses.dataclass(frozen=True)
class RuntimeBars:
    """One panel of `figure_baseline_runtimes`: one clock, the graphs in
    order. Per variant (those of `BASELINE_VARIANTS` that some graph has,
    in its order: no equality saturation where no graph ran it) and graph:
    the bar's height,
    the variant's median / the original's (NaN where either was not timed
    on this clock), and its error bar below and above (the interquartile
    range of the round medians / the original's median; 0 without a bar).
    Per graph: the original's median ms (None where not timed). On
    TensorFlow's clocks, the thesis' TASO / TF ratio (its GPU) per graph
    (NaN where it has none); None: not drawn (another clock, or no graph
    has one)."""
    clock: str
    graphs: List[str]
    heights: Dict[str, List[float]]
    below: Dict[str, List[float]]
    above: Dict[str, List[float]]
    original_ms: List[Optional[float]]
    thesis: Optional[List[float]]


def runtime_bars(runtimes: Mapping[str, BaselineRuntimes]) -> List[RuntimeBars]:
    """What `figure_baseline_runtimes` plots of `runtimes` (graph -> its
    baseline run's timings): a panel per clock of `RUNTIME_CLOCKS` that
    some graph's original was timed on."""
    names = list(runtimes)
    originals = [runtimes[n].variants["original"].measured for n in names]
    variants = [v for v in BASELINE_VARIANTS if any(v in r.variants for r in runtimes.values())]
    panels = []
    for clock in (c for c in RUNTIME_CLOCKS if any(c in m for m in originals)):
        heights: Dict[str, List[float]] = {}
        below: Dict[str, List[float]] = {}
        above: Dict[str, List[float]] = {}
        for vname in variants:
            h: List[float] = []
            lo: List[float] = []
            hi: List[float] = []
            for n, original in zip(names, originals):
                base = original.get(clock)
                timed = runtimes[n].variants.get(vname)
                m = timed.measured.get(clock) if timed else None
                if m is None or base is None:
                    h.append(np.nan)
                    lo.append(0)
                    hi.append(0)
                    continue
                b = base.median_ms
                h.append(m.median_ms / b)
                lo.append((m.median_ms - m.q1_ms) / b)
                hi.append((m.q3_ms - m.median_ms) / b)
            heights[vname], below[vname], above[vname] = h, lo, hi
        thesis = None
        if clock.startswith("tf"):
            ratios = [t["taso"] / t["tf"] if t else np.nan
                      for t in (runtimes[n].thesis_gpu_ms for n in names)]
            if not np.all(np.isnan(ratios)):
                thesis = ratios
        panels.append(RuntimeBars(
            clock=clock, graphs=names, heights=heights, below=below, above=above,
            original_ms=[None if clock not in m else m[clock].median_ms for m in originals],
            thesis=thesis))
    return panels


def figure_baseline_runtimes(runtimes: Mapping[str, BaselineRuntimes],
                             path: str) -> List[RuntimeBars]:
    """experiments/baselines.py's Figure 4.1: per graph, the measured
    runtime of the original, greedy's, TASO's and equality saturation's
    graphs (those that ran; medians over rounds, interquartile ranges as
    error bars; `runtime_bars`) normalised to the original's, so graphs of
    every size share an axis, with the original's ms written in its bar; one
    panel per clock (TensorFlow's wall time, the thesis', and onnxruntime's
    CPU time), the thesis' TASO / TF ratio (its GPU) as black diamonds on
    TensorFlow's, over TASO's bar.

    Not the report's Figure 4.1 (`figure_runtimes`): that one plots, per
    cost setting, the estimated and measured changes (%) of every variant,
    the agents' included, from the report's rows (no spread); this one the
    baselines alone, with their spread.

    Returns:
      The panels' data, as plotted.
    """
    plt = _pyplot()
    panels = runtime_bars(runtimes)
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    x = np.arange(len(runtimes))
    for ax, panel in zip(axes[0], panels):
        # The variants' bars side by side, 0.8 of a graph's slot in all.
        width = 0.8 / len(panel.heights)
        offset = {v: (i - (len(panel.heights) - 1) / 2) * width
                  for i, v in enumerate(panel.heights)}
        for vname in panel.heights:
            ax.bar(x + offset[vname], panel.heights[vname], width,
                   yerr=[panel.below[vname], panel.above[vname]], capsize=3, label=vname)
        for j, ms in enumerate(panel.original_ms):
            if ms is not None:
                ax.text(j + offset["original"], 0.02, f"{ms:.1f} ms", rotation=90,
                        ha="center", va="bottom", fontsize=7, color="white")
        if panel.thesis is not None:
            ax.scatter(x + offset.get("taso", 0.0), panel.thesis, marker="D", color="black",
                       zorder=3, label="thesis TASO / TF (GPU)")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(x)
        ax.set_xticklabels(panel.graphs, rotation=20)
        ax.set_ylabel(f"{panel.clock} time / original's")
        ax.set_title(f"{panel.clock} (this CPU; TensorRT not run: no GPU)")
        ax.legend(fontsize=8)
    _save(plt, fig, "Figure 4.1: baseline runtimes (median over rounds, IQR bars)", path,
          dpi=120)
    return panels


def _minmax(values: Sequence[float]) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    span = v.max() - v.min() if len(v) else 0.0
    return (v - v.min()) / span if span > 0 else np.zeros_like(v)


def figure_curves(runs: Dict[str, Dict[str, Runs]], series, path: str, title: str,
                  xlabel: str, ylabel: str, normalise: bool) -> None:
    """One panel per setting, one line per graph; `series(runs) -> (x, y)`."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 3.8), squeeze=False)
    for ax, (setting, by_graph) in zip(axes[0], runs.items()):
        for g, r in by_graph.items():
            x, y = series(r)
            if len(x):
                ax.plot(x, _minmax(y) if normalise else y, marker="." if len(x) < 30 else None,
                        label=g)
        ax.set(xlabel=xlabel, ylabel=ylabel, title=setting_label(setting))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    _save(plt, fig, title, path)


def figure_heatmap(rows: Dict[str, Dict[str, GraphRow]], path: str) -> None:
    """Figure 4.8: how often each xfer was applied, per graph and agent
    (model-based, model-free, TASO, greedy); xfers applied at least once."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(rows), figsize=(8 * len(rows), 6), squeeze=False)
    for ax, (setting, by_graph) in zip(axes[0], rows.items()):
        labels, counts = [], []
        for g, r in by_graph.items():
            for agent, applied in (("MB", r.mb_applied), ("MF", r.mf_applied),
                                   ("TASO", r.taso_applied), ("greedy", r.greedy_applied)):
                c: Dict[str, int] = {}
                for a in applied:
                    name = a if isinstance(a, str) else a[0]
                    c[name] = c.get(name, 0) + 1
                labels.append(f"{g} {agent}")
                counts.append(c)
        xfers = sorted({x for c in counts for x in c})
        grid = np.array([[c.get(x, 0) for x in xfers] for c in counts]) if xfers else \
            np.zeros((len(labels), 1))
        im = ax.imshow(grid, aspect="auto", cmap="viridis")
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=6)
        ax.set_xticks(range(len(xfers)))
        ax.set_xticklabels(xfers, rotation=70, fontsize=6)
        for i in range(grid.shape[0]):
            for j in range(len(xfers)):
                if grid[i, j]:
                    ax.text(j, i, int(grid[i, j]), ha="center", va="center", fontsize=5,
                            color="white" if grid[i, j] < grid.max() / 2 else "black")
        ax.set_title(setting_label(setting), fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.03)
    _save(plt, fig, "Figure 4.8: transformations applied (count per graph and agent)", path)


def _mf_reward(r: Runs):
    h = r.mf.history
    return [row["episode"] for row in h], [row["mean_reward"] for row in h]


def _wm_nll(r: Runs):
    rounds = r.mb.world_model.rounds
    return [x.real_steps for x in rounds], [x.held_out["latent_nll"] for x in rounds]


def _dream_return(r: Runs):
    return ([x["episodes"] for x in r.dream_history],
            [x["dream_return"] for x in r.dream_history])


FIGURES = {
    "fig4_1": "fig4_1_baseline_runtimes.png", "fig4_2": "fig4_2_taso_search.png",
    "fig4_3": "fig4_3_model_free_runtimes.png", "fig4_4": "fig4_4_model_free_reward.png",
    "fig4_5": "fig4_5_model_based_runtimes.png", "fig4_6": "fig4_6_world_model_nll.png",
    "fig4_7": "fig4_7_dream_reward.png", "fig4_8": "fig4_8_transformations.png",
}


def write_figures(runs: Dict[str, Dict[str, Runs]], rows: Dict[str, Dict[str, GraphRow]],
                  out_dir: str) -> Dict[str, str]:
    """Figures 4.1-4.8 as PNGs in `out_dir`; returns their paths by key."""
    paths = {k: os.path.join(out_dir, v) for k, v in FIGURES.items()}
    figure_runtimes(rows, ("greedy", "taso"), "taso", paths["fig4_1"],
                    "Figure 4.1: baselines (TensorRT not run: no GPU here)")
    figure_taso({setting_label(setting): {g: baseline_costs(r.baselines)
                                          for g, r in by_graph.items()}
                 for setting, by_graph in runs.items()},
                paths["fig4_2"], "Figure 4.2: TASO's backtracking search (alpha 1.05)")
    figure_runtimes(rows, ("greedy", "taso", "model-free"), "mf", paths["fig4_3"],
                    "Figure 4.3: model-free agent and baselines")
    figure_curves(runs, _mf_reward, paths["fig4_4"], "Figure 4.4: model-free mean episode "
                  "reward (min-max normalised per graph)", "episodes", "normalised reward",
                  True)
    figure_runtimes(rows, ("greedy", "taso", "model-based"), "mb", paths["fig4_5"],
                    "Figure 4.5: model-based agent and baselines")
    figure_curves(runs, _wm_nll, paths["fig4_6"], "Figure 4.6: world model, held-out latent "
                  "negative log-likelihood / (Z+2)", "real environment steps", "NLL", False)
    figure_curves(runs, _dream_return, paths["fig4_7"], "Figure 4.7: imagined return of the "
                  "controller in the dream (min-max normalised per graph)",
                  "imagined episodes", "normalised return", True)
    figure_heatmap(rows, paths["fig4_8"])
    return paths


