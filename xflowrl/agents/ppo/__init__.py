"""Hierarchical PPO (thesis Algorithm 3) in Sonnet: role-named modules."""

from typing import Dict, TYPE_CHECKING

from xflowrl._lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers and IDEs
    from xflowrl.agents.ppo.acting import Action, Actor
    from xflowrl.agents.ppo.agent import PPOAgent
    from xflowrl.agents.ppo.config import PPOConfig
    from xflowrl.agents.ppo.learning import Learner, Step
    from xflowrl.agents.ppo.networks import PolicyValueNetwork

# Names are imported on first use (PEP 562): importing this package loads
# none of its modules, so its configs (and the packages that only need them)
# import without TensorFlow.
_EXPORTS: Dict[str, str] = {
    "Action": "xflowrl.agents.ppo.acting",
    "Actor": "xflowrl.agents.ppo.acting",
    "PPOAgent": "xflowrl.agents.ppo.agent",
    "PPOConfig": "xflowrl.agents.ppo.config",
    "Learner": "xflowrl.agents.ppo.learning",
    "Step": "xflowrl.agents.ppo.learning",
    "PolicyValueNetwork": "xflowrl.agents.ppo.networks",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
