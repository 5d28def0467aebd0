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
        self.class_nodes[a].extend(self.class_nodes.pop(b))
        self.class_weight_side[a] = self.class_weight_side[a] or self.class_weight_side[b]
        self.unions += 1
        return True

    def rebuild(self) -> None:
        """Restores congruence: every live e-node keyed by its canonical
        children; e-nodes that became equal are merged (the older one
        stays), and so are their classes, until nothing changes. A class
        that became weight-side makes its readers weight-side too."""
        while True:
            memo: Dict[ENode, int] = {}
            merged = False
            for n, alive in enumerate(self.alive):
                if not alive:
                    continue
                key = self.node(n)
                self.nodes[n] = key
                other = memo.get(key)
                if other is None:
                    memo[key] = n
                    continue
                if self.filtered[other] and not self.filtered[n]:
                    memo[key], other, n = n, n, other  # the usable one stays
                self.alive[n] = False
                if self.union(self.node_class[other], self.node_class[n]):
                    merged = True
            self._memo = memo
            for c in list(self.class_nodes):
                self.class_nodes[c] = [n for n in self.class_nodes[c]
                                       if self.alive[n] and not self.filtered[n]]
            changed = self._propagate_weight_side()
            if not merged and not changed:
                return

    def _propagate_weight_side(self) -> bool:
        changed = False
        for n, alive in enumerate(self.alive):
            if not alive:
                continue
            c = self.find(self.node_class[n])
            if not self.class_weight_side[c] and self._node_weight_side(self.nodes[n]):
                self.class_weight_side[c] = True
                changed = True
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
