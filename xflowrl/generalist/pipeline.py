"""One agent for many graphs: trained over the corpus' training split,
evaluated zero-shot on its held-out split (experiments/train_generalist.py).

`train_generalist(config, command)` trains the agent `config` names (the
model-free PPO policy, or the model-based agent) in the training
distribution (`distribution.training_env`), resuming from its seed folder
(`GeneralistConfig.seed_dir`); the model-free policy is saved as a policy
folder (`policy.save_policy`, loadable by `xflowrl optimize
--method=policy:DIR`) whose policy.json names the commit and `command` that
trained it, which a resumed finished run keeps. The model-based agent is
trained and selected as every entry point does
(`xflowrl.optimize.handover.train_model_based`).

`evaluate_generalist(config, trained)` plays the trained agent's greedy
episode on every held-out graph beside the baselines (`evaluate.zero_shot`)
and, with `FinetuneConfig.graphs`, compares fine-tuning it against per-graph
agents from scratch (`finetune.finetune_graphs`): a
`xflowrl.results.generalist.GeneralistRun`, which `run_markdown` sets out
as result.md. `trace_lines` plays the agent's greedy episode step by step;
`ship` copies a policy folder to the package's shipped one.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import shutil
import time
from typing import Any, Callable, Iterator, List, NamedTuple, Optional, Sequence, TYPE_CHECKING

from xflowrl import corpus
from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.agents.ppo.training import TrainConfig, train
from xflowrl.engine import CostModel, XferSet
from xflowrl.engine.cost import DEFAULT_BACKEND, GPU_PROFILE
from xflowrl.engine.xfers import DEFAULT_MAX_LOCATIONS, TASO_BUDGET
from xflowrl.entry_points import cost_model_from_spec
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.env.replay import trace
from xflowrl.generalist import evaluate
from xflowrl.generalist.distribution import training_env
from xflowrl.generalist.finetune import FinetuneConfig, finetune_graphs
from xflowrl.policy import PolicyInfo, SHIPPED, current_commit, read_info, save_policy
from xflowrl.results.generalist import GeneralistRun
from xflowrl.rules.sets import DEFAULT_RULE_SET
from xflowrl.search import greedy_search, with_equal_step_limit

if TYPE_CHECKING:
    from xflowrl.world_model import DreamConfig, WorldModelConfig

Progress = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class GeneralistConfig:
    """One generalist run: the agent, the setting it trains and is evaluated
    in, its budgets and where it is written.

    Attributes:
      agent: "mf" (the model-free PPO policy) or "mb" (the model-based agent).
      rules, cost_model, profile: the rule set and cost model of training
        and evaluation.
      max_steps: the step limit per episode (raised to 1.5 x greedy's steps
        on a graph where that is more); max_locations: L.
      seed: of the policy, its sampling and the graph draws.
      episodes: model-free training episodes.
      eval_limit: evaluate only the first N held-out graphs (0: all).
      taso_budget, random_episodes: the evaluation's baselines.
      relative_location_cost: `PPOConfig.relative_location_cost` of the
        model-free agents (the generalist and the per-graph ones).
      finetune: fine-tuning against from scratch (model-free only).
      world_model, dream: the model-based agent's configs (its controller's
        is `controller_ppo_config`); required with agent "mb".
      results_dir: the results root (`results_folder`).
    """
    agent: str = "mf"
    rules: str = DEFAULT_RULE_SET
    cost_model: str = DEFAULT_BACKEND
    profile: str = GPU_PROFILE
    max_steps: int = 30
    max_locations: int = DEFAULT_MAX_LOCATIONS
    seed: int = 0
    episodes: int = 1500
    eval_limit: int = 0
    taso_budget: int = TASO_BUDGET
    random_episodes: int = 5
    relative_location_cost: bool = False
    finetune: FinetuneConfig = FinetuneConfig()
    world_model: Optional["WorldModelConfig"] = None
    dream: Optional["DreamConfig"] = None
    results_dir: str = "results"

    def __post_init__(self):
        if self.agent not in ("mf", "mb"):
            raise ValueError(f"agent {self.agent!r}: one of 'mf', 'mb'")
        if self.model_based and (self.world_model is None or self.dream is None):
            raise ValueError("the model-based agent needs world_model and dream configs")

    @property
    def model_based(self) -> bool:
        return self.agent == "mb"

    @property
    def cost_spec(self) -> str:
        """The cost model as one string, backend/profile."""
        return f"{self.cost_model}/{self.profile}"

    @property
    def folder(self) -> str:
        """The results folder of the setting (`results_folder`)."""
        return results_folder(self.results_dir, self.cost_model, self.profile, self.rules)

    @property
    def seed_dir(self) -> str:
        """The run's folder: folder/seed<seed>, the model-based agent's under folder/mb/."""
        return os.path.join(self.folder, *(["mb"] if self.model_based else []),
                            f"seed{self.seed}")

    def ppo(self) -> PPOConfig:
        """The model-free agents' PPO settings (X-RLflow's), the generalist's
        and the per-graph agents' of fine-tuning alike."""
        return dataclasses.replace(PPOConfig.xrlflow(),
                                   relative_location_cost=self.relative_location_cost)


def results_folder(results_dir: str, cost_model: str, profile: str, rules: str) -> str:
    """results_dir/generalist/<cost model>_<profile>[-<rules>] (the rule set
    named where it is not the default): the seeds' folders lie under it."""
    setting = f"{cost_model}_{profile}"
    if rules != DEFAULT_RULE_SET:
        setting += f"-{rules}"
    return os.path.join(results_dir, "generalist", setting)


class Setting(NamedTuple):
    """The rules, cost model and environment config of a run."""
    xfers: XferSet
    cost_model: CostModel
    env: EnvConfig


def setting_of(config: GeneralistConfig) -> Setting:
    """The built setting `config` names."""
    return Setting(XferSet.from_name(config.rules), cost_model_from_spec(config.cost_spec),
                   EnvConfig(max_steps=config.max_steps, max_locations=config.max_locations))


@dataclasses.dataclass
class Trained:
    """A trained generalist: the agent, what its training took, and the
    folder its policy lies in (the model-based agent's: its seed folder)."""
    agent: Any
    setting: Setting
    episodes: int
    interactions: int
    seconds: float
    history: List[Any]
    policy_dir: str


def train_generalist(config: GeneralistConfig, command: str,
                     progress: Optional[Progress] = None) -> Trained:
    """Trains (or resumes) the agent `config` names over the training split;
    see the module docstring. `command` is recorded in the model-free
    policy's policy.json."""
    setting = setting_of(config)
    env = training_env(setting.xfers, setting.cost_model, setting.env, config.seed)
    if config.model_based:
        return _train_model_based(config, setting, env, progress)
    ppo = config.ppo()
    agent = PPOAgent(len(setting.xfers), ppo, seed=config.seed,
                     max_locations=config.max_locations)
    result = train(env, agent, TrainConfig(episodes=config.episodes,
                                           parallel_envs=ppo.episodes_per_update),
                   config.seed_dir)
    policy_dir = os.path.join(config.seed_dir, "policy")
    commit = current_commit()
    previous = read_info(policy_dir)
    if previous is not None and (previous.seed, previous.episodes) == (config.seed,
                                                                       result.episodes):
        # A finished run resumed (to evaluate or fine-tune again): the
        # policy is the one trained then, by that commit and command.
        commit, command = previous.commit, previous.command
    info = PolicyInfo(ppo=dataclasses.asdict(ppo), rules=config.rules,
                      num_xfers=len(setting.xfers), max_locations=config.max_locations,
                      cost_model=setting.cost_model.name,
                      graphs=[s.name for s in corpus.specs("train")],
                      episodes=result.episodes, seed=config.seed, commit=commit,
                      command=command)
    save_policy(agent, policy_dir, info)
    return Trained(agent, setting, result.episodes, result.interactions, result.seconds,
                   result.history, policy_dir)


def _train_model_based(config: GeneralistConfig, setting: Setting, env,
                       progress: Optional[Progress]) -> Trained:
    """The model-based agent over the training graphs (resumes from its
    seed folder): world-model rounds with the controller in the dream after
    each, then the round whose greedy real episodes on the training graphs
    reached the cheapest graphs on average."""
    # Imported here: the model-free runs skip TF Probability.
    # pylint: disable=import-outside-toplevel
    from xflowrl.optimize.handover import train_model_based
    from xflowrl.world_model import ModelBasedAgent
    from xflowrl.world_model.config import controller_ppo_config
    assert config.world_model is not None and config.dream is not None
    start = time.time()
    agent = ModelBasedAgent(env, config.seed_dir, config.world_model, config.dream,
                            controller_ppo_config(config.dream.batch_size), seed=config.seed,
                            progress=progress)
    state = train_model_based(agent).world_model
    assert agent.controller is not None  # trained
    steps = (state.real_steps + state.held_out_steps + state.evaluation_steps
             + agent.controller_real_steps)
    return Trained(agent, setting, int(agent.controller.episodes.numpy()), int(steps),
                   time.time() - start, state.to_state()["rounds"], config.seed_dir)


def held_out_specs(config: GeneralistConfig) -> List[corpus.GraphSpec]:
    """The held-out graphs the run evaluates (the first `eval_limit`, if set)."""
    held_out = corpus.specs("held_out")
    return held_out[:config.eval_limit] if config.eval_limit else held_out


def evaluate_generalist(config: GeneralistConfig, trained: Trained,
                        progress: Optional[Progress] = None) -> GeneralistRun:
    """The trained agent zero-shot on the held-out graphs beside the
    baselines, and fine-tuning against from scratch where `config` names
    graphs: the run's record."""
    xfers, cost_model, env_config = trained.setting
    start = time.time()
    rows = evaluate.zero_shot(trained.agent, {s.name: s.build for s in held_out_specs(config)},
                              xfers, cost_model, env_config, taso_budget=config.taso_budget,
                              random_episodes=config.random_episodes, seed=config.seed,
                              progress=progress)
    eval_seconds = time.time() - start
    finetune = (finetune_graphs(trained.policy_dir, config.finetune, config.ppo(), xfers,
                                cost_model, env_config, config.seed, config.seed_dir, progress)
                if config.finetune.graphs else [])
    return GeneralistRun(
        agent=config.agent, cost_model=cost_model.name, rules=config.rules, seed=config.seed,
        episodes=trained.episodes, interactions=trained.interactions,
        train_seconds=trained.seconds, eval_seconds=eval_seconds,
        training_graphs=[s.name for s in corpus.specs("train")], held_out=rows,
        zero_shot=evaluate.zero_shot_summary(rows), finetune=finetune,
        policy=trained.policy_dir, commit=current_commit(), history=trained.history)


def run_markdown(run: GeneralistRun) -> str:
    """result.md: the zero-shot table and summary, and fine-tuning against
    from scratch where the run did it."""
    model_based = run.agent == "mb"
    what = "imagined episodes of the controller" if model_based else "episodes"
    text = (f"# One {'model-based agent' if model_based else 'policy'} for many graphs "
            f"({run.cost_model}, seed {run.seed})\n\n"
            f"Trained {run.episodes} {what} ({run.interactions} real steps, "
            f"{run.train_seconds:.0f} s) over {len(run.training_graphs)} training graphs; "
            f"zero-shot on {len(run.held_out)} held-out graphs:\n\n"
            f"{evaluate.markdown(run.held_out)}\n\n"
            f"Summary: {dataclasses.asdict(run.zero_shot)}\n")
    if run.finetune:
        text += ("\n## Fine-tuning vs from scratch\n\n| graph | scratch | fine-tuned |\n"
                 "|---|---|---|\n")
        for row in run.finetune:
            tuned = ", ".join(f"{t.change:+.2f}% ({t.episodes} episodes, "
                              f"{t.interactions} steps)" for t in row.finetuned)
            text += (f"| {row.graph} | {row.scratch.change:+.2f}% "
                     f"({row.scratch.interactions} steps) | {tuned} |\n")
    return text


def trace_lines(agent, names: Sequence[str], setting: Setting) -> Iterator[str]:
    """The agent's greedy episode on each corpus graph of `names` (the
    zero-shot evaluation's episode), step by step; then the rewrites one-step
    greedy applies there, counted, and (model-based) those outside the
    agent's vocabulary, which it can never choose."""
    xfers, cost_model, env_config = setting
    vocab = getattr(agent, "vocab", None)
    for name in names:
        env = with_equal_step_limit(GraphEnv(corpus.get(name), xfers, cost_model, env_config))
        episode = agent.run_episode(env, greedy=True, learn=False)
        initial = env.initial_cost
        yield f"{name}: initial {initial:.4f} ms, step limit {env.config.max_steps}"
        for k, (xfer, location, cost) in enumerate(trace(env, episode.applied), 1):
            yield (f"  {k:3d}  {xfer:<28} location {location:<4} {cost:.4f} ms "
                   f"({100.0 * (cost / initial - 1.0):+.2f}%)")
        greedy = greedy_search(env.with_config(max_steps=NO_STEP_LIMIT))
        used = collections.Counter(xfer for xfer, _ in greedy.applied)
        yield (f"  greedy: {100.0 * (greedy.final_cost / initial - 1.0):+.2f}% with "
               + ", ".join(f"{xfer} x{n}" for xfer, n in used.most_common()))
        if vocab is not None:
            index = {n: i for i, n in enumerate(xfers.names)}
            outside = [x for x in used if vocab.to_compact(index[x]) < 0]
            yield f"  of those outside the agent's vocabulary: {', '.join(outside) or 'none'}"


def ship(policy_dir: str, shipped: str = SHIPPED) -> str:
    """Copies the policy folder `policy_dir` to the package's shipped folder
    (replacing what was there); returns that folder."""
    if os.path.isdir(shipped):
        shutil.rmtree(shipped)
    shutil.copytree(policy_dir, shipped)
    return shipped
