"""Small hand-built e-graphs for the extraction tests (eqsat_test.py,
eqsat_extraction_test.py), and zoo graphs' e-graphs grown a few
iterations (`grown`)."""

from typing import Dict, List, Tuple

from xflowrl import zoo
from xflowrl.engine import CostModel, XferSet
from xflowrl.search.eqsat import (
    EGraph,
    EqsatConfig,
    compile_rules,
    graph_to_egraph,
    greedy_extract,
    node_costs,
    saturate,
)
from xflowrl.search.eqsat.extract import Choice, used
from xflowrl.search.eqsat.rewrites import canonical


def grown(name: str, rules: str, iterations: int, cost_model: CostModel
          ) -> Tuple[EGraph, List[int], Dict[int, float], Choice]:
    """A zoo graph's e-graph after a few iterations, its outputs, costs and
    greedy extraction's used choice."""
    graph = zoo.get_graph(name)
    rewrites, _ = compile_rules(XferSet.from_name(rules))
    eg, roots = graph_to_egraph(graph)
    saturate(eg, rewrites, EqsatConfig(iteration_limit=iterations, time_limit_s=120))
    costs = node_costs(eg, cost_model)
    start = used(eg, greedy_extract(eg, roots, costs).choice, roots)
    return eg, roots, costs, start


def costed(eg: EGraph, cost_of: Dict[Tuple[str, int], float]) -> Dict[int, float]:
    """Per live e-node: `cost_of[(op, its first child's class)]`, 0 elsewhere."""
    costs = {}
    for c in eg.classes():
        for n in eg.live_nodes(c):
            op, _, children = eg.nodes[n]
            costs[n] = cost_of.get((op, eg.find(children[0])), 0.0) if children else 0.0
    return costs


def shared_sub_graph() -> Tuple[EGraph, List[int], Dict[int, float]]:
    """Two readers of a class that can be computed alone (cost 5 each) or
    from one shared class (1 each plus 6 once): the tree cost prefers the
    first, the DAG cost (10 against 8) the second. (e-graph, roots, costs)."""
    eg = EGraph()
    x = eg.add("input", (("name", "x"), ("shape", (2, 2))), ())
    y = eg.add("input", (("name", "y"), ("shape", (2, 2))), ())
    shared = eg.add("sigmoid", canonical("sigmoid", {}), [x])
    a_alone = eg.add("tanh", canonical("tanh", {}), [y])
    a_shared = eg.add("relu", canonical("relu", {}), [shared])
    b_alone = eg.add("sigmoid", canonical("sigmoid", {}), [y])
    b_shared = eg.add("tanh", canonical("tanh", {}), [shared])
    eg.union(a_alone, a_shared)
    eg.union(b_alone, b_shared)
    root = eg.add("add", canonical("add", {}), [a_alone, b_alone])
    eg.rebuild()
    costs = costed(eg, {("sigmoid", x): 6.0, ("tanh", y): 5.0, ("relu", shared): 1.0,
                        ("sigmoid", y): 5.0, ("tanh", shared): 1.0})
    return eg, [root], costs


def self_reading_class() -> Tuple[EGraph, int, int, int]:
    """x = split(concat(x, y))[0]: a class whose second way to be computed
    reads the class itself (the class graph has a cycle). (e-graph, root:
    tanh(x), x's class, the concat's class)."""
    eg = EGraph()
    inp = eg.add("input", (("name", "in"), ("shape", (1, 2, 4, 4))), ())
    y = eg.add("input", (("name", "y"), ("shape", (1, 2, 4, 4))), ())
    x = eg.add("relu", canonical("relu", {}), [inp])
    cat = eg.add("concat", canonical("concat", {"axis": 1}), [x, y])
    parts = eg.add("split", canonical("split", {"axis": 1, "sizes": [2, 2]}), [cat])
    eg.union(x, eg.add_output(parts, 0))
    root = eg.add("tanh", canonical("tanh", {}), [x])
    eg.rebuild()
    return eg, root, x, cat
