"""Learning agents: the model-free hierarchical PPO agent (`ppo`)."""
