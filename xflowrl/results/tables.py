"""The report's tables (Tables 4.1-4.3 and the agents', measured runtimes',
steps' and separate reward network's), as Markdown, from its rows
(`xflowrl.results.rows.GraphRow`), with the thesis' figures beside ours;
and the summary lines that state where the agents beat, match or trail
greedy and each other; and baselines.py's summary (`baselines_markdown`);
`change_table`, the cost-and-change rows of the entry points' own tables."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from xflowrl.results.layout import (
    BASELINE_VARIANTS,
    BaselineCosts,
    BaselineRuntimes,
    CLOCKS,
    EQSAT,
    SEPARATE,
    VARIANTS,
    greedy_cost_ms,
    load_seeds,
    mb_cost,
    median_seed,
    pct,
    setting_label,
)
from xflowrl.results.measurement import ClockTiming
from xflowrl.results.rows import GraphRow, over_seeds
from xflowrl.results.runs import ModelBasedRun
from xflowrl.results.sweep import SweepResult
from xflowrl.results.thesis import (
    THESIS_MS,
    THESIS_OPT_SECONDS,
    THESIS_STEPS,
    THESIS_TABLE_4_2,
    THESIS_TABLE_4_3,
)


def number(v: Optional[float], spec: str = ".2f", suffix: str = "") -> str:
    """`v` formatted by `spec`, "-" for None."""
    return "-" if v is None else f"{v:{spec}}{suffix}"


def change(v: Optional[float], base: Optional[float], digits: int = 2) -> str:
    """The change of `v` against `base` as "+1.23%", "-" where either is None."""
    p = pct(v, base)
    return "-" if p is None else f"{p:+.{digits}f}%"


def change_table(rows: Sequence[Sequence[Any]], initial_cost: float,
                 change_digits: int = 2) -> str:
    """Markdown table rows, without a header: per row of `rows`, (name, cost
    in ms, further cells...), the line `| name | cost | change | further
    cells... |`, the change being the cost's relative to `initial_cost`."""
    lines = []
    for name, cost, *cells in rows:
        delta = f"{100 * (cost / initial_cost - 1):+.{change_digits}f}%"
        lines.append("| " + " | ".join([str(name), f"{cost:.4f}", delta]
                                       + [str(c) for c in cells]) + " |")
    return "\n".join(lines)


def change_over_seeds(median: Optional[float], span: Optional[Sequence[float]], seeds: int,
               base: Optional[float], digits: int = 2) -> str:
    """A change over seeds: the median's, and [min, max] where there are
    several seeds."""
    text = change(median, base, digits)
    if seeds > 1 and span:
        text += f" [{change(span[0], base, digits)}, {change(span[1], base, digits)}]"
    return text


def seeds_note(rows: Dict[str, GraphRow]) -> str:
    """What the agents' cells are over several seeds ("" for one)."""
    counts = sorted({len(r.seeds) for r in rows.values()})
    if counts in ([], [1]):
        return ""
    seeds = sorted({s for r in rows.values() for s in r.seeds})
    return (f" Agents: median [min, max] over {'/'.join(map(str, counts))} seeds "
            f"({', '.join(map(str, seeds))}); an agent is called better or worse than "
            "another (or greedy) only where their ranges over seeds do not overlap, else "
            "\"within the range of\". The measured runtimes, steps, wall times, "
            "transformations and curves are the median seed's run (of an even count, the "
            "cheaper of the two middle runs).")


def table_4_1(props: Optional[dict], rows: Dict[str, Dict[str, GraphRow]]) -> str:
    """Graph properties: TF time and memory (this CPU), ops, each setting's estimate."""
    if not props:
        return "Table 4.1: not run.\n"
    keys = list(rows)
    head = ("| graph | type | ops | TF inference ms (this CPU) | memory peak GiB | weights GiB | "
            + " | ".join(f"est. ms ({rows[k][next(iter(rows[k]))].cost_model})" for k in keys
                         if rows[k]) + " |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for p in props["rows"]:
        est = [number(rows[k][p["graph"]].initial_ms) if p["graph"] in rows[k] else "-"
               for k in keys if rows[k]]
        lines.append(f"| {p['graph']} | {p['type']} | {p['ops']} | {p['tf_inference_ms']:.1f}"
                     f" | {number(p['memory_peak_gib'], '.3f')} | {number(p['weights_gib'], '.3f')} | "
                     + " | ".join(est) + " |")
    return ("Thesis' Table 4.1 has its columns (type, inference time, memory) but no "
            "numbers; its Table 4.2 gives a TF time and memory per graph (below). TF = "
            f"TensorFlow through onnx-tf on this CPU, median of {props['repeats']} runs; memory "
            "= TensorFlow's CPU allocator peak.\n\n" + "\n".join(lines) + "\n")


def table_agents(rows: Dict[str, GraphRow]) -> str:
    """Figures 4.3/4.5 in numbers: estimated cost of every agent and baseline."""
    lines = ["| graph | initial ms | greedy (steps) | TASO (budget) | random | model-free | "
             "model-based | model-free vs greedy | model-based vs greedy | thesis MF vs TASO "
             "| thesis MB vs TASO |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for g, r in rows.items():
        t = THESIS_MS.get(g)
        # Each agent's own seeds (a partial report may hold fewer of one).
        k_mf, k_mb = len(r.mf_seed_ms) or len(r.seeds), len(r.mb_seed_ms) or len(r.seeds)
        lines.append(
            f"| {g} | {r.initial_ms:.3f} | {change(r.greedy_ms, r.initial_ms)} ({r.greedy_steps}) "
            f"| {change(r.taso_ms, r.initial_ms)} ({r.taso_budget}) | "
            f"{change(r.random_ms, r.initial_ms)} | "
            f"{change_over_seeds(r.mf_ms, r.mf_range, k_mf, r.initial_ms)} | "
            f"{change_over_seeds(r.mb_ms, r.mb_range, k_mb, r.initial_ms)} | {r.mf_vs_greedy} | "
            f"{r.mb_vs_greedy} | "
            f"{change(t['mf'], t['taso'], 1) if t else '-'} | "
            f"{change(t['mb'], t['taso'], 1) if t else '-'} |")
    return ("Estimated cost change against the initial graph (negative: faster), all under "
            "the same cost model; model-free = its greedy policy, model-based = best of its "
            "greedy and sampled evaluation episodes in the real environment; random = mean "
            "of the random agent's episodes." + seeds_note(rows) + "\n\n" + "\n".join(lines)
            + "\n")


def table_measured(rows: Dict[str, GraphRow]) -> str:
    """Measured end to end on this CPU, every variant, with its estimate."""
    if not any(r.measured for r in rows.values()):
        return ("Not measured: the measure step times the graphs after every run has "
                "finished (a partial report, `reproduce.py --report_only`, has none).\n")
    clocks = [c for c in CLOCKS if any(c in m for r in rows.values()
                                       for m in r.measured.values())]
    lines = ["| graph | variant | est. change | " + " | ".join(
        f"{c} ms | {c} change" for c in clocks) + " | thesis GPU ms |",
        "|---|---|---|" + "---|---|" * len(clocks) + "---|"]
    thesis_key = {"original": "tf", "taso": "taso", "model-free": "mf", "model-based": "mb"}
    for g, r in rows.items():
        if not r.measured:
            continue
        est = {"original": r.initial_ms, "greedy": r.greedy_ms, "taso": r.taso_ms,
               "model-free": r.mf_ms, "model-based": r.mb_ms, SEPARATE: r.mb_separate_ms}
        base = r.measured["original"]
        for v in VARIANTS:
            if v not in r.measured:
                continue
            same = f" (= {r.same_graph[v]})" if r.same_graph.get(v, v) != v else ""
            cells = []
            for c in clocks:
                m = r.measured[v].get(c)
                lo, hi = r.measured_iqr[v].get(c, [None, None])
                cells.append(f"{number(m)} ({number(lo)}-{number(hi)}) | {change(m, base.get(c))}")
            t = THESIS_MS.get(g, {}).get(thesis_key.get(v, ""))
            lines.append(f"| {g} | {v}{same} | {change(est[v], r.initial_ms)} | "
                         + " | ".join(cells) + f" | {number(t)} |")
    return ("End-to-end runtime on this CPU (median of interleaved rounds, interquartile "
            "range of the round medians in brackets): `ort/cpu` = onnxruntime, one thread, "
            "its CPU time (the steady figure on this shared machine); `tf` = TensorFlow "
            "through onnx-tf (the thesis' runtime), process CPU time and wall time. Variants "
            "with the same graph are timed once. The thesis column is its GPU's mean time "
            "(TF for the original).\n\n" + "\n".join(lines) + "\n")


def table_4_2(props: Optional[dict], rows: Dict[str, GraphRow]) -> str:
    """Inference time, memory and % improvement of the model-based agent."""
    tf = {p["graph"]: p for p in (props or {}).get("rows", [])}
    lines = ["| graph | TF ms (ours, CPU) | memory GiB (ours) | MB est. improvement | MB "
             "measured ort/cpu | MB measured tf/cpu | thesis TF ms | thesis memory GiB | "
             "thesis % improvement |", "|---|---|---|---|---|---|---|---|---|"]
    for g, r in rows.items():
        p, t = tf.get(g), THESIS_TABLE_4_2.get(g)
        base = r.measured.get("original", {})
        mb = r.measured.get("model-based", {})

        def impr(v, b):
            return "-" if v is None or b is None else f"{100 * (1 - v / b):+.2f}%"
        lines.append(
            f"| {g} | {number(p['tf_inference_ms'] if p else None, '.1f')} | "
            f"{number(p['memory_peak_gib'] if p else None, '.3f')} | {impr(r.mb_ms, r.initial_ms)} "
            f"| {impr(mb.get('ort/cpu'), base.get('ort/cpu'))} | "
            f"{impr(mb.get('tf/cpu'), base.get('tf/cpu'))} | "
            f"{t[0] if t else '-'} | {t[1] if t else '-'} | {f'{t[2]}%' if t else '-'} |")
    return ("Improvement = 1 - optimised / original (positive: faster). Ours: estimated under "
            "this setting's cost model, and measured on this CPU; the thesis': measured on its "
            "GPU against TensorFlow (its TASO-backend time of the optimised graph, so a "
            "runtime change as well as a graph change).\n\n" + "\n".join(lines) + "\n")


def table_4_3(sweep: Optional[SweepResult], setting: str, measured: Dict[float, List[float]]) -> str:
    """Temperature sweep: world-model and real scores per tau, the real
    episodes' graphs measured on this CPU, and the thesis' scores."""
    if not sweep:
        return "Table 4.3: not run.\n"
    lines = ["| temperature | world-model score | real score (est.) | measured ort/cpu change "
             "| thesis world-model score | thesis real score |",
             "|---|---|---|---|---|---|"]
    for r in sweep.rows:
        t = THESIS_TABLE_4_3.get(r.temperature)
        m = measured.get(r.temperature)
        lines.append(f"| {r.temperature} | {r.world_model_mean:+.3f}% ± "
                     f"{r.world_model_std:.3f} | {r.real_mean:+.3f}% ± "
                     f"{r.real_std:.3f} | "
                     + (f"{np.mean(m):+.2f}% ± {np.std(m):.2f}" if m else "-") + " | "
                     + (f"{t[0]:+.2f}% ± {t[1]} | {t[2]:+.2f}% ± {t[3]}" if t else "- | -")
                     + " |")
    return (f"{sweep.graph}, {sweep.seeds} seed(s) (thesis: BERT, 5), "
            f"{sweep.dream_episodes} imagined episodes per controller, estimated cost "
            f"under {setting_label(setting)}; scores are runtime changes in % (negative: faster), mean "
            "± std over seeds. The measured change is each seed's real-episode graph timed "
            "on this CPU by the measure step, interleaved with the original graph.\n\n"
            + "\n".join(lines) + "\n")


def table_steps(rows: Dict[str, GraphRow]) -> str:
    """Real environment steps and wall times: training, optimising, TASO."""
    lines = ["| graph | MF steps (to final cost) | MB real steps | MF train s | MB train s | "
             "MF optimise s | MB optimise s | greedy s | TASO s (budget) | thesis TASO s vs "
             "policy s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for g, r in rows.items():
        t = THESIS_OPT_SECONDS.get(g)
        lines.append(
            f"| {g} | {r.mf_interactions} ({r.mf_steps_to_final}) | {r.mb_real_steps} | "
            f"{r.mf_train_seconds:.0f} | {r.mb_train_seconds:.0f} | "
            f"{number(r.mf_optimize_seconds)} | {number(r.mb_optimize_seconds)} | "
            f"{r.greedy_seconds:.2f} | {number(r.taso_seconds)} ({r.taso_budget}) | "
            + (f"{t[0]} vs {t[1]}" if t else "-") + " |")
    return ("Real environment steps: the model-free agent's over its training (in brackets: "
            "until its greedy evaluation first reached its final cost); the model-based "
            "agent's random rollouts for the world model, held-out rollouts and real "
            f"evaluation episodes. Thesis: about {THESIS_STEPS['model_free']:,} (model-free, "
            f"2000 episodes) vs {THESIS_STEPS['model_based']:,} (model-based). Optimise s = "
            "one greedy episode of the trained policy in the real environment (the model-based "
            "one is its second greedy episode: the first traces its functions); thesis times: "
            "2019 xflowrl, TASO budget 1000, GTX 780.\n\n" + "\n".join(lines) + "\n")


def table_separate(results: str, setting: str, graphs: Sequence[str],
                   rows: Dict[str, GraphRow], seeds: Sequence[int] = (0,)) -> str:
    """train_mb --reward_model=separate against the MDN-RNN's reward head."""
    lines = ["| graph | reward model | controller est. change (best) | greedy | measured "
             "ort/cpu change | held-out reward MSE | predicted return | real return |",
             "|---|---|---|---|---|---|---|---|"]
    root = os.path.join(results, setting)
    for g in graphs:
        for model, parts, variant in (
                ("mdn", (g, "train_mb", "result.json"), "model-based"),
                ("separate", ("separate_reward", g, "train_mb", "result.json"), SEPARATE)):
            by_seed = load_seeds(root, seeds, ModelBasedRun, *parts)
            if not by_seed:
                continue
            mb = by_seed[median_seed(by_seed, mb_cost)]
            spread = over_seeds([mb_cost(r) for r in by_seed.values()])
            measured = rows[g].measured if g in rows else {}
            last = mb.world_model.rounds[-1]
            ev = mb.controller["greedy"]
            lines.append(f"| {g} | {model} | "
                         f"{change_over_seeds(spread.median, [spread.low, spread.high], spread.count, mb.initial_cost_ms, 3)} | "
                         f"{change(greedy_cost_ms(mb.baselines), mb.initial_cost_ms, 3)} | "
                         f"{change(measured.get(variant, {}).get('ort/cpu'), measured.get('original', {}).get('ort/cpu'))} | "
                         f"{last.held_out['reward_mse']:.3e} | {ev.predicted_return:+.4f} | "
                         f"{ev.real_return:+.4f} |")
    several = len(seeds) > 1
    return ("The same budgets and seed" + ("s" if several else "") + "; only the reward head "
            "differs (thesis §4.3.4 left this experiment as a TODO). Returns of the greedy "
            "evaluation episode" + (" of the median seed's run; the controller's change is "
                                    "the median [min, max] over seeds" if several else "")
            + "; the measured change is the measure step's (see the measured runtimes "
            "above).\n\n" + "\n".join(lines) + "\n")




def summary_lines(rows: Dict[str, Dict[str, GraphRow]]) -> List[str]:
    """Counts the text states: where the agents beat, match or trail greedy
    and each other (over seeds: only where the ranges do not overlap), and
    the range of the measured changes."""
    out = []
    for setting, by_graph in rows.items():
        for agent, key, other in (("model-free", "mf_vs_greedy", "greedy"),
                                  ("model-based", "mb_vs_greedy", "greedy"),
                                  ("model-based against model-free", "mb_vs_mf",
                                   "model-free")):
            verdicts = {g: getattr(r, key) for g, r in by_graph.items()}
            kinds = [f"better than {other}", f"only matches {other}", f"worse than {other}"]
            # Shown where it occurs: with one seed a range is a point.
            kinds += [v for v in [f"within the range of {other}"] if v in verdicts.values()]
            groups = {v: [g for g, w in verdicts.items() if w == v] for v in kinds}
            out.append(f"- {setting_label(setting)}, {agent}: " + "; ".join(
                f"{v} on {len(gs)} ({', '.join(gs) or '-'})" for v, gs in groups.items()) + ".")
        taso_eq = [g for g, r in by_graph.items()
                   if r.taso_ms is not None and np.isclose(r.taso_ms, r.greedy_ms, rtol=1e-9)]
        out.append(f"- {setting_label(setting)}: TASO's search equals one-step greedy's cost on "
                   f"{len(taso_eq)} of {len(by_graph)} graphs ({', '.join(taso_eq) or '-'}).")
        changes = [c for c in (pct(r.measured[v]["ort/cpu"], r.measured["original"]["ort/cpu"])
                               for r in by_graph.values() for v in VARIANTS[1:]
                               if v in r.measured and "ort/cpu" in r.measured[v])
                   if c is not None]
        if changes:
            out.append(f"- {setting_label(setting)}: measured ort/cpu change of the optimised graphs "
                       f"from {min(changes):+.1f}% to {max(changes):+.1f}% (negative: faster).")
    return out




def _spread_ms(m: Optional[ClockTiming]) -> str:
    return f"{m.median_ms:.2f} ({m.q1_ms:.2f}-{m.q3_ms:.2f})" if m else "-"


def _timing_change(m: Optional[ClockTiming], base: Optional[ClockTiming]) -> str:
    return f"{100 * (m.median_ms / base.median_ms - 1):+.1f}%" if m and base else "-"


def _eqsat_cells(c: BaselineCosts) -> List[str]:
    """The estimated-cost table's equality-saturation cells of one graph:
    its cost (time limit, why saturation stopped, e-nodes, whose
    extraction, seconds) and its change against greedy; dashes where it did
    not run."""
    if c.eqsat_ms is None:
        return ["-", "-"]
    return [f"{c.eqsat_ms:.4f} ({c.eqsat_time_limit_s:g} s, {c.eqsat_stop_reason}, "
            f"{c.eqsat_e_nodes}, {c.eqsat_handed_over}, {c.eqsat_seconds:.1f})",
            f"{100 * (c.eqsat_ms / c.greedy_ms - 1):+.2f}%"]


def baselines_markdown(costs: Mapping[str, BaselineCosts],
                       runtimes: Mapping[str, BaselineRuntimes], tensorrt: str) -> str:
    """baselines.py's summary (baselines.md): per graph (in the order of
    `costs`) the estimated costs and searches, then each variant's measured
    runtimes on this CPU with the thesis' GPU figures beside them;
    `tensorrt` says why TensorRT was not run. Equality saturation's columns
    and rows appear where some graph ran it."""
    eqsat = any(c.eqsat_ms is not None for c in costs.values())
    searches = ("one-step greedy, TASO's search and equality saturation" if eqsat
                else "one-step greedy and TASO's search")
    lines = [
        f"# Baselines: original, {searches} (Figures 4.1, 4.2)",
        "",
        "Ours: this machine's CPU (no GPU). Theirs (thesis, arXiv 2205.01435): "
        "mean inference ms on the thesis' GPU. Absolute times are not comparable across "
        "the two; compare the changes. Our times are the median over interleaved rounds "
        "(interquartile range of the round medians in brackets); `tf` = TensorFlow "
        "through onnx-tf (Grappler on, default thread pools), `ort` = onnxruntime with "
        "one thread; `wall` = latency, `cpu` = CPU time (onnxruntime: the inference "
        "thread's; TensorFlow: the whole process's). TensorRT: " + tensorrt + ".",
        "",
        "## Estimated cost and searches",
        "",
    ]
    header = ("| graph | ops | cost model | initial est. ms | greedy est. ms (steps, s) | "
              "TASO est. ms (budget, expansions, s) | TASO vs greedy |")
    columns = 7
    if eqsat:
        lines += ["Equality saturation (TENSAT's method, `xflowrl.search.eqsat`): the "
                  "e-graph grown under the rules for the time limit, then the cheaper of a "
                  "greedy and an ILP extraction; its graph is extracted, not stepped to.", ""]
        header += (" eqsat est. ms (time limit, stop, e-nodes, extraction, s) | "
                   "eqsat vs greedy |")
        columns += 2
    lines += [header, "|" + "---|" * columns]
    for name, c in costs.items():
        taso, vs = "skipped", "-"
        if c.taso_ms is not None:
            taso = (f"{c.taso_ms:.4f} ({c.taso_budget}, {c.taso_expansions}, "
                    f"{c.taso_seconds:.1f})")
            vs = f"{100 * (c.taso_ms / c.greedy_ms - 1):+.2f}%"
        lines.append(f"| {name} | {c.ops} | {c.cost_model} | {c.initial_ms:.4f}"
                     f" | {c.greedy_ms:.4f} ({c.greedy_steps}, {c.greedy_seconds:.1f})"
                     f" | {taso} | {vs} |"
                     + "".join(f" {cell} |" for cell in (_eqsat_cells(c) if eqsat else [])))
    clocks = [f"{rt}/{clock}" for rt in ("tf", "ort") for clock in ("wall", "cpu")]
    lines += ["", "## Measured runtimes, ms (this CPU), with the thesis' (GPU)", "",
              "| graph | variant | " + " | ".join(clocks) + " | change tf/wall | "
              "change ort/cpu | thesis GPU ms | TensorRT |",
              "|---|---|" + "---|" * (len(clocks) + 4)]
    for name in costs:
        r = runtimes[name]
        thesis = r.thesis_gpu_ms or {}
        base = r.variants["original"].measured
        for vname in BASELINE_VARIANTS:
            v = r.variants.get(vname)
            if v is None:
                continue
            ref = {"original": f"TF {thesis['tf']}" if "tf" in thesis else "-",
                   "greedy": "- (not reported)",
                   "taso": f"TASO {thesis['taso']}" if "taso" in thesis else "-",
                   EQSAT: "- (not in the thesis)"}[vname]
            trt = ("not run" + (f" (thesis: {thesis['trt']})" if "trt" in thesis else "")
                   if vname == "original" else "")
            earlier = BASELINE_VARIANTS[:BASELINE_VARIANTS.index(vname)]
            same = next((f" (= {e})" for e in earlier if e in r.variants
                         and r.variants[e].graph_key == v.graph_key), "")
            lines.append(f"| {name} | {vname}{same} | "
                         + " | ".join(_spread_ms(v.measured.get(c)) for c in clocks)
                         + f" | {_timing_change(v.measured.get('tf/wall'), base.get('tf/wall'))}"
                         f" | {_timing_change(v.measured.get('ort/cpu'), base.get('ort/cpu'))}"
                         f" | {ref} | {trt} |")
    speedups = [f"{n} {r.thesis_gpu_ms['tf'] / r.thesis_gpu_ms['taso']:.2f}x"
                for n, r in runtimes.items() if r.thesis_gpu_ms]
    if speedups:
        lines += ["", "Thesis speed-up of TASO's graph over TensorFlow (GPU): "
                  + ", ".join(speedups) + "."]
    lines.append("")
    return "\n".join(lines)
