"""Equality saturation over the engine's IR (TENSAT's method, MLSys'21).

`equality_saturation(graph, xfers, cost_model)` puts the graph in an e-graph,
applies every rule of `xfers` at every match at once, iteration after
iteration, until nothing new appears or a limit is reached (e-nodes,
iterations, seconds), then extracts the cheapest graph the e-graph holds:
by TENSAT's integer linear program, with greedy extraction as the fast
fallback, the gap between the two reported. The ILP is solved over
acyclic restrictions of the e-graph (a depth-first walk, then the age
order: `EGraph.filter_cycles`, `EGraph.filter_cycles_by_age`), and over
the loose program with order variables only where both end above one-step
greedy's cost. The graph handed over is the cheapest by the engine's own
cost of the whole graph among the ILP's, the greedy extraction's,
one-step greedy's (the descent's graph, the floor, held by the e-graph or
not, carried on over every location where the environment's L hides the
improving ones) and the original, so it is never costlier than the input,
one-step greedy's graph, or the best choice the e-graph was known to hold.
Where the e-graph stopped on a limit with nothing cheaper than one-step
greedy's graph, saturation starts again from that graph, in an e-graph of
its own, and its extractions join the candidates
(`EqsatConfig.descent_start`). The graph handed over is
rebuilt by the engine (shapes checked) and, unless switched off, checked
to compute the original's outputs on random values (the numpy reference
executor, float64).

Matching is semi-naive (`EqsatConfig.incremental`): after its first full
pass a rule looks for its root e-node only within its pattern's height
above the classes changed since it last found all its matches, and a
match applied before neither counts towards `match_limit` nor is applied
again.

Multi-pattern rules (several source outputs) are applied in the first
`multi_pattern_iterations` iterations only, as TENSAT's `k_multi`: they
match pairs of ops anywhere in the graph and grow the e-graph fastest.
A rule whose matches in one iteration reach `match_limit` has those
applied and sits out the next `ban_length` iterations (twice as many each
time it happens again; egg's back-off defaults: 1,000 matches, 5
iterations), so that one prolific rule (associativity and commutativity of
`add` on a transformer's residual chains) cannot starve the others.
`EqsatConfig.backoff="egg"` is egg's BackoffScheduler itself (TENSAT's
runner, there for single-pattern rules only): a rule over its threshold
(`match_limit`, doubled each time it was banned) applies none of its
matches. Applied to multi-pattern rules too, it drops a merge rule's
matches within its `multi_pattern_iterations` for good: better on NasRNN,
but BERT loses its matmul merges under three rule sets
(docs/benchmark.md), so it is not the default.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import time
from typing import Any, Dict, List, NamedTuple, Optional, Tuple
import weakref

import numpy as np

from xflowrl import _engine
from xflowrl.engine import CostModel, Graph, XferSet
from xflowrl.env import EnvConfig, GraphEnv, NO_STEP_LIMIT
from xflowrl.search.eqsat import extract
from xflowrl.search.eqsat.egraph import EGraph, EGraphError, Params, multi_output
from xflowrl.search.eqsat.native import NativeMatcher
from xflowrl.search.eqsat.rewrites import Match, Rewrite, Unsupported, canonical, compile_rule
from xflowrl.search.greedy import GreedyWalk, greedy_walk, greedy_walk_every_location

_LOG = logging.getLogger(__name__)

EXTRACTIONS = ("ilp", "greedy")
MATCHERS = ("native", "python")
BACKOFFS = ("cap", "egg")
DESCENT_STARTS = ("stalled", "always", "never")
# The second start runs only with at least this many seconds of
# `EqsatConfig.total_time_limit_s` left.
MIN_SECOND_START_S = 2.0


@dataclasses.dataclass(frozen=True)
class EqsatConfig:
    """Limits and choices of one run. The iteration limit is TENSAT's (15);
    multi-pattern rules run in 2 iterations (TENSAT's k_multi of 2: chains
    of merges, e.g. BERT's three attention matmuls merged by a pairwise
    rule applied twice, need the second). TENSAT's node limit is 50k with
    an hour for extraction; here 10k e-nodes, 30 s of saturation, 10 s of
    HiGHS's CPU time for the two acyclic ILP programs together and 10 s
    more for the loose one (only where both end above one-step greedy's
    cost) keep a run within a minute on this 2-core machine: the ILP
    finds less on a larger e-graph in the same time (docs/benchmark.md).
    The ILP's limits are CPU time, so that where a program stops on one
    what it found does not depend on the machine's load (a wall-clock
    limit of four times as much stays as a safety net,
    `extract.WALL_PER_CPU`)."""
    node_limit: int = 10_000
    iteration_limit: int = 15
    time_limit_s: float = 30.0
    multi_pattern_iterations: int = 2
    match_limit: int = 1_000
    ban_length: int = 5
    # "cap": a rule whose matches in one iteration reach `match_limit` has
    # those applied, then sits out; "egg": one whose matches exceed its
    # threshold (`match_limit`, doubled each time it was banned) applies
    # none of them, then sits out, as egg's BackoffScheduler does. The ban
    # is `ban_length` iterations, doubled each time.
    backoff: str = "cap"
    filter_cycles: bool = True       # TENSAT's cycle filtering before the ILP
    extraction: str = "ilp"          # "ilp" (greedy as the fallback) | "greedy"
    # CPU seconds: the acyclic programs together; the loose one again.
    ilp_time_limit_s: float = 10.0
    # The age-ordered program, the second acyclic one, at most this long
    # (CPU): on a large e-graph HiGHS can spend the whole limit proving the
    # walk's graph optimal there, and where it finds better it mostly does
    # so soon.
    age_time_limit_s: float = 4.0
    # HiGHS's primal heuristics (False: `extract.HIGHS_HEURISTICS_OFF`,
    # about 5% less CPU in the median setting, but costlier graphs where a
    # program stops on its CPU limit).
    ilp_heuristics: bool = True
    # The ILP's start may be one-step greedy's graph (the engine's descent
    # under the same rules) where the e-graph holds it and it is the
    # cheapest known choice; that graph is also the floor of what is
    # handed over, held or not; see `equality_saturation`.
    start_from_descent: bool = True
    # One-step greedy's graph added to the e-graph before saturation (its
    # outputs' classes merged with the input's), so that the e-graph holds
    # it and rewrites grow from it too: where the node limit binds early
    # (the large rule sets under the learned GPU cost models) saturation
    # from the input alone does not reach it. Off by default.
    seed_descent: bool = False
    # A second start: saturation again, from one-step greedy's graph (the
    # descent's), its extractions candidates beside the first start's.
    # The rules are not all reversible and a node limit can fill before
    # the merges greedy takes first are reached, so neither start's
    # e-graph holds the other's (reports/2026-12-02_eqsat_from_descent.md).
    # "stalled": only where the first e-graph stopped on a limit and
    # handed over nothing cheaper than one-step greedy's graph, or does
    # not hold that graph (`_wants_second_start`); "always":
    # wherever the descent moved; "never". It needs the descent, so it
    # runs only with the ILP and `start_from_descent`.
    descent_start: str = "stalled"
    # Wall-clock seconds for the whole run, saturation and extraction (the
    # output check, where on, comes after): the second start runs only
    # with `MIN_SECOND_START_S` of them left, within what is left
    # (`_second_start_config`); HiGHS is stopped at the end of them
    # (`ilp_in_child`).
    total_time_limit_s: float = 60.0
    # HiGHS in a child process (`child.py`) killed where the run passes
    # `total_time_limit_s`: HiGHS checks its limits between its steps, not
    # inside a round of cut separation, which can run for most of a minute
    # (docs/benchmark.md). False (or no fork): on the calling thread.
    ilp_in_child: bool = True
    # Semi-naive matching: a rule looks for matches only among e-nodes
    # within its pattern's height above the classes changed since it last
    # found all its matches (the same matches, in the same order, as
    # matching the whole e-graph again: tests/search/eqsat_test.py).
    incremental: bool = True
    # "native": the engine's e-matching (taso/ematch.h, `native.py`);
    # "python": `Rewrite.matches`, the reference. Both find the same
    # matches in the same order (tests/search/eqsat_native_test.py).
    matcher: str = "native"
    check_outputs: bool = True

    def __post_init__(self):
        if self.matcher not in MATCHERS:
            raise ValueError(f"matcher must be one of {MATCHERS}, got {self.matcher!r}")
        if self.backoff not in BACKOFFS:
            raise ValueError(f"backoff must be one of {BACKOFFS}, got {self.backoff!r}")
        if self.descent_start not in DESCENT_STARTS:
            raise ValueError(f"descent_start must be one of {DESCENT_STARTS}, got "
                             f"{self.descent_start!r}")
        if self.extraction not in EXTRACTIONS:
            raise ValueError(f"extraction must be one of {EXTRACTIONS}, got "
                             f"{self.extraction!r}")
        for name in ("node_limit", "iteration_limit", "match_limit"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if min(self.time_limit_s, self.ilp_time_limit_s, self.age_time_limit_s,
               self.total_time_limit_s) <= 0:
            raise ValueError("time limits must be positive")
        if self.multi_pattern_iterations < 0:
            raise ValueError("multi_pattern_iterations must be >= 0")


class IterationStats(NamedTuple):
    """The e-graph after one iteration."""
    iteration: int
    matches: int       # new matches applied
    e_nodes: int
    e_classes: int
    seconds: float     # since the start


class StartStats(NamedTuple):
    """The second start's run (`EqsatConfig.descent_start`): saturation
    from one-step greedy's graph, and its extraction."""
    best_cost: float      # the cheapest graph it found (one-step greedy's at most)
    stop_reason: str
    iterations: int
    e_nodes: int
    ilp_status: str
    seconds: float        # its saturation and extraction


class SaturationResult(NamedTuple):
    """What `equality_saturation` returns (costs in ms of the engine's cost
    of the whole graph under the run's cost model)."""
    graph: Graph                  # the graph handed over
    initial_cost: float
    best_cost: float              # graph's cost
    handed_over: str              # "ilp" | "greedy" | "descent" (one-step greedy's) | "original"
    greedy_cost: float            # greedy extraction's graph
    ilp_cost: Optional[float]     # the ILP's graph; None where it found none or did not run
    # Per program (`extract.ilp_extract`): "optimal" (HiGHS solved it),
    # "skipped" (its start provably optimal, HiGHS not run), "same" (the
    # program before it again, proven optimal there: not run), "cpu_limit"
    # (HiGHS stopped on its CPU time), "time_limit" (on the wall-clock
    # safety net), "stopped", "failed"; "off" without the ILP. Joined by
    # "+" in the order solved (e.g. "skipped+optimal")
    ilp_status: str
    ilp_programs: int             # programs (skipped ones too): 3 where the loose one ran
    ilp_start: str                # "greedy" extraction | "original" | "descent" | "" (no ILP)
    stop_reason: str              # "saturated" | "node_limit" | "iteration_limit" | "time_limit"
    iterations: int
    e_nodes: int
    e_classes: int
    saturation_seconds: float
    extraction_seconds: float
    seconds: float
    outputs_checked: Optional[bool]  # True: equal outputs; None: not checked (opaque ops, off)
    skipped_rules: List[Tuple[str, str]]  # (rule, why) the e-graph cannot express
    trace: List[IterationStats]
    # Steps one-step greedy over every location took past the descent's
    # graph (`Descent.tail_steps`; 0 without the descent).
    descent_tail_steps: int = 0
    # The e-graph the handed-over graph came from: "input" (the first
    # start's; the original too) or "descent" (the second start's). The
    # fields above from `greedy_cost` to `extraction_seconds` are the
    # first start's; `seconds` counts both.
    start: str = "input"
    descent_start: Optional[StartStats] = None   # None: no second start

    @property
    def ilp_gap_percent(self) -> Optional[float]:
        """How much cheaper the ILP's graph is than greedy extraction's, in %
        of the initial cost (positive: the ILP found a cheaper graph)."""
        if self.ilp_cost is None:
            return None
        return 100.0 * (self.greedy_cost - self.ilp_cost) / self.initial_cost


def graph_to_egraph(graph: Graph) -> Tuple[EGraph, List[int]]:
    """An e-graph holding `graph`, and the classes of its outputs in order."""
    eg = EGraph()
    return eg, add_graph(eg, graph)


def add_graph(eg: EGraph, graph: Graph) -> List[int]:
    """Adds `graph`'s ops to `eg` (those it holds already are found, not
    added again); returns the classes of its outputs in order."""
    tensor_class: Dict[Tuple[int, int], int] = {}
    for guid, type_id, raw, inputs, shapes, name in graph.handle.ops():
        op = _engine.op_type_str(type_id)
        if op in ("input", "weight"):
            c = eg.add(op, (("name", name), ("shape", tuple(shapes[0]))), ())
        else:
            c = eg.add(op, canonical(op, raw), [tensor_class[(t[0], t[1])] for t in inputs])
        if multi_output(op):
            for i in range(len(shapes)):
                tensor_class[(guid, i)] = eg.add_output(c, i)
        else:
            tensor_class[(guid, 0)] = c
        for i, shape in enumerate(shapes):
            if eg.shape(tensor_class[(guid, i)]) != tuple(shape):
                raise EGraphError(f"{op} op {guid}: e-graph shape "
                                  f"{eg.shape(tensor_class[(guid, i)])} != engine's {shape}")
    return [tensor_class[(t[0], t[1])] for t in graph.outputs()]


def choice_of_graph(eg: EGraph, graph: Graph) -> Optional[extract.Choice]:
    """The choice (class -> e-node) that extracts `graph` from `eg`, or None
    where the e-graph does not hold it. Its e-nodes may include ones cycle
    filtering took out of their classes (`EGraph.filter_cycles`):
    `extract.ilp_extract` takes them back for its start."""
    choice: extract.Choice = {}
    tensor_class: Dict[Tuple[int, int], int] = {}
    for guid, type_id, raw, inputs, shapes, name in graph.handle.ops():
        op = _engine.op_type_str(type_id)
        params: Params
        if op in ("input", "weight"):
            params, children = (("name", name), ("shape", tuple(shapes[0]))), []
        else:
            params, children = canonical(op, raw), [tensor_class[(t[0], t[1])] for t in inputs]
        n = eg.lookup_node(op, params, children)
        if n is None:
            return None
        c = eg.class_of_node(n)
        choice[c] = n
        if multi_output(op):
            for i in range(len(shapes)):
                out = eg.lookup_node("out", (("index", i),), (c,))
                if out is None:
                    return None
                tensor_class[(guid, i)] = eg.class_of_node(out)
                choice[tensor_class[(guid, i)]] = out
        else:
            tensor_class[(guid, 0)] = c
    return choice


# Per rule set: its rules when compiled, the rewrites, the skipped rules.
_Compiled = Tuple[List[Any], List[Rewrite], List[Tuple[str, str]]]
_COMPILED: "weakref.WeakKeyDictionary[XferSet, _Compiled]" = weakref.WeakKeyDictionary()


def compile_rules(xfers: XferSet) -> Tuple[List[Rewrite], List[Tuple[str, str]]]:
    """Every rule of `xfers` the e-graph can express, and (name, why) for
    each it cannot (logged as a warning naming it, each call). Compiled
    once per rule set while it lives and holds the same rules, as the
    engine compiles a rule set's patterns once: a rewrite keeps nothing of
    an e-graph but memos of what depends on its parameters and shapes
    alone (`Rewrite.apply`)."""
    cached = _COMPILED.get(xfers)
    if cached is not None and len(cached[0]) == len(xfers.rules) and all(
            a is b for a, b in zip(cached[0], xfers.rules)):
        _, rewrites, skipped = cached
        for _, why in skipped:
            _LOG.warning("equality saturation skips %s", why)
        return list(rewrites), list(skipped)
    rewrites, skipped = [], []
    for x, rule in enumerate(xfers.rules):
        try:
            rewrites.append(compile_rule(rule, x))
        except Unsupported as e:
            _LOG.warning("equality saturation skips %s", e)
            skipped.append((rule.name, str(e)))
    _COMPILED[xfers] = (list(xfers.rules), rewrites, skipped)
    return list(rewrites), list(skipped)


def _parents(eg: EGraph) -> Dict[Tuple[int, str], List[int]]:
    """(class, op type) -> the live e-nodes of that type reading the class."""
    parents: Dict[Tuple[int, str], List[int]] = {}
    for c in eg.classes():
        for n in eg.live_nodes(c):
            op = eg.nodes[n][0]
            for child in set(eg.nodes[n][2]):
                parents.setdefault((child, op), []).append(n)
    return parents


def _readers(eg: EGraph, parents: Dict[Tuple[int, str], List[int]]) -> Dict[int, set]:
    """Class -> the classes of the live e-nodes reading it."""
    readers: Dict[int, set] = {}
    for (child, _), nodes in parents.items():
        readers.setdefault(child, set()).update(eg.class_of_node(n) for n in nodes)
    return readers


def _above(classes: set, readers: Dict[int, set], steps: int) -> set:
    """`classes` and the classes at most `steps` reader steps above them."""
    out, level = set(classes), set(classes)
    for _ in range(steps):
        level = {p for c in level for p in readers.get(c, ()) if p not in out}
        if not level:
            break
        out |= level
    return out


def saturate(eg: EGraph, rewrites: List[Rewrite], config: EqsatConfig,
             start: Optional[float] = None) -> Tuple[str, List[IterationStats]]:
    """Applies `rewrites` to `eg` until saturation or a limit; returns the
    reason it stopped and the per-iteration trace."""
    start = time.time() if start is None else start
    deadline = start + config.time_limit_s
    banned_until: Dict[int, int] = {}
    bans: Dict[int, int] = {}
    applied = set()
    # Incremental (semi-naive) matching: per rule, the e-graph's marks
    # (e-nodes, touched classes) when it last found all its matches.
    marks: Dict[int, Tuple[int, int]] = {}

    def was_applied(xfer: int, nodes: Tuple[int, ...]) -> bool:
        return (xfer, nodes) in applied
    trace: List[IterationStats] = []
    param_memo: Dict[tuple, Any] = {}  # shared by the rules, kept across iterations
    native = NativeMatcher(rewrites) if config.matcher == "native" else None
    egg = config.backoff == "egg"
    parents: Dict[Tuple[int, str], List[int]] = {}
    for it in range(config.iteration_limit):
        if native is not None:
            native.sync(eg)
        else:
            parents = _parents(eg)
        now = (len(eg.nodes), len(eg.touched))
        readers: Optional[Dict[int, set]] = None
        near_changes: Dict[Tuple[int, ...], set] = {}
        matches: List[Match] = []
        step_memo: Dict[tuple, List[int]] = {}  # shared by the rules in this iteration
        out_of_time = cut_short = False
        for r, rw in enumerate(rewrites):
            if rw.multi_pattern and it >= config.multi_pattern_iterations:
                continue
            if banned_until.get(r, -1) > it:
                continue
            root_classes = None
            within: Optional[int] = None
            if config.incremental and not rw.multi_pattern and r in marks:
                key = marks[r] + (rw.height,) + now
                if native is not None:
                    within = native.within_id(key)
                    if within is None:
                        within = native.set_within(key, eg.touched_since(*marks[r]),
                                                   rw.height)
                elif key not in near_changes:
                    if readers is None:
                        readers = _readers(eg, parents)
                    near_changes[key] = _above(eg.touched_since(*marks[r]), readers,
                                               rw.height)
                if native is None:
                    root_classes = (key, near_changes[key])
            # Matches past the e-graph's room for new e-nodes are not looked
            # for: those found first are applied first, and the node limit
            # ends saturation within them where each adds an e-node (on
            # BERT, matching the whole 10k-e-node e-graph took most of the
            # run for the 100 matches applied). A rule cut short keeps its
            # marks and finds the rest in the next iteration, if any.
            room = config.node_limit - eg.num_nodes() - len(matches)
            if egg:
                # One more than the threshold: finding it means too many.
                threshold = config.match_limit << bans.get(r, 0)
                cap = min(threshold + 1, max(room, 1))
            else:
                threshold = config.match_limit
                cap = min(config.match_limit, max(room, 1))
            if native is not None:
                found = native.matches(rw, cap, within)
            else:
                found = rw.matches(eg, parents, param_memo, cap, root_classes, was_applied,
                                   step_memo)
            if egg and len(found) > threshold:
                # Banned, its matches dropped (found again once it is back).
                banned_until[r] = it + (config.ban_length << bans.get(r, 0))
                bans[r] = bans.get(r, 0) + 1
                found = []
            elif not egg and len(found) >= config.match_limit:
                bans[r] = bans.get(r, 0) + 1
                banned_until[r] = it + 1 + config.ban_length * 2 ** (bans[r] - 1)
            elif len(found) < cap:
                marks[r] = now  # every match of the e-graph as it is now found
            matches.extend(found)
            if found and len(found) >= cap and cap < threshold + egg:
                cut_short = True  # the rules after this one were not matched
                break
            if time.time() > deadline:
                out_of_time = True  # the rules after this one were not matched
                break
        new = 0
        stop = None
        nodes_before, unions_before = eg.num_nodes(), eg.unions
        for m in matches:
            done = (m.rewrite.xfer, m.nodes)
            if done in applied:
                continue
            applied.add(done)
            if native is not None:
                native.add_applied(m.rewrite, m.nodes)
            try:
                m.rewrite.apply(eg, m)
            except EGraphError:
                continue
            new += 1
            if eg.num_nodes() >= config.node_limit:
                stop = "node_limit"
                break
            if new % 256 == 0 and time.time() > deadline:
                stop = "time_limit"
                break
        eg.rebuild()
        trace.append(IterationStats(it + 1, new, eg.num_nodes(), eg.num_classes(),
                                    time.time() - start))
        if stop is not None:
            return stop, trace
        if out_of_time:
            return "time_limit", trace
        if eg.num_nodes() == nodes_before and eg.unions == unions_before and not cut_short:
            if not any(until > it + 1 for until in banned_until.values()):
                return "saturated", trace
            banned_until.clear()  # nothing new without them: let them run (as egg does)
        if time.time() > deadline:
            return "time_limit", trace
    return "iteration_limit", trace


def same_outputs(original: Graph, rewritten: Graph, seed: int = 0) -> Optional[bool]:
    """Whether two graphs compute equal outputs on random values (float64,
    the reference executor; `rtol` 1e-6). Inputs are N(0, 1); weights are
    drawn by role (`random_weights`: He-normal conv and matmul weights,
    positive variances) with the first gain of sqrt(2), 0.5, 0.1 under
    which the original's outputs are finite and not all zero (a deep stack
    of matmuls without normalisation overflows at He gain; a check on
    infinities or zeros compares nothing). None where no gain does or the
    graphs hold opaque ops the executor cannot run."""
    from xflowrl.executor import reference
    from xflowrl.executor.weights import random_inputs, random_weights
    try:
        for gain in (np.sqrt(2.0), 0.5, 0.1):
            feeds = {**random_inputs(original, seed, np.float64),
                     **random_weights(original, seed, np.float64, gain)}
            with np.errstate(all="ignore"):
                want = reference.execute(original, feeds)
            if all(np.isfinite(a).all() for a in want) and any(np.abs(a).max() > 0
                                                                for a in want):
                break
        else:
            return None
        with np.errstate(all="ignore"):
            got = reference.execute(rewritten, feeds)
    except NotImplementedError:
        return None
    if len(want) != len(got):
        return False
    return all(a.shape == b.shape and np.allclose(b, a, rtol=1e-6,
                                                  atol=1e-9 * max(float(np.abs(a).max()), 1.0))
               for a, b in zip(want, got))


def _ilp_start(eg: EGraph, roots: List[int], costs: Dict[int, float], graph: Graph,
               greedy: extract.Extraction, xfers: XferSet, cost_model: CostModel,
               config: EqsatConfig, walk: Optional["Descent"] = None
               ) -> Tuple[str, extract.Choice, Optional["Descent"], Optional[extract.Choice]]:
    """The ILP's start: the cheapest (per-node costs, shared e-nodes once)
    of the choices known to extract a graph the e-graph holds: greedy
    extraction's, the input's, and, with `config.start_from_descent`, the
    graph one-step greedy descends to under the same rules (and its tail
    over every location, `Descent`), where the e-graph holds it. HiGHS improves on its start, so the ILP never ends
    costlier than any of them. The descent's graph matters where a gain
    needs several classes to switch together (a matmul merged for the
    three projections of attention pays only where all three read it):
    tree cost never sees such a gain, and on a large e-graph HiGHS may
    spend its time limit at the root node without finding it (vit, `taso`
    rules: started from the input, it ended at the input's cost; the
    descent's graph, 6.2% cheaper, was in the e-graph). Returns (which,
    choice, the descent: None where it did not run, and the descent's
    choice: None where it did not run, applied nothing or the e-graph does
    not hold its graph). `walk`: the descent where the caller ran it
    already (`_descent`)."""
    starts = [("greedy", greedy.choice), ("original", choice_of_graph(eg, graph))]
    descent: Optional[extract.Choice] = None
    if config.start_from_descent:
        walk = walk or _descent(graph, xfers, cost_model)
        if walk.moved:
            descent = choice_of_graph(eg, walk.graph)
            starts.append(("descent", descent))
    else:
        walk = None
    known = [(extract.dag_cost(eg, choice, roots, costs), k, name, choice)
             for k, (name, choice) in enumerate(starts) if choice is not None]
    _, _, name, choice = min(known, key=lambda t: t[:2])
    return name, choice, walk, descent


class Descent(NamedTuple):
    """One-step greedy's descent from the input (`walk`, the environment's
    L), and where one-step greedy over every location goes on from its
    graph (`greedy_walk_every_location`, TASO's search's view): `graph`,
    `cost` and `tail_steps` (0: it found nothing more, `graph` is the
    walk's)."""
    walk: GreedyWalk
    graph: Graph
    cost: float
    tail_steps: int

    @property
    def moved(self) -> bool:
        return bool(self.walk.applied or self.tail_steps)


def _descent(graph: Graph, xfers: XferSet, cost_model: CostModel) -> Descent:
    """One-step greedy's descent from `graph` under the run's rules and cost
    model, without a step limit (`greedy_walk`), then its tail over every
    location (`greedy_walk_every_location`)."""
    env = GraphEnv(graph, xfers, cost_model, EnvConfig(max_steps=NO_STEP_LIMIT))
    walk = greedy_walk(env)
    tail = greedy_walk_every_location(env, walk.graph)
    return Descent(walk, tail.graph, tail.cost, len(tail.applied))


# The extraction programs, in the order solved: the two acyclic
# restrictions, then the loose one. Without cycle filtering one program is
# solved over the whole e-graph (`filter_for_program`'s "none").
PROGRAMS = ("walk", "age", "loose")


def filter_for_program(eg: EGraph, program: str, roots: List[int], order: Dict[int, float],
                       keep: extract.Choice) -> None:
    """Filters `eg` for one of the ILP programs (`PROGRAMS`, or "none"),
    keeping `keep` (the program's start) whole: "walk", the strict
    depth-first walk, each class's e-nodes in `order` (tree cost); "age",
    the age order; "loose", the walk that never takes a class's last
    e-node; "none", nothing filtered."""
    eg.unfilter()
    if program == "age":
        eg.filter_cycles_by_age(keep)
    elif program != "none":
        # After saturation (TENSAT filters after every iteration, which
        # here dropped e-nodes later rewrites needed; docs/benchmark.md),
        # each class's e-nodes walked cheapest tree cost first, the
        # start's kept whole.
        eg.filter_cycles(roots, order, keep=keep, strict=program == "walk")


def equality_saturation(graph: Graph, xfers: XferSet, cost_model: CostModel,
                        config: EqsatConfig = EqsatConfig()) -> SaturationResult:
    """Optimises `graph` by equality saturation; see the module docstring.

    Raises:
      RuntimeError: the extracted graph computes something else than the
        original (a defect of a rule or of this module; never handed over).
    """
    with _cyclic_gc_paused():
        return _equality_saturation(graph, xfers, cost_model, config)


@contextlib.contextmanager
def _cyclic_gc_paused():
    """Python's cyclic garbage collector off for the block (as it was
    after). A run adds tens of thousands of e-nodes, tuples and lists that
    live until it ends and form no reference cycles the run leaves behind
    (tests/search/eqsat_test.py), so every collection during it rescans
    them for nothing (what that cost: docs/benchmark.md, "What the
    benchmark finds"). Reference counting still frees what the run drops;
    cycles made meanwhile wait for the next collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Start(NamedTuple):
    """One start's saturation and extraction (`_saturate_and_extract`)."""
    candidates: List[Tuple[float, str, Graph]]  # (cost, how, graph) it found
    walk: Optional["Descent"]                   # the descent, where it ran
    greedy_cost: float
    ilp_cost: Optional[float]
    ilp_status: str
    ilp_programs: int
    ilp_start: str
    stop_reason: str
    trace: List[IterationStats]
    e_nodes: int
    e_classes: int
    saturation_seconds: float
    extraction_seconds: float
    # Whether the e-graph holds one-step greedy's graph (None: no descent,
    # or it moved nowhere).
    holds_descent: Optional[bool] = None


def _saturate_and_extract(source: Graph, graph: Graph, rewrites: List[Rewrite],
                          xfers: XferSet, cost_model: CostModel, config: EqsatConfig,
                          walk: Optional["Descent"], initial_cost: float,
                          start: Optional[float] = None,
                          deadline: Optional[float] = None) -> _Start:
    """Saturates an e-graph that starts from `source` (the input `graph`, or
    one-step greedy's graph) and extracts from it; `walk`: the descent from
    `graph` where it ran already; `start`: when its clock started (now
    where None); `deadline`: when HiGHS's process is stopped (None: HiGHS
    runs on this thread; `extract.ilp_extract`)."""
    start = time.time() if start is None else start
    eg, roots = graph_to_egraph(source)
    if config.seed_descent and source is graph:
        walk = walk or _descent(graph, xfers, cost_model)
        if walk.moved:
            for root, seeded in zip(roots, add_graph(eg, walk.graph)):
                eg.union(root, seeded)
            eg.rebuild()
    stop, trace = saturate(eg, rewrites, config, start)
    saturated_at = time.time()

    costs = extract.node_costs(eg, cost_model)
    candidates: List[Tuple[float, str, Graph]] = []
    # Graphs built back, by the e-nodes they use: a program whose answer
    # is its start (skipped, or solved to it) builds and costs nothing new.
    built: Dict[frozenset, Tuple[Graph, float]] = {}

    def graph_of(choice: extract.Choice) -> Tuple[Graph, float]:
        key = frozenset(extract.used(eg, choice, roots).items())
        if key not in built:
            rebuilt = extract.build_graph(eg, choice, roots)
            built[key] = (rebuilt, rebuilt.cost(cost_model))
        return built[key]

    greedy, tree = extract.greedy_and_tree_costs(eg, roots, costs)
    greedy_graph, greedy_cost = graph_of(greedy.choice)
    candidates.append((greedy_cost, "greedy", greedy_graph))
    ilp_cost, ilp_status, ilp_programs = None, "off", 0
    ilp_start = ""
    holds_descent: Optional[bool] = None
    if config.extraction == "ilp":
        ilp_start, start_choice, walk, descent = _ilp_start(
            eg, roots, costs, graph, greedy, xfers, cost_model, config, walk)
        if walk is not None and walk.moved:
            holds_descent = descent is not None
        # One-step greedy's cost (inf without the descent): the loose
        # program runs where the acyclic ones end above it.
        descent_cost = walk.walk.cost if walk is not None else float("inf")
        # The floor: never hand over worse than one-step greedy's graph,
        # whatever a time-limited program returns, and whether or not the
        # per-node costs rank it first (a backend that prices ops by their
        # neighbours, fitted, sums to other figures than the whole graph's
        # cost: under fitted/cpu the programs' estimate preferred the input
        # on resnet50_taso, which greedy's 13 steps make cheaper). Built
        # back from the e-graph where it holds it; the descent's own graph
        # where it does not (an e-graph stopped by its node limit before
        # reaching it: nasrnn under learned/h100 with the large rule sets).
        # The descent goes on over every location where the environment's L
        # hides the improving ones (`Descent`): on Inception-v3 under
        # learned/h100, the graph of TASO's search, which weighs them all.
        if descent is not None:
            descent_graph, cost = graph_of(descent)
            candidates.append((cost, "descent", descent_graph))
        elif walk is not None and walk.moved:
            candidates.append((walk.cost, "descent", walk.graph))
        statuses = []
        order = tree if config.filter_cycles else {}
        # Two acyclic restrictions of the e-graph, each solved exactly (the
        # cheaper one wins): the depth-first walk (`EGraph.filter_cycles`,
        # cheap; it can empty classes and lose their readers), then the age
        # order (`EGraph.filter_cycles_by_age`, drops an e-node only for a
        # cycle), started from the walk's graph. They share one time limit.
        # Then, as a last resort, the loose program.
        programs = PROGRAMS if config.filter_cycles else ("none",)
        acyclic_seconds = 0.0
        previous: Optional[extract.Extraction] = None
        for program in programs:
            if program == "loose" and ilp_cost is not None and \
                    ilp_cost <= descent_cost + 1e-9 * initial_cost:
                break  # see below
            if deadline is not None and time.time() >= deadline:
                statuses.append("deadline")
                break
            filter_for_program(eg, program, roots, order,
                               extract.used(eg, start_choice, roots))
            left = config.ilp_time_limit_s
            if program != "loose":
                left = max(left - acyclic_seconds, 1.0)
            if program == "age":
                left = min(left, config.age_time_limit_s)
            # Where the age order's filter leaves the walk's e-nodes (bert
            # under TASO's rules), its program is the walk's, already solved.
            previous = ilp = extract.ilp_extract(
                eg, roots, costs, left, start=start_choice,
                highs_options=None if config.ilp_heuristics else extract.HIGHS_HEURISTICS_OFF,
                repeat_of=previous, deadline=deadline)
            if program != "loose":
                acyclic_seconds += ilp.cpu_seconds
            ilp_programs += 1
            statuses.append(ilp.status)
            if ilp.choice:
                ilp_graph, cost = graph_of(ilp.choice)
                if ilp_cost is None or cost < ilp_cost:
                    ilp_cost = cost
                    candidates.append((cost, "ilp", ilp_graph))
                if extract.dag_cost(eg, ilp.choice, roots, costs) <= \
                        extract.dag_cost(eg, start_choice, roots, costs):
                    start_choice = ilp.choice  # the next program starts from it
            # The loose program: where both acyclic programs end above the
            # descent's cost, the program that keeps each class's last
            # e-node (cycles ruled out by order variables; a weak
            # relaxation, so slow) is solved too, from the best graph so
            # far, with a time limit of its own.
        ilp_status = "+".join(statuses)
    return _Start(candidates=candidates, walk=walk, greedy_cost=greedy_cost,
                  ilp_cost=ilp_cost, ilp_status=ilp_status, ilp_programs=ilp_programs,
                  ilp_start=ilp_start, stop_reason=stop, trace=trace,
                  e_nodes=eg.num_nodes(), e_classes=eg.num_classes(),
                  saturation_seconds=saturated_at - start,
                  extraction_seconds=time.time() - saturated_at,
                  holds_descent=holds_descent)


def _second_start_config(config: EqsatConfig, left_s: float) -> EqsatConfig:
    """The second start's limits: its own, or within the `left_s` seconds
    of `config.total_time_limit_s` left (half for saturation, a quarter
    for each of the ILP's two time limits)."""
    return dataclasses.replace(
        config, time_limit_s=min(config.time_limit_s, left_s / 2),
        ilp_time_limit_s=min(config.ilp_time_limit_s, left_s / 4),
        age_time_limit_s=min(config.age_time_limit_s, left_s / 4))


def _equality_saturation(graph: Graph, xfers: XferSet, cost_model: CostModel,
                         config: EqsatConfig) -> SaturationResult:
    start = time.time()
    initial_cost = graph.cost(cost_model)
    rewrites, skipped = compile_rules(xfers)
    # HiGHS does not check its limits inside a round of cut separation, so
    # it runs in a child process stopped at the run's deadline.
    deadline = start + config.total_time_limit_s if config.ilp_in_child else None
    first = _saturate_and_extract(graph, graph, rewrites, xfers, cost_model, config, None,
                                  initial_cost, start, deadline)
    # The cheapest whole graph; ties go to the earlier (original first).
    candidates = [(initial_cost, "original", graph, "input")]
    candidates += [(cost, how, g, "input") for cost, how, g in first.candidates]
    second: Optional[_Start] = None
    walk = first.walk
    if _wants_second_start(config, first, walk, initial_cost):
        assert walk is not None
        left = config.total_time_limit_s - (time.time() - start)
        if left >= MIN_SECOND_START_S:
            second = _saturate_and_extract(walk.graph, graph, rewrites, xfers, cost_model,
                                           _second_start_config(config, left), walk,
                                           initial_cost, deadline=deadline)
            candidates += [(cost, how, g, "descent") for cost, how, g in second.candidates]
    best_cost, handed_over, best, from_start = min(candidates, key=lambda t: t[0])

    checked: Optional[bool] = None
    if config.check_outputs and handed_over != "original":
        checked = same_outputs(graph, best)
        if checked is False:
            raise RuntimeError(f"equality saturation's {handed_over} graph computes other "
                               f"outputs than the original")
    second_stats = None
    if second is not None:
        second_stats = StartStats(
            best_cost=min(c for c, _, _ in second.candidates),
            stop_reason=second.stop_reason, iterations=len(second.trace),
            e_nodes=second.e_nodes, ilp_status=second.ilp_status,
            seconds=second.saturation_seconds + second.extraction_seconds)
    return SaturationResult(
        graph=best, initial_cost=initial_cost, best_cost=best_cost, handed_over=handed_over,
        greedy_cost=first.greedy_cost, ilp_cost=first.ilp_cost, ilp_status=first.ilp_status,
        ilp_programs=first.ilp_programs, ilp_start=first.ilp_start,
        stop_reason=first.stop_reason, iterations=len(first.trace), e_nodes=first.e_nodes,
        e_classes=first.e_classes, saturation_seconds=first.saturation_seconds,
        extraction_seconds=first.extraction_seconds,
        seconds=time.time() - start,
        outputs_checked=checked, skipped_rules=skipped, trace=first.trace,
        descent_tail_steps=walk.tail_steps if walk is not None else 0,
        start=from_start, descent_start=second_stats)



def _wants_second_start(config: EqsatConfig, first: _Start, walk: Optional["Descent"],
                        initial_cost: float) -> bool:
    """Whether saturation starts again from one-step greedy's graph
    (`EqsatConfig.descent_start`): only with the descent (the ILP's start
    from it), where it moved, and, for "stalled", where the first
    e-graph stopped on a limit and either found nothing cheaper than that
    graph (than the descent's own, or than the descent's as the e-graph
    holds it, identical ops merged, which can be cheaper: nasnet_a) or
    does not hold it at all: its limit filled before the merges greedy
    takes first were made, so what it found lies beside greedy's way, not
    beyond it (NasRNN under the learned GPU models)."""
    if config.descent_start == "never" or walk is None or not walk.moved:
        return False
    if config.descent_start == "always":
        return True
    if first.stop_reason == "saturated":
        return False
    floor = min([walk.cost] + [c for c, how, _ in first.candidates if how == "descent"])
    best = min(c for c, _, _ in first.candidates)
    return best >= floor - 1e-9 * initial_cost or first.holds_descent is False
