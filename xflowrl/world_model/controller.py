"""The controller: PPO on [z_t, h_t], trained in the dream, evaluated for real.

`train_in_dream(dream, agent, config, ...)` collects `config.batch_size`
imagined episodes per dream call sequence (all advanced together, one
`tf.function` step each), turns them into PPO transitions (bootstrapping
episodes cut by the step limit from V_x of their last state) and updates
the agent after every batch; with a `seed`, each batch's imagined
episodes draw from [seed, episodes seen before it], so that a resumed
controller continues as an uninterrupted one. `evaluate(env, agent, greedy)` plays one episode
in a `LatentEnv` and reports it as an `Evaluation` (the record a run's
result holds, `xflowrl.results.runs`): the real final cost, the real and
the world model's predicted return, the actions the real engine found
invalid and the cheapest graph the episode passed through.
`collect_in_lockstep(views, agent, explore, rng)` plays the controller's
real episodes for the world model together (a `LatentEnvBatch`: one
batched policy call, graph encoding and MDN-RNN step per step);
`collect_with_controller` plays them one at a time; `play_in_lockstep`
plays the controller's own real episodes (no exploration) as PPO
transitions, for a controller that learns from real episodes too.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from xflowrl.agents.ppo import PPOAgent
from xflowrl.agents.ppo.learning import Step
from xflowrl.results.runs import Evaluation
from xflowrl.world_model.config import DreamConfig
from xflowrl.world_model.data import Rollout, RolloutRecorder
from xflowrl.world_model.dream import BatchedDream, DreamStarts
from xflowrl.world_model.latent_env import LatentEnv, LatentEnvBatch

StartSampler = Callable[[int], DreamStarts]


def imagine_batch(dream: BatchedDream, agent: PPOAgent, batch_size: int,
                  greedy: bool = False, starts: Optional[DreamStarts] = None
                  ) -> List[List[Step]]:
    """`batch_size` imagined episodes as lists of PPO steps (from the initial
    graph, or from `starts`)."""
    batch = dream.reset(batch_size, starts)
    episodes: List[List[Step]] = [[] for _ in range(batch_size)]
    live = np.ones(batch_size, bool)
    while live.any():
        actions = agent.actor.act_batch(batch.states, batch.xfer_mask, batch.location_mask,
                                        greedy=greedy, xfer_summaries=batch.xfer_summary)
        previous = batch
        batch = dream.step(np.array([[a.xfer, a.location] for a in actions]))
        cut = np.flatnonzero(batch.truncated)
        bootstrap = np.zeros(batch_size)
        if len(cut):
            values = agent.actor.act_batch(
                batch.states[cut], batch.xfer_mask[cut], batch.location_mask[cut], greedy=True,
                xfer_summaries=None if batch.xfer_summary is None else batch.xfer_summary[cut])
            bootstrap[cut] = [v.xfer_value for v in values]
        for i in np.flatnonzero(live):
            episodes[i].append(_vector_step(
                previous.states[i],
                None if previous.xfer_summary is None else previous.xfer_summary[i],
                previous.xfer_mask[i], previous.location_mask[i], actions[i],
                batch.rewards[i], batch.dones[i], bootstrap[i]))
        live = ~batch.dones
    return episodes


def train_in_dream(dream: BatchedDream, agent: PPOAgent, config: DreamConfig,
                   on_update: Optional[Callable[[Dict[str, float]], None]] = None,
                   starts: Optional[StartSampler] = None, until: Optional[int] = None,
                   seed: Optional[int] = None) -> List[Dict[str, float]]:
    """Trains `agent` on imagined episodes until it has seen `until` (default
    `config.episodes`; counting those of a resumed agent). `starts(n)` gives
    each batch's starts (default: all from the initial graph). With a
    `seed`, the dream is reseeded before each batch from [seed, the agent's
    episodes so far] (`BatchedDream.reseed`): its z_{t+1} samples then
    depend on where training stands, not on the dream object's history, and
    the agent's own generators are in its checkpoint, so a controller
    resumed from a checkpoint repeats an uninterrupted one. Returns one
    metrics row per update: the mean imagined return of the episodes from
    the initial graph ("dream_return", NaN if none) and of all of them
    ("dream_return_all"), their mean length, and the reward ensemble's mean
    standard deviation over the imagined steps ("dream_disagreement")."""
    history = []
    until = config.episodes if until is None else until
    while int(agent.episodes.numpy()) < until:
        start = time.time()
        seen = int(agent.episodes.numpy())
        n = min(config.batch_size, until - seen)
        if seed is not None:
            dream.reseed(int(np.random.SeedSequence([seed, seen]).generate_state(1)[0]))
        batch_starts = starts(n) if starts is not None else dream.initial_starts(n)
        dream.disagreement = []
        episodes = imagine_batch(dream, agent, n, starts=batch_starts)
        for steps in episodes:
            agent.add_steps(steps)
        imagine_s = time.time() - start
        metrics = agent.update()
        returns = np.array([sum(s.reward for s in e) for e in episodes])
        initial = np.asarray(batch_starts.initial, bool)
        metrics.update(
            episodes=int(agent.episodes.numpy()),
            dream_return=float(np.mean(returns[initial])) if initial.any() else math.nan,
            dream_return_all=float(np.mean(returns)),
            dream_length=float(np.mean([len(e) for e in episodes])),
            dream_disagreement=float(np.mean(dream.disagreement)) if dream.disagreement
            else 0.0,
            imagine_seconds=imagine_s, update_seconds=time.time() - start - imagine_s)
        history.append(metrics)
        if on_update:
            on_update(metrics)
    return history


def collect_with_controller(view: LatentEnv, agent: PPOAgent, episodes: int,
                            explore: float, rng: np.random.Generator) -> List[Rollout]:
    """Real episodes of the controller, recorded for the world model.

    The controller acts in `view` (which should show the real masks) by
    sampling from its policy; with probability `explore` per step it takes
    instead a uniformly random valid known xfer and location (never NO-OP),
    so the data reach a little beyond the policy. Every draw, the policy's
    sampling noise included, comes from `rng`: the controller's own
    generator (checkpointed with it) is left as it is. The rollouts hold the real
    graphs and every real xfer's location count, so xfers the vocabulary
    lacks are seen where they apply.
    """
    if not 0.0 <= explore <= 1.0:
        raise ValueError(f"explore must lie in [0, 1], got {explore}")
    vocab = view.vocab
    rollouts = []
    for _ in range(episodes):
        obs = view.reset()
        recorder = RolloutRecorder(view.real_observation)
        done = False
        info: Dict[str, Any] = {}
        while not done:
            known = np.flatnonzero(obs.xfer_mask[:-1])
            if len(known) and rng.random() < explore:
                x = int(rng.choice(known))
                l = int(rng.choice(np.flatnonzero(obs.location_mask[x])))
            else:
                a = agent.actor.act(obs, greedy=False, rng=rng)
                x, l = a.xfer, a.location
            obs, reward, done, info = view.step((x, l))
            recorder.add((vocab.to_real(x), l), reward, done, view.real_observation)
        rollouts.append(recorder.finish(info))
    return rollouts


def collect_in_lockstep(views: LatentEnvBatch, agent: PPOAgent, explore: float,
                        rng: np.random.Generator) -> List[Rollout]:
    """`collect_with_controller`'s episodes, one in each of `views`'
    environments, played in lockstep: every step, the live episodes' states
    go through the policy as one batch, and `views` encodes their next
    graphs and advances the MDN-RNN as one batch each.

    The rollouts are what `collect_with_controller` records (the same
    policy, exploration and format), in the order of the environments.
    Every draw comes from `rng`, step by step: for each live episode in
    order, whether it explores (and its random action), then the policy's
    sampling noise for the rest as one batch; so a seed gives the same
    rollouts every time, though not those of `collect_with_controller`.
    """
    return _lockstep(views, agent, explore, rng, transitions=False)[0]


def play_in_lockstep(views: LatentEnvBatch, agent: PPOAgent, rng: np.random.Generator
                     ) -> List[List[Step]]:
    """The controller's own real episodes as PPO transitions, one in each of
    `views`' environments, played in lockstep as `collect_in_lockstep`
    plays them but without exploration (every action the policy's sample,
    so PPO may learn from them as from imagined ones). An episode cut by
    the step limit is bootstrapped from V_x of its last state."""
    return _lockstep(views, agent, 0.0, rng, transitions=True)[1]


def _lockstep(views: LatentEnvBatch, agent: PPOAgent, explore: float,
              rng: np.random.Generator, transitions: bool):
    """(rollouts, PPO steps per episode) of episodes played in lockstep; with
    `transitions` the steps too (then nothing may explore: an exploring step
    has no log-probability under the policy), else empty lists."""
    if not 0.0 <= explore <= 1.0:
        raise ValueError(f"explore must lie in [0, 1], got {explore}")
    if transitions and explore:
        raise ValueError("PPO transitions need the policy's own actions: explore must be 0")
    vocab = views.vocab
    observations = dict(zip(range(len(views)), views.reset()))
    recorders = [RolloutRecorder(views.real_observation(i)) for i in range(len(views))]
    rollouts: List[Optional[Rollout]] = [None] * len(views)
    steps_of: List[List[Step]] = [[] for _ in range(len(views))]
    while views.live:
        live = list(views.live)
        actions: Dict[int, Any] = {}
        chosen: Dict[int, Any] = {}
        policy = []
        for i in live:
            obs = observations[i]
            known = np.flatnonzero(obs.xfer_mask[:-1])
            if len(known) and rng.random() < explore:
                x = int(rng.choice(known))
                actions[i] = (x, int(rng.choice(np.flatnonzero(obs.location_mask[x]))))
            else:
                policy.append(i)
        if policy:
            summaries = [observations[i].xfer_summary for i in policy]
            present = [s for s in summaries if s is not None]
            picked = agent.actor.act_batch(
                np.stack([observations[i].state for i in policy]),
                np.stack([observations[i].xfer_mask for i in policy]),
                np.stack([observations[i].location_mask for i in policy]), greedy=False,
                rng=rng, xfer_summaries=np.stack(present) if present else None)
            chosen = dict(zip(policy, picked))
            actions.update({i: (a.xfer, a.location) for i, a in chosen.items()})
        steps = views.step([actions[i] for i in live])
        for i, (obs, reward, done, info) in zip(live, steps):
            x, l = actions[i]
            recorders[i].add((vocab.to_real(x), l), reward, done, views.real_observation(i))
            if transitions:
                o = observations[i]
                bootstrap = agent.actor.value(obs) if info["truncated"] else 0.0
                steps_of[i].append(_vector_step(o.state, o.xfer_summary, o.xfer_mask,
                                                o.location_mask, chosen[i], reward, done,
                                                bootstrap))
            observations[i] = obs
            if done:
                rollouts[i] = recorders[i].finish(info)
    return [r for r in rollouts if r is not None], steps_of


def _vector_step(state, xfer_summary, xfer_mask, location_mask, a, reward, done,
                 bootstrap) -> Step:
    """The PPO step of action `a` in a vector state (the dream's or a latent
    view's): `location_mask` [M+1, L] of every xfer, of which the step keeps
    the chosen one's; `bootstrap`: V_x of the next state where the step
    limit cut the episode there, else 0."""
    return Step(state=state, xfer_summary=xfer_summary, xfer_mask=xfer_mask,
                location_nodes=None, cost_delta=None, location_mask=location_mask[a.xfer],
                xfer=a.xfer, location=a.location, xfer_log_prob=a.xfer_log_prob,
                location_log_prob=a.location_log_prob, xfer_value=a.xfer_value,
                location_value=a.location_value, reward=float(reward), done=bool(done),
                bootstrap_value=float(bootstrap))


def evaluate(env: LatentEnv, agent: PPOAgent, greedy: bool) -> Evaluation:
    """One episode of the controller in the real environment.

    Besides where the episode ends, it reports the cheapest graph it
    passed through (`cheapest_cost`, built by `applied[:cheapest_prefix_length]`): what
    optimising a graph with the controller hands over, as TASO's search
    returns the best graph it saw. An episode that goes on with
    cost-neutral rewrites after its last gain ends at the same cost with
    more rewrites than the graph needs.
    """
    obs = env.reset()
    initial = env.initial_cost
    done, real, predicted, invalid, steps = False, 0.0, 0.0, 0, 0
    costs = [initial]  # after 0, 1, ... substitutions
    info: Dict = {}
    while not done:
        a = agent.actor.act(obs, greedy=greedy)
        obs, reward, done, info = env.step((a.xfer, a.location))
        real += reward
        predicted += info["predicted_reward"]
        invalid += info["invalid"] is not None
        steps += 1
        if info["invalid"] is None and info["applied"] not in (None, "NO-OP"):
            costs.append(float(info["cost"]))
    best = int(np.argmin(costs))  # the first of equal costs
    return Evaluation(float(info.get("cost", math.nan)), real, predicted, invalid, steps,
                      list(info.get("history", [])), costs[best], best)
