"""Baselines: a random agent and one-step greedy (TASO's search lives in
`xflowrl.engine.XferSet.search`)."""

from xflowrl.search.baselines import (
                                     EQUAL_BUDGET_FACTOR,
                                     baseline_rows,
                                     equal_step_limit,
                                     greedy_steps,
                                     run_baselines,
                                     versus_greedy,
                                     with_equal_step_limit,
)
from xflowrl.search.greedy import GreedyAgent, greedy_search
from xflowrl.search.random_agent import RandomAgent
