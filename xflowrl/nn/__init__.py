"""Building blocks both agents' networks and learners share: explicitly
seeded weight initializers (`initializers.SeededInitializers`) and Adam
with its moments built up front (`optimizers.build_adam`). The model-free
agent (`xflowrl.agents.ppo`) and the model-based one (`xflowrl.world_model`)
import them from here, neither from the other.
"""

from xflowrl.nn.initializers import SeededInitializers
from xflowrl.nn.optimizers import build_adam

__all__ = ["SeededInitializers", "build_adam"]
