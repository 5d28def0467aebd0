"""Equality saturation (TENSAT) over the engine's IR: the graph as an
e-graph, the project's rules as rewrites, extraction by TENSAT's integer
linear program with greedy extraction as the fallback (docs/benchmark.md,
"Equality saturation")."""

from xflowrl.search.eqsat.egraph import EGraph, EGraphError
from xflowrl.search.eqsat.extract import (
    Extraction,
    build_graph,
    greedy_extract,
    ilp_extract,
    node_costs,
)
from xflowrl.search.eqsat.rewrites import Rewrite, Unsupported, compile_rule
from xflowrl.search.eqsat.saturation import (
    EqsatConfig,
    IterationStats,
    SaturationResult,
    StartStats,
    choice_of_graph,
    compile_rules,
    equality_saturation,
    graph_to_egraph,
    same_outputs,
    saturate,
)
