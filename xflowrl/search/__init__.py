"""Baselines: one-step greedy, TASO's backtracking search (the engine's
`XferSet.search`), the random agent (`xflowrl.agents.random_agent`) and equality saturation
(`xflowrl.search.eqsat`), run into one record
(`xflowrl.search.record.Baselines`) by `run_baselines`."""

from xflowrl.search.baselines import (
                                     EQSAT_TIME_LIMIT,
                                     EQUAL_BUDGET_FACTOR,
                                     baseline_rows,
                                     equal_step_limit,
                                     greedy_steps,
                                     replay_result,
                                     run_baselines,
                                     run_eqsat,
                                     run_greedy,
                                     run_random,
                                     run_taso,
                                     versus_greedy,
                                     with_equal_step_limit,
)
from xflowrl.search.greedy import GreedyAgent, GreedyWalk, greedy_search, greedy_walk
from xflowrl.search.record import (
                                     Baselines,
                                     EqsatResult,
                                     GreedyResult,
                                     NO_LOCATION,
                                     RECORD_VERSION,
                                     RandomResult,
                                     TasoResult,
                                     TracePoint,
)
