"""Baselines: a random agent (TASO's search lives in `xflowrl.graphs.XferSet.search`)."""

from xflowrl.search.random_agent import RandomAgent
