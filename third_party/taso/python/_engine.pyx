# cython: language_level=3
# distutils: language = c++
"""Thin marshalling layer over the native rewrite engine (xflowrl._engine).

ctaso.pxd mirrors the C++ headers; this file only converts between Python
values and the C++ structs declared there. Native
objects are held by shared_ptr/unique_ptr members, so their lifetime is that
of the Python wrapper. Every taso::EngineError arrives as a ValueError (it
derives from std::invalid_argument). The user-facing API is xflowrl.engine.

Nothing here may abort the process on bad arguments: a handle constructed
directly (``GraphHandle()``, ``CostBackendHandle()``, ...) holds no native
object and raises ValueError when used; typed arguments are ``not None``;
indices are checked here (IndexError) before any native container is read.
"""

from cython.operator cimport dereference as deref
from libc.stdint cimport int64_t, uint64_t
from libcpp.memory cimport shared_ptr, unique_ptr
from libcpp.mutex cimport mutex
from libcpp.pair cimport pair
from libcpp.string cimport string
from libcpp.utility cimport move
from libcpp.vector cimport vector

from ctaso cimport *

import numpy as np

# Columns of GraphHandle.structure()'s "params" array.
STRUCTURE_PARAMS = ("kernel_h", "kernel_w", "stride_h", "stride_w", "padding",
                    "activation", "groups", "axis")


def op_type_id(str name):
    """Returns the engine's type number for an op name, or -1."""
    return op_type_from_name(name.encode())


def op_type_str(int type_id):
    return op_type_name(type_id).decode()


def onednn_built():
    return onednn_available()


def cudnn_built():
    return cudnn_available()


cdef Shape _shape(object dims) except *:
    cdef Shape s
    for d in dims:
        if not -2 ** 63 <= d < 2 ** 63:
            raise ValueError(f"dimension {d} does not fit in int64")
        s.push_back(<int64_t> d)
    return s


cdef tuple _pyshape(Shape s):
    return tuple([s[i] for i in range(s.size())])


cdef OpParams _params(dict d) except *:
    """Fills an OpParams from a dict of field names (unknown keys rejected;
    a value out of its C type's range is a ValueError, not an OverflowError)."""
    try:
        return _params_unchecked(d)
    except OverflowError as e:
        raise ValueError(f"operator parameter out of range: {e} (in {d!r:.200})") from None


cdef OpParams _params_unchecked(dict d) except *:
    cdef OpParams p
    cdef vector[Shape] shapes
    for key, value in d.items():
        if key == "stride_h": p.stride_h = value
        elif key == "stride_w": p.stride_w = value
        elif key == "padding": p.padding = value
        elif key == "activation": p.activation = value
        elif key == "axis": p.axis = value
        elif key == "kernel_h": p.kernel_h = value
        elif key == "kernel_w": p.kernel_w = value
        elif key == "count": p.count = value
        elif key == "groups": p.groups = value
        elif key == "epsilon": p.epsilon = value
        elif key == "perm": p.perm = [int(v) for v in value]
        elif key == "shape": p.shape = [int(v) for v in value]
        elif key == "sizes": p.sizes = [int(v) for v in value]
        elif key == "opaque_type": p.opaque_type = value.encode()
        elif key == "opaque_flops": p.opaque_flops = value
        elif key == "opaque_shapes":
            for s in value:
                shapes.push_back(_shape(s))
            p.opaque_shapes = shapes
        else:
            raise ValueError(f"unknown operator parameter {key!r}")
    return p


cdef dict _pyparams(const OpParams& p):
    return {
        "stride_h": p.stride_h, "stride_w": p.stride_w, "padding": p.padding,
        "activation": p.activation, "axis": p.axis, "kernel_h": p.kernel_h,
        "kernel_w": p.kernel_w, "count": p.count, "groups": p.groups, "epsilon": p.epsilon,
        "perm": tuple(p.perm), "shape": tuple(p.shape), "sizes": tuple(p.sizes),
        "opaque_type": p.opaque_type.decode(), "opaque_flops": p.opaque_flops,
        "opaque_shapes": tuple([_pyshape(p.opaque_shapes[k])
                                for k in range(p.opaque_shapes.size())]),
    }


cdef class CostBackendHandle:
    """Owns one native cost backend."""
    cdef unique_ptr[CostBackend] ptr

    cdef CostBackend* get(self) except NULL:
        """The native backend; ValueError for a handle built without one."""
        if not self.ptr:
            raise ValueError("CostBackendHandle holds no backend (make one with "
                             "analytic_backend(), onednn_backend() or cudnn_backend())")
        return self.ptr.get()

    @property
    def name(self):
        return self.get().name().decode()

    @property
    def num_measured(self):
        return self.get().num_measured()

    def op_cost(self, int type_id, dict params not None, list input_shapes not None,
                bint weight_side=False):
        """Cost in ms of one op configuration (output shapes inferred here)."""
        cdef CostBackend* backend = self.get()
        cdef OpConfig c = _op_config(type_id, params, input_shapes, weight_side)
        cdef double ms
        with nogil:  # a measurement may take seconds; the backend is thread-safe
            ms = backend.op_cost(c)
        return ms


cdef OpConfig _op_config(int type_id, dict params, list input_shapes,
                         bint weight_side) except *:
    """An OpConfig whose output shapes come from the engine's shape inference."""
    cdef OpConfig c
    c.type = type_id
    c.params = _params(params)
    for s in input_shapes:
        c.input_shapes.push_back(_shape(s))
    c.output_shapes = infer_shapes(type_id, c.params, c.input_shapes)
    c.weight_side = weight_side
    return c


def shape_precheck_fails(int type_id, dict params not None, list input_shapes not None):
    """The rewriter's exception-free shape check (`try_infer_shapes`): True
    exactly where shape inference (`infer_output_shapes`) raises for these
    inputs."""
    cdef OpParams p = _params(params)
    cdef vector[Shape] shapes, out
    for s in input_shapes:
        shapes.push_back(_shape(s))
    return not try_infer_shapes(type_id, p, shapes, &out, NULL)


def infer_output_shapes(int type_id, dict params not None, list input_shapes not None):
    """The engine's shape inference for one op (ValueError where it fails)."""
    cdef OpConfig c = _op_config(type_id, params, input_shapes, False)
    return [list(s) for s in c.output_shapes]


def cudnn_plan(int type_id, dict params not None, list input_shapes not None):
    """What the cudnn backend runs for one op configuration (any build)."""
    cdef OpConfig c = _op_config(type_id, params, input_shapes, False)
    return cudnn_plan_description(c).decode()


def cudnn_check(int type_id, dict params not None, list input_shapes not None):
    """Builds the plan's cuDNN descriptors (cudnn build; no device needed)."""
    cdef OpConfig c = _op_config(type_id, params, input_shapes, False)
    cudnn_check_descriptors(c)


def analytic_backend(str profile not None):
    cdef CostBackendHandle h = CostBackendHandle.__new__(CostBackendHandle)
    h.ptr = make_analytic_backend(profile.encode())
    return h


def fitted_backend(str name not None, dict coefficients not None):
    """The fitted backend; `coefficients` maps op class -> [ms, ms/GFLOP, ms/MB]."""
    cdef vector[string] classes
    cdef vector[vector[double]] rows
    cdef vector[double] row
    for cls, values in coefficients.items():
        classes.push_back(cls.encode())
        row.clear()
        for v in values:
            row.push_back(<double> v)
        rows.push_back(row)
    cdef CostBackendHandle h = CostBackendHandle.__new__(CostBackendHandle)
    h.ptr = make_fitted_backend(name.encode(), classes, rows)
    return h


def learned_backend(str name not None, dict coefficients not None,
                    str fallback not None = "h100"):
    """The learned GPU backend; `coefficients` maps op class -> [ms, ms/GFLOP, ms/MB]."""
    cdef vector[string] classes
    cdef vector[vector[double]] rows
    cdef vector[double] row
    for cls, values in coefficients.items():
        classes.push_back(cls.encode())
        row.clear()
        for v in values:
            row.push_back(<double> v)
        rows.push_back(row)
    cdef CostBackendHandle h = CostBackendHandle.__new__(CostBackendHandle)
    h.ptr = make_learned_backend(name.encode(), classes, rows, fallback.encode())
    return h


def fitted_features(int type_id, dict params not None, list input_shapes not None,
                    bint weight_side=False):
    """(op class, FLOPs, bytes) the fitted backend prices for one op."""
    cdef OpConfig c = _op_config(type_id, params, input_shapes, weight_side)
    cdef FittedWork w = fitted_work(c)
    return w.op_class.decode(), w.flops, w.bytes


def onednn_backend(str cache_path not None, int warmup, int repeats,
                   str reference_path not None=""):
    cdef CostBackendHandle h = CostBackendHandle.__new__(CostBackendHandle)
    h.ptr = make_onednn_backend(cache_path.encode(), warmup, repeats, reference_path.encode())
    return h


def cudnn_backend(str cache_path not None, int warmup, int repeats, bint graph_timing=True):
    cdef CostBackendHandle h = CostBackendHandle.__new__(CostBackendHandle)
    h.ptr = make_cudnn_backend(cache_path.encode(), warmup, repeats, graph_timing)
    return h


cdef class GraphHandle:
    """Owns a shared reference to one immutable native graph."""
    cdef shared_ptr[const Graph] ptr

    cdef const Graph* get(self) except NULL:
        """The native graph; ValueError for a handle built without one."""
        if not self.ptr:
            raise ValueError("GraphHandle holds no graph (graphs come from "
                             "BuilderHandle.build() or a search)")
        return self.ptr.get()

    def ops(self):
        """List of (guid, type_id, params, inputs, output_shapes, name)."""
        cdef const Graph* g = self.get()
        cdef const Node* n
        cdef size_t k
        result = []
        for i in range(g.size()):
            n = &g.node(i)
            inputs = [(n.inputs[k].guid, n.inputs[k].index) for k in range(n.inputs.size())]
            shapes = [_pyshape(n.outputs[k]) for k in range(n.outputs.size())]
            result.append((n.guid, n.type, _pyparams(n.params), inputs, shapes,
                           n.name.decode()))
        return result

    def structure(self):
        """The graph as flat arrays, for featurization (xflowrl.embedding).

        Returns a dict: "guids" [n] int64, "types" [n] int32, "params" [n, 8]
        float32 (columns STRUCTURE_PARAMS), "out_shapes" [n, 4] int64 (first
        output, first four dims, zero padded), "senders" / "receivers" [e]
        int32 node indices (one edge per op input) and "edge_shapes" [e, 4]
        int64 (the tensor each edge carries, as out_shapes).
        """
        cdef const Graph* g = self.get()
        cdef const Node* n
        cdef int i, k, d, e = 0, num = g.size(), num_edges = 0
        for i in range(num):
            num_edges += g.node(i).inputs.size()
        guids = np.empty(num, np.int64)
        types = np.empty(num, np.int32)
        params = np.zeros((num, 8), np.float32)
        out_shapes = np.zeros((num, 4), np.int64)
        senders = np.empty(num_edges, np.int32)
        receivers = np.empty(num_edges, np.int32)
        edge_shapes = np.zeros((num_edges, 4), np.int64)
        cdef int64_t[::1] gv = guids
        cdef int[::1] tv = types
        cdef float[:, ::1] pv = params
        cdef int64_t[:, ::1] ov = out_shapes
        cdef int[::1] sv = senders
        cdef int[::1] rv = receivers
        cdef int64_t[:, ::1] ev = edge_shapes
        cdef const Shape* shape
        for i in range(num):
            n = &g.node(i)
            gv[i] = n.guid
            tv[i] = n.type
            pv[i, 0] = n.params.kernel_h
            pv[i, 1] = n.params.kernel_w
            pv[i, 2] = n.params.stride_h
            pv[i, 3] = n.params.stride_w
            pv[i, 4] = n.params.padding
            pv[i, 5] = n.params.activation
            pv[i, 6] = n.params.groups
            pv[i, 7] = n.params.axis
            if n.outputs.size() > 0:
                shape = &n.outputs[0]
                for d in range(min(4, <int>shape.size())):
                    ov[i, d] = deref(shape)[d]
            for k in range(<int>n.inputs.size()):
                sv[e] = g.index_of(n.inputs[k].guid)
                rv[e] = i
                shape = &g.shape(n.inputs[k])
                for d in range(min(4, <int>shape.size())):
                    ev[e, d] = deref(shape)[d]
                e += 1
        return {"guids": guids, "types": types, "params": params,
                "out_shapes": out_shapes, "senders": senders, "receivers": receivers,
                "edge_shapes": edge_shapes}

    def outputs(self):
        cdef vector[TensorRef] outs = self.get().outputs()
        return [(outs[k].guid, outs[k].index) for k in range(outs.size())]

    def weight_side(self):
        cdef const Graph* g = self.get()
        return [g.weight_side(i) for i in range(g.size())]

    def num_ops(self):
        return self.get().num_ops()

    def size(self):
        return self.get().size()

    def hash(self):
        return self.get().hash()

    # Costing may measure (seconds under onednn or cudnn): without the GIL.
    # Graphs, node memos and backends are thread-safe (docs/engine.md, "Threads").
    def cost(self, CostBackendHandle backend not None):
        cdef const Graph* g = self.get()
        cdef CostBackend* native_backend = backend.get()
        cdef double total
        with nogil:
            total = g.cost(native_backend)
        return total

    def op_costs(self, CostBackendHandle backend not None):
        cdef const Graph* g = self.get()
        cdef CostBackend* native_backend = backend.get()
        cdef vector[double] costs
        with nogil:
            costs = g.op_costs(native_backend)
        return list(costs)

    def merge_identical_ops(self):
        """The graph with identical ops merged (taso::merge_identical_ops),
        or None where nothing merges."""
        self.get()
        cdef shared_ptr[const Graph] merged
        with nogil:
            merged = merge_identical_ops(self.ptr)
        if merged.get() == self.ptr.get():
            return None
        return _wrap(merged)

    def op_config_key(self, int i):
        """The cost-cache key of node `i` (0 <= i < size())."""
        cdef const Graph* g = self.get()
        if not 0 <= i < g.size():
            raise IndexError(f"node index {i} out of range for a graph of {g.size()} nodes")
        return g.op_config(i).key().decode()

    def memory(self):
        cdef MemoryEstimate m = self.get().memory()
        return m.weight_bytes, m.activation_bytes, m.peak_bytes


cdef GraphHandle _wrap(shared_ptr[const Graph] g):
    cdef GraphHandle h = GraphHandle.__new__(GraphHandle)
    h.ptr = g
    return h


cdef TensorRef _ref(object t) except *:
    cdef TensorRef r
    r.guid = t[0]
    r.index = t[1]
    return r


cdef class BuilderHandle:
    """Owns a native GraphBuilder."""
    cdef GraphBuilder builder

    def input(self, str name not None, shape):
        cdef TensorRef t = self.builder.input(name.encode(), _shape(shape))
        return (t.guid, t.index)

    def weight(self, str name not None, shape):
        cdef TensorRef t = self.builder.weight(name.encode(), _shape(shape))
        return (t.guid, t.index)

    def add(self, int type_id, dict params not None, list inputs not None):
        cdef vector[TensorRef] refs
        for t in inputs:
            refs.push_back(_ref(t))
        return self.builder.add(type_id, _params(params), refs)

    def shape(self, tuple tensor not None):
        return _pyshape(self.builder.shape(_ref(tensor)))

    def num_outputs(self, int64_t guid):
        return self.builder.num_outputs(guid)

    def build(self, list outputs not None):
        cdef vector[TensorRef] refs
        for t in outputs:
            refs.push_back(_ref(t))
        return _wrap(self.builder.build(refs))


cdef PatternOp _pattern_op(object op) except *:
    """op = (type_id, [(op, index)...], [(key, value)...], [(key, src_op)...])."""
    cdef PatternOp p
    cdef PatternTensor t
    p.type = op[0]
    for ref in op[1]:
        t.op = ref[0]
        t.index = ref[1]
        p.inputs.push_back(t)
    for key, value in op[2]:
        p.params.push_back(pair[int, int](key, value))
    for key, src in op[3]:
        p.copied.push_back(pair[int, int](key, src))
    return p


cdef Rule _rule(object spec) except *:
    cdef Rule r
    cdef PatternTensor s, d
    name, src, dst, mapped = spec
    r.name = name.encode()
    for op in src:
        r.src.push_back(_pattern_op(op))
    for op in dst:
        r.dst.push_back(_pattern_op(op))
    for (so, si), (do, di) in mapped:
        s.op, s.index, d.op, d.index = so, si, do, di
        r.mapped_outputs.push_back(pair[PatternTensor, PatternTensor](s, d))
    r.validate()
    r.index()
    return r


cdef class RuleSetHandle:
    """Owns the native rules (xfers), validated at construction."""
    cdef vector[Rule] rules

    def __cinit__(self, list rules not None):
        """rules: list of (name, src_ops, dst_ops, [((op, idx), (op, idx))...])."""
        for spec in rules:
            self.rules.push_back(_rule(spec))

    def __len__(self):
        return self.rules.size()

    def locations(self, GraphHandle graph not None, int max_locations, int max_ops,
                  bint incremental=True, int num_rules=-1):
        """incremental=False builds every candidate graph at enumeration (the
        engine before incremental candidates; kept to compare against).
        num_rules >= 0: the first num_rules rules only, the others' lists
        left empty (taso::enumerate_locations)."""
        graph.get()
        cdef LocationsHandle h = LocationsHandle.__new__(LocationsHandle)
        cdef shared_ptr[const Graph] g = graph.ptr
        with nogil:  # thread-safe (taso/locations.h); other Python threads run
            h.locs = enumerate_locations(g, self.rules, max_locations, max_ops, incremental,
                                         num_rules)
        return h

    def apply_everywhere(self, GraphHandle graph not None, int xfer, int times,
                         int max_locations, int max_ops,
                         CostBackendHandle backend not None):
        """Rule `xfer` applied `times` times at its cheapest location
        (taso::apply_everywhere): (final graph, hash after each application,
        enumerations)."""
        graph.get()
        if not 0 <= xfer < <int>self.rules.size():
            raise IndexError(f"xfer {xfer} out of range [0, {self.rules.size()})")
        if max_locations < 1:
            raise ValueError("max_locations must be >= 1")
        cdef CostBackend* native_backend = backend.get()
        cdef shared_ptr[const Graph] g = graph.ptr
        cdef EverywhereResult r
        with nogil:
            r = apply_everywhere(g, self.rules[xfer], times, max_locations, max_ops,
                                 native_backend)
        return _wrap(r.graph), list(r.hashes), r.enumerations

    def search(self, GraphHandle graph not None, CostBackendHandle backend not None,
               double alpha, int budget, int max_ops, double time_limit_s,
               int max_queued=0, bint lazy_candidates=True, int max_locations=200):
        """`applied`: (xfer, location) pairs, locations numbered as
        `locations(..., max_locations, max_ops)` numbers them (-1: past the
        first max_locations)."""
        graph.get()
        cdef CostBackend* native_backend = backend.get()
        cdef SearchOptions opts
        opts.alpha = alpha
        opts.budget = budget
        opts.max_ops = max_ops
        opts.time_limit_s = time_limit_s
        opts.max_queued = max_queued
        opts.lazy_candidates = lazy_candidates
        opts.max_locations = max_locations
        cdef SearchResult r
        cdef shared_ptr[const Graph] g = graph.ptr
        with nogil:  # thread-safe (taso/search.h); other Python threads run
            r = backtracking_search(g, self.rules, native_backend, opts)
        return dict(
            best=_wrap(r.best), initial_cost=r.initial_cost, best_cost=r.best_cost,
            applied=[(step.first, step.second) for step in r.applied],
            expansions=r.expansions, enqueued=r.enqueued, seconds=r.seconds,
            peak_queued=r.peak_queued,
            peak_parents=r.peak_parents, dropped=r.dropped, seen=r.seen,
            trace=[(p.expansions, p.seconds, p.best_cost) for p in r.trace])


cdef class LocationsHandle:
    """The candidate graphs of every xfer on one graph.

    `graph`, `hashes` and `num_materialized` fill or read the candidates'
    caches, which one thread at a time may do (taso/locations.h); they run
    without the GIL, so `caches_mu` keeps them apart. It is only ever taken
    without the GIL, so a thread waiting for it holds nothing another needs.
    `costs` only reads and takes no lock.
    """
    cdef Locations locs
    cdef mutex caches_mu

    def counts(self):
        return [self.locs.candidates[x].size() for x in range(self.locs.candidates.size())]

    def count_array(self):
        """`counts` as an int64 array, filled in one loop (what `Locations`
        keeps: a Python int per xfer of ~1,700 cost more than the array)."""
        cdef size_t x, n = self.locs.candidates.size()
        out = np.empty(n, np.int64)
        cdef int64_t[::1] view = out
        for x in range(n):
            view[x] = <int64_t>self.locs.candidates[x].size()
        return out

    def num_matches(self):
        return list(self.locs.num_matches)

    cdef check_xfer(self, int xfer):
        if not 0 <= xfer < <int>self.locs.candidates.size():
            raise IndexError(f"xfer index {xfer} out of range for "
                             f"{self.locs.candidates.size()} xfers")

    def graph(self, int xfer, int location):
        self.check_xfer(xfer)
        if not 0 <= location < <int>self.locs.candidates[xfer].size():
            raise IndexError(f"location {location} out of range: xfer {xfer} has "
                             f"{self.locs.candidates[xfer].size()} candidates")
        cdef shared_ptr[const Graph] g
        with nogil:
            self.caches_mu.lock()
            try:
                g = self.locs.graph(xfer, location)
            finally:
                self.caches_mu.unlock()
        return _wrap(g)

    def hashes(self):
        """Per xfer: every candidate's canonical hash (computed without
        building the graph)."""
        cdef vector[vector[uint64_t]] rows
        with nogil:
            self.caches_mu.lock()
            try:
                rows = self.locs.hashes()
            finally:
                self.caches_mu.unlock()
        return [list(row) for row in rows]

    def hashes_of(self, int xfer):
        """`hashes()[xfer]` alone: the canonical hash of each candidate of
        one xfer."""
        self.check_xfer(xfer)
        cdef vector[uint64_t] row
        with nogil:
            self.caches_mu.lock()
            try:
                row = self.locs.hashes_of(xfer)
            finally:
                self.caches_mu.unlock()
        return list(row)

    def matched(self, int xfer):
        """Per location of `xfer`: the guids its source pattern matched."""
        self.check_xfer(xfer)
        if <size_t>xfer >= self.locs.matched.size():
            return []
        return [list(m) for m in self.locs.matched[xfer]]

    def matched_nodes(self, const int[::1] node_of not None, int[:, :, ::1] out not None):
        """Writes, for every xfer x, location l and pattern op j, the node
        index of the op it matched: out[x, l, j] = node_of[guid]. Entries past
        a location's pattern and past an xfer's locations are left as they
        are. One native loop instead of a Python loop per location: the
        environment needs every location's nodes at every step.

        Raises ValueError where `out` has too few rows, locations or pattern
        slots, and IndexError for a guid outside `node_of`; `out` may then
        be partly written.
        """
        cdef size_t x, l, j
        cdef int64_t guid
        cdef const vector[int64_t]* ops
        if self.locs.matched.size() > <size_t>out.shape[0]:
            raise ValueError(f"out has {out.shape[0]} rows for "
                             f"{self.locs.matched.size()} xfers")
        for x in range(self.locs.matched.size()):
            if self.locs.matched[x].size() > <size_t>out.shape[1]:
                raise ValueError(f"out has room for {out.shape[1]} locations; xfer {x} "
                                 f"has {self.locs.matched[x].size()}")
            for l in range(self.locs.matched[x].size()):
                ops = &self.locs.matched[x][l]
                if ops.size() > <size_t>out.shape[2]:
                    raise ValueError(f"out has {out.shape[2]} pattern slots; xfer {x} "
                                     f"matched {ops.size()} ops")
                for j in range(ops.size()):
                    guid = deref(ops)[j]
                    if not 0 <= guid < node_of.shape[0]:
                        raise IndexError(f"guid {guid} is outside node_of "
                                         f"({node_of.shape[0]} entries)")
                    out[x, l, j] = node_of[guid]

    def matched_nodes_rows(self, const int64_t[::1] xfers not None,
                           const int[::1] node_of not None, int[:, :, ::1] out not None):
        """`matched_nodes` for the xfers `xfers` only: out[i, l, j] =
        node_of[guid] of location l and pattern op j of xfer xfers[i]. The
        environment asks for the few xfers that have locations (a handful of
        ~1,700), so its arrays stay small. Entries past a location's pattern
        and past an xfer's locations are left as they are.

        Raises ValueError where `out` has too few rows, locations or pattern
        slots, and IndexError for an xfer out of range or a guid outside
        `node_of`; `out` may then be partly written.
        """
        cdef size_t i, l, j
        cdef int64_t x, guid
        cdef const vector[int64_t]* ops
        if xfers.shape[0] > out.shape[0]:
            raise ValueError(f"out has {out.shape[0]} rows for {xfers.shape[0]} xfers")
        for i in range(<size_t>xfers.shape[0]):
            x = xfers[i]
            if not 0 <= x < <int64_t>self.locs.candidates.size():
                raise IndexError(f"xfer index {x} out of range for "
                                 f"{self.locs.candidates.size()} xfers")
            if <size_t>x >= self.locs.matched.size():
                continue
            if self.locs.matched[x].size() > <size_t>out.shape[1]:
                raise ValueError(f"out has room for {out.shape[1]} locations; xfer {x} "
                                 f"has {self.locs.matched[x].size()}")
            for l in range(self.locs.matched[x].size()):
                ops = &self.locs.matched[x][l]
                if ops.size() > <size_t>out.shape[2]:
                    raise ValueError(f"out has {out.shape[2]} pattern slots; xfer {x} "
                                     f"matched {ops.size()} ops")
                for j in range(ops.size()):
                    guid = deref(ops)[j]
                    if not 0 <= guid < node_of.shape[0]:
                        raise IndexError(f"guid {guid} is outside node_of "
                                         f"({node_of.shape[0]} entries)")
                    out[i, l, j] = node_of[guid]

    def step_arrays(self, const int[::1] node_of, int width, int max_locations,
                    CostBackendHandle backend=None):
        """What a step reads of the locations, in one call: (active, counts,
        nodes, costs). `active`: the xfers with candidates, ascending
        (int64 [A]); `counts`: their candidate counts (int64 [A]); `nodes`:
        `matched_nodes_rows(active, ...)`'s int32 [A, max_locations, width]
        array, -1 where nothing matched, or None where `node_of` is None;
        `costs`: float64 [A, max_locations], each candidate's cost (`costs`'
        rows of the active xfers), NaN past an xfer's candidates, or None
        without a backend.

        Raises ValueError where an xfer has more candidates than
        max_locations or matched more ops than width, and IndexError for a
        guid outside `node_of`.
        """
        cdef size_t x, l, j, i, n = self.locs.candidates.size()
        cdef size_t num_active = 0
        cdef int64_t guid
        cdef const vector[int64_t]* ops
        for x in range(n):
            num_active += self.locs.candidates[x].size() > 0
        active = np.empty(num_active, np.int64)
        counts = np.empty(num_active, np.int64)
        cdef int64_t[::1] av = active
        cdef int64_t[::1] cv = counts
        i = 0
        for x in range(n):
            if self.locs.candidates[x].size() > 0:
                if self.locs.candidates[x].size() > <size_t>max_locations:
                    raise ValueError(f"xfer {x} has {self.locs.candidates[x].size()} "
                                     f"candidates, more than max_locations={max_locations}")
                av[i] = <int64_t>x
                cv[i] = <int64_t>self.locs.candidates[x].size()
                i += 1
        if max_locations < 1 or width < 0:
            raise ValueError("max_locations must be >= 1 and width >= 0")
        nodes = None
        cdef int[:, :, ::1] nv
        if node_of is not None:
            nodes = np.full((num_active, max_locations, width), -1, np.int32)
            nv = nodes
        for i in range(num_active if node_of is not None else 0):
            x = <size_t>av[i]
            for l in range(self.locs.matched[x].size()):
                ops = &self.locs.matched[x][l]
                if ops.size() > <size_t>width:
                    raise ValueError(f"width is {width}; xfer {x} matched {ops.size()} ops")
                for j in range(ops.size()):
                    guid = deref(ops)[j]
                    if not 0 <= guid < node_of.shape[0]:
                        raise IndexError(f"guid {guid} is outside node_of "
                                         f"({node_of.shape[0]} entries)")
                    nv[i, l, j] = node_of[guid]
        if backend is None:
            return active, counts, nodes, None
        cdef CostBackend* native_backend = backend.get()
        cdef vector[vector[double]] rows
        with nogil:  # costs() only reads (taso/locations.h)
            rows = self.locs.costs(native_backend)
        costs = np.full((num_active, max_locations), np.nan)
        cdef double[:, ::1] kv = costs
        for i in range(num_active):
            x = <size_t>av[i]
            for l in range(rows[x].size()):
                kv[i, l] = rows[x][l]
        return active, counts, nodes, costs

    def num_materialized(self):
        """How many candidates hold a graph built after enumeration (by
        `graph`); pricing them (`costs`) builds none, under every backend.
        Candidates whose graph was built at enumeration (a rewrite that
        leaves dead ops) are not counted."""
        cdef int n
        with nogil:
            self.caches_mu.lock()
            n = self.locs.num_materialized()
            self.caches_mu.unlock()
        return n

    def costs(self, CostBackendHandle backend not None):
        """Per xfer: the cost of every candidate graph, in ms."""
        cdef CostBackend* native_backend = backend.get()
        cdef vector[vector[double]] rows
        with nogil:  # costs() only reads (taso/locations.h)
            rows = self.locs.costs(native_backend)
        return rows

    def costs_flat(self, CostBackendHandle backend not None):
        """The rows of `costs` concatenated, xfer by xfer, as one float64
        array (the environment's path: no Python list per xfer)."""
        cdef CostBackend* native_backend = backend.get()
        cdef vector[vector[double]] rows
        with nogil:  # costs() only reads (taso/locations.h)
            rows = self.locs.costs(native_backend)
        cdef size_t total = 0
        cdef size_t x, l, k = 0
        for x in range(rows.size()):
            total += rows[x].size()
        out = np.empty(total, np.float64)
        cdef double[::1] view = out
        for x in range(rows.size()):
            for l in range(rows[x].size()):
                view[k] = rows[x][l]
                k += 1
        return out


include "_ops.pxi"


# ---------------------------------------------------------------------------
# E-matching (taso/ematch.h): equality saturation's matcher.

from libc.stdint cimport int32_t, uint8_t


cdef extern from "taso/ematch.h" namespace "taso":
    cdef cppclass EPatternOp:
        int32_t type
        int32_t signature
        bint projected
        vector[pair[int32_t, int32_t]] inputs

    enum class EStepKind(int32_t):
        kScan
        kDown
        kUp

    cdef cppclass EStep:
        EStepKind kind
        int32_t op
        int32_t via_op
        int32_t slot
        int32_t index
        int32_t var

    cdef cppclass EPattern:
        vector[EPatternOp] ops
        vector[EStep] steps
        int32_t num_vars
        vector[int32_t] var_order

    cdef cppclass EMatches:
        size_t count
        vector[int32_t] nodes
        vector[int32_t] vars

    cdef cppclass EMatcher:
        void set_graph(int32_t num_class_ids, int32_t out_type, const vector[int32_t]& type,
                       const vector[int32_t]& cls, const vector[uint8_t]& usable,
                       const vector[int32_t]& out_index, const vector[int32_t]& child_start,
                       const vector[int32_t]& children, const vector[int32_t]& class_order,
                       const vector[int32_t]& class_start,
                       const vector[int32_t]& class_nodes) except +
        void set_fit(int32_t signature, size_t first, const vector[uint8_t]& bits) except +
        int32_t add_pattern(const EPattern& pattern) except +
        void set_within(int32_t id, const vector[int32_t]& classes, int32_t steps) except +
        void add_applied(int32_t pattern, const vector[int32_t]& nodes) except +
        EMatches match(int32_t pattern, size_t limit, int32_t within) except +
        int32_t num_patterns()


cdef vector[uint8_t] _bytes_vector(const unsigned char[::1] data):
    cdef vector[uint8_t] out
    cdef Py_ssize_t i
    out.resize(data.shape[0])
    for i in range(data.shape[0]):
        out[i] = data[i]
    return out


cdef class EMatcherHandle:
    """Equality saturation's native matcher (taso/ematch.h): a mirror of an
    e-graph, set whole by `set_graph`, and source patterns matched on it in
    the Python reference matcher's order (xflowrl/search/eqsat/native.py
    drives it). Not for two threads at once. Every bad argument is a
    ValueError (or a TypeError / OverflowError from the conversion)."""
    cdef EMatcher m

    def set_graph(self, int num_class_ids, int out_type, type, cls, usable not None,
                  out_index, child_start, children, class_order, class_start, class_nodes):
        """The e-graph to match (taso/ematch.h, EMatcher::set_graph): int
        sequences, `usable` a bytes-like of 0/1 per e-node."""
        cdef vector[uint8_t] u = _bytes_vector(usable)
        self.m.set_graph(num_class_ids, out_type, type, cls, u, out_index, child_start,
                         children, class_order, class_start, class_nodes)

    def set_fit(self, int signature, size_t first, bits not None):
        """Signature bits (a bytes-like of 0/1) for e-nodes from `first`."""
        self.m.set_fit(signature, first, _bytes_vector(bits))

    def add_pattern(self, list ops not None, list steps not None, int num_vars,
                    list var_order not None):
        """Registers a pattern; returns its id. `ops`: (type, signature,
        projected, [(op or -1 - variable, output index), ...]) per source
        op; `steps`: (kind 0 scan | 1 down | 2 up, op, via_op, slot, index,
        variable)."""
        cdef EPattern p
        cdef EPatternOp op
        cdef EStep st
        cdef int kind
        for t in ops:
            op.inputs.clear()
            op.type, op.signature = t[0], t[1]
            op.projected = 1 if t[2] else 0
            for a, b in t[3]:
                op.inputs.push_back(pair[int32_t, int32_t](a, b))
            p.ops.push_back(op)
        for t in steps:
            kind = t[0]
            if kind not in (0, 1, 2):
                raise ValueError(f"step kind {kind} is not 0, 1 or 2")
            st.kind = <EStepKind>kind
            st.op, st.via_op, st.slot, st.index, st.var = t[1], t[2], t[3], t[4], t[5]
            p.steps.push_back(st)
        p.num_vars = num_vars
        p.var_order = var_order
        return self.m.add_pattern(p)

    def set_within(self, int id, classes, int steps):
        """Names the classes `classes` and those up to `steps` reader steps
        above them, for `match`'s `within`."""
        self.m.set_within(id, classes, steps)

    def add_applied(self, int pattern, nodes):
        """Leaves the match (pattern, nodes) out of later `match` calls."""
        self.m.add_applied(pattern, nodes)

    def match(self, int pattern, size_t limit, int within=-1):
        """At most `limit` matches of `pattern`: (count, e-nodes, variable
        classes), the lists flat, match by match."""
        cdef EMatches got = self.m.match(pattern, limit, within)
        return got.count, got.nodes, got.vars

    def num_patterns(self):
        return self.m.num_patterns()
