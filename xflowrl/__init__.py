"""xflowrl: reinforcement learning for computation-graph optimisation.

Subpackages: `graphs` (the engine's Python API), `search` (baselines).
"""
