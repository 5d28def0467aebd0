// Operators of the rewrite engine: types, parameters and shape inference.
//
// Operator type numbers follow TASO's OpType enum so that TASO's binary rule
// collection (graph_subst.pb) can be read without a translation table; the
// parameter keys follow TASO's PMParameter enum for the same reason.
//
// One header, four sources, one per idea: the operator table and the names
// handed to Python with it (src/ops_table.cc), parameters (OpParams,
// src/ops_params.cc), memo keys (OpConfig::key, src/ops_key.cc) and shapes:
// element counts, convolution windows, shape inference (src/ops_shapes.cc).
//
// Thread safety: the types here are plain values (any number of readers, or
// one writer) and the functions keep no state, so they may be called from
// any thread.
#ifndef TASO_OPS_H_
#define TASO_OPS_H_

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace taso {

using Shape = std::vector<int64_t>;

// Raised for any invalid input (bad shapes, bad parameters, bad actions).
// Derives from std::invalid_argument, which Cython turns into a Python
// ValueError carrying the message. A plain value (thread-safe to read).
class EngineError : public std::invalid_argument {
 public:
  explicit EngineError(const std::string& what) : std::invalid_argument(what) {}
};

enum OpType : int {
  OP_INPUT = 0,
  OP_WEIGHT = 1,
  OP_CONV2D = 3,
  OP_POOL_MAX = 6,
  OP_POOL_AVG = 7,
  OP_RELU = 8,
  OP_SIGMOID = 9,
  OP_TANH = 10,
  OP_BATCHNORM = 11,
  OP_CONCAT = 12,
  OP_SPLIT = 13,
  OP_RESHAPE = 14,
  OP_TRANSPOSE = 15,
  OP_EW_ADD = 16,
  OP_EW_MUL = 17,
  OP_MATMUL = 18,
  // x * s with s a one-element tensor [1] (TASO's scalar MUL).
  OP_SCALAR_MUL = 19,
  OP_ENLARGE = 20,
  OP_MERGE_GCONV = 21,
  OP_EW_SUB = 28,
  OP_EW_DIV = 29,
  // Conv+BN folding (weight side): w * scale / sqrt(var + eps).
  OP_FUSE_CONV_BN_ALPHA_VAR = 59,
  // Conv+BN folding (weight side): bias - scale * mean / sqrt(var + eps).
  OP_FUSE_CONV_BN_BIAS = 60,
  // x[N, C, ...] + b[C], broadcast over the channel axis 1.
  OP_BROADCAST_ADD = 61,
  // An operator the engine cannot rewrite but whose output shapes are known
  // (kept exactly, costed by its FLOPs/bytes, never matched by rules).
  OP_OPAQUE = 99,
};
// Op types are below this (Graph's per-type index is a vector).
constexpr int kNumOpTypeSlots = OP_OPAQUE + 1;

enum Activation : int { ACT_NONE = 0, ACT_SIGMOID = 1, ACT_RELU = 2, ACT_TANH = 3 };
enum Padding : int { PAD_SAME = 0, PAD_VALID = 1 };

// Keys of pattern constraints (values of TASO's PMParameter where one exists).
enum ParamKey : int {
  PM_OP_TYPE = 0,
  PM_NUM_INPUTS = 1,
  PM_NUM_OUTPUTS = 2,
  PM_GROUP = 3,
  PM_KERNEL_H = 4,
  PM_KERNEL_W = 5,
  PM_STRIDE_H = 6,
  PM_STRIDE_W = 7,
  PM_PAD = 8,
  PM_ACTI = 9,
  PM_NUMDIM = 10,
  PM_AXIS = 11,
  PM_PERM = 12,
  PM_MERGE_GCONV_COUNT = 14,
  PM_EPSILON = 17,
};

// What an operator computes, as the cost models see it (OpTypeInfo::kind):
// how op_work counts its FLOPs and which class of the fitted backend prices
// it. Every OpKind is handled by an exhaustive switch in those two places.
enum OpKind : int {
  KIND_LEAF = 0,      // input, weight: no computation
  KIND_CONV = 1,      // convolution
  KIND_MATMUL = 2,    // (batched) matrix product
  KIND_POOL = 3,      // windowed reduction
  KIND_ELTWISE = 4,   // each output element from the elements at its position
                      // (activations, binary arithmetic, bias add)
  KIND_BATCHNORM = 5,  // inference batch-norm
  KIND_CONCAT = 6,    // joins its inputs
  KIND_COPY = 7,      // moves data without arithmetic (split, transpose)
  KIND_VIEW = 8,      // reinterprets its input's data (reshape)
  KIND_WEIGHT_TRANSFORM = 9,  // rewrites weights (run offline)
  KIND_OPAQUE = 10,   // unknown: priced by its declared FLOPs
};

// ---- The operator table (src/ops_table.cc) ----

// Everything known of one operator type besides its shape inference and
// semantics. kOpTypes in ops_table.cc holds one entry per OpType and is the
// only list of operator facts: shape inference reads the arity from it, the
// cost backends the free flag, the kind, the FLOPs per element and the
// activation, rule validation the pattern flag, and the binding hands it to
// Python (xflowrl._engine.op_table(), read by xflowrl/ops.py). Its order is
// the order Python lists types in (the one-hot slots of
// xflowrl.embedding.features). ops_table.cc checks the columns against each
// other at compile time (free exactly for leaves, copies, views and weight
// transforms; weight_only exactly for weight transforms; ...).
//
// Adding an operator: a value in OpType, a row in kOpTypes (its kind decides
// its analytic work, op_work, and its fitted class, class_of), its shape
// inference (infer_unchecked in ops_shapes.cc) and its semantics
// (xflowrl/executor/reference.py). What each cost backend runs for it is
// the backend's to decide, in switches over OpType without a `default:`, so
// that -Wswitch (on through -Wall -Werror) stops the build until each one
// does: shape inference itself, the cudnn plan (plan_cudnn_op,
// src/cost/cudnn_plan.cc), the oneDNN primitive
// (OneDnnBackend::build_primitive, src/cost/onednn.cc; compiled by setup.py
// where oneDNN is found, not by scripts/engine_tests.sh) and onnxruntime's
// fusions and layouts in the fitted backend (revise and nchwc_role,
// src/cost/fitted.cc). docs/engine.md ("The operator table") lists the
// steps.
struct OpTypeInfo {
  int type;            // the OpType value (TASO's number)
  const char* name;    // as Python, rule files and the docs spell it
  int num_inputs;      // -1: variadic (concat: at least 2; opaque: any)
  int num_outputs;     // -1: set by the parameters (split's sizes, opaque's shapes)
  const char* params;  // the OpParams fields that apply, space-separated
  bool free;           // costs nothing at inference in every backend
  bool weight_only;    // transforms weights only (TASO precomputes it offline)
  bool pattern;        // may appear in a rule pattern
  int kind;            // an OpKind
  int flops_per_element;  // element-wise, batch-norm and concat kinds: FLOPs
                          // per output element (op_work); 0 for the others
  int activation;      // the Activation an activation function applies
                       // (relu: ACT_RELU); ACT_NONE for every other op
};

// The table, in its order (a copy; for the binding and tests).
std::vector<OpTypeInfo> op_type_table();
// The entry of `type`, or nullptr for an unknown type.
const OpTypeInfo* op_type_info(int type);

const char* op_type_name(int type);
// Parses a name as printed by op_type_name; returns -1 if unknown.
int op_type_from_name(const std::string& name);
bool is_valid_op_type(int type);
int num_inputs_expected(int type);  // -1 if variadic
// True for the types a rule pattern may use (not leaves, not opaque).
bool is_pattern_op_type(int type);
// True for the types that cost nothing in every backend (leaves, views and
// weight transforms); an op of another type is free only when weight-side.
bool is_free_op_type(int type);

// A value of the Activation, Padding or OpKind enum with the name Python
// and the docs use ("RELU", "SAME", "eltwise"), in value order.
struct EnumName {
  int value;
  const char* name;
};
std::vector<EnumName> activation_names();
std::vector<EnumName> padding_names();
std::vector<EnumName> op_kind_names();

// A ParamKey that rule files may name, with its name there ("stride_h").
// PM_OP_TYPE is left out: it is internal to TASO's generator.
struct ParamKeyInfo {
  int key;
  const char* name;
  bool is_float;  // epsilon: a float, which a rule can only copy ("src:K")
};
std::vector<ParamKeyInfo> rule_param_keys();

// ---- Parameters (src/ops_params.cc) ----

// Every parameter an operator can carry. Unused fields keep their defaults;
// `key()` serialises all of them, so two ops with different parameters never
// share a cost measurement.
struct OpParams {
  int stride_h = 1;
  int stride_w = 1;
  int padding = PAD_SAME;
  int activation = ACT_NONE;
  int axis = 0;
  int kernel_h = 0;       // pools only (convs take theirs from the weight)
  int kernel_w = 0;
  int count = 0;          // merge_gconv: how many groups are merged into one
  int groups = 0;         // merge_gconv: group count of the conv it serves
  float epsilon = 1e-5f;  // batchnorm and the folding ops
  std::vector<int> perm;           // transpose
  std::vector<int64_t> shape;      // reshape target (0 keeps, -1 infers)
  std::vector<int64_t> sizes;      // split sizes along `axis`
  std::string opaque_type;         // opaque: the original op type
  std::vector<Shape> opaque_shapes;  // opaque: declared output shapes
  int64_t opaque_flops = 0;        // opaque: estimated FLOPs

  // Reads a pattern parameter; throws EngineError for keys the op lacks.
  int get(int key, int op_type, const std::vector<Shape>& inputs) const;
  // get without the exception: false for keys the op lacks.
  bool try_get(int key, int op_type, const std::vector<Shape>& inputs, int* value) const;
  // Sets a pattern parameter (used when instantiating rule targets); throws
  // EngineError for a key that cannot be set or a bad value.
  void set(int key, int value);
  // set without the exception: false (the parameters unchanged) where set
  // throws.
  bool try_set(int key, int value);
  bool operator==(const OpParams& o) const;
};

// ---- Memo keys (src/ops_key.cc) ----

// The configuration of one operator instance as a cost backend sees it.
struct OpConfig {
  int type;
  OpParams params;
  std::vector<Shape> input_shapes;
  std::vector<Shape> output_shapes;
  // True when every input is a weight or derived only from weights: such ops
  // run once offline (weight preprocessing) and cost nothing per inference.
  bool weight_side = false;
  // A string that identifies the configuration: every parameter and every
  // input shape. Backends memoize measurements by it.
  std::string key() const;
};

// ---- Shapes (src/ops_shapes.cc) ----

// The most elements one tensor may hold: 2^48 (1 PiB of float32), so that
// byte counts, FLOP estimates and sums of them over a graph stay far inside
// int64. Builders and shape inference refuse larger tensors.
constexpr int64_t kMaxElements = int64_t{1} << 48;

// The element count of a shape; throws EngineError when a dimension is
// negative or the count exceeds kMaxElements (never overflows).
int64_t num_elements(const Shape& s);
std::string shape_str(const Shape& s);

// Infers the output shapes of an operator into *out. Where the inputs or
// parameters do not fit, returns false and, if `why` is not null, sets *why
// to the reason (the output is then unspecified). Throws nothing: this is
// the engine's one shape check, on the rewriter's hot path (a candidate
// target whose shapes fail is an ordinary rejection; the reason is not even
// formatted there) as under infer_shapes.
bool try_infer_shapes(int type, const OpParams& params, const std::vector<Shape>& inputs,
                      std::vector<Shape>* out, std::string* why = nullptr);

// try_infer_shapes, or an EngineError whose message names the operator, the
// reason and the input shapes.
std::vector<Shape> infer_shapes(int type, const OpParams& params,
                                const std::vector<Shape>& inputs);

// How a kernel slides over one spatial dimension: the output size and the
// padding before and after. SAME is TensorFlow's rule: out = ceil(size /
// stride), total padding max((out - 1) * stride + kernel - size, 0), the
// smaller half before. VALID: out = (size - kernel) / stride + 1, no padding.
// The one place the rule is written: shape inference, the cost backends, the
// numpy executor and ONNX import and export all use it (Python through
// xflowrl.ops.window). Throws EngineError for a stride below 1, an
// unknown padding, or a VALID kernel larger than the input.
struct Window {
  int64_t out, pad_before, pad_after;
};
Window conv_window(int64_t size, int64_t kernel, int stride, int padding);

// Convolution geometry: conv_window over height and width.
struct ConvGeometry {
  int64_t out_h, out_w;
  int64_t pad_top, pad_bottom, pad_left, pad_right;
};
ConvGeometry conv_geometry(int64_t h, int64_t w, int64_t kh, int64_t kw,
                           int stride_h, int stride_w, int padding);

}  // namespace taso

#endif  // TASO_OPS_H_
