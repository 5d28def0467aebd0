"""Rollout collection in Ray actors (`train(..., actors=RolloutActors(...))`).

Each actor holds its own environment (built by a picklable zero-argument
`make_env`, so that native engine objects never cross processes) and a copy
of the policy. Before every collection the learner's weights go to all
actors at once (one `ray.put`); each plays its share of the episodes at once
(`PPOAgent.run_episodes` over its own environment copies) and sends back
the episodes and their transitions, which the learner buffers in actor
order. Collection is synchronous: an update sees only episodes of the
current policy, as without actors.

Actor k samples from its own generators (seeded `seed + 1000 * (k + 1)`);
`generator_states` / `restore_generators` carry them, and those of the
actors' environment copies, through a checkpoint, so that a resumed run
repeats the uninterrupted one. Each actor takes one Ray CPU and runs
TensorFlow with one thread of each kind.

What it pays (`benchmarks/rollout_bench.py`, docs/agents.md): collection
per step falls by a third or more with two actors on two CPUs, the update
is untouched, so the loop gains 1.13-1.34x there.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from xflowrl.agents.ppo.config import PPOConfig
from xflowrl.env.interface import Environment

ACTOR_SEED_STRIDE = 1000  # actor k samples with seed + 1000 * (k + 1)


def _specs(variables) -> List[Tuple[str, Tuple[int, ...]]]:
    return [(v.name, tuple(v.shape.as_list())) for v in variables]


class RolloutWorker:
    """The body of one Ray actor: an environment, its copies and a policy
    copy that plays episodes under the weights it is sent."""

    def __init__(self, make_env: Callable[[], Environment], config: PPOConfig, state: str,
                 max_locations: int, seed: int):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        from xflowrl.agents.ppo.agent import PPOAgent  # pylint: disable=import-outside-toplevel
        self.env = make_env()
        self.envs: List[Environment] = [self.env]
        self.agent = PPOAgent(self.env.num_xfers, config, seed=seed, state=state,
                              max_locations=max_locations)
        self.agent.build(self.env)

    def variable_specs(self) -> List[Tuple[str, Tuple[int, ...]]]:
        return _specs(self.agent.network.variables)

    def collect(self, weights: Sequence[np.ndarray], episodes: int) -> Tuple[list, list]:
        """Plays `episodes` episodes at once under `weights`: (episodes, steps)."""
        for variable, value in zip(self.agent.network.variables, weights, strict=True):
            variable.assign(value)
        while len(self.envs) < episodes:
            self.envs.append(self.env.clone())  # type: ignore[attr-defined]
        played = self.agent.run_episodes(self.envs[:episodes], learn=True)
        steps, self.agent._buffer = self.agent._buffer, []  # pylint: disable=protected-access
        return played, steps

    def generator_states(self) -> Dict[str, Any]:
        """The sampling generator's state and those of the environment copies
        that draw at random (by copy index)."""
        envs = {str(i): getattr(env, "rng").bit_generator.state
                for i, env in enumerate(self.envs)
                if isinstance(getattr(env, "rng", None), np.random.Generator)}
        return {"actor": self.agent.actor.rng.bit_generator.state, "envs": envs,
                "copies": len(self.envs)}

    def restore_generators(self, states: Dict[str, Any]) -> None:
        while len(self.envs) < states["copies"]:
            self.envs.append(self.env.clone())  # type: ignore[attr-defined]
        self.agent.actor.rng.bit_generator.state = states["actor"]
        for i, state in states["envs"].items():
            self.envs[int(i)].rng.bit_generator.state = state  # type: ignore[attr-defined]


class RolloutActors:
    """`actors` Ray actors that collect the episodes of `agent`'s updates.

    `agent` must be built (`PPOAgent.build`), and Ray initialised
    (`ray.init()`, local by default, or a cluster's address) before this is
    made; `close()` ends the actors."""

    def __init__(self, make_env: Callable[[], Environment], agent, actors: int, seed: int = 0):
        if actors < 1:
            raise ValueError(f"actors must be >= 1, got {actors}")
        if not agent.built:
            # Before any actor starts (each would build its own network, to
            # be found different from the learner's).
            raise ValueError("the agent is not built: call agent.build(env) before "
                             "starting its actors")
        import ray  # pylint: disable=import-outside-toplevel
        self._ray = ray
        worker = ray.remote(num_cpus=1)(RolloutWorker)
        network = agent.network
        self.actors: List[Any] = [
            worker.remote(make_env, agent.config, network.state_kind, network.max_locations,
                          seed + ACTOR_SEED_STRIDE * (k + 1)) for k in range(actors)]
        self._variables = network.variables
        specs = _specs(self._variables)
        for got in ray.get([a.variable_specs.remote() for a in self.actors]):
            if got != specs:
                raise ValueError("the actors' policy variables differ from the learner's: "
                                 "is the agent built (agent.build(env))?")

    def shares(self, episodes: int) -> List[int]:
        """Episodes per actor: as even as can be, the first ones one more."""
        k = len(self.actors)
        return [episodes // k + (i < episodes % k) for i in range(k)]

    def run_episodes(self, agent, episodes: int) -> List[Any]:
        """Plays `episodes` episodes under `agent`'s current weights and
        buffers their transitions in `agent`; the episodes, in actor order."""
        ray = self._ray
        weights = ray.put([v.numpy() for v in self._variables])
        results = ray.get([actor.collect.remote(weights, n)
                           for actor, n in zip(self.actors, self.shares(episodes)) if n])
        played: List[Any] = []
        for episodes_of_actor, steps in results:
            agent.add_steps(steps)
            played += episodes_of_actor
        return played

    def generator_states(self) -> List[Dict[str, Any]]:
        return self._ray.get([a.generator_states.remote() for a in self.actors])

    def restore_generators(self, states: Sequence[Dict[str, Any]]) -> None:
        if len(states) != len(self.actors):
            raise ValueError(f"the checkpoint has {len(states)} actors' generators; "
                             f"this run has {len(self.actors)} actors")
        self._ray.get([a.restore_generators.remote(s) for a, s in zip(self.actors, states)])

    def close(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []
