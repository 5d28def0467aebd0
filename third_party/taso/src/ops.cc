// Operator names, parameters, memo keys and shape inference.
#include "taso/ops.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <sstream>

namespace taso {

namespace {

// The operator table (OpTypeInfo in ops.h). Order: as Python lists types.
constexpr const char* kConvLike = "stride_h stride_w padding activation";
constexpr const char* kPoolLike = "stride_h stride_w padding activation kernel_h kernel_w";
constexpr OpTypeInfo kOpTypes[] = {
    // type, name, inputs, outputs, params, free, weight_only, pattern
    {OP_INPUT, "input", 0, 1, "", true, false, false},
    {OP_WEIGHT, "weight", 0, 1, "", true, false, false},
    {OP_CONV2D, "conv2d", 2, 1, kConvLike, false, false, true},
    {OP_POOL_MAX, "maxpool", 1, 1, kPoolLike, false, false, true},
    {OP_POOL_AVG, "avgpool", 1, 1, kPoolLike, false, false, true},
    {OP_RELU, "relu", 1, 1, "", false, false, true},
    {OP_SIGMOID, "sigmoid", 1, 1, "", false, false, true},
    {OP_TANH, "tanh", 1, 1, "", false, false, true},
    {OP_BATCHNORM, "batchnorm", 5, 1, "epsilon", false, false, true},
    {OP_CONCAT, "concat", -1, 1, "axis", false, false, true},
    {OP_SPLIT, "split", 1, -1, "axis sizes", true, false, true},
    {OP_RESHAPE, "reshape", 1, 1, "shape", true, false, true},
    {OP_TRANSPOSE, "transpose", 1, 1, "perm", true, false, true},
    {OP_EW_ADD, "add", 2, 1, "", false, false, true},
    {OP_EW_MUL, "mul", 2, 1, "", false, false, true},
    {OP_EW_SUB, "sub", 2, 1, "", false, false, true},
    {OP_EW_DIV, "div", 2, 1, "", false, false, true},
    {OP_MATMUL, "matmul", 2, 1, "activation", false, false, true},
    {OP_SCALAR_MUL, "scalar_mul", 2, 1, "", false, false, true},
    {OP_ENLARGE, "enlarge", 2, 1, "", true, true, true},
    {OP_MERGE_GCONV, "merge_gconv", 1, 1, "count groups", true, true, true},
    {OP_FUSE_CONV_BN_ALPHA_VAR, "fuse_conv_bn_alpha_var", 3, 1, "epsilon", true, true, true},
    {OP_FUSE_CONV_BN_BIAS, "fuse_conv_bn_bias", 4, 1, "epsilon", true, true, true},
    {OP_BROADCAST_ADD, "broadcast_add", 2, 1, "activation", false, false, true},
    {OP_OPAQUE, "opaque", -1, -1, "opaque_type opaque_shapes opaque_flops", false, false,
     false},
};

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

// Set while the rewriter probes candidate targets: a shape failure there is
// an ordinary rejection, so the message is not worth formatting.
thread_local bool quiet_shape_errors = false;

[[noreturn]] void fail(int type, const std::vector<Shape>& inputs,
                       const std::string& why) {
  if (quiet_shape_errors) throw EngineError("shape mismatch");
  std::ostringstream os;
  os << op_type_name(type) << ": " << why << " (input shapes:";
  for (const auto& s : inputs) os << " " << shape_str(s);
  os << ")";
  throw EngineError(os.str());
}

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

// A macro so that the message is only built when the check fails: shape
// inference runs for every candidate rewrite, on the environment's hot path.
#define require(cond, type, inputs, why) \
  do {                                   \
    if (!(cond)) fail(type, inputs, why); \
  } while (0)

Shape broadcast(int type, const std::vector<Shape>& in) {
  const Shape& a = in[0];
  const Shape& b = in[1];
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    require(da == db || da == 1 || db == 1, type, in,
            "shapes cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape pool_or_conv_out(int type, const OpParams& p,
                       const std::vector<Shape>& in, int64_t kh, int64_t kw,
                       int64_t out_c) {
  require(p.stride_h >= 1 && p.stride_w >= 1, type, in,
          "strides must be positive");
  require(p.padding == PAD_SAME || p.padding == PAD_VALID, type, in,
          "padding must be SAME (0) or VALID (1)");
  require(p.activation >= ACT_NONE && p.activation <= ACT_TANH, type, in,
          "unknown activation " + std::to_string(p.activation));
  require(kh >= 1 && kw >= 1, type, in, "kernel must be at least 1x1");
  const Shape& x = in[0];
  if (p.padding == PAD_VALID)
    require(x[2] >= kh && x[3] >= kw, type, in,
            "VALID padding needs the input at least as large as the kernel");
  ConvGeometry g = conv_geometry(x[2], x[3], kh, kw, p.stride_h, p.stride_w,
                                 p.padding);
  return {x[0], out_c, g.out_h, g.out_w};
}

}  // namespace

QuietShapeErrors::QuietShapeErrors() : previous_(quiet_shape_errors) {
  quiet_shape_errors = true;
}
QuietShapeErrors::~QuietShapeErrors() { quiet_shape_errors = previous_; }

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

int OpParams::get(int key, int op_type,
                  const std::vector<Shape>& inputs) const {
  switch (key) {
    case PM_OP_TYPE: return op_type;
    case PM_NUM_INPUTS: return static_cast<int>(inputs.size());
    case PM_NUM_OUTPUTS:
      return op_type == OP_SPLIT ? static_cast<int>(sizes.size()) : 1;
    case PM_STRIDE_H: return stride_h;
    case PM_STRIDE_W: return stride_w;
    case PM_PAD: return padding;
    case PM_ACTI: return activation;
    case PM_AXIS: return axis;
    case PM_MERGE_GCONV_COUNT: return count;
    case PM_PERM: {  // digits plus one, most significant first: [1, 0] -> 21
      int code = 0;
      for (int v : perm) code = code * 10 + v + 1;
      return code;
    }
    case PM_NUMDIM:
      return inputs.empty() ? 0 : static_cast<int>(inputs[0].size());
    case PM_KERNEL_H:
      if (op_type == OP_CONV2D && inputs.size() == 2 && inputs[1].size() == 4)
        return static_cast<int>(inputs[1][2]);
      return kernel_h;
    case PM_KERNEL_W:
      if (op_type == OP_CONV2D && inputs.size() == 2 && inputs[1].size() == 4)
        return static_cast<int>(inputs[1][3]);
      return kernel_w;
    case PM_GROUP:
      if (op_type == OP_MERGE_GCONV) return groups;
      if (op_type == OP_CONV2D && inputs.size() == 2 && inputs[1][1] > 0)
        return static_cast<int>(inputs[0][1] / inputs[1][1]);
      return 1;
    default:
      throw EngineError(std::string("parameter key ") + std::to_string(key) +
                        " is not readable on " + op_type_name(op_type));
  }
}

void OpParams::set(int key, int value) {
  switch (key) {
    case PM_STRIDE_H: stride_h = value; break;
    case PM_STRIDE_W: stride_w = value; break;
    case PM_PAD: padding = value; break;
    case PM_ACTI: activation = value; break;
    case PM_AXIS: axis = value; break;
    case PM_KERNEL_H: kernel_h = value; break;
    case PM_KERNEL_W: kernel_w = value; break;
    case PM_MERGE_GCONV_COUNT: count = value; break;
    case PM_GROUP: groups = value; break;  // stored by merge_gconv only
    case PM_PERM: {
      if (value <= 0) throw EngineError("perm code must be positive, got " + std::to_string(value));
      std::vector<int> digits;
      for (int v = value; v > 0; v /= 10) {
        if (v % 10 == 0) throw EngineError("perm code " + std::to_string(value) + " has a zero digit");
        digits.insert(digits.begin(), v % 10 - 1);
      }
      perm = digits;
      break;
    }
    // Derived from shapes, nothing to store.
    case PM_NUM_INPUTS: case PM_NUM_OUTPUTS: case PM_NUMDIM:
      break;
    default:
      throw EngineError("parameter key " + std::to_string(key) +
                        " cannot be set on a target op");
  }
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
std::vector<Shape> infer_unchecked(int type, const OpParams& p,
                                   const std::vector<Shape>& in);
}  // namespace

bool shapes_surely_fail(int type, const OpParams& p, const std::vector<Shape>& in) {
  // Each test below is the negation of a `require` of infer_unchecked
  // (guarded so that it indexes only what exists), so a true here means
  // infer_shapes throws.
  const OpTypeInfo* info = op_type_info(type);
  if (!info) return false;  // infer_shapes reports it
  if (info->num_inputs >= 0 && static_cast<int>(in.size()) != info->num_inputs) return true;
  switch (type) {
    case OP_MATMUL: {
      const Shape& a = in[0];
      const Shape& b = in[1];
      if (a.size() < 2 || a.size() != b.size()) return true;
      const size_t r = a.size();
      for (size_t i = 0; i + 2 < r; ++i)
        if (a[i] != b[i]) return true;
      return a[r - 1] != b[r - 2];
    }
    case OP_EW_ADD:
    case OP_EW_MUL:
    case OP_EW_SUB:
    case OP_EW_DIV: {
      const Shape& a = in[0];
      const Shape& b = in[1];
      const size_t n = std::max(a.size(), b.size());
      for (size_t i = 0; i < n; ++i) {
        const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        if (!(da == db || da == 1 || db == 1)) return true;
      }
      return false;
    }
    case OP_CONCAT: {
      if (in.size() < 2) return true;
      const int rank = static_cast<int>(in[0].size());
      if (p.axis < 0 || p.axis >= rank) return true;
      for (size_t i = 1; i < in.size(); ++i) {
        if (static_cast<int>(in[i].size()) != rank) return true;
        for (int d = 0; d < rank; ++d)
          if (d != p.axis && in[i][d] != in[0][d]) return true;
      }
      return false;
    }
    case OP_CONV2D: {
      if (in[0].size() != 4 || in[1].size() != 4) return true;
      const int64_t c = in[0][1], o = in[1][0], cg = in[1][1];
      if (cg < 1 || c % cg != 0) return cg >= 1;
      return o % (c / cg) != 0;
    }
    case OP_SPLIT: {
      const int rank = static_cast<int>(in[0].size());
      if (p.axis < 0 || p.axis >= rank || p.sizes.size() < 2) return true;
      int64_t total = 0;
      for (int64_t s : p.sizes) {
        if (s < 1) return true;
        total += s;
      }
      return total != in[0][p.axis];
    }
    default:
      return false;
  }
}

std::vector<Shape> infer_shapes(int type, const OpParams& p,
                                const std::vector<Shape>& in) {
  std::vector<Shape> out = infer_unchecked(type, p, in);
  // Outputs obey what inputs must: dimensions >= 1 and at most kMaxElements
  // elements (an opaque op's declared shapes, a reshape target, a concat).
  for (const Shape& s : out) {
    for (int64_t d : s) require(d >= 1, type, in, "an output dimension is < 1: " + shape_str(s));
    if (num_elements_ok(s) < 0)
      fail(type, in, "output " + shape_str(s) + " has more than 2^48 elements");
  }
  return out;
}

namespace {
std::vector<Shape> infer_unchecked(int type, const OpParams& p,
                                   const std::vector<Shape>& in) {
  const OpTypeInfo* info = op_type_info(type);
  if (!info) throw EngineError("unknown operator type " + std::to_string(type));
  if (info->num_inputs >= 0)
    require(static_cast<int>(in.size()) == info->num_inputs, type, in,
            "expects " + std::to_string(info->num_inputs) + " inputs, got " +
                std::to_string(in.size()));
  for (const auto& s : in) {
    require(!s.empty() || type == OP_OPAQUE, type, in,
            "scalar (rank-0) inputs are not supported");
    for (int64_t d : s) require(d >= 1, type, in, "every dimension must be >= 1");
    require(num_elements_ok(s) >= 0, type, in, "an input has more than 2^48 elements");
  }

  switch (type) {
    case OP_INPUT:
    case OP_WEIGHT:
      fail(type, in, "inputs and weights are created by the builder");
    case OP_CONV2D: {
      require(in[0].size() == 4 && in[1].size() == 4, type, in,
              "needs a 4-D input [N,C,H,W] and a 4-D weight [O,C/g,kh,kw]");
      int64_t c = in[0][1], o = in[1][0], cg = in[1][1];
      require(c % cg == 0, type, in,
              "input channels " + std::to_string(c) +
                  " are not a multiple of the weight's " + std::to_string(cg));
      int64_t groups = c / cg;
      require(o % groups == 0, type, in,
              "output channels " + std::to_string(o) +
                  " are not divisible by the group count " +
                  std::to_string(groups));
      return {pool_or_conv_out(type, p, in, in[1][2], in[1][3], o)};
    }
    case OP_POOL_MAX:
    case OP_POOL_AVG:
      require(in[0].size() == 4, type, in, "needs a 4-D input [N,C,H,W]");
      return {pool_or_conv_out(type, p, in, p.kernel_h, p.kernel_w, in[0][1])};
    case OP_RELU:
    case OP_SIGMOID:
    case OP_TANH:
      return {in[0]};
    case OP_BATCHNORM: {
      require(in[0].size() == 4, type, in, "needs a 4-D input [N,C,H,W]");
      for (int i = 1; i < 5; ++i)
        require(in[i].size() == 1 && in[i][0] == in[0][1], type, in,
                "scale, bias, mean and var must be [C]");
      require(p.epsilon >= 0, type, in, "epsilon must be >= 0");
      return {in[0]};
    }
    case OP_CONCAT: {
      require(in.size() >= 2, type, in, "needs at least 2 inputs");
      int rank = static_cast<int>(in[0].size());
      require(p.axis >= 0 && p.axis < rank, type, in,
              "axis " + std::to_string(p.axis) + " out of range");
      Shape out = in[0];
      for (size_t i = 1; i < in.size(); ++i) {
        require(static_cast<int>(in[i].size()) == rank, type, in,
                "inputs must have equal rank");
        for (int d = 0; d < rank; ++d)
          if (d != p.axis)
            require(in[i][d] == in[0][d], type, in,
                    "inputs differ off the concat axis");
        out[p.axis] += in[i][p.axis];
      }
      return {out};
    }
    case OP_SPLIT: {
      int rank = static_cast<int>(in[0].size());
      require(p.axis >= 0 && p.axis < rank, type, in,
              "axis " + std::to_string(p.axis) + " out of range");
      require(p.sizes.size() >= 2, type, in, "needs at least 2 sizes");
      int64_t total = 0;
      std::vector<Shape> outs;
      for (int64_t s : p.sizes) {
        require(s >= 1, type, in, "split sizes must be >= 1");
        total += s;
        Shape o = in[0];
        o[p.axis] = s;
        outs.push_back(o);
      }
      require(total == in[0][p.axis], type, in,
              "split sizes sum to " + std::to_string(total) + ", not " +
                  std::to_string(in[0][p.axis]));
      return outs;
    }
    case OP_RESHAPE: {
      Shape out = p.shape;
      require(!out.empty(), type, in, "target shape is empty");
      int infer = -1;
      int64_t known = 1;
      for (size_t i = 0; i < out.size(); ++i) {
        if (out[i] == 0) {
          require(i < in[0].size(), type, in, "0 refers to a missing dim");
          out[i] = in[0][i];
        }
        if (out[i] == -1) {
          require(infer < 0, type, in, "at most one -1 in the target shape");
          infer = static_cast<int>(i);
        } else {
          require(out[i] >= 1, type, in, "bad target dim " + std::to_string(out[i]));
          require(known <= kMaxElements / out[i], type, in,
                  "target " + shape_str(p.shape) + " has more than 2^48 elements");
          known *= out[i];
        }
      }
      int64_t n = num_elements(in[0]);
      if (infer >= 0) {
        require(n % known == 0, type, in,
                "cannot infer -1 in target " + shape_str(p.shape));
        out[infer] = n / known;
      }
      require(num_elements(out) == n, type, in,
              "target " + shape_str(p.shape) + " has a different size");
      return {out};
    }
    case OP_TRANSPOSE: {
      size_t rank = in[0].size();
      require(p.perm.size() == rank, type, in, "perm length must equal rank");
      std::vector<bool> seen(rank, false);
      Shape out(rank);
      for (size_t i = 0; i < rank; ++i) {
        int a = p.perm[i];
        require(a >= 0 && a < static_cast<int>(rank) && !seen[a], type, in,
                "perm is not a permutation");
        seen[a] = true;
        out[i] = in[0][a];
      }
      return {out};
    }
    case OP_EW_ADD:
    case OP_EW_MUL:
    case OP_EW_SUB:
    case OP_EW_DIV:
      return {broadcast(type, in)};
    case OP_SCALAR_MUL:
      require(in[1].size() == 1 && in[1][0] == 1, type, in,
              "the scale must be a one-element tensor [1]");
      return {in[0]};
    case OP_MATMUL: {
      const Shape& a = in[0];
      const Shape& b = in[1];
      require(a.size() >= 2 && a.size() == b.size(), type, in,
              "operands must have equal rank >= 2");
      size_t r = a.size();
      for (size_t i = 0; i + 2 < r; ++i)
        require(a[i] == b[i], type, in, "batch dimensions differ");
      require(a[r - 1] == b[r - 2], type, in, "inner dimensions differ");
      require(p.activation >= ACT_NONE && p.activation <= ACT_TANH, type, in,
              "unknown activation");
      Shape out = a;
      out[r - 1] = b[r - 1];
      return {out};
    }
    case OP_ENLARGE: {
      require(in[0].size() == 4 && in[1].size() == 4, type, in,
              "needs two 4-D conv weights");
      int64_t dh = in[1][2] - in[0][2], dw = in[1][3] - in[0][3];
      require(dh >= 0 && dw >= 0 && dh % 2 == 0 && dw % 2 == 0, type, in,
              "the first kernel must fit centred in the second");
      return {{in[0][0], in[0][1], in[1][2], in[1][3]}};
    }
    case OP_MERGE_GCONV:
      require(in[0].size() == 4, type, in, "needs a 4-D conv weight");
      require(p.count >= 2, type, in, "count must be >= 2");
      require(p.groups >= p.count && p.groups % p.count == 0 && in[0][0] % p.groups == 0,
              type, in, "groups (" + std::to_string(p.groups) +
                            ") must be a multiple of count and divide the output channels");
      return {{in[0][0], in[0][1] * p.count, in[0][2], in[0][3]}};
    case OP_FUSE_CONV_BN_ALPHA_VAR:
      require(in[0].size() >= 2 && in[1].size() == 1 && in[2].size() == 1 &&
                  in[1][0] == in[0][0] && in[2][0] == in[0][0],
              type, in, "needs a weight [O,...] and scale, var of shape [O]");
      return {in[0]};
    case OP_FUSE_CONV_BN_BIAS:
      for (const auto& s : in)
        require(s.size() == 1 && s[0] == in[0][0], type, in,
                "scale, bias, mean and var must all be [C]");
      return {in[0]};
    case OP_BROADCAST_ADD:
      require(in[0].size() >= 2 && in[1].size() == 1 && in[1][0] == in[0][1],
              type, in, "needs x [N,C,...] and a bias [C]");
      return {in[0]};
    case OP_OPAQUE:
      require(!p.opaque_shapes.empty(), type, in,
              "opaque op '" + p.opaque_type + "' declares no output shapes");
      return p.opaque_shapes;
  }
  fail(type, in, "has no shape inference");
}
}  // namespace

}  // namespace taso
