"""The project's rules as e-graph rewrites: matching a rule's source pattern
on e-classes and adding its target pattern, with the engine's semantics.

A rule matches in the e-graph where the engine would match it in some graph
the e-graph represents: the same parameter constraints (the shape-derived
keys `num_inputs num_outputs numdim kernel_h kernel_w group` included, read
as `OpParams::try_get` reads them), element-wise source ops on equal-shaped
operands only, distinct source ops on distinct e-nodes, and no variable
bound to a matched op's output (a cycle). A match is applied as the engine
instantiates a target: parameters set or copied from source ops (`src:K`),
a target split's sizes taken from the source tensors its outputs replace,
the engine's shape inference, shape-derived keys as checks, mapped tensors
of equal shapes; then each mapped source tensor's class is merged with its
target's. Multi-pattern rules (several source outputs, e.g. two convs on
one input) match as a join over their shared variables.

`compile_rule` turns a `rules_io.Rule` into a `Rewrite`, or says why the
e-graph cannot express it (`Unsupported`); `Rewrite.matches` enumerates
matches and `Rewrite.apply` adds one.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from xflowrl import _engine
from xflowrl.rules import rules_io
from xflowrl.search.eqsat.egraph import EGraph, EGraphError, OUT, Params, infer_shapes

_ELEMENTWISE = ("add", "mul", "sub", "div")
# Rule keys the engine sets on a target op, by the OpParams field they set.
_SETTABLE = {"stride_h": "stride_h", "stride_w": "stride_w", "padding": "padding",
             "activation": "activation", "axis": "axis", "kernel_h": "kernel_h",
             "kernel_w": "kernel_w", "count": "count", "group": "groups", "perm": "perm"}
_DERIVED = ("num_inputs", "num_outputs", "numdim")
_MULTI_OUTPUT = ("split", "opaque")


class Unsupported(ValueError):
    """A rule the e-graph cannot express (the message says why)."""


@functools.lru_cache(maxsize=1)
def default_params() -> Dict[str, object]:
    """The engine's default OpParams, as raw fields (read off an op built
    with none set)."""
    builder = _engine.BuilderHandle()
    x = builder.input("x", (1,))
    guid = builder.add(_engine.op_type_id("relu"), {}, [x])
    graph = builder.build([(guid, 0)])
    for op_guid, _, raw, _, _, _ in graph.ops():
        if op_guid == guid:
            return dict(raw)
    raise RuntimeError("internal: the probe graph lost its op")


def canonical(op_type: str, raw: Dict[str, object]) -> Params:
    """An op's parameters as the e-graph keys them: every parameter of its
    type (`ops.PARAMS_OF_TYPE`), defaulted as the engine defaults it."""
    from xflowrl.ops import PARAMS_OF_TYPE
    defaults = default_params()
    out = []
    for name in PARAMS_OF_TYPE.get(op_type, ()):
        value = raw.get(name, defaults.get(name))
        if isinstance(value, list):
            value = tuple(value)
        out.append((name, value))
    return tuple(sorted(out))


def param_value(key: str, op_type: str, params: Dict[str, object],
                in_shapes: Sequence[Tuple[int, ...]]) -> Optional[int]:
    """A rule key's value on an op (the engine's `OpParams::try_get`); None
    where the key is not readable."""
    defaults = default_params()

    def field(name):
        return params.get(name, defaults.get(name))
    if key == "num_inputs":
        return len(in_shapes)
    if key == "num_outputs":
        return len(field("sizes")) if op_type == "split" else 1
    if key in ("stride_h", "stride_w", "padding", "activation", "axis", "count"):
        return int(field(key))
    if key == "perm":
        code = 0
        for v in field("perm"):
            code = code * 10 + int(v) + 1
        return code
    if key == "numdim":
        return len(in_shapes[0]) if in_shapes else 0
    if key in ("kernel_h", "kernel_w"):
        if op_type == "conv2d" and len(in_shapes) == 2 and len(in_shapes[1]) == 4:
            return int(in_shapes[1][2 if key == "kernel_h" else 3])
        return int(field(key))
    if key == "group":
        if op_type == "merge_gconv":
            return int(field("groups"))
        if op_type == "conv2d" and len(in_shapes) == 2 and in_shapes[1][1] > 0:
            return int(in_shapes[0][1] // in_shapes[1][1])
        return 1
    return None


def _set_param(params: Dict[str, object], key: str, value: int) -> bool:
    """The engine's `OpParams::try_set`: False for a key a target cannot set."""
    if key in _DERIVED:
        return True
    if key not in _SETTABLE:
        return False
    if key == "perm":
        if value <= 0 or "0" in str(value):
            return False
        params["perm"] = [int(d) - 1 for d in str(value)]
        return True
    params[_SETTABLE[key]] = int(value)
    return True


def fits_alone(eg: EGraph, n: int, constraints: Tuple[Tuple[str, Any], ...],
               memo: Dict[Any, Any]) -> bool:
    """Whether e-node `n` meets a source op's own conditions, given that it
    has the op's type and arity: equal element-wise operand shapes and the
    op's parameter `constraints` (memoised in `memo` by op type, parameters
    and operand shapes, `_operand_key`, and constraints: what the
    constraints read is a function of these alone, and neither an e-node's
    parameters nor its operands' shapes ever change)."""
    op_type, params, children = eg.nodes[n]
    if op_type in _ELEMENTWISE and eg.shape(children[0]) != eg.shape(children[1]):
        return False
    if constraints:
        key = (op_type, _operand_key(eg, n), constraints)
        ok = memo.get(key)
        if ok is None:
            shapes = [eg.shape(c) for c in children]
            raw = dict(params)
            ok = all(param_value(k, op_type, raw, shapes) == v for k, v in constraints)
            memo[key] = ok
        return ok
    return True


# (parameters, operand shapes) -> a number: `_operand_key`'s, shared by
# every e-graph, so that a rewrite's memo of planned targets (kept with the
# compiled rule set) means the same in each.
_OPERAND_KEYS: Dict[tuple, int] = {}


def _operand_key(eg: EGraph, n: int) -> int:
    """A number for e-node `n`'s parameters and operand shapes, which never
    change (equal numbers: equal parameters and shapes), kept per e-node
    in `eg.operand_keys`."""
    got = eg.operand_keys.get(n)
    if got is None:
        _, params, children = eg.nodes[n]
        value = (params, tuple([eg.shape(c) for c in children]))
        got = _OPERAND_KEYS.get(value)
        if got is None:
            got = _OPERAND_KEYS[value] = len(_OPERAND_KEYS)
        eg.operand_keys[n] = got
    return got


@dataclasses.dataclass
class _Step:
    """How the matcher finds the e-nodes a source op may bind."""
    op: int                      # source op index
    kind: str                    # "scan" | "down" | "up"
    via_op: int = -1             # down: the placed consumer; up: the placed producer (-1: var)
    slot: int = -1               # down: the consumer's input slot; up: this op's input slot
    index: int = 0               # the output index read
    var: int = 0                 # up through a variable: its number (< 0)


class Rewrite:
    """One rule compiled for the e-graph (see the module docstring)."""

    def __init__(self, rule: rules_io.Rule, xfer: int):
        self.rule = rule
        self.xfer = xfer
        self.name = rule.name
        src = rule.src
        for j, op in enumerate(src):
            if op.type in _MULTI_OUTPUT and op.type != "split":
                raise Unsupported(f"rule {rule.name!r}: source op {j} is {op.type}")
            for key, value in op.params:
                if not isinstance(value, int) or isinstance(value, bool):
                    raise Unsupported(f"rule {rule.name!r}: source op {j} constrains "
                                      f"{key}={value!r}, not an integer")
        for j, op in enumerate(rule.dst):
            if op.type == "opaque":
                raise Unsupported(f"rule {rule.name!r}: target op {j} is opaque")
        self.consumers: List[List[Tuple[int, int, int]]] = [[] for _ in src]
        for p, op in enumerate(src):
            for k, t in enumerate(op.inputs):
                if t.op >= 0:
                    self.consumers[t.op].append((p, k, t.index))
        self.roots = [j for j in range(len(src)) if not self.consumers[j]]
        self.multi_pattern = len(self.roots) > 1
        self.steps = self._plan()
        self.types = [op.type for op in src]
        self.constraints = [tuple(op.params) for op in src]
        self.height = self._height()
        self._split_source = any(t == "split" for t in self.types)
        # The first pass of `apply` by what it depends on (see there).
        self._planned: Dict[tuple, Any] = {}

    def _height(self) -> int:
        """How many e-node-to-child-class steps a match reaches below its
        root's class at most (a split source op's outputs are one more step:
        its `out` e-nodes' classes): a match holding a given class has its
        root within this many steps above it."""
        src = self.rule.src
        depth: Dict[int, int] = {}
        return max(self._op_depth(j, depth) + (1 if any(t.op < 0 for t in op.inputs) else 0)
                   for j, op in enumerate(src))

    def _op_depth(self, j: int, depth: Dict[int, int]) -> int:
        """The steps from source op `j` up to the match's root (memoized in
        `depth`). A method, not a closure of `_height`: a closure that calls
        itself is a reference cycle, which would keep the rule until a pass
        of the cyclic collector."""
        if j not in depth:
            step = 2 if self.rule.src[j].type == "split" else 1
            depth[j] = max((self._op_depth(p, depth) + step for p, _, _ in self.consumers[j]),
                           default=0)
        return depth[j]

    # ------------------------------------------------------------ planning
    def _plan(self) -> List[_Step]:
        src = self.rule.src
        placed: List[int] = []
        bound_vars: set = set()
        steps: List[_Step] = []

        def place(step: _Step) -> None:
            steps.append(step)
            placed.append(step.op)
            for t in src[step.op].inputs:
                if t.op < 0:
                    bound_vars.add(t.op)

        while len(placed) < len(src):
            step = None
            # Down: an input of a placed op (its producer, found in the class).
            for p in placed:
                for k, t in enumerate(src[p].inputs):
                    if t.op >= 0 and t.op not in placed:
                        step = _Step(t.op, "down", via_op=p, slot=k, index=t.index)
                        break
                if step:
                    break
            # Up: an op reading a bound variable or a placed op's output.
            if step is None:
                for j, op in enumerate(src):
                    if j in placed:
                        continue
                    for k, t in enumerate(op.inputs):
                        if t.op < 0 and t.op in bound_vars:
                            step = _Step(j, "up", slot=k, var=t.op)
                        elif t.op >= 0 and t.op in placed:
                            step = _Step(j, "up", via_op=t.op, slot=k, index=t.index)
                        if step:
                            break
                    if step:
                        break
            if step is None:
                # A new component: start at its root with the most constraints.
                free = [j for j in self.roots if j not in placed] or \
                       [j for j in range(len(src)) if j not in placed]
                j = max(free, key=lambda r: (len(src[r].params), -r))
                step = _Step(j, "scan")
            place(step)
        return steps

    # ------------------------------------------------------------ matching
    def matches(self, eg: EGraph, parents: Dict[Tuple[int, str], List[int]],
                param_memo: Dict[tuple, Any], limit: int,
                root_classes: Optional[Tuple[Any, set]] = None,
                skip: Optional[Callable[[int, Tuple[int, ...]], bool]] = None,
                step_memo: Optional[Dict[tuple, List[int]]] = None
                ) -> List["Match"]:
        """The rule's matches on `eg` (after a rebuild), at most `limit`, in
        the order of a depth-first search over the plan's steps.

        Args:
          parents: (class, op type) -> the live e-nodes of that type reading
            the class (this iteration's).
          param_memo: (op type, operand key, constraints) -> whether an
            e-node of that type, parameters and operand shapes meets
            them (`fits_alone`), and the e-nodes that can be a source op by themselves:
            shared by every rule, kept across iterations (neither changes
            as the e-graph grows; matching runs on a rebuilt e-graph).
          root_classes: (a key naming it, a set of classes): a single-pattern
            rule's root e-node is looked for in these classes only
            (incremental matching: the classes within `height` steps above
            those changed since the rule last matched).
          skip: (xfer, e-nodes) -> whether to leave a match out (e.g. one
            applied before); those left out do not count towards `limit`.
          step_memo: the candidates of a step that reads a class (the
            e-nodes of a type, arity and constraints in a class, or reading
            it), shared by every rule for one e-graph (one iteration's):
            each e-node is checked against an op's own conditions once,
            not once per rule and partial match.
        """
        src = self.rule.src
        if step_memo is None:
            step_memo = {}
        if not all(t in eg.by_type for t in self.types):
            return []
        nsrc = len(src)
        nodes: List[int] = [-1] * nsrc
        var_class: Dict[int, int] = {}
        out: List[Match] = []
        # Hoisted: the e-graph's tables and each source op's shape.
        enodes, node_class, alive, filtered = eg.nodes, eg.node_class, eg.alive, eg.filtered
        find = eg.find
        types, constraints = self.types, self.constraints
        arity = [len(op.inputs) for op in src]
        inputs = [[(t.op, t.index) for t in op.inputs] for op in src]
        is_split = [t == "split" for t in types]
        consumers = self.consumers
        steps = self.steps
        nsteps = len(steps)

        def out_class(j: int, index: int) -> Optional[int]:
            c = find(node_class[nodes[j]])
            if is_split[j]:
                return eg.lookup(OUT, (("index", index),), (c,))
            return c

        def candidates(step: _Step) -> List[int]:
            if step.kind == "scan":
                if root_classes is not None and not self.multi_pattern:
                    key = ("scan in", types[step.op], root_classes[0],
                           arity[step.op], constraints[step.op])
                    found_nodes = param_memo.get(key)
                    if found_nodes is None:
                        within = root_classes[1]
                        found_nodes = [n for n in scan(step.op)
                                       if node_class[n] in within
                                       or find(node_class[n]) in within]
                        param_memo[key] = found_nodes
                    return found_nodes
                return scan(step.op)
            j = step.op
            if step.kind == "down":
                child = enodes[nodes[step.via_op]][2][step.slot]
                if is_split[j]:
                    tuples = [enodes[n][2][0] for n in eg.live_nodes(child)
                              if enodes[n][0] == OUT and enodes[n][1][0][1] == step.index]
                    return [n for c in tuples for n in eg.live_nodes(c)
                            if enodes[n][0] == "split"]
                down: tuple = ("down", child, types[j], arity[j], constraints[j])
                got = step_memo.get(down)
                if got is None:
                    got = step_memo[down] = [n for n in eg.live_nodes(child)
                                            if enodes[n][0] == types[j] and
                                            len(enodes[n][2]) == arity[j] and op_fits(j, n)]
                return got
            source: Optional[int] = (var_class[step.var] if step.via_op < 0
                                     else out_class(step.via_op, step.index))
            if source is None:
                return []
            reader = find(source)
            up: tuple = ("up", reader, types[j], arity[j], constraints[j])
            got = step_memo.get(up)
            if got is None:
                got = step_memo[up] = [n for n in parents.get((reader, types[j]), [])
                                        if len(enodes[n][2]) == arity[j] and alive[n]
                                        and not filtered[n] and op_fits(j, n)]
            return got

        def scan(j: int) -> List[int]:
            """The usable e-nodes that can be source op `j` by themselves
            (type, arity, constraints, equal element-wise shapes): shared
            through `param_memo` by every rule whose op has the same type,
            arity and constraints in this iteration (the default set's
            1,678 rules start from a few such ops; checking each e-node
            once per rule was most of saturation's time)."""
            key = ("scan", types[j], arity[j], constraints[j])
            entry = param_memo.get(key)
            # [e-nodes of the type looked at, those that fit, e-graph size
            # when last brought up to date]: a memo kept across iterations
            # looks only at e-nodes added since, and drops unusable ones.
            if entry is None:
                entry = param_memo[key] = [0, [], -1]
            if entry[2] != len(enodes):
                of_type = eg.by_type.get(types[j], [])
                entry[1] = [n for n in entry[1] if alive[n] and not filtered[n]] + [
                    n for n in of_type[entry[0]:]
                    if len(enodes[n][2]) == arity[j] and alive[n] and not filtered[n]
                    and op_fits(j, n)]
                entry[0], entry[2] = len(of_type), len(enodes)
            return entry[1]

        def op_fits(j: int, n: int) -> bool:
            """Whether e-node `n` (of source op `j`'s type and arity) meets
            the op's own conditions (the module's `fits_alone`)."""
            return fits_alone(eg, n, constraints[j], param_memo)

        def fits(j: int, n: int) -> Optional[List[int]]:
            """The variables node `n` newly binds as source op `j`, or None.
            `n` is a candidate of `candidates`: of the op's type and arity
            and meeting its own conditions (a split's are checked here)."""
            # After a rebuild (matching runs on a rebuilt e-graph) every
            # e-node's children are representatives: no find needed.
            children = enodes[n][2]
            if n in nodes or not alive[n] or filtered[n] or (
                    is_split[j] and (len(children) != arity[j] or not op_fits(j, n))):
                return None
            newly: List[int] = []
            nodes[j] = n
            for k, (op, index) in enumerate(inputs[j]):
                c = children[k]
                if op < 0:
                    bound = var_class.get(op)
                    if bound is None:
                        var_class[op] = c
                        newly.append(op)
                    elif bound != c:
                        break
                elif nodes[op] >= 0 and out_class(op, index) != c:
                    break
            else:
                # Placed consumers of op j must read this node's output.
                for p, k, index in consumers[j]:
                    if nodes[p] >= 0 and enodes[nodes[p]][2][k] != out_class(j, index):
                        break
                else:
                    return newly
            nodes[j] = -1
            for v in newly:
                del var_class[v]
            return None

        def search(depth: int) -> bool:
            """Extends the partial match from `depth`; True once `limit`
            matches are found."""
            if depth == nsteps:
                matched = {find(node_class[n]) for n in nodes}
                if any(c in matched for c in var_class.values()):
                    return False  # a variable is a matched op's output: a cycle
                if skip is not None and skip(self.xfer, tuple(nodes)):
                    return False
                out.append(Match(self, tuple(nodes), dict(var_class)))
                return len(out) >= limit
            step = steps[depth]
            j = step.op
            for n in list(candidates(step)):
                newly = fits(j, n)
                if newly is None:
                    continue
                done = search(depth + 1)
                nodes[j] = -1
                for v in newly:
                    del var_class[v]
                if done:
                    return True
            return False

        search(0)
        return out

    # ------------------------------------------------------------ applying
    def apply(self, eg: EGraph, match: "Match") -> int:
        """Adds the target of `match` and merges each mapped pair; returns
        the number of unions that changed the e-graph (0: nothing new).

        Raises:
          EGraphError: the engine rejects the target here (shapes, a
            parameter it cannot take): nothing is added.
        """
        rule = self.rule

        def source_tensor(t: rules_io.PatternTensor) -> int:
            c = eg.class_of_node(match.nodes[t.op])
            if rule.src[t.op].type == "split":
                out = eg.lookup(OUT, (("index", t.index),), (c,))
                if out is None:
                    raise EGraphError("a mapped split output is not in the e-graph")
                return out
            return c

        # First pass: every target op's parameters and shapes, nothing added.
        # It depends on the source e-nodes' parameters and operand shapes and
        # the variables' shapes alone, so it is kept per rule by those (not
        # where a source op is a split: its outputs are looked up).
        key: Optional[tuple] = None
        planned: Any = None
        if not self._split_source:
            key = (tuple([_operand_key(eg, n) for n in match.nodes]),
                   tuple(sorted([(v, eg.shape(c)) for v, c in match.var_class.items()])))
            planned = self._planned.get(key)
        if planned is None:
            src_nodes = [eg.node(n) for n in match.nodes]

            def src_shapes(j):
                return [eg.shape(c) for c in src_nodes[j][2]]
            try:
                planned = self._plan_target(eg, match, src_nodes, src_shapes, source_tensor)
            except EGraphError as error:
                planned = str(error)
            if key is not None:
                self._planned[key] = planned
        if isinstance(planned, str):
            raise EGraphError(planned)
        plans = planned

        # Second pass: add the target ops, then merge the mapped pairs.
        classes: List[int] = []

        def target_tensor(op: int, index: int) -> int:
            if rule.dst[op].type == "split":
                return eg.add_output(classes[op], index)
            return classes[op]
        for op_type, canon, inputs in plans:
            children = [match.var_class[a] if is_target == 0 else target_tensor(a, b)
                        for a, b, is_target in inputs]
            classes.append(eg.add(op_type, canon, children))
        changed = 0
        for src_t, dst_t in rule.mapped_outputs:
            changed += eg.union(source_tensor(src_t), target_tensor(dst_t.op, dst_t.index))
        return changed

    def _plan_target(self, eg: EGraph, match: "Match", src_nodes, src_shapes,
                     source_tensor) -> List[Tuple[str, Params, List[Tuple[int, int, int]]]]:
        """Every target op's (type, params, inputs), an input either
        (variable, 0, 0) or (target op, output index, 1), checked against
        the engine's shapes; nothing is added.

        Raises:
          EGraphError: the engine rejects the target here.
        """
        rule = self.rule
        plans: List[Tuple[str, Params, List[Tuple[int, int, int]]]] = []
        out_shapes: List[Tuple[Tuple[int, ...], ...]] = []
        for j, pop in enumerate(rule.dst):
            params: Dict[str, object] = {}
            for key, value in pop.params:
                if isinstance(value, str):
                    continue
                if not _set_param(params, key, int(value)):
                    raise EGraphError(f"{key} cannot be set on a target op")
            for key, value in pop.params:
                if not isinstance(value, str):
                    continue
                s = int(value[len(rules_io.COPY_PREFIX):])
                s_type, s_params, _ = src_nodes[s]
                raw = dict(s_params)
                if key == "epsilon":
                    params["epsilon"] = raw.get("epsilon", default_params()["epsilon"])
                    continue
                got = param_value(key, s_type, raw, src_shapes(s))
                if got is None or not _set_param(params, key, got):
                    raise EGraphError(f"{key} cannot be copied from source op {s}")
            if pop.type == "split":
                params["sizes"] = self._split_sizes(eg, match, j, params, source_tensor)
            in_shapes = []
            inputs: List[Tuple[int, int, int]] = []
            for t in pop.inputs:
                if t.op < 0:
                    inputs.append((t.op, 0, 0))
                    in_shapes.append(eg.shape(match.var_class[t.op]))
                else:
                    inputs.append((t.op, t.index, 1))
                    in_shapes.append(out_shapes[t.op][t.index])
            canon = canonical(pop.type, params)
            outs = infer_shapes(pop.type, canon, tuple(in_shapes), eg._shape_cache)
            for key, value in pop.params:
                if isinstance(value, str):
                    continue
                if param_value(key, pop.type, dict(canon), in_shapes) != value:
                    raise EGraphError(f"target op {j}: {key} is not {value}")
            out_shapes.append(outs)
            plans.append((pop.type, canon, inputs))
        for src_t, dst_t in rule.mapped_outputs:
            if out_shapes[dst_t.op][dst_t.index] != eg.shape(source_tensor(src_t)):
                raise EGraphError("a mapped tensor would change shape")
        return plans


    def _split_sizes(self, eg, match, j, params, source_tensor) -> List[int]:
        axis = int(params.get("axis", default_params()["axis"]))
        sizes: Dict[int, int] = {}
        for s, d in self.rule.mapped_outputs:
            if d.op != j:
                continue
            shape = eg.shape(source_tensor(s))
            if not 0 <= axis < len(shape):
                raise EGraphError("a target split's axis is out of range")
            sizes[d.index] = int(shape[axis])
        if len(sizes) < 2 or max(sizes) != len(sizes) - 1:
            raise EGraphError("a target split's sizes are not all mapped")
        return [sizes[k] for k in range(len(sizes))]


@dataclasses.dataclass(frozen=True)
class Match:
    """One match: the e-node of each source op, the class of each variable."""
    rewrite: Rewrite
    nodes: Tuple[int, ...]
    var_class: Dict[int, int]


def compile_rule(rule: rules_io.Rule, xfer: int) -> Rewrite:
    """The rule as a rewrite; `Unsupported` where the e-graph cannot express it."""
    return Rewrite(rule, xfer)
