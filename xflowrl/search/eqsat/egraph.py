"""An e-graph over the engine's IR: tensors as e-classes, ops as e-nodes.

An e-class is a set of equivalent tensors; an e-node is one op applied to
e-classes. A multi-output op (split, opaque) is an e-node of a *tuple*
class, whose outputs are `out` e-nodes (`OUT`, parameter `index`) in
tensor classes, as TENSAT models TASO's split. Leaves (`input`, `weight`)
carry their name and shape as parameters, so a graph built back from the
e-graph binds the same values by name.

Every e-class carries two analyses, both the engine's: its shape (a tensor
shape, or a tuple of them for a tuple class) and whether it is computed
from weights alone (weight-side, folded offline and free in every cost
backend). Shapes come from the engine's shape inference
(`_engine.infer_output_shapes`), never from a second implementation.

Unions are deferred: `union` merges two classes at once, and `rebuild`
restores congruence (equal e-nodes over merged children are merged, and
their classes with them) for the whole e-graph, as egg's deferred
rebuilding does; the saturation loop rebuilds once per iteration.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from xflowrl import _engine, ops

# The projection e-node: output `index` of a multi-output op's tuple class.
OUT = "out"

Params = Tuple[Tuple[str, Any], ...]   # canonical: sorted (name, value) pairs
ENode = Tuple[str, Params, Tuple[int, ...]]  # (op type, params, child classes)
Shape = Tuple[int, ...]


class EGraphError(ValueError):
    """An e-graph operation that the engine's shapes rule out."""


class EGraph:
    """E-classes of tensors, e-nodes of ops; see the module docstring.

    Node ids and class ids are dense ints. A class id stays valid after a
    union (`find` maps it to its representative); a node id stays valid
    until `rebuild` finds it equal to an older node (it is then dead:
    `alive[n]` False, and the older node stands for both).
    """

    def __init__(self):
        self._parent: List[int] = []           # union-find over class ids
        self.class_nodes: Dict[int, List[int]] = {}   # representative -> node ids
        self.class_shape: List[Any] = []    # per class id (valid at the representative)
        self.class_weight_side: List[bool] = []
        self.nodes: List[ENode] = []            # as added; children may be stale ids
        self.node_class: List[int] = []
        self.alive: List[bool] = []
        # Filtered by `filter_cycles`: kept for congruence (so that adding it
        # again finds it) but out of its class's e-nodes, never matched or
        # extracted.
        self.filtered: List[bool] = []
        self._memo: Dict[ENode, int] = {}       # canonical e-node -> node id
        self.by_type: Dict[str, List[int]] = {}  # op type -> node ids (dead ones too)
        self._shape_cache: Dict[tuple, Optional[Tuple[Shape, ...]]] = {}
        self.unions = 0
        # Classes whose e-nodes changed other than by an e-node added: a
        # union's surviving class, an e-node merged into an equal one's
        # class, in order (incremental matching's delta, `touched_since`).
        self.touched: List[int] = []
        # E-node -> a number for its parameters and operand shapes
        # (`Rewrite.apply`'s memo key).
        self.operand_keys: Dict[int, int] = {}
        # The e-nodes, in order, that may yet make their class weight-side:
        # live ones of classes that are not (both only ever turn the other
        # way: a dead e-node stays dead, a weight-side class weight-side).
        self._ws_pending: List[int] = []

    # ---------------------------------------------------------------- classes
    def find(self, c: int) -> int:
        parent = self._parent
        root = c
        while parent[root] != root:
            root = parent[root]
        while parent[c] != root:
            parent[c], c = root, parent[c]
        return root

    def num_classes(self) -> int:
        return len(self.class_nodes)

    def num_nodes(self) -> int:
        return len(self._memo)

    def classes(self) -> Iterable[int]:
        return self.class_nodes.keys()

    def shape(self, c: int):
        return self.class_shape[self.find(c)]

    def weight_side(self, c: int) -> bool:
        return self.class_weight_side[self.find(c)]

    def node(self, n: int) -> ENode:
        """Node `n` with its children as current representatives."""
        op, params, children = self.nodes[n]
        return op, params, tuple(self.find(c) for c in children)

    # ---------------------------------------------------------------- adding
    def add(self, op_type: str, params: Params, children: Sequence[int]) -> int:
        """The class of the e-node (op_type, params, children), added if new.

        Raises:
          EGraphError: the engine's shape inference rejects the op.
        """
        key: ENode = (op_type, params, tuple(self.find(c) for c in children))
        n = self._memo.get(key)
        if n is not None:
            return self.find(self.node_class[n])
        shape = self._infer(key)
        ws = self._node_weight_side(key)
        c = len(self._parent)
        self._parent.append(c)
        self.class_shape.append(shape)
        self.class_weight_side.append(ws)
        n = len(self.nodes)
        self.nodes.append(key)
        self.node_class.append(c)
        self.alive.append(True)
        self.filtered.append(False)
        if not ws:
            self._ws_pending.append(n)
        self._memo[key] = n
        self.class_nodes[c] = [n]
        self.by_type.setdefault(op_type, []).append(n)
        return c

    def add_output(self, tuple_class: int, index: int) -> int:
        """The class of output `index` of a multi-output op's tuple class."""
        return self.add(OUT, (("index", index),), (tuple_class,))

    def lookup_node(self, op_type: str, params: Params,
                    children: Sequence[int]) -> Optional[int]:
        """The e-node (op_type, params, children), or None (nothing is added)."""
        return self._memo.get((op_type, params, tuple(self.find(c) for c in children)))

    def lookup(self, op_type: str, params: Params, children: Sequence[int]) -> Optional[int]:
        """The class holding this e-node, or None (nothing is added)."""
        n = self._memo.get((op_type, params, tuple(self.find(c) for c in children)))
        return None if n is None else self.find(self.node_class[n])

    def _node_weight_side(self, key: ENode) -> bool:
        op, _, children = key
        if op == "weight":
            return True
        if op == "input" or not children:
            return False
        return all(self.class_weight_side[c] for c in children)

    def _infer(self, key: ENode):
        """The shape of the e-node's value: a shape, or a tuple of shapes for
        a multi-output op."""
        op, params, children = key
        if op in ("input", "weight"):
            return tuple(dict(params)["shape"])
        if op == OUT:
            index = params[0][1]
            outs = self.class_shape[children[0]]
            if not isinstance(outs, list) or not 0 <= index < len(outs):
                raise EGraphError(f"output {index} of a class with shape {outs!r}")
            return outs[index]
        in_shapes = tuple(self.class_shape[c] for c in children)
        for s in in_shapes:
            if isinstance(s, list):
                raise EGraphError(f"{op} reads a multi-output op's tuple, not a tensor")
        outs = infer_shapes(op, params, in_shapes, self._shape_cache)
        if multi_output(op):
            return list(outs)
        if len(outs) != 1:
            raise EGraphError(f"{op} made {len(outs)} outputs, expected 1")
        return outs[0]

    # ---------------------------------------------------------------- unions
    def union(self, a: int, b: int) -> bool:
        """Merges the classes of `a` and `b`; False if they were one already.

        Raises:
          EGraphError: the two classes have different shapes (an unsound
            rewrite: never merged).
        """
        a, b = self.find(a), self.find(b)
        if a == b:
            return False
        if self.class_shape[a] != self.class_shape[b]:
            raise EGraphError(f"union of classes of shapes {self.class_shape[a]} and "
                              f"{self.class_shape[b]}")
        if len(self.class_nodes[a]) < len(self.class_nodes[b]):
            a, b = b, a
        self._parent[b] = a
        self.touched.append(a)
        self.class_nodes[a].extend(self.class_nodes.pop(b))
        self.class_weight_side[a] = self.class_weight_side[a] or self.class_weight_side[b]
        self.unions += 1
        return True

    def rebuild(self) -> None:
        """Restores congruence: every live e-node keyed by its canonical
        children; e-nodes that became equal are merged (the older one
        stays), and so are their classes, until nothing changes. A class
        that became weight-side makes its readers weight-side too."""
        nodes, alive, filtered, node_class = self.nodes, self.alive, self.filtered, self.node_class
        parent, find = self._parent, self.find
        while True:
            memo: Dict[ENode, int] = {}
            merged = False
            for n in range(len(alive)):
                if not alive[n]:
                    continue
                key = nodes[n]
                children = key[2]
                for c in children:
                    if parent[c] != c:   # a child no longer canonical
                        key = (key[0], key[1], tuple([find(d) for d in children]))
                        nodes[n] = key
                        break
                other = memo.get(key)
                if other is None:
                    memo[key] = n
                    continue
                if filtered[other] and not filtered[n]:
                    memo[key], other, n = n, n, other  # the usable one stays
                alive[n] = False
                self.touched.append(node_class[other])
                if self.union(node_class[other], node_class[n]):
                    merged = True
            self._memo = memo
            for c, members in self.class_nodes.items():
                self.class_nodes[c] = [n for n in members if alive[n] and not filtered[n]]
            changed = self._propagate_weight_side()
            if not merged and not changed:
                return

    def _propagate_weight_side(self) -> bool:
        """One pass, e-node by e-node in order, making the class of each live
        e-node whose operands are all weight-side weight-side; whether any
        changed. Only `_ws_pending`'s e-nodes are visited: the others are
        dead or of weight-side classes, where a pass over every e-node
        changes nothing either."""
        changed = False
        nodes, alive, node_class, parent = self.nodes, self.alive, self.node_class, self._parent
        weight_side = self.class_weight_side
        pending: List[int] = []
        for n in self._ws_pending:
            if not alive[n]:
                continue
            c = node_class[n]
            if parent[c] != c:
                c = self.find(c)
            if weight_side[c]:
                continue
            if self._node_weight_side(nodes[n]):
                weight_side[c] = True
                changed = True
                continue
            pending.append(n)
        self._ws_pending = pending
        return changed

    def filter_cycles(self, roots: Sequence[int], order: Optional[Dict[int, float]] = None,
                      keep: Optional[Dict[int, int]] = None, strict: bool = True) -> int:
        """Removes the e-nodes that close a cycle, TENSAT's cycle filtering:
        a depth-first walk from `roots` over classes, each class's e-nodes
        in increasing `order` (e.g. their tree costs, so that the cheapest
        ways down are the walk's tree and kept; default: the order they
        were added), drops an e-node that reads a class on the walk's path
        (a back edge), and an e-node that reads a class left without
        e-nodes (every one of which was dropped: a class whose only way
        down closes a cycle, such as the projection of a split of a concat
        of the class itself). What is left reachable from `roots` is
        acyclic, so extraction needs no cycle constraints. (Keeping a
        class's last e-node instead leaves its cycles for the ILP's order
        variables, whose weak relaxation ran HiGHS out of time on the large
        e-graphs; this way costs e-nodes a walk from another side would have
        kept: docs/benchmark.md.)

        `keep` (class -> e-node, an acyclic choice such as the extraction
        program's start) survives whole: the walk starts from its classes
        children first, and an e-node reading one of its classes the walk
        has not finished is dropped as a back edge would be, so the ILP's
        start never brings the cycles of dropped e-nodes back into the
        program. Without `keep`, a root may be left without e-nodes.

        `strict=False` never takes a class's last e-node: the cycles through
        such classes stay (for the ILP's order variables), and e-nodes a
        strict walk loses with them stay too. Returns how many e-nodes it
        removed."""
        def ordered(c: int) -> List[int]:
            nodes = self.class_nodes[c]
            if order is None:
                return sorted(nodes)
            return sorted(nodes, key=lambda n: (order.get(n, float("inf")), n))
        kept = self._choice_post_order(roots, keep) if keep else []
        pending = set(kept)   # keep's classes the walk has not finished
        removed = 0
        on_path, done, empty = 1, 2, 3
        state: Dict[int, int] = {}   # class -> on_path | done | empty
        for first in kept + [self.find(r) for r in roots]:
            if first in state:
                continue
            # Frames: [class, its e-nodes, e-node position, child position].
            state[first] = on_path
            work: List[List[Any]] = [[first, ordered(first), 0, 0]]
            while work:
                frame = work[-1]
                c, nodes, k, i = frame
                if k == len(nodes):
                    state[c] = done if self.class_nodes[c] else empty
                    pending.discard(c)
                    work.pop()
                    continue
                n = nodes[k]
                children = self.nodes[n][2]
                if i == len(children):
                    frame[2], frame[3] = k + 1, 0
                    continue
                d = self.find(children[i])
                seen = state.get(d)
                if seen is None and d not in pending:
                    state[d] = on_path
                    work.append([d, ordered(d), 0, 0])  # d is looked at again when done
                elif seen == done:
                    frame[3] = i + 1
                elif not strict and len(self.class_nodes[c]) == 1:
                    frame[3] = i + 1  # the cycle stays
                else:  # on the path, left empty, or a kept class not finished
                    self.filtered[n] = True
                    self.class_nodes[c].remove(n)
                    removed += 1
                    frame[2], frame[3] = k + 1, 0
        return removed

    def filter_cycles_by_age(self, keep: Optional[Dict[int, int]] = None,
                             search_limit: int = 64) -> int:
        """Removes the e-nodes that close a cycle with older ones: every
        e-node in the order saturation added it (the input graph's first),
        `keep`'s e-nodes (an acyclic choice, e.g. the extraction program's
        start) before all others, is kept unless its class is reachable from
        one of its children through the e-nodes kept before it. TENSAT
        filters so as it adds e-nodes (its "efficient" cycle filtering);
        here it runs after saturation, so that rewrites still match the
        e-nodes it drops. What is left is acyclic, and an e-node is dropped
        only for a cycle (or a long search, below), never because a class
        went empty, as the depth-first walk (`filter_cycles`) drops them: on
        squeezenet1_1 at batch 16 with the generated rules the walk took
        TASO's graph out of the e-graph, the age order kept it
        (docs/benchmark.md).

        Reachability is kept by an incremental topological order of the
        classes (Pearce and Kelly, JEA 2006), started from a depth-first
        post-order: an edge from a child class to its reader that agrees
        with the order costs nothing; one that does not searches only the
        classes between the two; where that search would pass
        `search_limit` classes, the e-node is dropped as if it closed a
        cycle (what is left stays acyclic; unbounded, the searches took
        most of the extraction's time on BERT's 10k e-nodes). Returns how
        many e-nodes it removed."""
        # The order starts as a depth-first post-order of the classes over
        # all their e-nodes, oldest first, so that most edges agree with it.
        rank: Dict[int, int] = {}        # class -> position (children lower)
        finished = 0
        for first in sorted(self.class_nodes):
            if first in rank:
                continue
            rank[first] = -1   # on the walk
            work = [(first, iter([d for n in sorted(self.class_nodes[first])
                                  for d in self.nodes[n][2]]))]
            while work:
                c, children = work[-1]
                for d in children:
                    d = self.find(d)
                    if d not in rank:
                        rank[d] = -1
                        work.append((d, iter([e for n in sorted(self.class_nodes[d])
                                              for e in self.nodes[n][2]])))
                        break
                else:
                    work.pop()
                    rank[c] = finished
                    finished += 1
        readers: Dict[int, Dict[int, int]] = {}   # class -> {reading class: e-nodes}
        reads: Dict[int, Dict[int, int]] = {}     # class -> {child class: e-nodes}

        def rank_of(c: int) -> int:
            r = rank.get(c)
            if r is None:
                r = rank[c] = len(rank) + len(self.nodes)  # after every ranked one
            return r

        def link(d: int, c: int) -> bool:
            """Adds the edge d -> c (c reads d); False where it closes a cycle."""
            upper, lower = rank_of(d), rank_of(c)  # a new child ranks below a new reader
            if upper >= lower:  # the order disagrees: search between the two
                forward, stack, seen = [], [c], {c}
                while stack:   # classes reading c, ranked up to d's
                    w = stack.pop()
                    forward.append(w)
                    for v in readers.get(w, ()):
                        if v == d or len(seen) > search_limit:
                            return False
                        if v not in seen and rank[v] < upper:
                            seen.add(v)
                            stack.append(v)
                backward, stack, seen = [], [d], {d}
                while stack:   # classes d reads, ranked from c's
                    w = stack.pop()
                    backward.append(w)
                    for v in reads.get(w, ()):
                        if len(seen) > search_limit:
                            return False
                        if v not in seen and rank[v] > lower:
                            seen.add(v)
                            stack.append(v)
                moved = sorted(backward, key=rank.__getitem__) + \
                    sorted(forward, key=rank.__getitem__)
                for w, r in zip(moved, sorted(rank[w] for w in moved)):
                    rank[w] = r
            readers.setdefault(d, {})
            readers[d][c] = readers[d].get(c, 0) + 1
            reads.setdefault(c, {})
            reads[c][d] = reads[c].get(d, 0) + 1
            return True

        def unlink(d: int, c: int) -> None:
            for table, a, b in ((readers, d, c), (reads, c, d)):
                table[a][b] -= 1
                if not table[a][b]:
                    del table[a][b]

        kept: List[int] = [keep[c] for c in self._choice_post_order(list(keep), keep)
                           if self.usable(keep[c])] if keep else []
        kept_set = set(kept)
        removed = 0
        for n in kept + [n for n in range(len(self.nodes)) if n not in kept_set]:
            if not self.usable(n):
                continue
            c = self.find(self.node_class[n])
            child_classes = {self.find(d) for d in self.nodes[n][2]}
            done = []
            for d in sorted(child_classes):
                if d == c or not link(d, c):
                    break
                done.append(d)
            else:
                continue
            for d in done:
                unlink(d, c)
            self.filtered[n] = True
            self.class_nodes[c].remove(n)
            removed += 1
        return removed

    def unfilter(self) -> None:
        """Puts every e-node cycle filtering removed back into its class."""
        for n, out in enumerate(self.filtered):
            if out:
                self.filtered[n] = False
                if self.alive[n]:
                    self.class_nodes[self.class_of_node(n)].append(n)

    def _choice_post_order(self, roots: Sequence[int], choice: Dict[int, int]) -> List[int]:
        """The classes of an acyclic `choice` reachable from `roots`, each
        after the classes its chosen e-node reads."""
        choice = {self.find(c): n for c, n in choice.items()}
        order: List[int] = []
        done: set = set()
        for root in roots:
            work = [(self.find(root), False)]
            while work:
                c, expanded = work.pop()
                if expanded:
                    order.append(c)
                    continue
                if c in done:
                    continue
                done.add(c)
                work.append((c, True))
                work.extend((self.find(d), False) for d in self.nodes[choice[c]][2]
                            if self.find(d) not in done)
        return order

    def touched_since(self, node_mark: int, touched_mark: int) -> set:
        """The classes that changed since the e-graph had `node_mark` e-nodes
        and `touched_mark` entries in `touched`: those of the e-nodes added
        since and those touched since (current representatives). A match
        that was not one then holds an e-node or a class of these (unions
        only add equalities; shapes and parameters never change)."""
        out = {self.find(self.node_class[n]) for n in range(node_mark, len(self.nodes))}
        out.update(self.find(c) for c in self.touched[touched_mark:])
        return out

    def usable(self, n: int) -> bool:
        """Whether e-node `n` may be matched and extracted (neither merged
        into an equal one nor filtered)."""
        return self.alive[n] and not self.filtered[n]

    def class_of_node(self, n: int) -> int:
        return self.find(self.node_class[n])

    def live_nodes(self, c: int) -> List[int]:
        return self.class_nodes[self.find(c)]


def multi_output(op_type: str) -> bool:
    """Whether an op of this type has a tuple of outputs (split, opaque)."""
    return ops.BY_NAME[op_type].num_outputs is None if op_type in ops.BY_NAME else False


def infer_shapes(op_type: str, params: Params, in_shapes: Tuple[Shape, ...],
                 cache: Optional[Dict[tuple, Optional[Tuple[Shape, ...]]]] = None
                 ) -> Tuple[Shape, ...]:
    """The engine's output shapes of one op (memoised in `cache`).

    Raises:
      EGraphError: the engine rejects the op's inputs or parameters.
    """
    key = (op_type, params, in_shapes)
    outs: Optional[Tuple[Shape, ...]]
    if cache is not None and key in cache:
        outs = cache[key]
        if outs is None:
            raise EGraphError(f"{op_type}: the engine rejects inputs {list(in_shapes)}")
        return outs
    try:
        raw = _engine.infer_output_shapes(_engine.op_type_id(op_type), dict(params),
                                          [list(s) for s in in_shapes])
        outs = tuple(tuple(int(d) for d in s) for s in raw)
    except (ValueError, RuntimeError):
        outs = None
    if cache is not None:
        cache[key] = outs
    if outs is None:
        raise EGraphError(f"{op_type}: the engine rejects inputs {list(in_shapes)}")
    return outs
