"""A trained policy as a folder: saved once, loaded for any graph.

A policy folder holds the network's weights (a TensorFlow checkpoint of the
`PolicyValueNetwork` alone: no optimizer state, a third of a training
checkpoint), the arrays its greedy acting needs as `policy.npz` (for
`xflowrl.policy.runtime`, which acts without TensorFlow) and
`policy.json`: what it needs to be rebuilt (the PPO config, the rule set
and its size, L) and where it came from (cost model, training graphs,
episodes, seed, the commit of the code that trained it). Loading checks
that the rule set matches: the xfer head has one output per rule.

`load_policy(folder)` also reads a model-free training run's results folder
(`train_mf`: `checkpoints/` and `result.json`), so `xflowrl optimize
--method=policy:DIR` takes either.

The shipped generalist (`SHIPPED`, package data of `xflowrl.policy`) is
such a folder; `shipped_policy()` finds it without network access.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from typing import Any, Dict, List, Optional

POLICY_JSON = "policy.json"
POLICY_PREFIX = "policy"
# The shipped generalist, a folder of package data.
SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shipped", "generalist")


@dataclasses.dataclass
class PolicyInfo:
    """What `policy.json` records.

    Attributes:
      ppo: the `PPOConfig` fields.
      rules: the rule set's name; num_xfers: its size (the xfer head's N).
      max_locations: L.
      cost_model: the cost model it was trained under.
      graphs: the graphs it was trained on.
      episodes: training episodes; seed: the training seed.
      commit: the git commit of the code that trained it ("" if unknown).
      command: the command that trained it.
    """
    ppo: Dict[str, Any]
    rules: str
    num_xfers: int
    max_locations: int
    cost_model: str = ""
    graphs: List[str] = dataclasses.field(default_factory=list)
    episodes: int = 0
    seed: int = 0
    commit: str = ""
    command: str = ""


def current_commit(path: Optional[str] = None) -> str:
    """The git commit of the checkout at `path` (this file's), or "" outside git."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=path or os.path.dirname(os.path.abspath(__file__)),
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def save_policy(agent, folder: str, info: PolicyInfo) -> str:
    """Writes `agent`'s network (checkpoint and `policy.npz`) and `info` to
    `folder`; returns the checkpoint path."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from xflowrl.policy import runtime  # pylint: disable=import-outside-toplevel
    os.makedirs(folder, exist_ok=True)
    path = tf.train.Checkpoint(network=agent.network).write(os.path.join(folder, POLICY_PREFIX))
    runtime.save_arrays(runtime.network_arrays(agent.network), folder)
    tmp = os.path.join(folder, POLICY_JSON + ".tmp")
    with open(tmp, "w") as f:
        json.dump(dataclasses.asdict(info), f, indent=2)
    os.replace(tmp, os.path.join(folder, POLICY_JSON))
    return path


def read_info(folder: str) -> Optional[PolicyInfo]:
    """`policy.json` of a policy folder; None if there is none."""
    path = os.path.join(folder, POLICY_JSON)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return PolicyInfo(**json.load(f))


def load_policy(folder: str, env, seed: int = 0,
                config_changes: Optional[Dict[str, Any]] = None):
    """A `PPOAgent` with the policy of `folder`, built for `env`'s spec.

    Args:
      folder: a policy folder (`save_policy`) or a `train_mf` results folder
        (or its `checkpoints/`).
      env: the environment it will act in (its rule set must be the policy's).
      seed: the agent's sampling seed.
      config_changes: `PPOConfig` fields to change from the recorded ones
        (e.g. the learning rates of fine-tuning); not sizes, which the
        weights fix.

    Raises:
      ValueError: no policy in `folder`, or one for another rule set.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from xflowrl.agents.ppo import PPOAgent, PPOConfig  # pylint: disable=import-outside-toplevel
    spec = env.observation_spec()
    info = read_info(folder)
    if info is not None:
        _check_rule_set(folder, info, spec)
        agent = PPOAgent(spec.num_xfers, PPOConfig(**{**info.ppo, **(config_changes or {})}),
                         seed=seed, max_locations=info.max_locations)
        agent.actor.build(env.reset())
        status = tf.train.Checkpoint(network=agent.network).read(
            os.path.join(folder, POLICY_PREFIX))
        status.assert_existing_objects_matched()
        return agent
    run = os.path.dirname(folder.rstrip("/")) if os.path.basename(
        folder.rstrip("/")) == "checkpoints" else folder
    latest = tf.train.latest_checkpoint(os.path.join(run, "checkpoints"))
    if latest is None:
        raise ValueError(f"{folder}: no policy checkpoint (a policy folder with "
                         f"{POLICY_JSON}, or a train_mf results folder with checkpoints/)")
    ppo = PPOConfig()
    result = os.path.join(run, "result.json")
    if os.path.exists(result):
        with open(result) as f:
            recorded = json.load(f).get("ppo")
        if recorded:
            ppo = PPOConfig(**recorded)
    ppo = dataclasses.replace(ppo, **(config_changes or {}))
    agent = PPOAgent(spec.num_xfers, ppo, seed=seed, max_locations=spec.max_locations)
    agent.build(env)
    try:
        agent.restore(latest, generators=False)  # sampling from `seed`, not the run's
    except (AssertionError, ValueError) as e:
        raise ValueError(f"{folder}: the policy does not fit this rule set "
                         f"({spec.num_xfers} xfers): {e}") from None
    return agent


def _check_rule_set(folder: str, info: PolicyInfo, spec) -> None:
    """ValueError unless the policy of `folder` has one xfer output per rule
    of the environment whose observation spec is `spec`."""
    if info.num_xfers != spec.num_xfers:
        raise ValueError(f"{folder}: the policy was trained with the {info.rules!r} rule "
                         f"set ({info.num_xfers} xfers); this environment has "
                         f"{spec.num_xfers}")


def has_arrays(folder: str) -> bool:
    """Whether `folder` is a policy folder with `policy.npz` (so
    `load_numpy_policy` can load it without TensorFlow)."""
    from xflowrl.policy import runtime  # pylint: disable=import-outside-toplevel
    return (read_info(folder) is not None
            and os.path.exists(os.path.join(folder, runtime.ARRAYS_FILE)))


def load_numpy_policy(folder: str, env):
    """The policy of `folder` as a `runtime.NumpyPolicy` (no TensorFlow),
    checked against `env`'s rule set as `load_policy` checks it.

    Raises:
      ValueError: no policy arrays in `folder`, or a policy for another rule set.
    """
    from xflowrl.policy import runtime  # pylint: disable=import-outside-toplevel
    info = read_info(folder)
    if info is None or not os.path.exists(os.path.join(folder, runtime.ARRAYS_FILE)):
        raise ValueError(f"{folder}: no {POLICY_JSON} with {runtime.ARRAYS_FILE} beside it")
    _check_rule_set(folder, info, env.observation_spec())
    policy = runtime.NumpyPolicy.load(folder)
    if policy.num_xfers != info.num_xfers:
        raise ValueError(f"{folder}: {runtime.ARRAYS_FILE} has {policy.num_xfers} xfers, "
                         f"{POLICY_JSON} says {info.num_xfers}")
    return policy


def export_arrays(folder: str) -> str:
    """Writes `policy.npz` for a policy folder saved without one from its
    checkpoint; returns its path. Needs TensorFlow.

        python -c "from xflowrl.policy import export_arrays; export_arrays('DIR')"
    """
    from xflowrl import corpus  # pylint: disable=import-outside-toplevel
    from xflowrl.engine import XferSet  # pylint: disable=import-outside-toplevel
    from xflowrl.entry_points import cost_model_from_spec  # pylint: disable=import-outside-toplevel
    from xflowrl.env import EnvConfig, GraphEnv  # pylint: disable=import-outside-toplevel
    from xflowrl.policy import runtime  # pylint: disable=import-outside-toplevel
    info = read_info(folder)
    if info is None:
        raise ValueError(f"{folder}: no {POLICY_JSON}")
    # Any graph builds the network; the smallest of the corpus is quickest.
    env = GraphEnv(corpus.get("mlp/s0"), XferSet.from_name(info.rules),
                   cost_model_from_spec(info.cost_model or "analytic/v100"),
                   EnvConfig(max_locations=info.max_locations))
    return runtime.save_arrays(runtime.network_arrays(load_policy(folder, env).network), folder)


def shipped_policy() -> str:
    """The shipped generalist's folder.

    Raises:
      ValueError: this installation has none (it was not trained yet).
    """
    if read_info(SHIPPED) is None:
        raise ValueError(f"no shipped policy in {SHIPPED}; train one with "
                         f"experiments/train_generalist.py --ship")
    return SHIPPED
