"""A model-based run's own report: experiments/train_mb.py's result.md
(`model_based_markdown`) and training.png (`figure_model_based_training`),
both from its `ModelBasedRun` record; `model_free_beside`, the model-free
run on the same graph that the record names beside it.

The tables: the controller's costs (greedy episode, best of greedy and
sampled, greedy on the other masks) beside the baselines', the
world-model planner's and the model-free run's where they ran; the
controller beside the world-model planner (cost change, real steps learnt
from, real steps of their own on the graph and elsewhere, model steps,
wall time); estimated against measured end to end where measured; the
real environment steps by use; the controller after each world-model
round; every evaluation episode. matplotlib is imported on use.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Sequence, Tuple

from xflowrl.results.layout import SETTINGS
from xflowrl.results.records import RecordError
from xflowrl.results.runs import (
    Evaluation,
    ModelBasedRun,
    ModelFreeRun,
    ModelPlannerRun,
    WorldModelRound,
)
from xflowrl.results.tables import change_table

# The masks of the evaluation beside the chosen one (train_mb.py --eval_masks).
OTHER_MASKS = {"real": "model", "model": "real"}


def imagined_steps(dream_history: Sequence[Dict[str, Any]], episodes: int) -> Optional[int]:
    """The controller's imagined steps (its model steps in the dream): per
    update its new episodes times their mean length, summed over the
    history (rows with "episodes", cumulative from 0, and "dream_length";
    a resumed controller's comes back from its checkpoint); None where the
    history does not reach `episodes`."""
    total, seen = 0.0, 0
    for row in dream_history:
        total += (int(row["episodes"]) - seen) * float(row["dream_length"])
        seen = int(row["episodes"])
    return int(round(total)) if seen == episodes and dream_history else None


def figure_model_based_training(path: str, run: ModelBasedRun,
                                dream_history: Sequence[Dict[str, Any]]) -> None:
    """Writes training.png: the world model's held-out and training latent
    NLL and its held-out reward MSE and xfer-mask error per round, against
    real steps; the controller's imagined return per update in the dream
    (`dream_history`: rows with "episodes" and "dream_return"), beside the
    real speed-up of its greedy episode."""
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    rounds = run.world_model.rounds
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    steps = [r.real_steps for r in rounds]
    axes[0].plot(steps, [r.held_out["latent_nll"] for r in rounds], marker="o", label="held out")
    axes[0].plot(steps, [r.train_latent_nll for r in rounds], marker="s", label="train")
    axes[0].set(xlabel="real environment steps", ylabel="latent NLL / (Z+2)",
                title="world model")
    axes[0].legend()
    axes[1].semilogy(steps, [r.held_out["reward_mse"] for r in rounds], marker="o",
                     label="reward MSE")
    axes[1].plot(steps, [1 - r.held_out["xfer_mask_accuracy"] for r in rounds], marker="s",
                 label="xfer-mask error")
    axes[1].set(xlabel="real environment steps", title="held-out errors")
    axes[1].legend()
    if dream_history:
        axes[2].plot([r["episodes"] for r in dream_history],
                     [r["dream_return"] for r in dream_history])
    # The real speed-up, not the real return: that includes the penalty of a
    # final invalid action (a mask error), which the graph does not pay.
    real = 100.0 * (1.0 - run.controller_cost_ms / run.initial_cost_ms)
    axes[2].axhline(real, color="C1", linestyle="--", label=f"real speed-up (greedy) {real:+.3f}")
    axes[2].set(xlabel="imagined episodes", ylabel="return (% speed-up)",
                title="controller in the dream")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _count_accuracy(held_out: dict) -> str:
    """The share of valid xfers whose location count the world model got
    right, as a clause of result.md's summary, where the run recorded it
    (`WorldModelLearner.evaluate`'s `location_count_accuracy`); else ""."""
    if "location_count_accuracy" not in held_out:
        return ""
    return (f", location counts right {held_out['location_count_accuracy']:.3f} "
            f"(per valid xfer)")


def model_based_markdown(run: ModelBasedRun,
                         baseline_rows: Sequence[Tuple[str, float]]) -> str:
    """result.md of a model-based run.

    Args:
      run: the run's record; its `controller` holds the greedy episodes
        "greedy" and "greedy_<other>_masks" (`OTHER_MASKS`).
      baseline_rows: (row name, cost in ms) of the baselines, in table
        order (`xflowrl.search.Baselines.rows`).
    """
    initial = run.initial_cost_ms
    masks = run.eval_masks
    ablation = OTHER_MASKS[masks]
    greedy, other = run.controller["greedy"], run.controller[f"greedy_{ablation}_masks"]
    note = "" if masks == "real" else ", the world model's masks: ablation"
    rows: List[Tuple[str, float]] = [
        ("initial", initial),
        (f"model-based (greedy episode{note})", greedy.final_cost),
        (f"model-based (best of greedy + {len(run.sampled)} sampled{note})",
         run.controller_cheapest_cost_ms),
        (f"model-based, greedy on the {ablation} masks"
         f"{' (ablation: the thesis)' if ablation == 'model' else ''}", other.final_cost)]
    planner = run.model_planner
    if planner is not None:
        rows.append((f"world-model planner{'' if planner.checked else ' (not checked)'}",
                     planner.cost_ms))
    rows += baseline_rows
    mf = run.real_steps.model_free
    if mf and mf.get("agent_cost_ms") is not None:
        rows.append(("model-free PPO (from train_mf.py)", mf["agent_cost_ms"]))
    table = change_table(rows, initial, change_digits=3)
    steps = run.real_steps
    episodes = [(f"greedy, {masks} masks", greedy), (f"greedy, {ablation} masks", other)] + [
        (f"sampled {i + 1}", e) for i, e in enumerate(run.sampled)]
    last = run.world_model.rounds[-1]
    lockstep = (f" + {steps.lockstep_dream} stepped in lockstep by the dream"
                if steps.lockstep_dream else "") + (
        f" + {steps.controller_learning} in the controller's own episodes it learned from"
        if steps.controller_learning else "")
    return (
        f"# Model-based agent on {run.graph} ({_setting(run.cost_model)})\n\n"
        f"World model: {len(run.world_model.rounds)} rounds, vocabulary of "
        f"{run.world_model.vocabulary_known} xfers (of "
        f"{run.world_model.vocabulary} slots), held-out latent NLL "
        f"{last.held_out['latent_nll']:.3f}, reward MSE {last.held_out['reward_mse']:.3e}, "
        f"xfer-mask accuracy {last.held_out['xfer_mask_accuracy']:.3f}, location-mask accuracy "
        f"{last.held_out['location_mask_accuracy']:.3f}{_count_accuracy(last.held_out)}. "
        f"Controller: "
        f"{run.dream_episodes} imagined episodes at temperature "
        f"{run.dream['temperature']}. {run.seconds.total:.0f} s in all.\n\n"
        f"Step limit {run.max_steps} (one-step greedy takes "
        f"{run.greedy_steps} steps; --max_steps={run.requested_max_steps}). The "
        f"controller acts on the {masks} environment's masks"
        f"{'' if masks == 'real' else ' as predicted by the world model'}"
        f"{_selected(run)}.\n\n"
        f"| | cost (ms) | change |\n|---|---|---|\n{table}\n\n"
        f"The controller (best episode) {run.controller_vs_greedy}.\n\n"
        f"{_planner_section(run)}"
        f"{_measured_table(run)}"
        f"Real environment steps: {steps.world_model_rollouts} for the world model's "
        f"rollouts + {steps.held_out_rollouts} held out + {steps.evaluation} in "
        f"evaluation{lockstep}; model-free agent: "
        f"{mf['interactions'] if mf else 'not run (train_mf.py writes it)'}.\n\n"
        f"{_rounds_table(run.world_model.rounds)}"
        f"| evaluation episode | final cost | best cost (after k rewrites) | real return | "
        f"predicted return | invalid actions | steps |\n|---|---|---|---|---|---|---|\n"
        f"{_episodes_table(episodes)}\n\n"
        f"Controller's substitutions (best episode): "
        f"{', '.join(f'{n}@{l}' for n, l in run.controller_cheapest_applied) or 'none'}\n")


def _change(cost: float, initial: float) -> str:
    return f"{100.0 * (cost / initial - 1.0):+.3f}%"


def _planner_section(run: ModelBasedRun) -> str:
    """The controller beside the world-model planner: both learnt from the
    same real episodes; their results, real steps, model steps and wall
    times."""
    planner = run.model_planner
    if planner is None:
        return (f"World-model planner: not run ({run.model_planner_note}).\n\n"
                if run.model_planner_note else "")
    steps, seconds, initial = run.real_steps, run.seconds, run.initial_cost_ms
    learnt = steps.world_model_rollouts + steps.held_out_rollouts
    own = steps.total - learnt
    controller_seconds = seconds.world_model + seconds.controller + (seconds.evaluation or 0.0)
    imagined = f"{run.imagined_steps:,} imagined" if run.imagined_steps is not None else \
        f"{run.dream_episodes:,} imagined episodes"
    return (
        "The dream-trained controller beside the world-model planner (a deterministic "
        "latent model trained on the same real episodes, a MuZero-style search in its "
        "latent space acting on the real graph, greedy's floor; "
        "`xflowrl.planning.model_episodes`):\n\n"
        "| agent | cost change | real steps learnt from | real steps of its own on this "
        "graph | real steps elsewhere | model steps | wall time (s) |\n"
        "|---|---|---|---|---|---|---|\n"
        f"| model-based controller (dream) | {_change(run.controller_cheapest_cost_ms, initial)} | "
        f"{learnt:,} | {own:,} (round evaluations, evaluation) | 0 | {imagined} | "
        f"{controller_seconds:.0f} |\n"
        f"| world-model planner | {_change(planner.cost_ms, initial)} | "
        f"{planner.data_real_steps:,} (the same episodes) | {planner.real_steps} "
        f"({planner.real_steps_to_best} to its result, {planner.planner_real_steps} before "
        f"greedy's floor) | {planner.real_steps_elsewhere} | {planner.model_steps:,} | "
        f"{planner.seconds.total:.0f} |\n\n"
        f"The planner: {planner.states:,} distinct states and {planner.transitions:,} "
        f"transitions of its actions in the episodes, {planner.train_steps} training steps "
        f"({planner.seconds.train:.0f} s), {planner.decisions} decisions "
        f"({planner.checked_actions} actions checked on the real graph; stopped: "
        f"{planner.stopped}; {planner.seconds.plan:.1f} s); its own best "
        f"{_change(planner.planner_cost_ms, initial)}"
        f"{', greedy graph handed over' if planner.from_greedy else ''}. "
        f"{_planner_check(planner)} Its substitutions (@*: a step of a multi-location "
        f"action): {_route(planner.route)}.\n\n")


def _route(route: Sequence[Tuple[str, int, int]]) -> str:
    """A route's steps, runs of one xfer at all its locations as `name@* xk`."""
    parts: List[str] = []
    i = 0
    while i < len(route):
        name, location, _ = route[i]
        if location >= 0:
            parts.append(f"{name}@{location}")
            i += 1
            continue
        run = 1
        while i + run < len(route) and route[i + run][0] == name and route[i + run][1] < 0:
            run += 1
        parts.append(f"{name}@*" + (f" x{run}" if run > 1 else ""))
        i += run
    return ", ".join(parts) or "none"


def _planner_check(planner: ModelPlannerRun) -> str:
    replayed = "replays" if planner.replayed else "does NOT replay"
    outputs = {True: "computes the original's outputs (float64 reference executor, random "
                     "values)",
               False: "does NOT compute the original's outputs",
               None: "could not be run to compare outputs"}[planner.same_outputs]
    verdict = "" if planner.checked else " It is not a result."
    return f"Its graph {replayed} from its route and {outputs}.{verdict}"


def _setting(cost_model: str) -> str:
    """The cost model's name, saying which stands for a GPU."""
    gpu = SETTINGS["gpu"]
    if cost_model == f"{gpu.cost_model}/{gpu.profile}":
        return f"GPU-like profile: {cost_model} cost"
    return f"{cost_model} cost"


def _selected(run: ModelBasedRun) -> str:
    """Which round's agent was deployed, when one was chosen."""
    chosen = run.selected_round
    if not chosen:
        return ""
    return (f"; the deployed agent is round {chosen['round']}'s of "
            f"{len(run.world_model.rounds)} (its greedy real episode reached the "
            f"cheapest graph, {chosen['cost_ms']:.4f} ms)")


def _measured_table(run: ModelBasedRun) -> str:
    """Estimated against measured (TensorFlow) times of the initial, the
    controller's and greedy's graphs, where the run measured them."""
    m: Optional[Dict[str, Any]] = run.measured
    if not m:
        return ""
    base_ms, base_est = m["initial"]["median_ms"], m["initial"]["estimated_ms"]
    lines = "\n".join(
        f"| {name} | {m[name]['estimated_ms']:.4f} "
        f"({100 * (m[name]['estimated_ms'] / base_est - 1):+.3f}%) | "
        f"{m[name]['median_ms']:.2f} [{m[name]['min_ms']:.2f}, {m[name]['max_ms']:.2f}] "
        f"({100 * (m[name]['median_ms'] / base_ms - 1):+.2f}%) |"
        for name in ("initial", "controller", "greedy"))
    weights = "the model's own weights" if run.onnx else "random weights"
    return (f"Estimated vs measured end to end in TensorFlow (onnx-tf, 1 process, "
            f"{weights}; median of {m['rounds']} interleaved rounds [min, max]; "
            f"the controller's graph is its best evaluation episode's):\n\n| graph | "
            f"estimated ms | measured ms |\n|---|---|---|\n{lines}\n\n")


def _rounds_table(rounds: List[WorldModelRound]) -> str:
    """Per round: who collected, real steps, held-out accuracy, and (with
    controller collection) the controller's imagined, predicted and real
    returns: the gap between them should shrink over rounds."""
    if not rounds or rounds[0].controller is None:
        return ""
    lines = ["| round | collected by | real steps | held-out NLL | location-mask acc | "
             "imagined return | predicted return | real return | gap |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rounds:
        c = r.controller
        if c is None:
            continue
        gap = c.imagined_return - c.real_return
        lines.append(
            f"| {r.round} | {r.collection} | {r.real_steps} | "
            f"{r.held_out['latent_nll']:.3f} | {r.held_out['location_mask_accuracy']:.3f} | "
            f"{c.imagined_return:+.3f} | {c.predicted_return:+.3f} | "
            f"{c.real_return:+.3f} | {gap:+.3f} |")
    return ("The controller after each round (greedy; imagined: from the initial graph in "
            "the dream; predicted: the world model's rewards along its real episode):\n\n"
            + "\n".join(lines) + "\n\n")


def _episodes_table(episodes: Sequence[Tuple[str, Evaluation]]) -> str:
    """A row per evaluation episode: where it ended, the cheapest graph it
    passed through (after how many rewrites), returns, invalid actions, steps."""
    return "\n".join(f"| {n} | {e.final_cost:.4f} | "
                     f"{e.cheapest_cost:.4f} ({e.cheapest_prefix_length}) | "
                     f"{e.real_return:+.4f} | "
                     f"{e.predicted_return:+.4f} | {e.invalid_actions} | {e.steps} |"
                     for n, e in episodes)


def model_free_beside(path: str) -> Optional[Dict[str, Any]]:
    """What a model-based run's report says of the model-free run on the
    same graph (train_mf.py's result.json at `path`): its real steps, cost
    and episodes, and `path`; None where there is none, or (with a warning)
    where the file is not a model-free run this code reads."""
    try:
        mf = ModelFreeRun.load(path)
    except RecordError as e:
        logging.getLogger(__name__).warning("not beside the model-free run: %s", e)
        return None
    if mf is None:
        return None
    return {"interactions": mf.interactions, "agent_cost_ms": mf.agent_cost_ms,
            "episodes": mf.episodes, "source": path}
