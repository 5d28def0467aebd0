"""Baselines: a random agent and one-step greedy (TASO's search lives in
`xflowrl.engine.XferSet.search`)."""

from xflowrl.search.baselines import baseline_rows, run_baselines, versus_greedy
from xflowrl.search.greedy import GreedyAgent, greedy_search
from xflowrl.search.random_agent import RandomAgent
