# cython: language_level=3
"""Declarations mirroring third_party/taso/include/taso/*.h one to one."""

from libc.stdint cimport int64_t, uint64_t
from libcpp cimport bool
from libcpp.memory cimport shared_ptr, unique_ptr
from libcpp.pair cimport pair
from libcpp.string cimport string
from libcpp.vector cimport vector


cdef extern from "taso/ops.h" namespace "taso":
    ctypedef vector[int64_t] Shape

    cdef cppclass OpParams:
        int stride_h, stride_w, padding, activation, axis
        int kernel_h, kernel_w, count, groups
        float epsilon
        vector[int] perm
        vector[int64_t] shape
        vector[int64_t] sizes
        string opaque_type
        vector[Shape] opaque_shapes
        int64_t opaque_flops

    cdef cppclass OpConfig:
        int type
        OpParams params
        vector[Shape] input_shapes
        vector[Shape] output_shapes
        bool weight_side
        string key()

    const char* op_type_name(int type)
    int op_type_from_name(const string& name)
    vector[Shape] infer_shapes(int type, const OpParams& params, const vector[Shape]& inputs) except +
    bool shapes_surely_fail(int type, const OpParams& params, const vector[Shape]& inputs) except +


cdef extern from "taso/cost.h" namespace "taso":
    cdef cppclass CostBackend:
        string name()
        double op_cost(const OpConfig& op) except +
        size_t num_measured()

    cdef cppclass FittedWork:
        string op_class
        double flops, bytes

    unique_ptr[CostBackend] make_analytic_backend(const string& profile) except +
    unique_ptr[CostBackend] make_fitted_backend(const string& name, const vector[string]& classes,
                                                const vector[vector[double]]& coefficients) except +
    FittedWork fitted_work(const OpConfig& op) except +
    unique_ptr[CostBackend] make_onednn_backend(const string& cache_path, int warmup, int repeats,
                                                 const string& reference_path) except +
    unique_ptr[CostBackend] make_cudnn_backend(const string& cache_path, int warmup, int repeats) except +
    bool onednn_available()
    bool cudnn_available()
    string cudnn_plan_description(const OpConfig& op) except +
    void cudnn_check_descriptors(const OpConfig& op) except +


cdef extern from "taso/graph.h" namespace "taso":
    cdef cppclass TensorRef:
        int64_t guid
        int index

    cdef cppclass Node:
        int64_t guid
        int type
        OpParams params
        vector[TensorRef] inputs
        vector[Shape] outputs
        string name

    cdef cppclass MemoryEstimate:
        int64_t weight_bytes, activation_bytes, peak_bytes

    cdef cppclass Graph:
        int size()
        const Node& node(int i)
        int index_of(int64_t guid)
        const Shape& shape(const TensorRef& t)
        const vector[TensorRef]& outputs()
        int num_ops()
        uint64_t hash()
        bool weight_side(int i)
        OpConfig op_config(int i)
        double cost(CostBackend* backend) except +
        vector[double] op_costs(CostBackend* backend) except +
        MemoryEstimate memory() except +

    cdef cppclass GraphBuilder:
        TensorRef input(const string& name, const Shape& shape) except +
        TensorRef weight(const string& name, const Shape& shape) except +
        int64_t add(int type, const OpParams& params, const vector[TensorRef]& inputs) except +
        const Shape& shape(const TensorRef& t) except +
        int num_outputs(int64_t guid) except +
        shared_ptr[const Graph] build(const vector[TensorRef]& outputs) except +


cdef extern from "taso/rules.h" namespace "taso":
    cdef cppclass PatternTensor:
        int op
        int index

    cdef cppclass PatternOp:
        int type
        vector[PatternTensor] inputs
        vector[pair[int, int]] params
        vector[pair[int, int]] copied

    cdef cppclass Rule:
        string name
        vector[PatternOp] src
        vector[PatternOp] dst
        vector[pair[PatternTensor, PatternTensor]] mapped_outputs
        void validate() except +

    cdef cppclass Candidate:
        uint64_t hash
        int num_ops

    cdef cppclass Locations:
        shared_ptr[const Graph] parent
        vector[vector[Candidate]] candidates
        vector[vector[vector[int64_t]]] matched
        vector[int] num_matches
        shared_ptr[const Graph] graph(int x, int l) except +
        vector[vector[double]] costs(CostBackend* backend) except +

    Locations enumerate_locations(shared_ptr[const Graph] graph, const vector[Rule]& rules,
                                  int max_locations, int max_ops, bool incremental) except +


cdef extern from "taso/search.h" namespace "taso":
    cdef cppclass SearchOptions:
        double alpha
        int budget
        int max_ops
        double time_limit_s
        int max_queued
        bool lazy_candidates

    cdef cppclass TracePoint:
        int expansions
        double seconds
        double best_cost

    cdef cppclass SearchResult:
        shared_ptr[const Graph] best
        double initial_cost, best_cost
        vector[int] applied
        vector[TracePoint] trace
        int expansions, enqueued
        double seconds
        int64_t peak_queued, peak_parents, dropped, seen

    SearchResult backtracking_search(shared_ptr[const Graph] graph, const vector[Rule]& rules,
                                     CostBackend* backend, const SearchOptions& opts) except +
