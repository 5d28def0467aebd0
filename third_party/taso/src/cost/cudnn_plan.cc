// Host-side planning of the cudnn cost backend (see cudnn_plan.h).
#include "cudnn_plan.h"

#include <climits>
#include <sstream>

#include "taso/cost.h"

namespace taso {

namespace {

[[noreturn]] void fail(const OpConfig& op, const std::string& why) {
  throw EngineError(std::string("cudnn backend: ") + op_type_name(op.type) + ": " + why +
                    " (op " + op.key() + ")");
}

int to_int(const OpConfig& op, int64_t v) {
  if (v < 0 || v > INT_MAX) fail(op, "dimension " + std::to_string(v) + " exceeds cuDNN's int range");
  return static_cast<int>(v);
}

int64_t product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

// A packed 4-D view of an element-wise tensor: leading 1s for rank < 4, the
// leading dims merged for rank > 4 (element-wise kernels ignore the split).
Dims view4(const OpConfig& op, const Shape& s) {
  Shape v(s);
  if (v.size() > 4) {
    const size_t extra = v.size() - 4;
    v.erase(v.begin() + 1, v.begin() + 1 + static_cast<std::ptrdiff_t>(extra));
    v[0] = product(s, 0, extra + 1);
  }
  while (v.size() < 4) v.insert(v.begin(), 1);
  Dims d;
  for (int64_t x : v) d.push_back(to_int(op, x));
  return d;
}

Dims dims_of(const OpConfig& op, const Shape& s) {
  Dims d;
  for (int64_t x : s) d.push_back(to_int(op, x));
  return d;
}

Shape widen(const Shape& s, size_t rank) {
  Shape out(rank - s.size(), 1);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

// Conv/pool window geometry; checks that cuDNN's symmetric-padding output
// formula reproduces the engine's output shape.
void plan_window(const OpConfig& op, const Shape& x, int64_t kh, int64_t kw, CudnnPlan* p) {
  const OpParams& prm = op.params;
  ConvGeometry g = conv_geometry(x[2], x[3], kh, kw, prm.stride_h, prm.stride_w, prm.padding);
  const int64_t h = x[2] + (g.pad_bottom - g.pad_top);
  const int64_t w = x[3] + (g.pad_right - g.pad_left);
  p->x = dims_of(op, {x[0], x[1], h, w});
  p->y = dims_of(op, op.output_shapes[0]);
  p->pad_h = to_int(op, g.pad_top);
  p->pad_w = to_int(op, g.pad_left);
  p->stride_h = prm.stride_h;
  p->stride_w = prm.stride_w;
  const int64_t out_h = (h + 2 * g.pad_top - kh) / prm.stride_h + 1;
  const int64_t out_w = (w + 2 * g.pad_left - kw) / prm.stride_w + 1;
  if (out_h != p->y[2] || out_w != p->y[3])
    fail(op, "padding plan gives a " + std::to_string(out_h) + "x" + std::to_string(out_w) +
                 " output, the engine expects " + shape_str(op.output_shapes[0]));
}

void plan_op_tensor(const OpConfig& op, CudnnPlan* p) {
  const Shape& out = op.output_shapes[0];
  const size_t rank = out.size();
  Shape a = widen(op.input_shapes[0], rank);
  Shape b;
  if (op.type == OP_BROADCAST_ADD) {
    b = Shape(rank, 1);
    b[1] = op.input_shapes[1][0];
  } else {
    b = widen(op.input_shapes[1], rank);
  }
  p->kind = CudnnKind::kOpTensor;
  p->multiply = op.type == OP_EW_MUL || op.type == OP_SCALAR_MUL || op.type == OP_EW_DIV;
  if (op.type == OP_EW_DIV)
    p->approximation = "division timed as cudnnOpTensor MUL (cuDNN has no divide)";
  const float sign = op.type == OP_EW_SUB ? -1.f : 1.f;
  if (a == out) {
    p->alpha2 = sign;  // a - b = 1*a + (-1)*b
  } else if (b == out) {
    std::swap(a, b);   // only B may broadcast: a - b = (-1)*b + 1*a
    p->alpha1 = sign;
  } else {
    a = out;
    p->alpha2 = sign;
    p->approximation = "both operands broadcast: timed with a full-size first operand";
  }
  // Collapse runs of dims where B is either full or broadcast; size-1 output
  // dims disappear. cudnnOpTensor takes 4-D or 5-D descriptors.
  Shape cc, bb;
  int last = -1;  // 1: B full in the current run, 0: B broadcast
  for (size_t i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;
    const int full = b[i] == out[i] ? 1 : 0;
    if (full == last) {
      cc.back() *= out[i];
      bb.back() *= b[i];
    } else {
      cc.push_back(out[i]);
      bb.push_back(b[i]);
      last = full;
    }
  }
  if (cc.size() > 5)
    fail(op, "the broadcast of " + shape_str(op.input_shapes[1]) +
                 " needs more than 5 dims in cudnnOpTensor");
  while (cc.size() < 4) {
    cc.insert(cc.begin(), 1);
    bb.insert(bb.begin(), 1);
  }
  p->c = dims_of(op, cc);
  p->a = p->c;
  p->b = dims_of(op, bb);
}

std::string dims_str(const Dims& d) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < d.size(); ++i) os << (i ? "," : "") << d[i];
  os << ']';
  return os.str();
}

const char* activation_name(int act) {
  switch (act) {
    case ACT_RELU: return "relu";
    case ACT_SIGMOID: return "sigmoid";
    case ACT_TANH: return "tanh";
    default: return "none";
  }
}

}  // namespace

size_t dims_elements(const Dims& d) {
  size_t n = 1;
  for (int x : d) n *= static_cast<size_t>(x);
  return n;
}

CudnnPlan plan_cudnn_op(const OpConfig& op) {
  if (is_free_op(op)) fail(op, "free ops are never measured");
  const auto& in = op.input_shapes;
  const auto& out = op.output_shapes;
  if (out.empty()) fail(op, "output shapes are missing");
  const OpParams& prm = op.params;
  CudnnPlan p;
  // Over the enum, without a default: -Wswitch refuses a type left out. A
  // type the backend runs returns its plan; the others fail below.
  switch (static_cast<OpType>(op.type)) {
    case OP_CONV2D: {
      p.kind = CudnnKind::kConv;
      plan_window(op, in[0], in[1][2], in[1][3], &p);
      p.w = dims_of(op, in[1]);
      p.groups = to_int(op, in[0][1] / in[1][1]);
      p.activation = prm.activation;
      p.fused_activation = prm.activation == ACT_RELU;
      return p;
    }
    case OP_POOL_MAX:
    case OP_POOL_AVG:
      p.kind = CudnnKind::kPool;
      plan_window(op, in[0], prm.kernel_h, prm.kernel_w, &p);
      p.window_h = prm.kernel_h;
      p.window_w = prm.kernel_w;
      p.max_pool = op.type == OP_POOL_MAX;
      p.activation = prm.activation;
      return p;
    case OP_MATMUL: {
      const Shape& a = in[0];
      const Shape& b = in[1];
      const size_t r = a.size();
      p.kind = CudnnKind::kGemm;
      p.batch = to_int(op, product(a, 0, r - 2));
      p.m = to_int(op, a[r - 2]);
      p.k = to_int(op, a[r - 1]);
      p.n = to_int(op, b[r - 1]);
      p.y = view4(op, out[0]);
      p.activation = prm.activation;
      return p;
    }
    case OP_RELU:
    case OP_SIGMOID:
    case OP_TANH:
      p.kind = CudnnKind::kActivation;
      p.x = p.y = view4(op, out[0]);
      p.activation = op_type_info(op.type)->activation;  // the op table's
      return p;
    case OP_EW_ADD:
    case OP_EW_MUL:
    case OP_SCALAR_MUL:
    case OP_EW_SUB:
    case OP_EW_DIV:
    case OP_BROADCAST_ADD:
      plan_op_tensor(op, &p);
      return p;
    case OP_BATCHNORM:
      p.kind = CudnnKind::kBatchNorm;
      p.x = p.y = dims_of(op, in[0]);
      p.vec = {1, p.x[1], 1, 1};
      p.epsilon = prm.epsilon;
      return p;
    case OP_CONCAT: {
      p.kind = CudnnKind::kConcat;
      const size_t axis = static_cast<size_t>(prm.axis);
      const int64_t inner = product(out[0], axis + 1, out[0].size());
      p.rows = static_cast<size_t>(product(out[0], 0, axis));
      for (const Shape& s : in)
        p.widths.push_back(static_cast<size_t>(s[axis] * inner) * sizeof(float));
      p.out_width = static_cast<size_t>(out[0][axis] * inner) * sizeof(float);
      return p;
    }
    case OP_OPAQUE:
      p.kind = CudnnKind::kAnalytic;
      return p;
    // Free in every backend (refused above): nothing to run.
    case OP_INPUT:
    case OP_WEIGHT:
    case OP_SPLIT:
    case OP_RESHAPE:
    case OP_TRANSPOSE:
    case OP_ENLARGE:
    case OP_MERGE_GCONV:
    case OP_FUSE_CONV_BN_ALPHA_VAR:
    case OP_FUSE_CONV_BN_BIAS:
      break;
  }
  fail(op, "no cuDNN/cuBLAS kernel for this op type");
}

std::string CudnnPlan::describe() const {
  std::ostringstream os;
  switch (kind) {
    case CudnnKind::kConv:
      os << "conv x=" << dims_str(x) << " w=" << dims_str(w) << " y=" << dims_str(y)
         << " pad=[" << pad_h << ',' << pad_w << "] stride=[" << stride_h << ',' << stride_w
         << "] groups=" << groups << " act=" << activation_name(activation)
         << " fused=" << (fused_activation ? 1 : 0);
      break;
    case CudnnKind::kPool:
      os << (max_pool ? "maxpool" : "avgpool") << " x=" << dims_str(x) << " y=" << dims_str(y)
         << " window=[" << window_h << ',' << window_w << "] pad=[" << pad_h << ',' << pad_w
         << "] stride=[" << stride_h << ',' << stride_w << "] act=" << activation_name(activation);
      break;
    case CudnnKind::kGemm:
      os << "gemm batch=" << batch << " m=" << m << " n=" << n << " k=" << k
         << " act=" << activation_name(activation);
      break;
    case CudnnKind::kActivation:
      os << "activation " << activation_name(activation) << " x=" << dims_str(x);
      break;
    case CudnnKind::kOpTensor:
      os << "optensor " << (multiply ? "mul" : "add") << " a=" << dims_str(a)
         << " b=" << dims_str(b) << " c=" << dims_str(c) << " alpha=[" << alpha1 << ','
         << alpha2 << ']';
      break;
    case CudnnKind::kBatchNorm:
      os << "batchnorm x=" << dims_str(x) << " vec=" << dims_str(vec) << " eps=" << epsilon;
      break;
    case CudnnKind::kConcat: {
      os << "concat rows=" << rows << " widths=[";
      for (size_t i = 0; i < widths.size(); ++i) os << (i ? "," : "") << widths[i];
      os << "] out_width=" << out_width;
      break;
    }
    case CudnnKind::kAnalytic:
      os << "analytic";
      break;
  }
  if (!approximation.empty()) os << " approx=\"" << approximation << '"';
  return os.str();
}

std::string cudnn_plan_description(const OpConfig& op) { return plan_cudnn_op(op).describe(); }

}  // namespace taso
