"""Baselines: a random agent and one-step greedy (TASO's search lives in
`xflowrl.graphs.XferSet.search`)."""

from xflowrl.search.greedy import GreedyAgent, greedy_search
from xflowrl.search.random_agent import RandomAgent
