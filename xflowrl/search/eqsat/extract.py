"""Extraction: the cheapest graph an e-graph represents, and the graph built
back in the engine.

Two extractors over per-e-node costs (`node_costs`: each op's cost in the
engine's cost backend, 0 for leaves, projections and weight-side ops):

- `greedy_extract`: per class, the e-node of least *tree* cost (its own
  plus its children classes' best), finalised in increasing cost order
  (Knuth's generalisation of Dijkstra), so a class is chosen only after
  its children and the choice is acyclic by construction. Fast; counts a
  sub-graph shared by several readers once per reader.
- `ilp_extract`: TENSAT's integer linear program (arXiv 2101.01332, §4): a
  0/1 variable per e-node, the output classes selected, a selected e-node
  selects an e-node in each child class, cost = the sum of selected
  e-nodes' costs (shared sub-graphs counted once). TENSAT rules out cycles
  with topological-order variables; here a cycle of a solution becomes a
  cut and the program is solved again (lazy constraints: most e-graphs
  need a few). Solved by HiGHS (`scipy.optimize.milp`) under a time limit.

`build_graph` turns a choice (class -> e-node) into an engine `Graph`
(shape-checked by the engine as it is built).
"""

from __future__ import annotations

import heapq
import time
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from xflowrl import _engine
from xflowrl.engine import CostModel, Graph, GraphBuilder
from xflowrl.search.eqsat.egraph import EGraph, OUT

Choice = Dict[int, int]  # class -> e-node


class Extraction(NamedTuple):
    """An extractor's choice and what it cost."""
    choice: Choice
    dag_cost: float     # the choice's per-node costs summed, shared nodes once (ms)
    method: str         # "greedy" | "ilp"
    status: str         # "ok"; ILP: "optimal", "time_limit" (best found), ...
    seconds: float
    bound: float = 0.0  # ILP: a lower bound on any acyclic choice's dag_cost (ms)


def node_costs(eg: EGraph, cost_model: CostModel,
               cache: Optional[Dict[tuple, float]] = None) -> Dict[int, float]:
    """Per live e-node: its op's cost in ms under `cost_model`'s backend (the
    engine's `op_cost`, weight-side ops free as in a graph's cost); leaves
    and projections cost 0. A backend that prices ops by their neighbours
    (fitted) is asked for each op alone: extraction then optimises an
    estimate, and the graph handed over is re-costed whole."""
    cache = {} if cache is None else cache
    backend = cost_model.handle
    costs: Dict[int, float] = {}
    for c in list(eg.classes()):
        for n in eg.live_nodes(c):
            op, params, children = eg.nodes[n]
            if op in ("input", "weight", OUT):
                costs[n] = 0.0
                continue
            shapes = tuple(eg.shape(ch) for ch in children)
            ws = all(eg.weight_side(ch) for ch in children) and bool(children)
            key = (op, params, shapes, ws)
            if key not in cache:
                cache[key] = float(backend.op_cost(_engine.op_type_id(op), dict(params),
                                                   [list(s) for s in shapes], ws))
            costs[n] = cache[key]
    return costs


def _reachable(eg: EGraph, roots: Sequence[int]) -> List[int]:
    """Classes reachable from `roots` through live e-nodes."""
    seen = set()
    stack = [eg.find(r) for r in roots]
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        for n in eg.live_nodes(c):
            stack.extend(ch for ch in eg.nodes[n][2] if ch not in seen)
    return sorted(seen)


def dag_cost(eg: EGraph, choice: Choice, roots: Sequence[int],
             costs: Dict[int, float]) -> float:
    """The cost of a choice: each chosen e-node reachable from `roots` once."""
    total, seen = 0.0, set()
    stack = [eg.find(r) for r in roots]
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        n = choice[c]
        total += costs[n]
        stack.extend(eg.nodes[n][2])
    return total


def greedy_extract(eg: EGraph, roots: Sequence[int], costs: Dict[int, float]) -> Extraction:
    """Per class the e-node of least tree cost; see the module docstring.

    Raises:
      ValueError: an output class has no acyclic choice (cannot happen for
        an e-graph built from a graph: the graph itself is one).
    """
    start = time.time()
    classes = _reachable(eg, roots)
    readers: Dict[int, List[int]] = {}
    pending: Dict[int, int] = {}
    heap: List[Tuple[float, int]] = []
    for c in classes:
        for n in eg.live_nodes(c):
            kids = set(eg.nodes[n][2])
            if c in kids:
                continue  # reads its own class: never part of an acyclic graph
            pending[n] = len(kids)
            for k in kids:
                readers.setdefault(k, []).append(n)
            if not kids:
                heapq.heappush(heap, (costs[n], n))
    best: Dict[int, float] = {}
    choice: Choice = {}
    while heap:
        cost, n = heapq.heappop(heap)
        c = eg.class_of_node(n)
        if c in choice:
            continue
        choice[c], best[c] = n, cost
        for r in readers.get(c, ()):
            pending[r] -= 1
            if pending[r] == 0:
                tree = costs[r] + sum(best[k] for k in set(eg.nodes[r][2]))
                heapq.heappush(heap, (tree, r))
    missing = [r for r in roots if eg.find(r) not in choice]
    if missing:
        raise ValueError(f"no acyclic choice for output classes {missing}")
    return Extraction(choice, dag_cost(eg, choice, roots, costs), "greedy", "ok",
                      time.time() - start)


def _find_cycles(eg: EGraph, choice: Choice, roots: Sequence[int]) -> List[List[int]]:
    """The cycles of a choice reachable from `roots`, one per back edge of a
    depth-first walk, each as the classes along it (each class's chosen
    e-node reads the next class; the last reads the first)."""
    cycles: List[List[int]] = []
    state: Dict[int, int] = {}   # class -> 1 on the path, 2 done
    path: List[int] = []         # classes on the current path
    for root in roots:
        root = eg.find(root)
        if root in state:
            continue
        work = [(root, 0)]
        while work:
            c, i = work.pop()
            if i == 0:
                state[c] = 1
                path.append(c)
            children = eg.nodes[choice[c]][2]
            while i < len(children):
                d = children[i]
                i += 1
                if state.get(d) == 1:
                    cycles.append(path[path.index(d):])
                elif d not in state:
                    work.append((c, i))
                    work.append((d, 0))
                    break
            else:
                state[c] = 2
                path.pop()
    return cycles


def _short_cycles(eg: EGraph, classes: Sequence[int]) -> List[List[int]]:
    """Every cycle of two or three classes in the class graph (an edge c ->
    d where an e-node of c reads d), each once. An e-graph over the
    project's rules is full of them (`x = split(concat(x, y))[0]` is one of
    three), and cutting them all before the first solve saves one solve
    per few cycles."""
    succ = {c: {ch for n in eg.live_nodes(c) for ch in eg.nodes[n][2]} - {c}
            for c in classes}
    cycles = []
    for a in classes:
        for b in succ[a]:
            if b <= a:
                continue
            if a in succ.get(b, ()):
                cycles.append([a, b])
            for c in succ.get(b, ()):
                if c > a and c != b and a in succ.get(c, ()):
                    cycles.append([a, b, c])
    # a -> c -> b -> a is found from a too (as [a, c, b]) when c > b: keep
    # both, they are different cycles.
    return cycles


def ilp_extract(eg: EGraph, roots: Sequence[int], costs: Dict[int, float],
                time_limit_s: float = 30.0) -> Extraction:
    """TENSAT's ILP; see the module docstring. Acyclicity is enforced
    lazily: the program is solved without it, and each cycle of the
    solution becomes a cut (not all of its e-nodes at once) before solving
    again, until a solution is acyclic or the time is up. A cut names the
    cycle's classes: of the e-nodes that read the next class on it, fewer
    than one per class may be chosen. `status` is
    "optimal", "time_limit" (the best acyclic solution found in time), or
    "failed" (none: `choice` is empty)."""
    from scipy import sparse
    from scipy.optimize import LinearConstraint, milp

    start = time.time()
    classes = _reachable(eg, roots)
    nodes = [n for c in classes for n in eg.live_nodes(c) if c not in eg.nodes[n][2]]
    var = {n: i for i, n in enumerate(nodes)}
    members: Dict[int, List[int]] = {c: [] for c in classes}
    for n in nodes:
        members[eg.class_of_node(n)].append(var[n])

    rows: List[int] = []
    cols: List[int] = []
    vals: List[float] = []
    lower: List[float] = []
    upper: List[float] = []

    def row(entries, lo, hi):
        r = len(lower)
        for col, val in entries:
            rows.append(r)
            cols.append(col)
            vals.append(val)
        lower.append(lo)
        upper.append(hi)

    for c in {eg.find(r) for r in roots}:
        row([(i, 1.0) for i in members[c]], 1.0, np.inf)
    for c in classes:
        if len(members[c]) > 1:
            row([(i, 1.0) for i in members[c]], -np.inf, 1.0)
    for n in nodes:
        for d in set(eg.nodes[n][2]):
            row([(var[n], 1.0)] + [(i, -1.0) for i in members[d]], -np.inf, 0.0)

    def cut(cycle: List[int]) -> None:
        # Every e-node of the cycle's classes that reads the next class on
        # the cycle: fewer than one per class may be chosen (with one
        # e-node per class, choosing such an e-node in every class is this
        # cycle, whichever e-nodes they are).
        edges = [i for k, c in enumerate(cycle) for i in members[c]
                 if cycle[(k + 1) % len(cycle)] in eg.nodes[nodes[i]][2]]
        row([(i, 1.0) for i in edges], -np.inf, len(cycle) - 1.0)

    for cycle in _short_cycles(eg, classes):
        cut(cycle)
    objective = np.array([costs[n] * 1e3 for n in nodes])  # in µs: better scaled
    integrality = np.ones(len(nodes))
    bounds = (np.zeros(len(nodes)), np.ones(len(nodes)))
    status = "failed"
    while True:
        left = time_limit_s - (time.time() - start)
        if left <= 0:
            break
        matrix = sparse.csr_array((vals, (rows, cols)), shape=(len(lower), len(nodes)))
        result = milp(objective, integrality=integrality, bounds=bounds,
                      constraints=LinearConstraint(matrix, lower, upper),
                      options={"time_limit": left, "mip_rel_gap": 1e-4, "disp": False})
        if result.x is None:
            break
        choice: Choice = {}
        for c in classes:
            picked = [nodes[i] for i in members[c] if result.x[i] > 0.5]
            if picked:
                choice[c] = picked[0]
        if any(eg.find(r) not in choice for r in roots):
            break
        cycles = _find_cycles(eg, choice, roots)
        if not cycles:
            status = "optimal" if result.status == 0 else "time_limit"
            bound = getattr(result, "mip_dual_bound", None)
            bound = 0.0 if bound is None or not np.isfinite(bound) else bound / 1e3
            return Extraction(choice, dag_cost(eg, choice, roots, costs), "ilp", status,
                              time.time() - start, bound)
        for cycle in cycles:
            cut(cycle)
    return Extraction({}, float("inf"), "ilp", status, time.time() - start)


def build_graph(eg: EGraph, choice: Choice, roots: Sequence[int]) -> Graph:
    """The engine graph of a choice, outputs in the order of `roots`.

    Raises:
      ValueError: the choice is cyclic or misses a class it needs.
    """
    builder = GraphBuilder()
    built: Dict[int, list] = {}   # class -> its Tensors (one, or a tuple's outputs)
    visiting = set()

    def build(c: int):
        c = eg.find(c)
        if c in built:
            return built[c]
        if c in visiting:
            raise ValueError(f"the choice is cyclic at class {c}")
        if c not in choice:
            raise ValueError(f"the choice has no e-node for class {c}")
        visiting.add(c)
        op, params, children = eg.nodes[choice[c]]
        if op == OUT:
            tensors = [build(children[0])[params[0][1]]]
        elif op in ("input", "weight"):
            p = dict(params)
            leaf = builder.input if op == "input" else builder.weight
            tensors = [leaf(name=str(p["name"]), shape=p["shape"])]
        else:
            inputs = [build(ch)[0] for ch in children]
            tensors = builder.add_op(op, inputs, dict(params))
        visiting.discard(c)
        built[c] = tensors
        return tensors

    outputs = [build(r)[0] for r in roots]
    return builder.build(outputs=outputs)
