"""Agents: the model-free hierarchical PPO agent (`ppo`) and the random
agent (`random_agent`: the baseline every learned agent must beat and the
world model's data collector)."""
