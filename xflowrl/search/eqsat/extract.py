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
  e-nodes' costs (shared sub-graphs counted once). Saturation filters
  cycles (`EGraph.filter_cycles`, `filter_cycles_by_age`); a cycle left in a
  solution becomes a cut and the program is solved again (lazy
  constraints). Solved by HiGHS (highspy) under a limit on its CPU time,
  started from greedy extraction's choice, so that it never returns a
  costlier one; not solved where that start provably costs the least
  (`_Program.lower_bound`).

`build_graph` turns a choice (class -> e-node) into an engine `Graph`
(shape-checked by the engine as it is built).
"""

from __future__ import annotations

import heapq
import itertools
import os
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from xflowrl import _engine
from xflowrl.engine import CostModel, Graph, GraphBuilder
from xflowrl.search.eqsat import child
from xflowrl.search.eqsat.egraph import EGraph, OUT

Choice = Dict[int, int]  # class -> e-node
# `_undominated` looks up the subsets of an e-node's child classes up to this many.
_SUBSETS_UP_TO = 6


class Extraction(NamedTuple):
    """An extractor's choice and what it cost."""
    choice: Choice
    dag_cost: float     # the choice's per-node costs summed, shared nodes once (ms)
    method: str         # "greedy" | "ilp"
    status: str         # "ok"; ILP: "optimal", "skipped", "cpu_limit" (best found), ...
    seconds: float
    bound: float = 0.0  # ILP: a lower bound on any acyclic choice's dag_cost (ms)
    cpu_seconds: float = 0.0  # ILP: CPU time of the calling thread and HiGHS's process
    # ILP: the program's identity (`_Program.identity`); () where none was made.
    program: tuple = ()


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
    for n, alive in enumerate(eg.alive):  # filtered e-nodes too (`_Program`'s start)
        if alive:
            op, params, children = eg.node(n)
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


def _reachable(eg: EGraph, roots: Sequence[int],
               extra: Optional[Dict[int, List[int]]] = None) -> List[int]:
    """Classes reachable from `roots` through live e-nodes (and the e-nodes
    `extra` adds to a class)."""
    seen = set()
    find, nodes, extra = eg.find, eg.nodes, extra or {}
    stack = [find(r) for r in roots]
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        for members in (eg.live_nodes(c), extra.get(c, ())):
            for n in members:
                for ch in nodes[n][2]:
                    d = find(ch)
                    if d not in seen:
                        stack.append(d)
    return sorted(seen)


def used(eg: EGraph, choice: Choice, roots: Sequence[int]) -> Choice:
    """The part of `choice` the graph it extracts uses: the classes reached
    from `roots` through the chosen e-nodes."""
    out: Choice = {}
    stack = [eg.find(r) for r in roots]
    while stack:
        c = stack.pop()
        if c in out:
            continue
        out[c] = choice[c]
        stack.extend(eg.find(d) for d in eg.nodes[choice[c]][2])
    return out


def dag_cost(eg: EGraph, choice: Choice, roots: Sequence[int],
             costs: Dict[int, float]) -> float:
    """The cost of a choice: each chosen e-node reachable from `roots` once."""
    return sum(costs[n] for n in used(eg, choice, roots).values())


def greedy_extract(eg: EGraph, roots: Sequence[int], costs: Dict[int, float]) -> Extraction:
    """Per class the e-node of least tree cost; see the module docstring.

    Raises:
      ValueError: an output class has no acyclic choice (cannot happen for
        an e-graph built from a graph: the graph itself is one).
    """
    return greedy_and_tree_costs(eg, roots, costs)[0]


def greedy_and_tree_costs(eg: EGraph, roots: Sequence[int],
                          costs: Dict[int, float]) -> Tuple[Extraction, Dict[int, float]]:
    """`greedy_extract` and `tree_costs` from one pass of Knuth's algorithm
    (both come out of it).

    Raises:
      ValueError: as `greedy_extract`.
    """
    start = time.time()
    choice, node_tree = _tree_costs(eg, roots, costs)
    missing = [r for r in roots if eg.find(r) not in choice]
    if missing:
        raise ValueError(f"no acyclic choice for output classes {missing}")
    return (Extraction(choice, dag_cost(eg, choice, roots, costs), "greedy", "ok",
                       time.time() - start), node_tree)


def tree_costs(eg: EGraph, roots: Sequence[int], costs: Dict[int, float]) -> Dict[int, float]:
    """Per live e-node reachable from `roots`: its tree cost (its own cost
    plus its children classes' least tree costs; inf where a child has
    none, i.e. only through a cycle)."""
    _, node_tree = _tree_costs(eg, roots, costs)
    return node_tree


def _tree_costs(eg: EGraph, roots: Sequence[int],
                costs: Dict[int, float]) -> Tuple[Choice, Dict[int, float]]:
    """Knuth's algorithm: (per class the e-node of least tree cost, per
    e-node its tree cost)."""
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
    node_tree: Dict[int, float] = {n: float("inf") for c in classes for n in eg.live_nodes(c)}
    while heap:
        cost, n = heapq.heappop(heap)
        node_tree[n] = cost
        c = eg.class_of_node(n)
        if c in choice:
            continue
        choice[c], best[c] = n, cost
        for r in readers.get(c, ()):
            pending[r] -= 1
            if pending[r] == 0:
                tree = costs[r] + sum(best[k] for k in set(eg.nodes[r][2]))
                heapq.heappush(heap, (tree, r))
    return choice, node_tree


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


def _undominated(eg: EGraph, nodes: Sequence[int], costs: Dict[int, float]) -> List[int]:
    """The e-nodes of one class that no other e-node of it dominates: costs
    no more and reads a subset of its children classes (ties: the older
    e-node stays). Replacing a dominated e-node by its dominator never
    costs more, needs no other class and closes no cycle, so an optimal
    extraction never needs one.

    A dominator reads a subset of the dominated e-node's classes, so per
    e-node only the subsets of its own classes are looked up (e-nodes
    grouped by the classes they read, each group's cheapest kept); past
    `_SUBSETS_UP_TO` classes, the e-nodes sharing one of them are compared
    instead. Comparing every pair took seconds on BERT's largest classes."""
    kids = {n: frozenset(eg.nodes[n][2]) for n in nodes}
    cheapest: Dict[frozenset, Tuple[float, int]] = {}   # classes read -> (cost, e-node)
    for n in nodes:
        key = (costs[n], n)
        if kids[n] not in cheapest or key < cheapest[kids[n]]:
            cheapest[kids[n]] = key
    by_child: Dict[int, List[int]] = {}
    for n in nodes:
        for d in kids[n]:
            by_child.setdefault(d, []).append(n)
    kept = []
    for b in nodes:
        kids_b, cost_b = kids[b], costs[b]
        if cheapest[kids_b] != (cost_b, b):
            continue  # a cheaper (or as cheap and older) e-node reads the same classes
        if len(kids_b) <= _SUBSETS_UP_TO:
            dominated = any(
                cheapest.get(frozenset(sub), (np.inf, -1))[0] <= cost_b
                for size in range(len(kids_b))
                for sub in itertools.combinations(sorted(kids_b), size))
        else:
            candidates = {a for d in kids_b for a in by_child[d]} | \
                {a for a in nodes if not kids[a]}
            dominated = any(costs[a] <= cost_b and kids[a] < kids_b for a in candidates)
        if not dominated:
            kept.append(b)
    return kept


def _cyclic_components(classes: Sequence[int], succ: Dict[int, set]) -> Dict[int, int]:
    """Class -> its strongly connected component (a representative class),
    for the classes of components that hold a cycle (Tarjan's algorithm,
    iterative)."""
    index: Dict[int, int] = {}
    low: Dict[int, int] = {}
    stack: List[int] = []
    on_stack: set = set()
    component: Dict[int, int] = {}
    for start in classes:
        if start in index:
            continue
        work = [(start, iter(sorted(succ.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            advanced = False
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                members = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    members.append(w)
                    if w == v:
                        break
                if len(members) > 1 or v in succ.get(v, ()):
                    for w in members:
                        component[w] = v
    return component


class _Program:
    """TENSAT's extraction program over the classes reachable from the
    roots: a 0/1 variable per undominated e-node (`nodes`) and one per
    class (the sum of its e-nodes'), rows kept in coordinate form so that
    cuts can be added between solves."""

    def __init__(self, eg: EGraph, roots: Sequence[int], costs: Dict[int, float],
                 start: Optional[Choice] = None):
        self.eg, self.roots = eg, [eg.find(r) for r in roots]
        # The start's e-nodes are in the program even where cycle filtering
        # took them out of their class, so that the start is always a
        # solution; only those its graph uses (a greedy extraction chooses
        # in every class, and the filtered e-nodes of classes the graph
        # does not read would bring their cycles into the program).
        extra: Dict[int, List[int]] = {}
        for c, n in used(eg, start or {}, roots if start else []).items():
            if not eg.usable(n):
                extra.setdefault(eg.find(c), []).append(n)
        self.classes = _reachable(eg, roots, extra)
        self.nodes = [n for c in self.classes
                      for n in _undominated(eg, [m for m in eg.live_nodes(c)
                                                 if c not in eg.nodes[m][2]], costs)
                      + extra.get(c, [])]
        self.costs = costs
        self.var = {n: i for i, n in enumerate(self.nodes)}
        self.class_var = {c: len(self.nodes) + k for k, c in enumerate(self.classes)}
        self.num_vars = len(self.nodes) + len(self.classes)
        self.members: Dict[int, List[int]] = {c: [] for c in self.classes}
        for n in self.nodes:
            self.members[eg.class_of_node(n)].append(self.var[n])

    @property
    def identity(self) -> tuple:
        """What fixes the program: its classes and e-nodes, in order (with the
        e-graph and costs, which one run of extraction does not change: its
        rows follow from these)."""
        return tuple(self.classes), tuple(self.nodes)

    def cheapest_everywhere(self, choice: Choice) -> bool:
        """Whether each e-node of `choice` (a choice's used part) that costs
        anything is a cheapest of its class here: otherwise `lower_bound`,
        which counts a cheapest e-node per class it counts (a subset of
        the classes every solution, the choice included, selects), is
        below the choice's cost, and need not be computed."""
        costs = self.costs
        for c, n in choice.items():
            if costs[n] > 0 and c in self.members and any(
                    costs[self.nodes[i]] < costs[n] for i in self.members[c]):
                return False
        return True

    def lower_bound(self) -> Optional[float]:
        """A lower bound on the program's optimum (ms), from the classes every
        solution selects, or None where the program's class graph has a
        cycle, a class has no e-node or a cost is negative.

        A class c *requires* itself and the classes every one of its
        e-nodes requires through its children: req(c) = {c} | the
        intersection over its e-nodes n of the union over n's child classes
        d of req(d). A selected class selects one of its e-nodes, hence all
        of that e-node's child classes, hence (by induction over the
        acyclic class graph) req(c). So every solution selects req(r) for
        each output class r, and pays at least the cheapest e-node of each
        of them (costs are not negative; classes outside pay at least 0)."""
        eg, costs = self.eg, self.costs
        if any(costs[n] < 0 for n in self.nodes):
            return None
        bit = {c: 1 << k for k, c in enumerate(self.classes)}
        kids = {c: [set(eg.nodes[self.nodes[i]][2]) for i in self.members[c]]
                for c in self.classes}
        req: Dict[int, int] = {}
        state: Dict[int, int] = {}  # 1 on the path, 2 done
        for root in self.roots:
            work = [(root, False)]
            while work:
                c, expanded = work.pop()
                if expanded:
                    if not kids[c]:
                        return None
                    common = -1  # every class
                    for children in kids[c]:
                        union = 0
                        for d in children:
                            union |= req[d]
                        common &= union
                    req[c] = common | bit[c]
                    state[c] = 2
                    continue
                if state.get(c) == 2:
                    continue
                if state.get(c) == 1:
                    return None  # a cycle
                state[c] = 1
                work.append((c, True))
                for children in kids[c]:
                    for d in children:
                        if d not in bit:
                            return None
                        if state.get(d) == 1:
                            return None
                        if d not in state:
                            work.append((d, False))
        required = 0
        for r in self.roots:
            required |= req[r]
        return sum(min(costs[self.nodes[i]] for i in self.members[c])
                   for c in self.classes if required & bit[c])

    def build(self) -> None:
        """The program's rows, order variables and bounds."""
        eg, costs, var = self.eg, self.costs, self.var
        self.rows: List[int] = []
        self.cols: List[int] = []
        self.vals: List[float] = []
        self.lower: List[float] = []
        self.upper: List[float] = []
        rows, cols, vals, lower, upper = self.rows, self.cols, self.vals, self.lower, self.upper
        class_var = self.class_var
        for c in self.classes:  # y_c = the sum of its e-nodes' x (so at most one)
            r = len(lower)
            for i in self.members[c]:
                rows.append(r)
                cols.append(i)
                vals.append(1.0)
            rows.append(r)
            cols.append(class_var[c])
            vals.append(-1.0)
            lower.append(0.0)
            upper.append(0.0)
        for n in self.nodes:  # x_n <= y_d for each child class d
            i = var[n]
            for d in set(eg.nodes[n][2]):
                r = len(lower)
                rows.extend((r, r))
                cols.extend((i, class_var[d]))
                vals.extend((1.0, -1.0))
                lower.append(-np.inf)
                upper.append(0.0)
        # Acyclicity, as TENSAT's ILP: an order variable t_c per class of a
        # strongly connected component of the program's class graph (after
        # cycle filtering, few), and for a chosen e-node of c reading d in
        # the same component t_c >= t_d + 1. Edges between components never
        # close a cycle.
        succ: Dict[int, set] = {c: set() for c in self.classes}
        for n in self.nodes:
            succ[eg.class_of_node(n)].update(eg.nodes[n][2])
        self.component = _cyclic_components(self.classes, succ)
        ordered = sorted(self.component)
        first_order = self.num_vars
        self.order_var = {c: first_order + k for k, c in enumerate(ordered)}
        self.num_vars += len(ordered)
        self.big = float(len(ordered) + 1)
        for n in self.nodes:
            c = eg.class_of_node(n)
            if c not in self.component:
                continue
            for d in set(eg.nodes[n][2]):
                if self.component.get(d) == self.component[c]:
                    self.row([(self.order_var[c], 1.0), (self.order_var[d], -1.0),
                              (var[n], -self.big)], 1.0 - self.big, np.inf)
        self.objective = np.zeros(self.num_vars)
        self.objective[:len(self.nodes)] = [costs[n] * 1e3 for n in self.nodes]  # µs
        self.lb, self.ub = np.zeros(self.num_vars), np.ones(self.num_vars)
        self.ub[first_order:] = self.big - 1
        self.integrality = np.ones(self.num_vars)
        self.integrality[first_order:] = 0
        for r in self.roots:
            self.lb[self.class_var[r]] = 1.0

    def row(self, entries, lo: float, hi: float) -> None:
        r = len(self.lower)
        for col, val in entries:
            self.rows.append(r)
            self.cols.append(col)
            self.vals.append(val)
        self.lower.append(lo)
        self.upper.append(hi)

    def cut(self, cycle: List[int]) -> None:
        """Every e-node of the cycle's classes that reads the next class on
        the cycle: fewer than one per class may be chosen (with one e-node
        per class, choosing such an e-node in every class is this cycle,
        whichever e-nodes they are)."""
        edges = [i for k, c in enumerate(cycle) for i in self.members[c]
                 if cycle[(k + 1) % len(cycle)] in self.eg.nodes[self.nodes[i]][2]]
        self.row([(i, 1.0) for i in edges], -np.inf, len(cycle) - 1.0)

    def matrix(self):
        from scipy import sparse
        return sparse.csr_array((self.vals, (self.rows, self.cols)),
                                shape=(len(self.lower), self.num_vars))

    def solution_of(self, choice: Choice) -> np.ndarray:
        """The 0/1 vector of an acyclic choice: its e-nodes reachable from
        the roots and their classes (a dominated e-node is replaced by an
        undominated one of its class that reads a subset of its classes)."""
        x = np.zeros(self.num_vars)
        index = {n: i for i, n in enumerate(self.nodes)}
        seen: set = set()
        stack = list(self.roots)
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            n = choice[c]
            if n not in index:
                kids = set(self.eg.nodes[n][2])
                n = next(self.nodes[i] for i in self.members[c]
                         if set(self.eg.nodes[self.nodes[i]][2]) <= kids)
            x[index[n]] = 1.0
            x[self.class_var[c]] = 1.0
            stack.extend(self.eg.nodes[n][2])
        # Order variables: the chosen classes of components ranked children
        # first (a depth-first post-order of the acyclic choice).
        rank: Dict[int, int] = {}
        done: set = set()

        def visit(c: int) -> None:
            work = [(c, False)]
            while work:
                k, expanded = work.pop()
                if expanded:
                    rank[k] = len(rank)
                    continue
                if k in done:
                    continue
                done.add(k)
                work.append((k, True))
                n = choice[k]
                if n not in index:
                    kids = set(self.eg.nodes[n][2])
                    n = next(self.nodes[i] for i in self.members[k]
                             if set(self.eg.nodes[self.nodes[i]][2]) <= kids)
                work.extend((d, False) for d in self.eg.nodes[n][2] if d not in done)
        for r in self.roots:
            visit(r)
        in_components = sorted((rank[c], c) for c in self.component if c in rank)
        for position, (_, c) in enumerate(in_components):
            x[self.order_var[c]] = position + 1
        return x

    def choice(self, x: np.ndarray) -> Choice:
        """The e-node chosen in each class by a solution `x`."""
        choice: Choice = {}
        for c in self.classes:
            picked = [self.nodes[i] for i in self.members[c] if x[i] > 0.5]
            if picked:
                choice[c] = picked[0]
        return choice


# The wall-clock limit of a solve, as a multiple of its CPU-time limit: a
# safety net only (a solve stopped by it depends on the machine's load; its
# status says so), loose enough not to act below a load of about 4 per core.
WALL_PER_CPU = 4.0


# HiGHS's primal heuristics off (the feasibility jump, the sub-MIPs RINS
# and RENS, the root's reduced-cost fixing, and the effort share of the
# others): `EqsatConfig(ilp_heuristics=False)`. They look for a solution,
# and every program equality saturation solves starts from one, usually
# already the optimum: on the programs of 10 zoo settings they took 20% of
# HiGHS's CPU time in the median program (up to 86% of a small program's)
# and changed no optimum (reports/2026-11-28_eqsat_highs_settings.md).
# They decide nothing about optimality: HiGHS still stops on the same
# relative gap. But a program that stops on its CPU limit can end
# costlier without them (nasnet_a's age-ordered program under the large
# rule sets: 0.07-0.13 points of the initial cost), so they stay on by
# default: the strongest baseline's graphs come before 5% of its time.
# Presolve stays on either way: without it HiGHS took 1.5 to 80 times as
# long.
HIGHS_HEURISTICS_OFF: Dict[str, object] = {
    "mip_heuristic_effort": 0.0,
    "mip_heuristic_run_feasibility_jump": False,
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_rens": False,
    "mip_heuristic_run_root_reduced_cost": False,
}


# The statuses of an extraction whose program's optimum is proven (within
# HiGHS's relative gap, `mip_rel_gap`).
PROVEN = ("optimal", "skipped", "same")


class _Solved(NamedTuple):
    """What one HiGHS run returned."""
    x: Optional[np.ndarray]   # None: no feasible solution
    # "optimal" | "cpu_limit" | "time_limit" | "stopped"; in a child process
    # also "deadline" (killed there) | "crashed" (it ended by itself)
    status: str
    bound: float              # HiGHS's dual bound (ms; 0 where none)
    cpu_seconds: float
    in_child: bool = False    # HiGHS ran in a child process (its CPU is not this thread's)


class _Request(NamedTuple):
    """One HiGHS run as plain arrays (it pickles: `child.call`)."""
    cost: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    col_starts: np.ndarray    # the matrix, column-wise (CSC)
    row_indices: np.ndarray
    values: np.ndarray
    integral: np.ndarray      # bool per column
    solution: Optional[np.ndarray]  # a feasible start, or None
    cpu_limit_s: float
    options: Dict[str, object]


def _solve(program: _Program, start_choice: Optional[Choice], cpu_limit_s: float,
           options: Optional[Dict[str, object]] = None, integral: bool = True,
           deadline: Optional[float] = None) -> _Solved:
    """Solves `program` with HiGHS (highspy, one thread), from `start_choice`
    where one is given (an acyclic choice: a feasible solution HiGHS
    improves on, so the result is never costlier). HiGHS's own time limit
    is wall-clock; the limit here is the CPU time of the thread HiGHS runs
    on, checked each time HiGHS's MIP checks its limits (its interrupt
    callback), so that how far it gets depends on its work rather than on
    the machine's load. A wall-clock limit of `WALL_PER_CPU` times as much
    stays as a safety net.

    `deadline` (`time.time()` seconds, or None): HiGHS runs in a child
    process (`child.call`) that is killed at the deadline, since HiGHS does
    not check its limits inside a round of cut separation; the answer is
    then the best solution it had reported (status "deadline"). None, or a
    platform without fork: HiGHS runs on the calling thread.

    `options` are HiGHS options set on top of those (None or `{}`:
    HiGHS's defaults; e.g. `HIGHS_HEURISTICS_OFF`). `integral=False` solves
    the linear relaxation instead (every variable continuous; no start, no
    CPU-time limit but the wall-clock one; `bound` is 0): what the MIP's
    bound starts from (`benchmarks/eqsat_ilp_bench.py`).

    Raises:
      ValueError: HiGHS rejects an option of `options`.
    """
    request = _request(program, start_choice, cpu_limit_s, options, integral)
    if deadline is None or not child.available():
        return _run_highs(request)
    outcome = child.call(_run_highs, (request,), deadline)
    if outcome.finished:
        return outcome.value._replace(cpu_seconds=outcome.cpu_seconds, in_child=True)
    status = "deadline" if outcome.died is None else "crashed"
    # The best HiGHS reported, or the start it had (no incumbent it
    # reports costs more than the start).
    best = outcome.partial if outcome.partial is not None else request.solution
    return _Solved(best, status, 0.0, outcome.cpu_seconds, in_child=True)


def _request(program: _Program, start_choice: Optional[Choice], cpu_limit_s: float,
             options: Optional[Dict[str, object]] = None, integral: bool = True) -> _Request:
    """`_solve`'s arguments as a `_Request`."""
    matrix = program.matrix().tocsc()
    return _Request(
        cost=np.asarray(program.objective, dtype=float),
        col_lower=np.asarray(program.lb, dtype=float),
        col_upper=np.asarray(program.ub, dtype=float),
        row_lower=np.asarray(program.lower, dtype=float),
        row_upper=np.asarray(program.upper, dtype=float),
        col_starts=matrix.indptr, row_indices=matrix.indices, values=matrix.data,
        integral=np.asarray(program.integrality, dtype=bool) & integral,
        solution=(program.solution_of(start_choice)
                  if start_choice is not None and integral else None),
        cpu_limit_s=float(max(cpu_limit_s, 0.1)), options=dict(options or {}))


def _run_highs(request: _Request, report: Optional[Callable[[np.ndarray], None]] = None
               ) -> _Solved:
    """Runs HiGHS on `request` on the calling thread (`_solve`); passes each
    new incumbent (each better solution, and the start where HiGHS takes
    it as its first) to `report` where given."""
    import highspy  # pylint: disable=import-outside-toplevel

    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = len(request.cost), len(request.row_lower)
    lp.col_cost_ = request.cost
    lp.col_lower_, lp.col_upper_ = request.col_lower, request.col_upper
    lp.row_lower_ = np.where(np.isinf(request.row_lower), -highspy.kHighsInf,
                             request.row_lower)
    lp.row_upper_ = np.where(np.isinf(request.row_upper), highspy.kHighsInf,
                             request.row_upper)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = request.col_starts
    lp.a_matrix_.index_ = request.row_indices
    lp.a_matrix_.value_ = request.values
    integral = bool(request.integral.any())
    lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
                       for i in request.integral]
    cpu_limit_s = request.cpu_limit_s
    h = highspy.Highs()
    h.setOptionValue("output_flag", bool(os.environ.get("XFLOWRL_ILP_LOG")))
    h.setOptionValue("time_limit", WALL_PER_CPU * cpu_limit_s)
    h.setOptionValue("mip_rel_gap", 1e-4)
    h.setOptionValue("threads", 1)
    for name, value in request.options.items():
        if h.setOptionValue(name, value) != highspy.HighsStatus.kOk:
            raise ValueError(f"HiGHS rejects option {name}={value!r}")
    h.passModel(lp)
    if request.solution is not None:
        solution = highspy.HighsSolution()
        solution.col_value = list(request.solution)
        solution.value_valid = True
        h.setSolution(solution)
    cpu_start = time.thread_time()
    out_of_cpu = []

    def interrupt(event) -> None:
        if time.thread_time() - cpu_start >= cpu_limit_s:
            out_of_cpu.append(True)
            event.interrupt()
    h.cbMipInterrupt.subscribe(interrupt)
    if report is not None:
        h.cbMipImprovingSolution.subscribe(
            lambda event: report(np.array(event.data_out.mip_solution)))
    try:
        h.run()
    finally:
        # highspy's Highs keeps its callbacks in `callbacks`, each holding
        # the Highs: a reference cycle, freed here rather than by a later
        # pass of the cyclic collector.
        h.callbacks.clear()
    cpu = time.thread_time() - cpu_start
    info = h.getInfo()
    model_status = h.getModelStatus()
    if model_status == highspy.HighsModelStatus.kOptimal:
        status = "optimal"
    elif model_status == highspy.HighsModelStatus.kTimeLimit:
        status = "time_limit"
    elif out_of_cpu:
        status = "cpu_limit"
    else:
        status = "stopped"
    if info.primal_solution_status != 2:  # kSolutionStatusFeasible
        return _Solved(None, status, 0.0, cpu)
    bound = info.mip_dual_bound if integral else np.nan
    return _Solved(np.asarray(h.getSolution().col_value), status,
                   float(bound) / 1e3 if np.isfinite(bound) else 0.0, cpu)


def ilp_extract(eg: EGraph, roots: Sequence[int], costs: Dict[int, float],
                time_limit_s: float = 30.0, start: Optional[Choice] = None,
                skip_proven: bool = True,
                highs_options: Optional[Dict[str, object]] = None,
                repeat_of: Optional[Extraction] = None,
                deadline: Optional[float] = None) -> Extraction:
    """TENSAT's ILP; see the module docstring. The program (`_Program`) has
    a 0/1 variable per e-node and one per class, so that "a chosen e-node's
    child class is chosen" is one two-term row per edge, and leaves out
    dominated e-nodes (`_undominated`). HiGHS starts from `start` (e.g.
    greedy extraction's choice) where given. Acyclicity is enforced
    lazily: every cycle of two or three classes is cut before the first
    solve, and each cycle of a solution becomes a cut before solving
    again, until a solution is acyclic or the time is up (after cycle
    filtering, `EGraph.filter_cycles`, there are none). `time_limit_s`
    is CPU time of HiGHS's thread, all solves together (`_solve`).

    HiGHS is not run where the start is provably optimal: its cost
    (shared e-nodes once) equals the program's lower bound
    (`_Program.lower_bound`); the start is then the answer (unless
    `skip_proven` is False: tests solve such programs to compare).
    `highs_options` are set on HiGHS for every solve (`_solve`).

    `repeat_of`: an earlier extraction on the same e-graph and costs. Where
    it proved its program's optimum (a status of `PROVEN`) and this
    program is the same one (`_Program.identity`: cycle filtering of
    another kind can leave the same e-nodes), its answer is this one's too,
    and nothing is solved (status "same").

    `deadline` (`time.time()` seconds): HiGHS runs in a child process
    killed at the deadline (`_solve`); the answer is then the best solution
    it had found (or the start), where acyclic (status "deadline").

    `status` is "optimal" (solved), "skipped" (the start proven optimal
    without solving), "same" (`repeat_of`'s), "cpu_limit" (the best acyclic
    solution found within the CPU time), "time_limit" (the same, stopped by
    the wall-clock safety net), "deadline" (the same, HiGHS's process
    stopped at `deadline`), "crashed" (the same, HiGHS's process ended by
    itself), "stopped" (HiGHS ended otherwise, unproven) or "failed" (no
    solution: `choice` is empty). `cpu_seconds` counts the
    CPU time of HiGHS's process where it runs in one."""
    clock, cpu_clock = time.time(), time.thread_time()
    program = _Program(eg, roots, costs, start)
    identity = program.identity
    if repeat_of is not None and repeat_of.status in PROVEN and \
            repeat_of.program == identity:
        return repeat_of._replace(status="same", seconds=time.time() - clock,
                                  cpu_seconds=time.thread_time() - cpu_clock)
    if skip_proven and start is not None and program.cheapest_everywhere(used(eg, start, roots)):
        start_cost = dag_cost(eg, start, roots, costs)
        bound = program.lower_bound()
        if bound is not None and bound >= start_cost - 1e-9 * max(start_cost, 1.0):
            return Extraction(used(eg, start, roots), start_cost, "ilp", "skipped",
                              time.time() - clock, bound, time.thread_time() - cpu_clock,
                              identity)
    program.build()
    status = "failed"
    solving_cpu = 0.0   # HiGHS's in its own process (0: on this thread)

    def cpu_used() -> float:
        return time.thread_time() - cpu_clock + solving_cpu
    while True:
        left = time_limit_s - cpu_used()
        if left <= 0:
            break
        if deadline is not None and time.time() >= deadline:
            status = "deadline"
            break
        solved = _solve(program, start, left, highs_options, deadline=deadline)
        if solved.in_child:
            solving_cpu += solved.cpu_seconds
        if solved.x is None:
            if solved.status in ("deadline", "crashed"):
                status = solved.status
            break
        choice = program.choice(solved.x)
        if any(r not in choice for r in program.roots):
            break
        cycles = _find_cycles(eg, choice, roots)
        if not cycles:
            return Extraction(choice, dag_cost(eg, choice, roots, costs), "ilp",
                              solved.status, time.time() - clock, solved.bound,
                              cpu_used(), identity)
        if solved.status == "deadline":
            status = "deadline"
            break
        for cycle in cycles:
            program.cut(cycle)
    return Extraction({}, float("inf"), "ilp", status, time.time() - clock,
                      cpu_seconds=cpu_used(), program=identity)


def build_graph(eg: EGraph, choice: Choice, roots: Sequence[int]) -> Graph:
    """The engine graph of a choice, outputs in the order of `roots`.

    Raises:
      ValueError: the choice is cyclic or misses a class it needs.
    """
    builder = GraphBuilder()
    built: Dict[int, list] = {}   # class -> its Tensors (one, or a tuple's outputs)
    visiting: set = set()
    outputs = [_build_class(eg, choice, builder, built, visiting, r)[0] for r in roots]
    return builder.build(outputs=outputs)


def _build_class(eg: EGraph, choice: Choice, builder: GraphBuilder, built: Dict[int, list],
                 visiting: set, c: int) -> list:
    """Class `c`'s Tensors, built with what its chosen e-node reads first.
    (A function of its own, not a closure of `build_graph`: a closure that
    calls itself is a reference cycle, which would keep the e-graph until
    a pass of the cyclic collector.)"""
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
        tensors = [_build_class(eg, choice, builder, built, visiting,
                                children[0])[params[0][1]]]
    elif op in ("input", "weight"):
        p = dict(params)
        leaf = builder.input if op == "input" else builder.weight
        tensors = [leaf(name=str(p["name"]), shape=p["shape"])]
    else:
        inputs = [_build_class(eg, choice, builder, built, visiting, ch)[0] for ch in children]
        tensors = builder.add_op(op, inputs, dict(params))
    visiting.discard(c)
    built[c] = tensors
    return tensors
