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

from xflowrl.engine.graph import Graph


def merge_identical_ops(graph: Graph) -> Graph:
    """`graph` with identical ops merged (module docstring), in one native
    pass (`taso::merge_identical_ops`): the kept ops in `graph`'s order,
    renumbered as a builder adding them in that order would, which is what
    `graph_from_data` of the kept ops builds; `graph` itself where it has
    none."""
    merged = graph.handle.merge_identical_ops()
    return graph if merged is None else Graph(merged)


def identical_ops(graph: Graph) -> int:
    """How many ops `merge_identical_ops` removes from `graph`."""
    return graph.num_ops() - merge_identical_ops(graph).num_ops()
