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

    enum OpType:
        OP_INPUT
        OP_WEIGHT
        OP_CONV2D
        OP_POOL_MAX
        OP_POOL_AVG
        OP_RELU
        OP_SIGMOID
        OP_TANH
        OP_BATCHNORM
        OP_CONCAT
        OP_SPLIT
        OP_RESHAPE
        OP_TRANSPOSE
        OP_EW_ADD
        OP_EW_MUL
        OP_MATMUL
        OP_SCALAR_MUL
        OP_ENLARGE
        OP_MERGE_GCONV
        OP_EW_SUB
        OP_EW_DIV
        OP_FUSE_CONV_BN_ALPHA_VAR
        OP_FUSE_CONV_BN_BIAS
        OP_BROADCAST_ADD
        OP_OPAQUE

    enum OpKind:
        KIND_LEAF
        KIND_CONV
        KIND_MATMUL
        KIND_POOL
        KIND_ELTWISE
        KIND_BATCHNORM
        KIND_CONCAT
        KIND_COPY
        KIND_VIEW
        KIND_WEIGHT_TRANSFORM
        KIND_OPAQUE

    enum Activation:
        ACT_NONE
        ACT_SIGMOID
        ACT_RELU
        ACT_TANH

    enum Padding:
        PAD_SAME
        PAD_VALID

    enum ParamKey:
        PM_OP_TYPE
        PM_NUM_INPUTS
        PM_NUM_OUTPUTS
        PM_GROUP
        PM_KERNEL_H
        PM_KERNEL_W
        PM_STRIDE_H
        PM_STRIDE_W
        PM_PAD
        PM_ACTI
        PM_NUMDIM
        PM_AXIS
        PM_PERM
        PM_MERGE_GCONV_COUNT
        PM_EPSILON

    const int64_t kMaxElements

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

    cdef cppclass OpTypeInfo:
        int type
        const char* name
        int num_inputs, num_outputs
        const char* params
        bool free, weight_only, pattern
        int kind, flops_per_element, activation

    cdef cppclass EnumName:
        int value
        const char* name

    cdef cppclass ParamKeyInfo:
        int key
        const char* name
        bool is_float

    vector[OpTypeInfo] op_type_table()
    const OpTypeInfo* op_type_info(int type)
    const char* op_type_name(int type)
    int op_type_from_name(const string& name)
    bool is_valid_op_type(int type)
    int num_inputs_expected(int type)
    bool is_pattern_op_type(int type)
    bool is_free_op_type(int type)
    vector[EnumName] activation_names()
    vector[EnumName] padding_names()
    vector[EnumName] op_kind_names()
    vector[ParamKeyInfo] rule_param_keys()
    string shape_str(const Shape& s)
    vector[Shape] infer_shapes(int type, const OpParams& params, const vector[Shape]& inputs) except +
    bool try_infer_shapes(int type, const OpParams& params, const vector[Shape]& inputs,
                          vector[Shape]* out, string* why) except +

    cdef cppclass Window:
        int64_t out, pad_before, pad_after

    cdef cppclass ConvGeometry:
        int64_t out_h, out_w
        int64_t pad_top, pad_bottom, pad_left, pad_right

    Window conv_window(int64_t size, int64_t kernel, int stride, int padding) except +
    ConvGeometry conv_geometry(int64_t h, int64_t w, int64_t kh, int64_t kw,
                               int stride_h, int stride_w, int padding) except +
    int64_t num_elements(const Shape& s) except +


cdef extern from "taso/cost.h" namespace "taso":
    cdef cppclass OpWork:
        double flops, bytes
        int kernels

    OpWork op_work(const OpConfig& op) except +
    bool is_free_op(const OpConfig& op)

    cdef cppclass CostBackend:
        string name()
        double op_cost(const OpConfig& op) except + nogil
        size_t num_measured()

    cdef cppclass FittedWork:
        string op_class
        double flops, bytes

    unique_ptr[CostBackend] make_analytic_backend(const string& profile) except +
    unique_ptr[CostBackend] make_fitted_backend(const string& name, const vector[string]& classes,
                                                const vector[vector[double]]& coefficients) except +
    FittedWork fitted_work(const OpConfig& op) except +
    unique_ptr[CostBackend] make_learned_backend(const string& name, const vector[string]& classes,
                                                 const vector[vector[double]]& coefficients,
                                                 const string& fallback) except +
    unique_ptr[CostBackend] make_onednn_backend(const string& cache_path, int warmup, int repeats,
                                                 const string& reference_path) except +
    unique_ptr[CostBackend] make_cudnn_backend(const string& cache_path, int warmup, int repeats,
                                               bool graph_timing) except +
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
        double cost(CostBackend* backend) except + nogil
        vector[double] op_costs(CostBackend* backend) except + nogil
        MemoryEstimate memory() except +

    cdef cppclass GraphBuilder:
        TensorRef input(const string& name, const Shape& shape) except +
        TensorRef weight(const string& name, const Shape& shape) except +
        int64_t add(int type, const OpParams& params, const vector[TensorRef]& inputs) except +
        const Shape& shape(const TensorRef& t) except +
        int num_outputs(int64_t guid) except +
        shared_ptr[const Graph] build(const vector[TensorRef]& outputs) except +

    shared_ptr[const Graph] merge_identical_ops(const shared_ptr[const Graph]& graph) except + nogil


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
        void index()

    cdef cppclass Candidate:
        int num_ops

    cdef cppclass Locations:
        shared_ptr[const Graph] parent
        vector[vector[Candidate]] candidates
        vector[vector[vector[int64_t]]] matched
        vector[int] num_matches
        shared_ptr[const Graph] graph(int x, int l) except + nogil
        vector[vector[double]] costs(CostBackend* backend) except + nogil
        vector[vector[uint64_t]] hashes() except + nogil
        vector[uint64_t] hashes_of(int x) except + nogil
        int num_materialized() nogil

    Locations enumerate_locations(shared_ptr[const Graph] graph, const vector[Rule]& rules,
                                  int max_locations, int max_ops, bool incremental,
                                  int num_rules) except + nogil

    cdef cppclass EverywhereResult:
        shared_ptr[const Graph] graph
        vector[uint64_t] hashes
        int enumerations

    EverywhereResult apply_everywhere(shared_ptr[const Graph] graph, const Rule& rule, int times,
                                      int max_locations, int max_ops,
                                      CostBackend* backend) except + nogil


cdef extern from "taso/search.h" namespace "taso":
    cdef cppclass SearchOptions:
        double alpha
        int budget
        int max_ops
        double time_limit_s
        int max_queued
        bool lazy_candidates
        int max_locations

    cdef cppclass TracePoint:
        int expansions
        double seconds
        double best_cost

    cdef cppclass SearchResult:
        shared_ptr[const Graph] best
        double initial_cost, best_cost
        vector[pair[int, int]] applied
        vector[TracePoint] trace
        int expansions, enqueued
        double seconds
        int64_t peak_queued, peak_parents, dropped, seen

    SearchResult backtracking_search(shared_ptr[const Graph] graph, const vector[Rule]& rules,
                                     CostBackend* backend, const SearchOptions& opts) except + nogil
