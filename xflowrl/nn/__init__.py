"""Building blocks both agents' networks and learners share: explicitly
seeded weight initializers (`initializers.SeededInitializers`) and Adam
with its moments built up front (`optimizers.build_adam`) and its update
traced in a few ops (`optimizers.apply_adam`). The model-free
agent (`xflowrl.agents.ppo`) and the model-based one (`xflowrl.world_model`)
import them from here, neither from the other.
"""

from xflowrl.nn.initializers import SeededInitializers
from xflowrl.nn.optimizers import apply_adam, build_adam

__all__ = ["SeededInitializers", "apply_adam", "build_adam"]
