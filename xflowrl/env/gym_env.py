"""A gymnasium view of `GraphEnv` (checked by `gymnasium.utils.env_checker`).

Observation: a `spaces.Dict` with the current graph as a `spaces.Graph`
(node features, edge features, edge links; see xflowrl.embedding.features),
the per-location features and the masks as arrays. Action: `MultiDiscrete([N+1,
L])` = (xfer, location). `terminated` = NO-OP, no applicable xfer or an
invalid action (with invalid_action="end"); `truncated` = the step limit.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
from gymnasium import spaces
import numpy as np

from xflowrl.embedding import features
from xflowrl.env.environment import GraphEnv, Observation, XFER_SUMMARY_SIZE


class GymGraphEnv(gym.Env):
    """Gymnasium wrapper; the underlying environment is `self.env`."""

    metadata = {"render_modes": []}

    def __init__(self, env: GraphEnv):
        super().__init__()
        self.env = env
        n, num_l, k = env.num_xfers + 1, env.config.max_locations, env.max_pattern_ops
        inf = np.float32(np.inf)
        self.observation_space = spaces.Dict({
            "graph": spaces.Graph(
                node_space=spaces.Box(-inf, inf, (features.NODE_SIZE,), np.float32),
                edge_space=spaces.Box(-inf, inf, (features.EDGE_SIZE,), np.float32)),
            "location_nodes": spaces.Box(-1, np.iinfo(np.int32).max, (n, num_l, k), np.int32),
            "cost_delta": spaces.Box(-inf, inf, (n, num_l), np.float32),
            "xfer_summary": spaces.Box(-inf, inf, (n, XFER_SUMMARY_SIZE), np.float32),
            "location_mask": spaces.MultiBinary((n, num_l)),
            "xfer_mask": spaces.MultiBinary(n),
        })
        self.action_space = spaces.MultiDiscrete([n, num_l])

    @staticmethod
    def convert(obs: Observation) -> Dict[str, Any]:
        g, locations = obs.state, obs.location_features()
        return {
            "graph": spaces.GraphInstance(
                nodes=g.nodes, edges=g.edges,
                edge_links=np.stack([g.senders, g.receivers], axis=1).astype(np.int64)),
            "location_nodes": locations.dense_nodes(),
            "cost_delta": locations.dense_cost_delta(),
            "xfer_summary": locations.xfer_summary,
            "location_mask": obs.location_mask.astype(np.int8),
            "xfer_mask": obs.xfer_mask.astype(np.int8),
        }

    def reset(self, *, seed: Optional[int] = None,
              options: Optional[dict] = None) -> Tuple[Dict[str, Any], dict]:
        super().reset(seed=seed)
        obs = self.env.reset()
        return self.convert(obs), {"cost": self.env.cost, "initial_cost": self.env.initial_cost}

    def step(self, action) -> Tuple[Dict[str, Any], float, bool, bool, dict]:
        obs, reward, done, info = self.env.step((int(action[0]), int(action[1])))
        truncated = bool(info["truncated"])
        return self.convert(obs), float(reward), done and not truncated, truncated, info
