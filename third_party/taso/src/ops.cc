// Operator names, parameters, memo keys and shape inference.
#include "taso/ops.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <iterator>
#include <sstream>

namespace taso {

namespace {

// The operator table (OpTypeInfo in ops.h). Order: as Python lists types.
constexpr const char* kConvLike = "stride_h stride_w padding activation";
constexpr const char* kPoolLike = "stride_h stride_w padding activation kernel_h kernel_w";
constexpr OpTypeInfo kOpTypes[] = {
    // type, name, inputs, outputs, params, free, weight_only, pattern,
    //   kind, FLOPs per element, activation
    {OP_INPUT, "input", 0, 1, "", true, false, false, KIND_LEAF, 0, ACT_NONE},
    {OP_WEIGHT, "weight", 0, 1, "", true, false, false, KIND_LEAF, 0, ACT_NONE},
    {OP_CONV2D, "conv2d", 2, 1, kConvLike, false, false, true, KIND_CONV, 0, ACT_NONE},
    {OP_POOL_MAX, "maxpool", 1, 1, kPoolLike, false, false, true, KIND_POOL, 0, ACT_NONE},
    {OP_POOL_AVG, "avgpool", 1, 1, kPoolLike, false, false, true, KIND_POOL, 0, ACT_NONE},
    {OP_RELU, "relu", 1, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_RELU},
    {OP_SIGMOID, "sigmoid", 1, 1, "", false, false, true, KIND_ELTWISE, 4, ACT_SIGMOID},
    {OP_TANH, "tanh", 1, 1, "", false, false, true, KIND_ELTWISE, 4, ACT_TANH},
    {OP_BATCHNORM, "batchnorm", 5, 1, "epsilon", false, false, true, KIND_BATCHNORM, 2,
     ACT_NONE},
    {OP_CONCAT, "concat", -1, 1, "axis", false, false, true, KIND_CONCAT, 1, ACT_NONE},
    {OP_SPLIT, "split", 1, -1, "axis sizes", true, false, true, KIND_COPY, 0, ACT_NONE},
    {OP_RESHAPE, "reshape", 1, 1, "shape", true, false, true, KIND_VIEW, 0, ACT_NONE},
    {OP_TRANSPOSE, "transpose", 1, 1, "perm", true, false, true, KIND_COPY, 0, ACT_NONE},
    {OP_EW_ADD, "add", 2, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_NONE},
    {OP_EW_MUL, "mul", 2, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_NONE},
    {OP_EW_SUB, "sub", 2, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_NONE},
    {OP_EW_DIV, "div", 2, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_NONE},
    {OP_MATMUL, "matmul", 2, 1, "activation", false, false, true, KIND_MATMUL, 0, ACT_NONE},
    {OP_SCALAR_MUL, "scalar_mul", 2, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_NONE},
    {OP_ENLARGE, "enlarge", 2, 1, "", true, true, true, KIND_WEIGHT_TRANSFORM, 0, ACT_NONE},
    {OP_MERGE_GCONV, "merge_gconv", 1, 1, "count groups", true, true, true,
     KIND_WEIGHT_TRANSFORM, 0, ACT_NONE},
    {OP_FUSE_CONV_BN_ALPHA_VAR, "fuse_conv_bn_alpha_var", 3, 1, "epsilon", true, true, true,
     KIND_WEIGHT_TRANSFORM, 0, ACT_NONE},
    {OP_FUSE_CONV_BN_BIAS, "fuse_conv_bn_bias", 4, 1, "epsilon", true, true, true,
     KIND_WEIGHT_TRANSFORM, 0, ACT_NONE},
    {OP_BROADCAST_ADD, "broadcast_add", 2, 1, "activation", false, false, true, KIND_ELTWISE,
     1, ACT_NONE},
    {OP_OPAQUE, "opaque", -1, -1, "opaque_type opaque_shapes opaque_flops", false, false,
     false, KIND_OPAQUE, 0, ACT_NONE},
};

// The columns checked against each other, at compile time: a row that
// contradicts itself does not build.
constexpr bool kind_is_free(int kind) {
  return kind == KIND_LEAF || kind == KIND_COPY || kind == KIND_VIEW ||
         kind == KIND_WEIGHT_TRANSFORM;
}
constexpr bool kind_counts_elements(int kind) {  // op_work: FLOPs per output element
  return kind == KIND_ELTWISE || kind == KIND_BATCHNORM || kind == KIND_CONCAT;
}
constexpr bool every_row(bool (*check)(const OpTypeInfo&)) {
  for (const OpTypeInfo& t : kOpTypes)
    if (!check(t)) return false;
  return true;
}
constexpr bool unique_types() {
  for (size_t i = 0; i < std::size(kOpTypes); ++i)
    for (size_t j = 0; j < i; ++j)
      if (kOpTypes[i].type == kOpTypes[j].type) return false;
  return true;
}
static_assert(unique_types(), "an operator type has two rows");
static_assert(every_row([](const OpTypeInfo& t) {
                return t.type >= 0 && t.type < kNumOpTypeSlots;
              }),
              "an operator type is outside [0, kNumOpTypeSlots)");
static_assert(every_row([](const OpTypeInfo& t) {
                return t.kind >= KIND_LEAF && t.kind <= KIND_OPAQUE;
              }),
              "an operator's kind is not an OpKind");
static_assert(every_row([](const OpTypeInfo& t) { return t.free == kind_is_free(t.kind); }),
              "free must hold exactly for leaves, copies, views and weight transforms");
static_assert(every_row([](const OpTypeInfo& t) {
                return t.weight_only == (t.kind == KIND_WEIGHT_TRANSFORM);
              }),
              "weight_only must hold exactly for weight transforms");
static_assert(every_row([](const OpTypeInfo& t) {
                return (t.num_inputs == 0) == (t.kind == KIND_LEAF);
              }),
              "leaves, and only leaves, take no inputs");
static_assert(every_row([](const OpTypeInfo& t) {
                return kind_counts_elements(t.kind) ? t.flops_per_element > 0
                                                    : t.flops_per_element == 0;
              }),
              "FLOPs per element: positive for element-wise, batch-norm and concat "
              "kinds, 0 for the others");
static_assert(every_row([](const OpTypeInfo& t) {
                return t.activation == ACT_NONE ||
                       (t.activation >= ACT_SIGMOID && t.activation <= ACT_TANH &&
                        t.kind == KIND_ELTWISE && t.num_inputs == 1);
              }),
              "only unary element-wise ops apply an activation");

constexpr EnumName kOpKinds[] = {
    {KIND_LEAF, "leaf"},       {KIND_CONV, "conv"},
    {KIND_MATMUL, "matmul"},   {KIND_POOL, "pool"},
    {KIND_ELTWISE, "eltwise"}, {KIND_BATCHNORM, "batchnorm"},
    {KIND_CONCAT, "concat"},   {KIND_COPY, "copy"},
    {KIND_VIEW, "view"},       {KIND_WEIGHT_TRANSFORM, "weight_transform"},
    {KIND_OPAQUE, "opaque"},
};
constexpr bool kinds_in_value_order() {
  for (size_t i = 0; i < std::size(kOpKinds); ++i)
    if (kOpKinds[i].value != static_cast<int>(i)) return false;
  return std::size(kOpKinds) == KIND_OPAQUE + 1;
}
static_assert(kinds_in_value_order(), "every OpKind has a name, in value order");

constexpr EnumName kActivations[] = {
    {ACT_NONE, "NONE"}, {ACT_SIGMOID, "SIGMOID"}, {ACT_RELU, "RELU"}, {ACT_TANH, "TANH"}};
constexpr EnumName kPaddings[] = {{PAD_SAME, "SAME"}, {PAD_VALID, "VALID"}};
constexpr ParamKeyInfo kRuleParamKeys[] = {
    {PM_NUM_INPUTS, "num_inputs", false}, {PM_NUM_OUTPUTS, "num_outputs", false},
    {PM_GROUP, "group", false},           {PM_KERNEL_H, "kernel_h", false},
    {PM_KERNEL_W, "kernel_w", false},     {PM_STRIDE_H, "stride_h", false},
    {PM_STRIDE_W, "stride_w", false},     {PM_PAD, "padding", false},
    {PM_ACTI, "activation", false},       {PM_NUMDIM, "numdim", false},
    {PM_AXIS, "axis", false},             {PM_PERM, "perm", false},
    {PM_MERGE_GCONV_COUNT, "count", false}, {PM_EPSILON, "epsilon", true},
};

// The element count of a shape, or -1 when a dimension is negative or the
// count exceeds kMaxElements (no exception: the hot path formats lazily).
int64_t num_elements_ok(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0 || (d > 0 && n > kMaxElements / d)) return -1;
    n *= d;
  }
  return n;
}

// One check of shape inference: where `cond` fails, the inference returns
// false with the reason in *why. A macro so that the reason is only built
// when the check fails and someone asked for it (`why` not null): shape
// inference runs for every candidate rewrite, on the environment's hot path,
// where a failure is an ordinary rejection and nobody reads the reason.
#define SHAPE_CHECK(cond, reason) \
  do {                            \
    if (!(cond)) {                \
      if (why) *why = (reason);   \
      return false;               \
    }                             \
  } while (0)

bool broadcast(const std::vector<Shape>& in, Shape* out, std::string* why) {
  const Shape& a = in[0];
  const Shape& b = in[1];
  size_t n = std::max(a.size(), b.size());
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SHAPE_CHECK(da == db || da == 1 || db == 1, "shapes cannot be broadcast together");
    (*out)[i] = da == 1 ? db : da;
  }
  return true;
}

bool pool_or_conv_out(const OpParams& p, const std::vector<Shape>& in, int64_t kh,
                      int64_t kw, int64_t out_c, Shape* out, std::string* why) {
  SHAPE_CHECK(p.stride_h >= 1 && p.stride_w >= 1, "strides must be positive");
  SHAPE_CHECK(p.padding == PAD_SAME || p.padding == PAD_VALID,
              "padding must be SAME (0) or VALID (1)");
  SHAPE_CHECK(p.activation >= ACT_NONE && p.activation <= ACT_TANH,
              "unknown activation " + std::to_string(p.activation));
  SHAPE_CHECK(kh >= 1 && kw >= 1, "kernel must be at least 1x1");
  const Shape& x = in[0];
  if (p.padding == PAD_VALID)
    SHAPE_CHECK(x[2] >= kh && x[3] >= kw,
                "VALID padding needs the input at least as large as the kernel");
  // Cannot throw: the stride, the padding and a VALID kernel were checked.
  ConvGeometry g = conv_geometry(x[2], x[3], kh, kw, p.stride_h, p.stride_w,
                                 p.padding);
  *out = {x[0], out_c, g.out_h, g.out_w};
  return true;
}

}  // namespace

std::vector<OpTypeInfo> op_type_table() {
  return {std::begin(kOpTypes), std::end(kOpTypes)};
}

const OpTypeInfo* op_type_info(int type) {
  for (const auto& t : kOpTypes)
    if (t.type == type) return &t;
  return nullptr;
}

std::vector<EnumName> activation_names() {
  return {std::begin(kActivations), std::end(kActivations)};
}

std::vector<EnumName> padding_names() {
  return {std::begin(kPaddings), std::end(kPaddings)};
}

std::vector<EnumName> op_kind_names() {
  return {std::begin(kOpKinds), std::end(kOpKinds)};
}

std::vector<ParamKeyInfo> rule_param_keys() {
  return {std::begin(kRuleParamKeys), std::end(kRuleParamKeys)};
}

const char* op_type_name(int type) {
  const OpTypeInfo* t = op_type_info(type);
  return t ? t->name : "unknown";
}

int op_type_from_name(const std::string& name) {
  for (const auto& t : kOpTypes)
    if (name == t.name) return t.type;
  return -1;
}

bool is_valid_op_type(int type) { return op_type_info(type) != nullptr; }

int num_inputs_expected(int type) {
  const OpTypeInfo* t = op_type_info(type);
  return t ? t->num_inputs : -1;
}

bool is_pattern_op_type(int type) {
  const OpTypeInfo* t = op_type_info(type);
  return t && t->pattern;
}

bool is_free_op_type(int type) {
  const OpTypeInfo* t = op_type_info(type);
  return t && t->free;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << "]";
  return os.str();
}

int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw EngineError("shape " + shape_str(s) + " has a negative dimension");
    if (d > 0 && n > kMaxElements / d)
      throw EngineError("shape " + shape_str(s) + " has more than 2^48 elements");
    n *= d;
  }
  return n;
}

Window conv_window(int64_t size, int64_t kernel, int stride, int padding) {
  if (stride < 1) throw EngineError("stride must be >= 1, got " + std::to_string(stride));
  if (padding == PAD_SAME) {
    int64_t out = (size + stride - 1) / stride;
    int64_t total = std::max<int64_t>((out - 1) * stride + kernel - size, 0);
    return {out, total / 2, total - total / 2};
  }
  if (padding != PAD_VALID)
    throw EngineError("padding must be SAME (0) or VALID (1), got " + std::to_string(padding));
  if (kernel > size)
    throw EngineError("VALID kernel of size " + std::to_string(kernel) +
                      " exceeds input size " + std::to_string(size));
  return {(size - kernel) / stride + 1, 0, 0};
}

ConvGeometry conv_geometry(int64_t h, int64_t w, int64_t kh, int64_t kw,
                           int stride_h, int stride_w, int padding) {
  Window rows = conv_window(h, kh, stride_h, padding);
  Window cols = conv_window(w, kw, stride_w, padding);
  return {rows.out, cols.out, rows.pad_before, rows.pad_after, cols.pad_before,
          cols.pad_after};
}

bool OpParams::try_get(int key, int op_type, const std::vector<Shape>& inputs,
                       int* value) const {
  switch (key) {
    case PM_OP_TYPE: *value = op_type; return true;
    case PM_NUM_INPUTS: *value = static_cast<int>(inputs.size()); return true;
    case PM_NUM_OUTPUTS:
      *value = op_type == OP_SPLIT ? static_cast<int>(sizes.size()) : 1;
      return true;
    case PM_STRIDE_H: *value = stride_h; return true;
    case PM_STRIDE_W: *value = stride_w; return true;
    case PM_PAD: *value = padding; return true;
    case PM_ACTI: *value = activation; return true;
    case PM_AXIS: *value = axis; return true;
    case PM_MERGE_GCONV_COUNT: *value = count; return true;
    case PM_PERM: {  // digits plus one, most significant first: [1, 0] -> 21
      int code = 0;
      for (int v : perm) code = code * 10 + v + 1;
      *value = code;
      return true;
    }
    case PM_NUMDIM:
      *value = inputs.empty() ? 0 : static_cast<int>(inputs[0].size());
      return true;
    case PM_KERNEL_H:
      *value = op_type == OP_CONV2D && inputs.size() == 2 && inputs[1].size() == 4
                   ? static_cast<int>(inputs[1][2])
                   : kernel_h;
      return true;
    case PM_KERNEL_W:
      *value = op_type == OP_CONV2D && inputs.size() == 2 && inputs[1].size() == 4
                   ? static_cast<int>(inputs[1][3])
                   : kernel_w;
      return true;
    case PM_GROUP:
      if (op_type == OP_MERGE_GCONV)
        *value = groups;
      else if (op_type == OP_CONV2D && inputs.size() == 2 && inputs[1][1] > 0)
        *value = static_cast<int>(inputs[0][1] / inputs[1][1]);
      else
        *value = 1;
      return true;
    default:
      return false;
  }
}

int OpParams::get(int key, int op_type, const std::vector<Shape>& inputs) const {
  int value;
  if (!try_get(key, op_type, inputs, &value))
    throw EngineError(std::string("parameter key ") + std::to_string(key) +
                      " is not readable on " + op_type_name(op_type));
  return value;
}

namespace {

// OpParams::set, reporting why not (when `why` is not null) instead of
// throwing.
bool set_param(OpParams* p, int key, int value, std::string* why) {
  switch (key) {
    case PM_STRIDE_H: p->stride_h = value; return true;
    case PM_STRIDE_W: p->stride_w = value; return true;
    case PM_PAD: p->padding = value; return true;
    case PM_ACTI: p->activation = value; return true;
    case PM_AXIS: p->axis = value; return true;
    case PM_KERNEL_H: p->kernel_h = value; return true;
    case PM_KERNEL_W: p->kernel_w = value; return true;
    case PM_MERGE_GCONV_COUNT: p->count = value; return true;
    case PM_GROUP: p->groups = value; return true;  // stored by merge_gconv only
    case PM_PERM: {
      if (value <= 0) {
        if (why) *why = "perm code must be positive, got " + std::to_string(value);
        return false;
      }
      std::vector<int> digits;
      for (int v = value; v > 0; v /= 10) {
        if (v % 10 == 0) {
          if (why) *why = "perm code " + std::to_string(value) + " has a zero digit";
          return false;
        }
        digits.insert(digits.begin(), v % 10 - 1);
      }
      p->perm = digits;
      return true;
    }
    // Derived from shapes, nothing to store.
    case PM_NUM_INPUTS: case PM_NUM_OUTPUTS: case PM_NUMDIM:
      return true;
    default:
      if (why) *why = "parameter key " + std::to_string(key) + " cannot be set on a target op";
      return false;
  }
}

}  // namespace

bool OpParams::try_set(int key, int value) { return set_param(this, key, value, nullptr); }

void OpParams::set(int key, int value) {
  std::string why;
  if (!set_param(this, key, value, &why)) throw EngineError(why);
}

bool OpParams::operator==(const OpParams& o) const {
  return stride_h == o.stride_h && stride_w == o.stride_w &&
         padding == o.padding && activation == o.activation &&
         axis == o.axis && kernel_h == o.kernel_h && kernel_w == o.kernel_w &&
         count == o.count && groups == o.groups && epsilon == o.epsilon && perm == o.perm &&
         shape == o.shape && sizes == o.sizes &&
         opaque_type == o.opaque_type && opaque_shapes == o.opaque_shapes &&
         opaque_flops == o.opaque_flops;
}

namespace {
// Appends the decimal form of `v`, as std::ostream's operator<< writes it.
void append_int(std::string* out, int64_t v) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, res.ptr);
}
}  // namespace

std::string OpConfig::key() const {
  // Built by appending (it is computed for every op priced, every step):
  // the same text an ostringstream wrote before (cost cache files and the
  // onednn reference table are keyed by it).
  std::string os;
  os.reserve(160);
  os += op_type_name(type);
  os += "|s";
  append_int(&os, params.stride_h);
  os += ',';
  append_int(&os, params.stride_w);
  os += "|p";
  append_int(&os, params.padding);
  os += "|a";
  append_int(&os, params.activation);
  os += "|x";
  append_int(&os, params.axis);
  os += "|k";
  append_int(&os, params.kernel_h);
  os += ',';
  append_int(&os, params.kernel_w);
  os += "|c";
  append_int(&os, params.count);
  os += ',';
  append_int(&os, params.groups);
  os += "|e";
  // Exact bits of epsilon: two values that print alike must not collide.
  uint32_t eps_bits;
  std::memcpy(&eps_bits, &params.epsilon, sizeof(eps_bits));
  append_int(&os, eps_bits);
  os += "|perm";
  for (int v : params.perm) {
    os += ',';
    append_int(&os, v);
  }
  os += "|shape";
  for (int64_t v : params.shape) {
    os += ',';
    append_int(&os, v);
  }
  os += "|sizes";
  for (int64_t v : params.sizes) {
    os += ',';
    append_int(&os, v);
  }
  if (type == OP_OPAQUE) {
    os += '|';
    os += params.opaque_type;
    os += "|f";
    append_int(&os, params.opaque_flops);
  }
  os += "|in";
  for (const auto& s : input_shapes) {  // shape_str
    os += '[';
    for (size_t i = 0; i < s.size(); ++i) {
      if (i) os += ',';
      append_int(&os, s[i]);
    }
    os += ']';
  }
  os += "|w";
  os += weight_side ? '1' : '0';
  return os;
}

namespace {

// Shape inference without the checks of the outputs (try_infer_shapes).
bool infer_unchecked(int type, const OpParams& p, const std::vector<Shape>& in,
                     std::vector<Shape>* out, std::string* why) {
  const OpTypeInfo* info = op_type_info(type);
  SHAPE_CHECK(info, "unknown operator type " + std::to_string(type));
  if (info->num_inputs >= 0)
    SHAPE_CHECK(static_cast<int>(in.size()) == info->num_inputs,
                "expects " + std::to_string(info->num_inputs) + " inputs, got " +
                    std::to_string(in.size()));
  for (const auto& s : in) {
    SHAPE_CHECK(!s.empty() || type == OP_OPAQUE, "scalar (rank-0) inputs are not supported");
    for (int64_t d : s) SHAPE_CHECK(d >= 1, "every dimension must be >= 1");
    SHAPE_CHECK(num_elements_ok(s) >= 0, "an input has more than 2^48 elements");
  }

  // Over the enum, without a default: -Wswitch refuses a type left out.
  switch (static_cast<OpType>(type)) {
    case OP_INPUT:
    case OP_WEIGHT:
      if (why) *why = "inputs and weights are created by the builder";
      return false;
    case OP_CONV2D: {
      SHAPE_CHECK(in[0].size() == 4 && in[1].size() == 4,
                  "needs a 4-D input [N,C,H,W] and a 4-D weight [O,C/g,kh,kw]");
      int64_t c = in[0][1], o = in[1][0], cg = in[1][1];
      SHAPE_CHECK(c % cg == 0, "input channels " + std::to_string(c) +
                                   " are not a multiple of the weight's " +
                                   std::to_string(cg));
      int64_t groups = c / cg;
      SHAPE_CHECK(o % groups == 0, "output channels " + std::to_string(o) +
                                       " are not divisible by the group count " +
                                       std::to_string(groups));
      out->resize(1);
      return pool_or_conv_out(p, in, in[1][2], in[1][3], o, &(*out)[0], why);
    }
    case OP_POOL_MAX:
    case OP_POOL_AVG:
      SHAPE_CHECK(in[0].size() == 4, "needs a 4-D input [N,C,H,W]");
      out->resize(1);
      return pool_or_conv_out(p, in, p.kernel_h, p.kernel_w, in[0][1], &(*out)[0], why);
    case OP_RELU:
    case OP_SIGMOID:
    case OP_TANH:
      out->assign(1, in[0]);
      return true;
    case OP_BATCHNORM: {
      SHAPE_CHECK(in[0].size() == 4, "needs a 4-D input [N,C,H,W]");
      for (int i = 1; i < 5; ++i)
        SHAPE_CHECK(in[i].size() == 1 && in[i][0] == in[0][1],
                    "scale, bias, mean and var must be [C]");
      SHAPE_CHECK(p.epsilon >= 0, "epsilon must be >= 0");
      out->assign(1, in[0]);
      return true;
    }
    case OP_CONCAT: {
      SHAPE_CHECK(in.size() >= 2, "needs at least 2 inputs");
      int rank = static_cast<int>(in[0].size());
      SHAPE_CHECK(p.axis >= 0 && p.axis < rank,
                  "axis " + std::to_string(p.axis) + " out of range");
      int64_t along = in[0][p.axis];
      for (size_t i = 1; i < in.size(); ++i) {
        SHAPE_CHECK(static_cast<int>(in[i].size()) == rank, "inputs must have equal rank");
        for (int d = 0; d < rank; ++d)
          if (d != p.axis) SHAPE_CHECK(in[i][d] == in[0][d], "inputs differ off the concat axis");
        along += in[i][p.axis];
      }
      out->assign(1, in[0]);
      (*out)[0][p.axis] = along;
      return true;
    }
    case OP_SPLIT: {
      int rank = static_cast<int>(in[0].size());
      SHAPE_CHECK(p.axis >= 0 && p.axis < rank,
                  "axis " + std::to_string(p.axis) + " out of range");
      SHAPE_CHECK(p.sizes.size() >= 2, "needs at least 2 sizes");
      int64_t total = 0;
      for (int64_t s : p.sizes) {
        SHAPE_CHECK(s >= 1, "split sizes must be >= 1");
        total += s;
      }
      SHAPE_CHECK(total == in[0][p.axis], "split sizes sum to " + std::to_string(total) +
                                              ", not " + std::to_string(in[0][p.axis]));
      out->assign(p.sizes.size(), in[0]);
      for (size_t k = 0; k < p.sizes.size(); ++k) (*out)[k][p.axis] = p.sizes[k];
      return true;
    }
    case OP_RESHAPE: {
      Shape shape = p.shape;
      SHAPE_CHECK(!shape.empty(), "target shape is empty");
      int infer = -1;
      int64_t known = 1;
      for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == 0) {
          SHAPE_CHECK(i < in[0].size(), "0 refers to a missing dim");
          shape[i] = in[0][i];
        }
        if (shape[i] == -1) {
          SHAPE_CHECK(infer < 0, "at most one -1 in the target shape");
          infer = static_cast<int>(i);
        } else {
          SHAPE_CHECK(shape[i] >= 1, "bad target dim " + std::to_string(shape[i]));
          SHAPE_CHECK(known <= kMaxElements / shape[i],
                      "target " + shape_str(p.shape) + " has more than 2^48 elements");
          known *= shape[i];
        }
      }
      const int64_t n = num_elements_ok(in[0]);  // >= 1: the inputs were checked
      if (infer >= 0) {
        SHAPE_CHECK(n % known == 0, "cannot infer -1 in target " + shape_str(p.shape));
        shape[infer] = n / known;
      }
      SHAPE_CHECK(num_elements_ok(shape) == n,
                  "target " + shape_str(p.shape) + " has a different size");
      out->assign(1, std::move(shape));
      return true;
    }
    case OP_TRANSPOSE: {
      size_t rank = in[0].size();
      SHAPE_CHECK(p.perm.size() == rank, "perm length must equal rank");
      std::vector<bool> seen(rank, false);
      Shape shape(rank);
      for (size_t i = 0; i < rank; ++i) {
        int a = p.perm[i];
        SHAPE_CHECK(a >= 0 && a < static_cast<int>(rank) && !seen[a],
                    "perm is not a permutation");
        seen[a] = true;
        shape[i] = in[0][a];
      }
      out->assign(1, std::move(shape));
      return true;
    }
    case OP_EW_ADD:
    case OP_EW_MUL:
    case OP_EW_SUB:
    case OP_EW_DIV:
      out->resize(1);
      return broadcast(in, &(*out)[0], why);
    case OP_SCALAR_MUL:
      SHAPE_CHECK(in[1].size() == 1 && in[1][0] == 1,
                  "the scale must be a one-element tensor [1]");
      out->assign(1, in[0]);
      return true;
    case OP_MATMUL: {
      const Shape& a = in[0];
      const Shape& b = in[1];
      SHAPE_CHECK(a.size() >= 2 && a.size() == b.size(), "operands must have equal rank >= 2");
      size_t r = a.size();
      for (size_t i = 0; i + 2 < r; ++i) SHAPE_CHECK(a[i] == b[i], "batch dimensions differ");
      SHAPE_CHECK(a[r - 1] == b[r - 2], "inner dimensions differ");
      SHAPE_CHECK(p.activation >= ACT_NONE && p.activation <= ACT_TANH, "unknown activation");
      out->assign(1, a);
      (*out)[0][r - 1] = b[r - 1];
      return true;
    }
    case OP_ENLARGE: {
      SHAPE_CHECK(in[0].size() == 4 && in[1].size() == 4, "needs two 4-D conv weights");
      int64_t dh = in[1][2] - in[0][2], dw = in[1][3] - in[0][3];
      SHAPE_CHECK(dh >= 0 && dw >= 0 && dh % 2 == 0 && dw % 2 == 0,
                  "the first kernel must fit centred in the second");
      out->assign(1, Shape{in[0][0], in[0][1], in[1][2], in[1][3]});
      return true;
    }
    case OP_MERGE_GCONV:
      SHAPE_CHECK(in[0].size() == 4, "needs a 4-D conv weight");
      SHAPE_CHECK(p.count >= 2, "count must be >= 2");
      SHAPE_CHECK(p.groups >= p.count && p.groups % p.count == 0 && in[0][0] % p.groups == 0,
                  "groups (" + std::to_string(p.groups) +
                      ") must be a multiple of count and divide the output channels");
      out->assign(1, Shape{in[0][0], in[0][1] * p.count, in[0][2], in[0][3]});
      return true;
    case OP_FUSE_CONV_BN_ALPHA_VAR:
      SHAPE_CHECK(in[0].size() >= 2 && in[1].size() == 1 && in[2].size() == 1 &&
                      in[1][0] == in[0][0] && in[2][0] == in[0][0],
                  "needs a weight [O,...] and scale, var of shape [O]");
      out->assign(1, in[0]);
      return true;
    case OP_FUSE_CONV_BN_BIAS:
      for (const auto& s : in)
        SHAPE_CHECK(s.size() == 1 && s[0] == in[0][0], "scale, bias, mean and var must all be [C]");
      out->assign(1, in[0]);
      return true;
    case OP_BROADCAST_ADD:
      SHAPE_CHECK(in[0].size() >= 2 && in[1].size() == 1 && in[1][0] == in[0][1],
                  "needs x [N,C,...] and a bias [C]");
      out->assign(1, in[0]);
      return true;
    case OP_OPAQUE:
      SHAPE_CHECK(!p.opaque_shapes.empty(),
                  "opaque op '" + p.opaque_type + "' declares no output shapes");
      *out = p.opaque_shapes;
      return true;
  }
  // Not reached: `type` has a row in the table (checked above), and so a case.
  if (why) *why = "has no shape inference";
  return false;
}

}  // namespace

bool try_infer_shapes(int type, const OpParams& p, const std::vector<Shape>& in,
                      std::vector<Shape>* out, std::string* why) {
  if (!infer_unchecked(type, p, in, out, why)) return false;
  // Outputs obey what inputs must: dimensions >= 1 and at most kMaxElements
  // elements (an opaque op's declared shapes, a reshape target, a concat).
  for (const Shape& s : *out) {
    for (int64_t d : s) SHAPE_CHECK(d >= 1, "an output dimension is < 1: " + shape_str(s));
    SHAPE_CHECK(num_elements_ok(s) >= 0,
                "output " + shape_str(s) + " has more than 2^48 elements");
  }
  return true;
}

std::vector<Shape> infer_shapes(int type, const OpParams& p,
                                const std::vector<Shape>& in) {
  if (!op_type_info(type)) throw EngineError("unknown operator type " + std::to_string(type));
  std::vector<Shape> out;
  std::string why;
  if (try_infer_shapes(type, p, in, &out, &why)) return out;
  std::ostringstream os;
  os << op_type_name(type) << ": " << why << " (input shapes:";
  for (const auto& s : in) os << " " << shape_str(s);
  os << ")";
  throw EngineError(os.str());
}

#undef SHAPE_CHECK

}  // namespace taso
