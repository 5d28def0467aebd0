"""Identical ops merged: common-subexpression elimination on a graph.

Two ops of the same type, with the same parameters and the same inputs,
compute the same tensors; `merge_identical_ops(graph)` keeps the first of
each such group and points every reader of the others at it, repeatedly
(merging two ops can make their readers identical). Inputs and weights
are never merged: two leaves are two different tensors, whatever their
shapes.

Equality saturation does this to its input without being asked (an
e-graph stores each distinct e-node once), while no rule set gives it to
the methods that step from graph to graph: on NASNet-A, the 18 duplicated
poolings of the zoo graph are the whole of what equality saturation finds
beyond one-step greedy (docs/benchmark.md, "Where the room is").
"""

from __future__ import annotations

import json
from typing import Dict, List

from xflowrl.engine.graph import Graph, graph_from_data

_LEAVES = ("input", "weight")


def merge_identical_ops(graph: Graph) -> Graph:
    """`graph` with identical ops merged (module docstring); `graph`
    itself where it has none."""
    data = graph.to_data()
    kept: List[list] = []
    position: Dict[int, int] = {}   # original op position -> kept position
    first: Dict[str, int] = {}      # an op's identity -> its kept position
    for k, (type_name, params, inputs, name, leaf_shape) in enumerate(data["ops"]):
        inputs = [[position[p], i] for p, i in inputs]
        identity = (None if type_name in _LEAVES
                    else json.dumps([type_name, params, inputs], sort_keys=True))
        if identity is not None and identity in first:
            position[k] = first[identity]
            continue
        position[k] = len(kept)
        if identity is not None:
            first[identity] = len(kept)
        kept.append([type_name, params, inputs, name, leaf_shape])
    if len(kept) == len(data["ops"]):
        return graph
    return graph_from_data({"ops": kept,
                            "outputs": [[position[p], i] for p, i in data["outputs"]]})


def identical_ops(graph: Graph) -> int:
    """How many ops `merge_identical_ops` removes from `graph`."""
    return graph.num_ops() - merge_identical_ops(graph).num_ops()
