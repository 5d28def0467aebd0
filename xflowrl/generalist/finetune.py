"""Fine-tuning the generalist against training a per-graph agent from scratch.

`finetune_graphs(generalist_dir, config, ...)`: per named held-out graph, a
per-graph model-free agent trained from scratch for
`FinetuneConfig.scratch_episodes`, against the generalist of
`generalist_dir` fine-tuned for each of `FinetuneConfig.fractions` of that
(its learning rates `lr_scale` times its own). Every run resumes from its
folder under the generalist's own (`<out_dir>/finetune/<graph>/<label>`: a
resumed fine-tuning run must have started from this generalist).

Results are counted two ways, the same for both agents: by final graphs
(the cheapest final graph of a training episode or of the greedy
evaluation), and by the cheapest graph any of those episodes passed through
(what `xflowrl optimize` hands over). Each fine-tuning run records when it
first reached the per-graph agent's result (`evaluate.steps_to_reach`), the
per-graph agent when it reached its own, and how likely the generalist's
sampling is to follow the per-graph agent's route to it
(`evaluate.route_against`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from xflowrl import corpus
from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.agents.ppo.training import TrainConfig, train
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.generalist import evaluate
from xflowrl.policy import has_arrays, load_numpy_policy, load_policy
from xflowrl.results.generalist import FinetuneGraph, FinetunedRun, RouteSummary, ScratchRun
from xflowrl.search import with_equal_step_limit


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """Which held-out graphs, and the budgets of the runs on each.

    Attributes:
      graphs: the corpus graphs (none: no fine-tuning).
      scratch_episodes: the per-graph agent's episodes from scratch.
      fractions: fine-tuning episodes as fractions of `scratch_episodes`
        (one fine-tuning run each).
      lr_scale: fine-tuning's learning rates (policy and value) as a
        multiple of the generalist's; runs of another scale than 1 are
        labelled (and written) apart.
    """
    graphs: Tuple[str, ...] = ()
    scratch_episodes: int = 300
    fractions: Tuple[float, ...] = (0.1, 0.03)
    lr_scale: float = 1.0

    def runs(self) -> List[Tuple[str, int]]:
        """(label, episodes) of every run on a graph: "scratch" first, then
        "finetuned_<episodes>[_lr<scale>]", the longest first."""
        tune = sorted({max(1, int(round(f * self.scratch_episodes))) for f in self.fractions},
                      reverse=True)
        suffix = "" if self.lr_scale == 1.0 else f"_lr{self.lr_scale:g}"
        return [("scratch", self.scratch_episodes)] + [(f"finetuned_{n}{suffix}", n)
                                                       for n in tune]


def finetune_graphs(generalist_dir: str, config: FinetuneConfig, ppo: PPOConfig,
                    xfers: XferSet, cost_model: CostModel, env_config: EnvConfig, seed: int,
                    out_dir: str, progress: Optional[Callable[[str], None]] = None
                    ) -> List[FinetuneGraph]:
    """Per graph of `config`: from scratch against the generalist of
    `generalist_dir` (trained with `ppo`) fine-tuned; see the module
    docstring. Runs are written under `out_dir`/finetune/."""
    rows = []
    for name in config.graphs:
        env = with_equal_step_limit(GraphEnv(corpus.get(name), xfers, cost_model, env_config))
        tuned: List[FinetunedRun] = []
        scratch: Optional[ScratchRun] = None
        target = target_lowest = math.inf
        for label, episodes in config.runs():
            if label == "scratch":
                agent = PPOAgent(len(xfers), ppo, seed=seed)
            else:
                agent = load_policy(generalist_dir, env, seed=seed, config_changes=dict(
                    policy_learning_rate=config.lr_scale * ppo.policy_learning_rate,
                    value_learning_rate=config.lr_scale * ppo.value_learning_rate))
                agent.learner.build()
                zero_shot = agent.run_episode(env, greedy=True, learn=False)
            with_dir = os.path.join(out_dir, "finetune", name.replace("/", "_"), label)
            result = train(env, agent, TrainConfig(episodes=episodes,
                                                   parallel_envs=ppo.episodes_per_update),
                           with_dir, progress=_prefixed(progress, f"{name} {label}: "))
            final = agent.run_episode(env, greedy=True, learn=False)
            lowest = min(final.cheapest_cost, result.cheapest_cost)
            reached = min(final.final_cost, result.best_final_cost)
            common: Dict[str, Any] = dict(episodes=episodes, interactions=result.interactions,
                                          greedy_cost_ms=final.final_cost,
                                          best_training_cost_ms=result.best_final_cost,
                                          change=100.0 * (reached / env.initial_cost - 1.0),
                                          cheapest_graph_ms=lowest,
                                          cheapest_graph_change=100.0 * (
                                              lowest / env.initial_cost - 1.0))
            # The run's updates, then its final greedy evaluation.
            history = result.history + [{"interactions": result.interactions + final.steps,
                                         "greedy_cost": final.final_cost,
                                         "greedy_cheapest_cost": final.cheapest_cost}]
            if label == "scratch":
                target, target_lowest = reached, lowest
                # How likely the generalist's sampling is to follow the route
                # to that result, which fine-tuning from it has to find.
                route = _route_under(generalist_dir, env, final.applied
                                     if final.final_cost <= result.best_final_cost
                                     else result.best_sequence)
                # When the per-graph agent itself first reached its result:
                # how much of its run the target's tenth would have to match.
                scratch = ScratchRun(
                    **common,
                    steps_to_own_result=evaluate.steps_to_reach(target, math.inf, 0, history),
                    steps_to_own_cheapest_graph=evaluate.steps_to_reach(
                        target_lowest, math.inf, 0, history, evaluate.CHEAPEST_GRAPH_KEYS),
                    generalist_route=route)
            else:
                # When it first reached the per-graph agent's result.
                tuned.append(FinetunedRun(
                    **common, lr_scale=config.lr_scale,
                    steps_to_reach=evaluate.steps_to_reach(
                        target, zero_shot.final_cost, zero_shot.steps, history),
                    steps_to_reach_cheapest_graph=evaluate.steps_to_reach(
                        target_lowest, zero_shot.cheapest_cost, zero_shot.steps, history,
                        evaluate.CHEAPEST_GRAPH_KEYS)))
        assert scratch is not None  # runs() puts it first
        rows.append(FinetuneGraph(graph=name, initial_ms=env.initial_cost, finetuned=tuned,
                                  scratch=scratch))
    return rows


def _prefixed(progress: Optional[Callable[[str], None]],
              prefix: str) -> Optional[Callable[[str], None]]:
    """`progress` with `prefix` before every line (None: None)."""
    if progress is None:
        return None
    return lambda line: progress(prefix + line)


def _route_under(generalist_dir: str, env: GraphEnv,
                 applied: Sequence[Tuple[str, int]]) -> Optional[RouteSummary]:
    """`evaluate.route_against` under the generalist of `generalist_dir`;
    None for one saved without its NumPy arrays."""
    if not has_arrays(generalist_dir):
        return None
    return evaluate.route_against(load_numpy_policy(generalist_dir, env), env, applied)
