"""The model-based agent (thesis §3.4): latent encoder, MDN-RNN, dream, controller."""

from typing import Dict, TYPE_CHECKING

from xflowrl._lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers and IDEs
    from xflowrl.world_model.agent import ModelBasedAgent
    from xflowrl.world_model.config import DreamConfig, WorldModelConfig, controller_ppo_config
    from xflowrl.world_model.controller import (
        Evaluation,
        evaluate,
        imagine_batch,
        train_in_dream,
    )
    from xflowrl.world_model.data import XferVocabulary, collect_rollouts
    from xflowrl.world_model.diagnostics import dream_start_masks
    from xflowrl.world_model.dream import BatchedDream, DreamEnv
    from xflowrl.world_model.latent import LatentEncoder
    from xflowrl.world_model.latent_env import LatentEnv
    from xflowrl.world_model.networks import MDNRNN
    from xflowrl.world_model.seeds import Component, Purpose, component_seed, purpose_seed

# Names are imported on first use (PEP 562): importing this package loads
# none of its modules, so its configs (and the packages that only need them)
# import without TensorFlow.
_EXPORTS: Dict[str, str] = {
    "ModelBasedAgent": "xflowrl.world_model.agent",
    "DreamConfig": "xflowrl.world_model.config",
    "WorldModelConfig": "xflowrl.world_model.config",
    "controller_ppo_config": "xflowrl.world_model.config",
    "Evaluation": "xflowrl.world_model.controller",
    "evaluate": "xflowrl.world_model.controller",
    "imagine_batch": "xflowrl.world_model.controller",
    "train_in_dream": "xflowrl.world_model.controller",
    "XferVocabulary": "xflowrl.world_model.data",
    "collect_rollouts": "xflowrl.world_model.data",
    "dream_start_masks": "xflowrl.world_model.diagnostics",
    "BatchedDream": "xflowrl.world_model.dream",
    "DreamEnv": "xflowrl.world_model.dream",
    "LatentEncoder": "xflowrl.world_model.latent",
    "LatentEnv": "xflowrl.world_model.latent_env",
    "MDNRNN": "xflowrl.world_model.networks",
    "Component": "xflowrl.world_model.seeds",
    "Purpose": "xflowrl.world_model.seeds",
    "component_seed": "xflowrl.world_model.seeds",
    "purpose_seed": "xflowrl.world_model.seeds",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
