"""Policy folders of untrained networks, for tests of what reads them."""

import os
from typing import List, Sequence

from xflowrl import corpus
from xflowrl.agents.ppo import PPOAgent, PPOConfig
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv
from xflowrl.policy import PolicyInfo, save_policy


def untrained_policy_folders(root: str, graph: str, seeds: Sequence[int], xfers: XferSet,
                             cost_model: CostModel, subfolder: str = "") -> List[str]:
    """One saved policy per seed (`root/seed<S>[/subfolder]`): an untrained
    X-RLflow-sized network built on corpus member `graph`; different seeds
    give different policies."""
    env = GraphEnv(corpus.get(graph), xfers, cost_model, EnvConfig())
    folders = []
    for seed in seeds:
        ppo = PPOConfig.xrlflow()
        agent = PPOAgent(len(xfers), ppo, seed=seed)
        agent.build(env)
        folder = os.path.join(root, f"seed{seed}", subfolder)
        save_policy(agent, folder, PolicyInfo(
            ppo=ppo.__dict__, rules="default", num_xfers=len(xfers), max_locations=200,
            cost_model=cost_model.name, seed=seed, commit="abc", command="test"))
        folders.append(os.path.normpath(folder))
    return folders
