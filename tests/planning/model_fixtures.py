"""What the world-model planner's tests share: the rules, the cost model,
a small graph's environment and a tiny latent model."""

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
