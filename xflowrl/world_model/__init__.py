"""The model-based agent (thesis §3.4): latent encoder, MDN-RNN, dream, controller."""

from xflowrl.world_model.agent import ModelBasedAgent
from xflowrl.world_model.config import DreamConfig, WorldModelConfig, controller_ppo_config
from xflowrl.world_model.controller import Evaluation, evaluate, imagine_batch, train_in_dream
from xflowrl.world_model.data import XferVocabulary, collect_rollouts
from xflowrl.world_model.diagnostics import dream_start_masks
from xflowrl.world_model.dream import BatchedDream, DreamEnv
from xflowrl.world_model.latent import LatentEncoder
from xflowrl.world_model.latent_env import LatentEnv
from xflowrl.world_model.networks import MDNRNN
from xflowrl.world_model.seeds import Component, Purpose, component_seed, purpose_seed
