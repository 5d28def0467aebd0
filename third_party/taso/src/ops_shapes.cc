// Shapes: element counts, convolution windows and shape inference.
#include "taso/ops.h"

#include <algorithm>
#include <sstream>

namespace taso {

namespace {

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
  out->assign({x[0], out_c, g.out_h, g.out_w});  // in place: no temporary vector
  return true;
}

}  // namespace

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
