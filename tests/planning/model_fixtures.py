"""What the world-model planner's tests share: the rules, the cost model,
a small graph's environment, a tiny latent model and stub heads."""

import numpy as np

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.planning.model import LatentModel, ModelConfig

XFERS = XferSet.default()
COST = CostModel("analytic")
TINY = dict(latent_size=8, encoder_size=8, message_passing_steps=1, action_size=4,
            hidden_size=8)


def env(graph: str = "small_cnn") -> GraphEnv:
    return GraphEnv(zoo.get_graph(graph), XFERS, COST, EnvConfig(max_steps=NO_STEP_LIMIT))


def tiny_model(environment: GraphEnv, seed: int = 0, **config) -> LatentModel:
    return LatentModel(ModelConfig(num_xfers=len(environment.xfers), seed=seed, **TINY,
                                   **config))


class StubHeads:
    """Heads of a model that knows one thing: after action `target` the cost
    can fall by 10 points; every model reward is -1 and nothing applies
    below the root."""

    def __init__(self, num_actions: int, target: int):
        self.num_actions, self.target = num_actions, target

    def dynamics(self, h, actions):
        out = np.zeros((len(actions), self.num_actions))
        out[np.arange(len(actions)), actions] = 1.0
        return out, -np.ones(len(actions))

    def predict(self, h):
        value = 10.0 * h[:, self.target]
        zeros = np.zeros((len(h), self.num_actions))
        return value, zeros, zeros - 10.0
