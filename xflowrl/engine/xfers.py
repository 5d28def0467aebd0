"""The xfers (substitution rules) of the engine: locations, apply and search.

`XferSet` holds an ordered list of rules in the native engine. On a graph,
`XferSet.locations(graph)` enumerates, for every xfer, the distinct graphs it
produces: location `l` of xfer `x` is the `l`-th result of the deterministic
match order after dropping cyclic results, results over the size cap and
results whose canonical hash was already seen in this step (the current graph
and every earlier candidate). At most `max_locations` per xfer are kept.
"""

from __future__ import annotations

import functools
import resource
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from xflowrl import _engine, ops
from xflowrl.engine.cost import CostModel
from xflowrl.engine.graph import Graph
from xflowrl.rules import rules_io
from xflowrl.rules.sets import load_default_rules, load_rule_set

# L: the locations kept per xfer (`XferSet.locations`, the environment's
# `EnvConfig.max_locations`, the agents' location heads).
DEFAULT_MAX_LOCATIONS = 200

# TASO's backtracking search as the baselines, the CLI and the thesis run it
# (`XferSet.search`): the relaxation alpha (TASO's default) and the budget in
# graphs expanded.
TASO_ALPHA = 1.05
TASO_BUDGET = 1000


def _native_op(op: "rules_io.PatternOp", rule_name: str):
    type_id = _engine.op_type_id(op.type)
    if type_id < 0:
        raise ValueError(f"rule {rule_name!r}: unknown op type {op.type!r}")
    params, copied = [], []
    for key, value in op.params:
        if key not in ops.PARAM_KEYS:
            raise ValueError(f"rule {rule_name!r}: unknown parameter {key!r} on {op.type}")
        if isinstance(value, str):
            if not value.startswith("src:"):
                raise ValueError(f"rule {rule_name!r}: bad parameter value {value!r}")
            copied.append((ops.PARAM_KEYS[key], int(value[4:])))
        elif isinstance(value, float) and not value.is_integer():
            # The engine's constraints are integers; a float such as an
            # epsilon can only be copied from a source op ("src:K").
            raise ValueError(f"rule {rule_name!r}: {op.type} parameter {key}={value} is not "
                             f"an integer; copy it from a source op with 'src:K'")
        else:
            params.append((ops.PARAM_KEYS[key], int(value)))
    return (type_id, [(t.op, t.index) for t in op.inputs], params, copied)


@functools.lru_cache(maxsize=None)
def _native_rule(rule: "rules_io.Rule"):
    """The binding's form of `rule` (kept: rules are immutable, and a rule
    set is built many times from the same rules; the binding only reads it)."""
    return (rule.name,
            [_native_op(op, rule.name) for op in rule.src],
            [_native_op(op, rule.name) for op in rule.dst],
            [((s.op, s.index), (d.op, d.index)) for s, d in rule.mapped_outputs])


class SearchResult(NamedTuple):
    """What `XferSet.search` returns. The binding's search returns a dict
    whose keys are these fields (with `best` for `graph` and xfer indices
    in `applied`); `_search_result` checks that they match one to one.

    `applied` is in the form the environment's replay takes
    (`xflowrl.env.replay`): (xfer name, location) in the order applied, the
    location numbered as `XferSet.locations(parent, max_locations, max_ops)`
    numbers it on the graph it was applied to, with the search's
    `max_locations` and size cap; -1 where the search took a candidate
    past the first `max_locations` (a step no environment with that L can
    take)."""
    graph: Graph                 # the best graph found
    initial_cost: float          # ms
    best_cost: float             # ms
    applied: List[Tuple[str, int]]  # (xfer name, location) applied to build `graph`, in order
    expansions: int              # graphs popped from the queue
    enqueued: int
    seconds: float
    trace: List[Tuple[int, float, float]]  # (expansions, seconds, best cost)
    peak_queued: int = 0         # most candidates queued at once
    peak_parents: int = 0        # most expanded graphs held for queued candidates
    dropped: int = 0             # candidates dropped by max_queued (0: results exact)
    seen: int = 0                # distinct graphs met
    peak_rss_mb: float = 0.0     # the process's peak resident memory after the search

    @property
    def applied_names(self) -> List[str]:
        """The names of the xfers applied, in order."""
        return [name for name, _ in self.applied]


class StepArrays(NamedTuple):
    """What a step reads of its locations, from one native call
    (`Locations.step_arrays`): the rows of the xfers with candidates."""
    active: np.ndarray            # [A] int64: `Locations.active_xfers()`
    counts: np.ndarray            # [A] int64: their candidate counts
    nodes: Optional[np.ndarray]   # [A, L, width] int32: `matched_nodes(node_of, width, active)`; None without node_of
    costs: Optional[np.ndarray]   # [A, L] float64: `active_costs(cost_model)`; None without one


class Locations:
    """The candidate graphs of every xfer on one graph, with their masks."""

    def __init__(self, handle, graph: Graph, max_locations: int):
        self._handle = handle
        self.graph = graph
        self.max_locations = max_locations
        self._counts = handle.count_array()
        self._counts.setflags(write=False)
        self._count_list: Optional[List[int]] = None

    @property
    def counts(self) -> List[int]:
        """Locations per xfer (a list, made on first use from `count_array`)."""
        if self._count_list is None:
            self._count_list = self._counts.tolist()
        return self._count_list

    @property
    def num_xfers(self) -> int:
        return len(self._counts)

    def location_mask(self) -> np.ndarray:
        """[N+1, L] bool; row N (NO-OP) is all False."""
        mask = np.zeros((self.num_xfers + 1, self.max_locations), bool)
        active = self.active_xfers()
        mask[active] = self._prefix_mask(active)
        return mask

    def _prefix_mask(self, xfers: np.ndarray) -> np.ndarray:
        """[len(xfers), L] bool: True at the locations each xfer has. Only
        the few xfers with locations are worth a row; most of ~1,700 have none."""
        return np.arange(self.max_locations) < self._counts[xfers, None]

    def xfer_mask(self) -> np.ndarray:
        """[N+1] bool: xfers with at least one location; NO-OP always True."""
        return np.append(self._counts > 0, True)

    @property
    def count_array(self) -> np.ndarray:
        """`counts` as a read-only [N] int64 array, for vectorised features."""
        return self._counts

    def active_xfers(self) -> np.ndarray:
        """The xfers with at least one location, ascending (int64)."""
        return np.flatnonzero(self._counts)

    def matched_ops(self, xfer: int) -> List[List[int]]:
        """For each location of `xfer`, the guids (in `self.graph`) of the ops
        its source pattern matched, in source-pattern order."""
        self._check_xfer(xfer)
        return self._handle.matched(xfer)

    def matched_nodes(self, node_of: np.ndarray, width: int,
                      xfers: Optional[np.ndarray] = None) -> np.ndarray:
        """[N+1, L, width] int32: `matched_ops` of every location as node
        indices, `node_of[guid]`; -1 past a pattern's ops, at missing
        locations and in row N (NO-OP). Built in one native call, since the
        environment needs it for every location at every step.

        Args:
          node_of: int32 map from guid to node index (at least max guid + 1
            entries; `graph.structure()["guids"]` inverted).
          width: pattern slots, at least the largest source pattern.
          xfers: only these xfers' rows, in this order ([len(xfers), L,
            width]; e.g. `active_xfers()`, as the environment asks).
        """
        node_of = np.ascontiguousarray(node_of, np.int32)
        if xfers is None:
            out = np.full((self.num_xfers + 1, self.max_locations, width), -1, np.int32)
            self._handle.matched_nodes(node_of, out)
            return out
        xfers = np.ascontiguousarray(xfers, np.int64)
        out = np.full((len(xfers), self.max_locations, width), -1, np.int32)
        self._handle.matched_nodes_rows(xfers, node_of, out)
        return out

    def step_arrays(self, node_of: Optional[np.ndarray], width: int = 0,
                    cost_model: Optional[CostModel] = None) -> StepArrays:
        """`active_xfers()`, their counts, (with `node_of`)
        `matched_nodes(node_of, width, active)` and (with `cost_model`)
        `active_costs(cost_model)`, equal to theirs element for element, in
        one native call: what the environment and the planner's simulator
        read at every step.

        Args:
          node_of: int32 map from guid to node index (as `matched_nodes`);
            None leaves `nodes` None.
          width: pattern slots, at least the largest source pattern.
          cost_model: prices the candidates; None leaves `costs` None.
        """
        if node_of is not None:
            node_of = np.ascontiguousarray(node_of, np.int32)
        active, counts, nodes, costs = self._handle.step_arrays(
            node_of, width, self.max_locations,
            None if cost_model is None else cost_model.handle)
        return StepArrays(active, counts, nodes, costs)

    def costs(self, cost_model: CostModel) -> np.ndarray:
        """[N, L] float64: the cost (ms) of every candidate graph; NaN where
        the xfer has no such location. With a context-free backend (analytic,
        onednn, cudnn) a candidate's cost is the current graph's minus the
        ops it removes plus the ops it adds, summed in the candidate's own
        order, without building the candidate; the fitted backend, which
        prices ops by their neighbours, revises a flat view of the candidate
        laid out in that same order (docs/engine.md, "Incremental
        candidates"), again without building it. Either way it equals the
        candidate graph's `cost` bit for bit."""
        out = np.full((self.num_xfers, self.max_locations), np.nan)
        out[self._prefix_mask(np.arange(self.num_xfers))] = self.flat_costs(cost_model)
        return out

    def active_costs(self, cost_model: CostModel) -> np.ndarray:
        """[A, L] float64: the rows of `costs` for `active_xfers()` only (the
        environment needs no more, and a full [N, L] array is megabytes)."""
        active = self.active_xfers()
        out = np.full((len(active), self.max_locations), np.nan)
        out[self._prefix_mask(active)] = self.flat_costs(cost_model)
        return out

    def cheapest(self, cost_model: CostModel) -> Optional[Tuple[int, int, float]]:
        """The cheapest candidate as (xfer, location, cost in ms), the first
        in xfer then location order among equals (as an argmin over
        `costs`); None where no xfer has a location. No [N, L] array is
        made, so any L will do, even one that keeps every location."""
        flat = self.flat_costs(cost_model)
        if flat.size == 0:
            return None
        k = int(np.argmin(flat))
        active = self.active_xfers()
        ends = np.cumsum(self._counts[active])
        row = int(np.searchsorted(ends, k, side="right"))
        first = int(ends[row]) - int(self._counts[active[row]])
        return int(active[row]), k - first, float(flat[k])

    def flat_costs(self, cost_model: CostModel) -> np.ndarray:
        """Every candidate's cost, xfer by xfer and location by location: the
        order in which a row-major boolean assignment through `_prefix_mask`
        puts them in place (xfers without locations contribute nothing)."""
        return self._handle.costs_flat(cost_model.handle)

    def apply(self, xfer: int, location: int) -> Graph:
        """The graph that applying `xfer` at `location` produces.

        Raises:
          ValueError: the action is out of range or masked out.
        """
        self._check_xfer(xfer)
        if not 0 <= location < self._counts[xfer]:
            raise ValueError(f"location {location} is not valid for xfer {xfer}, "
                             f"which has {self._counts[xfer]} locations")
        return Graph(self._handle.graph(xfer, location))

    def hashes(self) -> List[List[int]]:
        """Per xfer, the canonical hash of every candidate graph (what
        `apply(x, l).hash()` returns), computed without building it."""
        return self._handle.hashes()

    def hashes_of(self, xfer: int) -> List[int]:
        """`hashes()[xfer]` alone: the canonical hash of each candidate of
        `xfer`, without hashing the other xfers' candidates."""
        self._check_xfer(xfer)
        return self._handle.hashes_of(xfer)

    def _check_xfer(self, xfer: int) -> None:
        if not 0 <= xfer < self.num_xfers:
            raise ValueError(f"xfer {xfer} out of range [0, {self.num_xfers})")


class XferSet:
    """An ordered list of validated rules held by the native engine."""

    def __init__(self, rules: Sequence["rules_io.Rule"]):
        self.rules = list(rules)
        self._handle = _engine.RuleSetHandle([_native_rule(r) for r in self.rules])
        # The environment looks names up every step: built once (the rules
        # are fixed once the native set holds them).
        self._names = tuple(r.name for r in self.rules)

    @classmethod
    def default(cls) -> "XferSet":
        """The built-in xfers followed by the generated, verified rules."""
        return cls(load_default_rules())

    @classmethod
    def from_name(cls, name: str) -> "XferSet":
        """A named rule set (`xflowrl.rules.sets.RULE_SETS`); ValueError for an
        unknown name."""
        return cls(load_rule_set(name))

    @property
    def names(self) -> Tuple[str, ...]:
        """The rules' names, in xfer order."""
        return self._names

    def __len__(self) -> int:
        return len(self.rules)

    def locations(self, graph: Graph, max_locations: int = DEFAULT_MAX_LOCATIONS,
                  max_ops: Optional[int] = None, incremental: bool = True,
                  through: Optional[int] = None) -> Locations:
        """Enumerates the locations of every xfer on `graph`.

        Args:
          graph: the current graph.
          max_locations: L, locations kept per xfer.
          max_ops: size cap on results (default: twice `graph`'s op count).
          incremental: describe each candidate by what it changes (its hash,
            op count and cost computed from the current graph's) and build
            its graph only when `apply` asks for it (default). False builds
            every candidate graph at once, as the engine did before; the
            locations are the same (kept to compare against).
          through: enumerate xfers 0..`through` only; the later xfers get no
            location. An xfer's locations depend on the xfers before it alone
            (duplicates of earlier candidates are dropped), so those of
            xfers 0..`through` are exactly the full enumeration's: what
            looking up or applying one location of xfer `through` needs.
            None: every xfer.
        """
        cap = _size_cap(graph, max_ops)
        if through is None:
            num_rules = -1
        elif not 0 <= through < len(self.rules):
            raise ValueError(f"through {through} out of range [0, {len(self.rules)})")
        else:
            num_rules = through + 1
        handle = self._handle.locations(graph.handle, max_locations, cap, incremental,
                                        num_rules)
        return Locations(handle, graph, max_locations)

    def apply(self, graph: Graph, xfer: int, location: int,
              max_locations: int = DEFAULT_MAX_LOCATIONS) -> Graph:
        """Applies one xfer at one location; `graph` is left intact."""
        return self.locations(graph, max_locations).apply(xfer, location)

    def apply_everywhere(self, graph: Graph, xfer: int, times: int, cost_model: CostModel,
                         max_locations: int = DEFAULT_MAX_LOCATIONS,
                         max_ops: Optional[int] = None) -> Tuple[Graph, List[int], int]:
        """`xfer` applied again and again from `graph`, each time at its
        cheapest location (the first among equals) of that rule alone
        (`XferSet([rule]).locations(g, max_locations, max_ops)`), `times`
        times or until it has no location: a multi-location action, in one
        native call.

        Returns:
          The graph it ends at, the canonical hash of the graph after each
          application, and the single-rule enumerations it ran.
        """
        if not 0 <= xfer < len(self.rules):
            raise ValueError(f"xfer {xfer} out of range [0, {len(self.rules)})")
        cap = _size_cap(graph, max_ops)
        handle, hashes, enumerations = self._handle.apply_everywhere(
            graph.handle, xfer, times, max_locations, cap, cost_model.handle)
        return Graph(handle), hashes, enumerations

    def replay(self, graph: Graph, applied: Sequence[Tuple[str, int]],
               max_locations: int = DEFAULT_MAX_LOCATIONS, max_ops: int = 0) -> Graph:
        """The graph that applying `applied`, (xfer name, location) pairs, in
        order from `graph` builds, with locations numbered as an environment
        of this L and size cap numbers them (`xflowrl.env.replay` without
        an environment: nothing is costed). `max_ops` 0: twice `graph`'s op
        count, the environment's and the search's cap.

        Raises:
          ValueError: an unknown xfer, or a location the graph it applies to
            does not have (e.g. `NO_LOCATION`, -1).
        """
        index = {name: x for x, name in enumerate(self.names)}
        cap = max_ops if max_ops > 0 else 2 * graph.num_ops()
        for k, (name, location) in enumerate(applied):
            if name not in index:
                raise ValueError(f"replay: step {k} names an unknown xfer {name!r}")
            locations = self.locations(graph, max_locations, cap)
            try:
                graph = locations.apply(index[name], location)
            except ValueError as e:
                raise ValueError(f"replay: step {k} ({name}, {location}): {e}") from None
        return graph

    def search(self, graph: Graph, cost_model: CostModel, *, alpha: float = TASO_ALPHA,
               budget: int = TASO_BUDGET, max_ops: int = 0, time_limit_s: float = 0.0,
               max_queued: int = 0, lazy_candidates: bool = True,
               max_locations: int = DEFAULT_MAX_LOCATIONS) -> SearchResult:
        """TASO's backtracking search (thesis Algorithm 1), in bounded memory.

        Args:
          graph, cost_model: the start graph and the cost it minimises.
          alpha: relaxation; candidates cheaper than alpha * best are queued.
          budget: graphs expanded (popped from the queue).
          max_ops: size cap on candidates (0: twice `graph`'s op count).
          time_limit_s: wall-clock limit (0: none).
          max_queued: queued candidates beyond this many are dropped, costliest
            first (0: no cap). `SearchResult.dropped` says whether it bit; when
            it is 0 the result equals the uncapped search's.
          lazy_candidates: hold a queued candidate as (parent, xfer, match
            index) and rebuild it when popped (default), instead of holding
            every queued graph whole as TASO does. Same results either way;
            the lazy queue needs memory for the expanded parents only (TASO's
            way took ~2 GB after 300 expansions on nasnet_a).
          max_locations: how `SearchResult.applied` numbers locations: as
            an environment with this L and the same size cap does
            (`EnvConfig.max_locations`), so that `xflowrl.env.replay` of
            the applied steps rebuilds the best graph. It bounds nothing:
            the search still considers every candidate.

        `peak_rss_mb` is the process's peak resident set (ru_maxrss) read
        after the search: an upper bound on what the search itself needed.
        """
        native = self._handle.search(graph.handle, cost_model.handle, alpha, budget,
                                     max_ops, time_limit_s, max_queued, lazy_candidates,
                                     max_locations)
        return self._search_result(native)

    def _search_result(self, native: Dict) -> SearchResult:
        """Types the binding's result dict; a key that is not a field of
        `SearchResult`, or a field the binding does not fill, raises."""
        fields = dict(native)
        fields["graph"] = Graph(fields.pop("best"))
        fields["applied"] = [(self.rules[x].name, location)
                             for x, location in fields["applied"]]
        fields["peak_rss_mb"] = peak_rss_mb()
        if set(fields) != set(SearchResult._fields):
            raise RuntimeError(f"the engine's search result has keys {sorted(native)}; "
                               f"SearchResult has fields {SearchResult._fields}")
        return SearchResult(**fields)


def peak_rss_mb() -> float:
    """This process's peak resident set so far, in MiB (Linux: ru_maxrss in
    KiB); monotone over a process's life. The benchmarks report it too."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _size_cap(graph: Graph, max_ops: Optional[int]) -> int:
    """The op count a candidate may reach: `max_ops`, by default twice the
    graph's (the engine's cap on a rewrite's growth)."""
    return 2 * graph.num_ops() if max_ops is None else max_ops
