"""The generalist's results over seeds: one table, medians and ranges.

`seed_results(folder)` reads every `seed*/result.json` that
`experiments/train_generalist.py` wrote under `folder`
(`xflowrl.results.generalist.GeneralistRun`); `markdown(results)`
sets them side by side: per held-out graph the policy's change (median and
[min, max] over seeds) beside one-step greedy, TASO's search and the random
agent (deterministic or averaged, so one figure), and whether the policy
is better than, matches or trails greedy (a difference only when greedy
lies outside the policy's range over seeds); then the summary figures of
each seed (`evaluate.summary`) as median [min, max], and fine-tuning
against training from scratch where runs did it. The model-based agent's
seeds (`--agent=mb`, under `folder/mb/`) add a column and their summaries.
`write_report(folder)` writes the whole report of a results folder
(report.md), as experiments/generalist_report.py prints it.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from xflowrl.results.generalist import (
    FinetunedRun,
    GeneralistRun,
    HeldOutTimings,
    MEASURED_JSON,
    REPORT_MD,
    ZeroShotRow,
    agent_runs,
    seed_runs,
)


def seed_results(folder: str) -> List[GeneralistRun]:
    """The result.json of every seed under `folder`, by seed."""
    return seed_runs(folder)


def _spread(values: Sequence[float], digits: int = 2) -> str:
    values = list(values)
    if len(values) == 1:
        return f"{values[0]:+.{digits}f}%"
    return (f"{np.median(values):+.{digits}f}% [{min(values):+.{digits}f}, "
            f"{max(values):+.{digits}f}]")




def _verdict(changes: Sequence[float], greedy: float) -> str:
    """Better, worse or matching greedy over seeds (a difference only when
    greedy lies outside the range)."""
    if max(changes) < greedy - 1e-6:
        return "better"
    if min(changes) > greedy + 1e-6:
        return "worse"
    if all(abs(p - greedy) <= 1e-6 for p in changes):
        return "matches"
    return "no difference (range spans greedy)"


def _fraction(steps: Optional[int], scratch_steps: int) -> str:
    """Steps to reach as a fraction of the per-graph agent's, and in steps."""
    if steps is None:
        return "not reached"
    return f"{steps / scratch_steps:.2f} ({steps})"


def _lr_note(run: FinetunedRun) -> str:
    """", learning rates x0.1" for a fine-tuning run of other learning rates."""
    return "" if run.lr_scale == 1.0 else f", learning rates x{run.lr_scale:g}"


def _by_graph(results: Sequence[GeneralistRun]) -> Dict[str, List[ZeroShotRow]]:
    by_graph: Dict[str, List[ZeroShotRow]] = {}
    for result in results:
        for row in result.held_out:
            by_graph.setdefault(row.graph, []).append(row)
    return by_graph


def markdown(results: Sequence[GeneralistRun], model_based: Sequence[GeneralistRun] = ()) -> str:
    """The table and summaries of the module docstring; with `model_based`
    (the model-based agent's seeds, `--agent=mb`) its zero-shot change and
    verdict beside the model-free policy's, on the graphs both evaluated."""
    if not results:
        return "no results"
    seeds = [r.seed for r in results]
    by_graph = _by_graph(results)
    mb_by_graph = _by_graph(model_based)
    mb = bool(mb_by_graph)
    head = "| graph | ops | initial ms | policy, zero-shot | greedy | TASO | random | vs greedy |"
    rule = "|---|---:|---:|---:|---:|---:|---:|---|"
    if mb:
        head += " model-based, zero-shot | vs greedy |"
        rule += "---:|---|"
    lines = [f"Seeds {seeds}; policy: median [min, max] over seeds." + (
        f" Model-based agent: seeds {[r.seed for r in model_based]}." if mb else ""), "",
        head, rule]
    for graph, rows in by_graph.items():
        policy = [r.policy_change for r in rows]
        greedy = rows[0].greedy_change
        taso = rows[0].change(rows[0].taso_ms)
        rand = [c for c in (r.change(r.random_ms) for r in rows) if c is not None]
        line = (f"| {graph} | {rows[0].ops} | {rows[0].initial_ms:.4f} | "
                f"{_spread(policy)} | {greedy:+.2f}% | "
                f"{'' if taso is None else f'{taso:+.2f}%'} | "
                f"{_spread(rand) if rand else ''} | {_verdict(policy, greedy)} |")
        if mb:
            other = [r.policy_change for r in mb_by_graph.get(graph, [])]
            line += (f" {_spread(other)} | {_verdict(other, greedy)} |" if other
                     else " | |")
        lines.append(line)
    lines += ["", "| per seed | median [min, max] over seeds |", "|---|---|"]
    keys = ["within_margin_of_greedy", "above_initial", "better_than_greedy", "matches_greedy",
            "policy_vs_taso_time"]
    for label, runs in (("", results), ("model-based: ", model_based)):
        if not runs:
            continue
        for key in keys:
            values = [getattr(r.zero_shot, key) for r in runs]
            lines.append(f"| {label}{key} | {np.median(values):.3f} [{min(values):.3f}, "
                         f"{max(values):.3f}] |")
        train = [r.train_seconds for r in runs]
        lines.append(f"| {label}training seconds | {np.median(train):.0f} [{min(train):.0f}, "
                     f"{max(train):.0f}] |")
        # The model-based agent's per-round controllers: what the dream
        # promised (greedy imagined episodes) against their real return.
        controllers = [row.controller for r in runs for row in r.rounds()
                       if row.controller is not None]
        if controllers:
            imagined = [c.imagined_return for c in controllers]
            real = [c.real_return for c in controllers]
            lines.append(f"| {label}per-round controllers' return, imagined / real "
                         f"(median over {len(controllers)} rounds of all seeds) | "
                         f"{np.median(imagined):+.1f} / {np.median(real):+.1f} |")
        if label:
            steps = [r.interactions for r in runs]
            lines.append(f"| {label}real steps (collection and round evaluations) | "
                         f"{np.median(steps):.0f} [{min(steps):.0f}, {max(steps):.0f}] |")
    tuned = [row for r in results for row in r.finetune]
    if tuned:
        lines += ["", "| graph (seed) | from scratch: change (episodes, steps) | fine-tuned "
                  "generalist: change (episodes, steps) | steps, fine-tuned / scratch | "
                  "steps to reach scratch's result / scratch's steps | the same, counting "
                  "the cheapest graphs passed through: scratch's, fine-tuned's, steps |",
                  "|---|---|---|---:|---:|---|"]
        reach: Dict[str, List[bool]] = {"steps_to_reach": [],
                                        "steps_to_reach_cheapest_graph": []}
        for result in results:
            for row in result.finetune:
                s = row.scratch
                scratch_steps = max(s.interactions, 1)
                for t in row.finetuned:
                    cheapest = (f"{s.cheapest_graph_change:+.3f}%, "
                                f"{t.cheapest_graph_change:+.3f}%, "
                                f"{_fraction(t.steps_to_reach_cheapest_graph, scratch_steps)}")
                    lines.append(f"| {row.graph} ({result.seed}) | {s.change:+.2f}% "
                                 f"({s.episodes}, {s.interactions}) | "
                                 f"{t.change:+.2f}% ({t.episodes}, {t.interactions}"
                                 f"{_lr_note(t)}) | "
                                 f"{t.interactions / scratch_steps:.2f} | "
                                 f"{_fraction(t.steps_to_reach, scratch_steps)} | {cheapest} |")
                for key, pairs in reach.items():
                    known = [getattr(t, key) for t in row.finetuned]
                    if known:  # per (graph, seed): the first time any fine-tuning reached it
                        reached = [k for k in known if k is not None]
                        pairs.append(bool(reached) and min(reached) <= 0.1 * scratch_steps)
        for key, how in (("steps_to_reach", "final graphs"),
                         ("steps_to_reach_cheapest_graph", "the cheapest graphs passed through")):
            if reach[key]:
                lines += ["", f"Fine-tuning reached the per-graph agent's result within 10% of "
                              f"its real steps in {sum(reach[key])} of {len(reach[key])} "
                              f"(graph, seed) pairs, counting {how}."]
        lines += _own_result_lines(results)
        lines += _route_lines(results)
    return "\n".join(lines)


def _own_result_lines(results: Sequence[GeneralistRun]) -> List[str]:
    """When the per-graph agents from scratch first reached their own result,
    as a fraction of their steps, per graph over seeds: the share of its run
    that the target's tenth asks fine-tuning to beat."""
    fractions: Dict[str, List[str]] = {}
    for result in results:
        for row in result.finetune:
            s = row.scratch
            fractions.setdefault(row.graph, []).append(
                f"{result.seed}: {_fraction(s.steps_to_own_result, s.interactions)}")
    if not fractions:
        return []
    return ["", "From scratch, the per-graph agents first reached their own result (final "
                "graphs) after this share of their real steps, per seed: " + "; ".join(
                    f"{graph} {', '.join(values)}" for graph, values in fractions.items()) + "."]


def _route_lines(results: Sequence[GeneralistRun]) -> List[str]:
    """How likely the generalist's sampling is to follow the route of each
    per-graph agent's result, and which of its steps use xfers the
    generalist's greedy episode never applies (where the runs
    record it, `evaluate.route_against`): fine-tuning starts from
    that sampling."""
    routes = []
    for result in results:
        for row in result.finetune:
            route = row.scratch.generalist_route
            if route is not None:
                new = route.new_xfers
                routes.append(
                    f"{row.graph} ({result.seed}): {route.steps} steps, "
                    f"{route.off_greedy} of them not its greedy action, log-probability "
                    f"{route.log_prob:.1f}; {len(new)} with xfers its own greedy episode "
                    f"never applies" + (
                        f", log-probability {sum(p for _, p in new):.1f} ("
                        + _grouped(new) + ")" if new else ""))
    if not routes:
        return []
    return ["", "The per-graph agent's route to its result (the shortest prefix reaching its "
                "cheapest graph) under the generalist's sampling, natural log-probabilities "
                "of taking exactly those steps: " + "; ".join(routes) + "."]


def _grouped(steps: Sequence[Tuple[str, float]]) -> str:
    """(xfer, log-probability) steps grouped by xfer in order of first use:
    "a -4.5, b x3 (-5.6 to -4.9)"."""
    by_xfer: Dict[str, List[float]] = {}
    for xfer, log_prob in steps:
        by_xfer.setdefault(xfer, []).append(log_prob)
    return ", ".join(f"{x} {p[0]:.1f}" if len(p) == 1 else
                     f"{x} x{len(p)} ({min(p):.1f} to {max(p):.1f})" for x, p in by_xfer.items())


def write_report(folder: str) -> str:
    """The report of the results folder `folder` (one cost model and rule
    set, `xflowrl.generalist.pipeline.results_folder`): the policy's seeds
    beside the model-based agent's (or the latter alone), and the held-out
    graphs' estimated and measured changes where they were timed
    (measured.json). Writes it to `folder`/report.md; returns it."""
    # Imported here: measured imports the engine, the tables need only records.
    from xflowrl.generalist import measured  # pylint: disable=import-outside-toplevel
    runs = agent_runs(folder)
    if runs["policy"]:
        text = markdown(runs["policy"], model_based=runs["model-based"])
    else:  # the model-based agent's seeds alone
        text = "Model-based agent.\n\n" + markdown(runs["model-based"])
    timings = HeldOutTimings.load(os.path.join(folder, MEASURED_JSON))
    if timings is not None:
        text += "\n\n## Estimated and measured\n\n" + measured.markdown(timings.graphs)
    with open(os.path.join(folder, REPORT_MD), "w") as f:
        f.write(text + "\n")
    return text
