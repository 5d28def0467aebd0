"""Hierarchical PPO (thesis Algorithm 3) in Sonnet: role-named modules."""

from xflowrl.agents.ppo.acting import Action, Actor
from xflowrl.agents.ppo.agent import PPOAgent
from xflowrl.agents.ppo.config import PPOConfig
from xflowrl.agents.ppo.learning import Learner, Step
from xflowrl.agents.ppo.networks import PolicyValueNetwork
