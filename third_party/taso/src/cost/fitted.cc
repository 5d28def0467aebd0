// The fitted CPU backend: per-op-class linear models over op_work(), fitted to
// onnxruntime timings on one machine, and onnxruntime's fusions in graph
// context (docs/engine.md, "The fitted backend").
#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>

#include "taso/cost.h"
#include "taso/graph.h"

namespace taso {

namespace {

enum FitClass { kConv, kMatmul, kPool, kEltwise, kBatchnorm, kConcat, kCopy, kNumClasses };
const char* const kClassNames[kNumClasses] = {"conv",      "matmul", "pool", "eltwise",
                                              "batchnorm", "concat", "copy"};

// The class that prices an op: by its kind (the op table), -1 for the kinds
// the backend does not fit (free ones never reach it; opaque ops get the
// analytic cpu roofline). Over the enum, without a default: a new kind must
// be given a class or none.
int class_of(const OpConfig& op) {
  const OpTypeInfo* info = op_type_info(op.type);
  if (!info) return -1;
  switch (static_cast<OpKind>(info->kind)) {
    case KIND_CONV: return kConv;
    case KIND_MATMUL: return kMatmul;
    case KIND_POOL: return kPool;
    case KIND_ELTWISE: return kEltwise;
    case KIND_BATCHNORM: return kBatchnorm;
    case KIND_CONCAT: return kConcat;
    case KIND_COPY: return kCopy;
    case KIND_LEAF:
    case KIND_VIEW:
    case KIND_WEIGHT_TRANSFORM:
    case KIND_OPAQUE:
      return -1;
  }
  return -1;  // not reached: info->kind is an OpKind (ops_table.cc checks the table)
}

double elements(const std::vector<Shape>& shapes) {
  double n = 0;
  for (const Shape& s : shapes) n += static_cast<double>(num_elements(s));
  return n;
}

// State of an op's output with respect to a conv it could be fused into.
enum Chain : unsigned char {
  kNone,    // not a conv's output
  kOpen,    // conv (+ folded batch-norm / bias): may still absorb BN, bias, add, activation
  kSummed,  // conv + residual add: may still absorb an activation
  kClosed,  // activation applied: absorbs nothing more
};

// How onnxruntime's NCHWc layout transformer treats an op type (add_reorders).
enum class Nchwc : unsigned char {
  kBlocked,  // runs in the blocked layout and reads blocked inputs (conv, pool)
  kFollows,  // runs blocked where every activation input is blocked
  kPlain,    // runs in the plain layout (a fused op takes its conv's layout)
};

// Over the enum, without a default: -Wswitch refuses a type left out.
Nchwc nchwc_role(int type) {
  switch (static_cast<OpType>(type)) {
    case OP_CONV2D:
    case OP_POOL_MAX:
    case OP_POOL_AVG:
      return Nchwc::kBlocked;
    case OP_BATCHNORM:
    case OP_RELU:
    case OP_SIGMOID:
    case OP_TANH:
    case OP_EW_ADD:  // of same-shaped tensors (add_reorders checks)
    case OP_CONCAT:  // along channels divisible by the block (add_reorders checks)
      return Nchwc::kFollows;
    case OP_INPUT:
    case OP_WEIGHT:
    case OP_SPLIT:
    case OP_RESHAPE:
    case OP_TRANSPOSE:
    case OP_EW_MUL:
    case OP_EW_SUB:
    case OP_EW_DIV:
    case OP_MATMUL:
    case OP_SCALAR_MUL:
    case OP_ENLARGE:
    case OP_MERGE_GCONV:
    case OP_FUSE_CONV_BN_ALPHA_VAR:
    case OP_FUSE_CONV_BN_BIAS:
    case OP_BROADCAST_ADD:
    case OP_OPAQUE:
      return Nchwc::kPlain;
  }
  return Nchwc::kPlain;  // not an OpType
}

// Graph read through GraphView's accessors, so that one template of the
// in-context revision serves both a built Graph and a candidate's view.
class GraphAccess {
 public:
  explicit GraphAccess(const Graph& g) : g_(g) {}
  int size() const { return g_.size(); }
  int type(int i) const { return g_.node(i).type; }
  const OpParams& params(int i) const { return g_.node(i).params; }
  bool weight_side(int i) const { return g_.weight_side(i); }
  int num_inputs(int i) const { return static_cast<int>(g_.node(i).inputs.size()); }
  GraphView::Ref input(int i, int k) const {
    const TensorRef& t = g_.node(i).inputs[k];
    return {g_.index_of(t.guid), t.index};
  }
  const Shape& output_shape(int i, int k) const { return g_.node(i).outputs[k]; }
  const std::vector<Shape>& output_shapes(int i) const { return g_.node(i).outputs; }
  const Shape& input_shape(int i, int k) const { return g_.shape(g_.node(i).inputs[k]); }
  int num_consumers(int i) const { return static_cast<int>(g_.consumers(i).size()); }
  int num_matmul_consumers(int i) const {
    int n = 0;
    for (const auto& r : g_.consumers(i)) n += g_.node(r.first).type == OP_MATMUL;
    return n;
  }
  bool is_output(int i) const { return g_.is_output(i); }
  int num_graph_outputs() const { return static_cast<int>(g_.outputs().size()); }
  GraphView::Ref graph_output(int k) const {
    const TensorRef& t = g_.outputs()[k];
    return {g_.index_of(t.guid), t.index};
  }

 private:
  const Graph& g_;
};

// Buffers of one in-context revision, reused across calls (the environment
// and the search revise one candidate after another).
struct ContextScratch {
  std::vector<Chain> chain;
  std::vector<int> root;
  std::vector<char> blocked, reordered_out;
  std::vector<int> reordered_in;
};

class FittedBackend : public CostBackend {
 public:
  FittedBackend(std::string name, std::array<std::array<double, 5>, kNumClasses> coef)
      : name_(std::move(name)), coef_(coef), fallback_(make_analytic_backend("cpu")) {}

  std::string name() const override { return "fitted/" + name_; }
  bool context_free() const override { return false; }

  // The revision's scratch is the backend's: one revision at a time.
  void in_context(const Graph& g, std::vector<double>* costs) override {
    std::lock_guard<std::mutex> lock(scratch_mu_);
    revise(GraphAccess(g), costs);
  }
  void in_context(const GraphView& g, std::vector<double>* costs) override {
    std::lock_guard<std::mutex> lock(scratch_mu_);
    revise(g, costs);
  }

 protected:
  double measure(const OpConfig& op) override {
    const int cls = class_of(op);
    if (cls < 0) return fallback_->op_cost(op);
    const FittedWork w = fitted_work(op);
    double ms = linear(cls, w.flops, w.bytes);
    if ((op.type == OP_MATMUL || op.type == OP_BROADCAST_ADD) &&
        op.params.activation != ACT_NONE) {
      // onnxruntime runs the activation as its own kernel after MatMul or Add.
      const double out = elements(op.output_shapes);
      ms += linear(kEltwise, out, 8.0 * out);
    }
    return ms;
  }

 private:
  double linear(int cls, double flops, double bytes) const {
    const auto& c = coef_[cls];
    const double mb = bytes * 1e-6;
    return c[0] + c[1] * flops * 1e-9 + c[2] * mb + c[3] * std::max(0.0, mb - c[4]);
  }

  // The revision itself, over a Graph (GraphAccess) or a GraphView. It
  // walks the ops in the graph's topological order and the reorder charges
  // accumulate with `+=` in that order, so the view must list a candidate's
  // ops exactly as Graph::Create orders them for the result to be the same
  // to the last bit (floating-point addition is not associative).
  template <class G>
  void revise(const G& g, std::vector<double>* costs) {
    const int n = g.size();
    ContextScratch& s = scratch_;
    s.chain.assign(n, kNone);
    s.root.resize(n);  // the conv a fused op belongs to; else itself
    std::vector<Chain>& chain = s.chain;
    for (int i = 0; i < n; ++i) {
      s.root[i] = i;
      const int t = g.type(i);
      if (t == OP_INPUT || t == OP_WEIGHT || g.weight_side(i)) continue;
      // What onnxruntime does with each op type in graph context. Over the
      // enum, without a default: -Wswitch refuses a type left out.
      switch (static_cast<OpType>(t)) {
        case OP_CONV2D:  // starts a chain that may absorb what follows
          chain[i] = g.params(i).activation == ACT_NONE ? kOpen : kClosed;
          break;
        case OP_TRANSPOSE:  // a copy, unless only matmuls read it
          if (!only_matmuls_read(g, i)) (*costs)[i] = copy_cost(g, i);
          break;
        case OP_SPLIT:  // a copy
          (*costs)[i] = copy_cost(g, i);
          break;
        // Fused into the conv that produces their input where they can be
        // (absorb has the rule of each).
        case OP_BATCHNORM:
        case OP_BROADCAST_ADD:
        case OP_RELU:
        case OP_SIGMOID:
        case OP_TANH:
        case OP_EW_ADD: {
          int producer = -1;
          chain[i] = absorb(g, i, chain, &producer);
          if (chain[i] != kNone) {
            (*costs)[i] = 0.0;
            s.root[i] = s.root[producer];
          }
          break;
        }
        // Run as priced alone: never fused into a producer, nothing copied.
        case OP_INPUT:  // (inputs and weights were skipped above)
        case OP_WEIGHT:
        case OP_POOL_MAX:
        case OP_POOL_AVG:
        case OP_CONCAT:
        case OP_RESHAPE:
        case OP_EW_MUL:
        case OP_EW_SUB:
        case OP_EW_DIV:
        case OP_MATMUL:
        case OP_SCALAR_MUL:
        case OP_ENLARGE:
        case OP_MERGE_GCONV:
        case OP_FUSE_CONV_BN_ALPHA_VAR:
        case OP_FUSE_CONV_BN_BIAS:
        case OP_OPAQUE:
          break;
      }
    }
    add_reorders(g, &s, costs);
  }

  // What fitted_work and linear price a split or transpose at: a copy of
  // its input and output bytes (the same arithmetic, from the shapes).
  template <class G>
  double copy_cost(const G& g, int i) const {
    double in = 0;
    for (int k = 0; k < g.num_inputs(i); ++k)
      in += static_cast<double>(num_elements(g.input_shape(i, k)));
    const double bytes = 4.0 * (in + elements(g.output_shapes(i)));
    return linear(kCopy, 0.0, bytes);
  }

  // Whether onnxruntime's NCHWc transformer keeps op i's output blocked:
  // a conv (chain) or pool output.
  template <class G>
  static bool nchwc_output(const G& g, int i, const std::vector<Chain>& chain) {
    const int t = g.type(i);
    return chain[i] != kNone || t == OP_POOL_MAX || t == OP_POOL_AVG;
  }

  static constexpr int64_t kBlock = 16;  // onnxruntime's NCHWc block (AVX-512)

  // onnxruntime's NCHWc layout transformer: convs and pools run blocked;
  // batch-norm, activations, same-shaped adds and channel concats of
  // channel counts divisible by the block run blocked when every
  // activation input is blocked. Where a blocked tensor meets an op that is
  // not, it adds a ReorderOutput (charged to the producer, once); where a
  // conv or pool reads an unblocked tensor other than a graph input, a
  // ReorderInput (charged to the conv, once per tensor). Each is priced as
  // a copy of the tensor. (A graph input is read directly: the first conv
  // of the zoo graphs has 3 channels.)
  template <class G>
  void add_reorders(const G& g, ContextScratch* s, std::vector<double>* costs) const {
    const int n = g.size();
    const std::vector<Chain>& chain = s->chain;
    const std::vector<int>& root = s->root;
    std::vector<char>& blocked = s->blocked;
    std::vector<char>& reordered_out = s->reordered_out;
    std::vector<int>& reordered_in = s->reordered_in;
    blocked.assign(n, 0);
    reordered_out.assign(n, 0);
    auto is_activation_input = [&](int p) {
      return g.type(p) != OP_WEIGHT && !g.weight_side(p);
    };
    auto tensor_copy = [&](int p, int k) {
      const double e = static_cast<double>(num_elements(g.output_shape(p, k)));
      return linear(kCopy, 0.0, 8.0 * e);
    };
    for (int i = 0; i < n; ++i) {
      const int t = g.type(i);
      if (t == OP_INPUT || t == OP_WEIGHT || g.weight_side(i)) continue;
      const Nchwc role = nchwc_role(t);
      if (role == Nchwc::kBlocked || chain[i] != kNone) {
        blocked[i] = g.output_shape(i, 0).size() == 4;
      } else if (role == Nchwc::kFollows) {
        bool all = true, any = false;
        for (int k = 0; k < g.num_inputs(i); ++k) {
          const int p = g.input(i, k).op;
          if (p < 0 || !is_activation_input(p)) continue;
          any = true;
          all = all && blocked[p];
          const Shape& in = g.input_shape(i, k);
          if (t == OP_EW_ADD && in != g.output_shape(i, 0)) all = false;
          if (t == OP_CONCAT && (g.params(i).axis != 1 || in[1] % kBlock != 0)) all = false;
        }
        blocked[i] = any && all;
      }
      const bool needs_blocked = role == Nchwc::kBlocked;
      reordered_in.clear();
      for (int k = 0; k < g.num_inputs(i); ++k) {
        const auto in = g.input(i, k);
        const int p = in.op;
        if (p < 0 || !is_activation_input(p)) continue;
        if (blocked[p] && !blocked[i] && !reordered_out[p]) {
          reordered_out[p] = 1;
          (*costs)[root[p]] += tensor_copy(p, in.index);
        }
        if (needs_blocked && blocked[i] && !blocked[p] && g.type(p) != OP_INPUT &&
            std::find(reordered_in.begin(), reordered_in.end(), p) == reordered_in.end()) {
          reordered_in.push_back(p);
          (*costs)[i] += tensor_copy(p, in.index);
        }
      }
    }
    for (int k = 0; k < g.num_graph_outputs(); ++k) {
      const auto out = g.graph_output(k);
      const int p = out.op;
      if (p >= 0 && blocked[p] && !reordered_out[p]) {
        reordered_out[p] = 1;
        (*costs)[root[p]] += tensor_copy(p, out.index);
      }
    }
  }

  template <class G>
  static bool only_matmuls_read(const G& g, int i) {
    const int readers = g.num_consumers(i);
    if (readers == 0 || g.is_output(i)) return false;
    return g.num_matmul_consumers(i) == readers;
  }

  // The chain state of op `i` if onnxruntime fuses it into the conv that
  // produces its input (kNone otherwise). revise calls it only for the types
  // it lists as fusable, each of which has its rule here. The producer's
  // output must have no other reader and not be a graph output
  // (ConvBNFusion, ConvAddFusion, ConvActivationFusion and the NCHWc conv's
  // Sum fusion all require that).
  template <class G>
  static Chain absorb(const G& g, int i, const std::vector<Chain>& chain, int* producer) {
    auto fusable_producer = [&](int slot) -> int {
      const int p = g.input(i, slot).op;
      if (p < 0 || chain[p] == kNone || chain[p] == kClosed) return -1;
      if (g.is_output(p) || g.num_consumers(p) != 1) return -1;
      *producer = p;
      return p;
    };
    if (g.num_inputs(i) == 0) return kNone;
    switch (g.type(i)) {
      case OP_BATCHNORM: {
        const int p = fusable_producer(0);
        return p >= 0 && chain[p] == kOpen ? kOpen : kNone;
      }
      case OP_BROADCAST_ADD: {
        const int p = fusable_producer(0);
        if (p < 0 || chain[p] != kOpen) return kNone;
        return g.params(i).activation == ACT_NONE ? kOpen : kClosed;
      }
      case OP_RELU: case OP_SIGMOID: case OP_TANH:
        return fusable_producer(0) >= 0 ? kClosed : kNone;
      case OP_EW_ADD: {
        // A residual add of two same-shaped tensors (no broadcast) whose
        // other operand onnxruntime also holds in its NCHWc layout (a conv's
        // or a pool's output); the NCHWc conv then adds it as its "Sum".
        if (g.num_inputs(i) != 2) return kNone;
        const Shape& out = g.output_shape(i, 0);
        if (g.input_shape(i, 0) != out || g.input_shape(i, 1) != out) return kNone;
        for (int slot = 0; slot < 2; ++slot) {
          const int p = fusable_producer(slot);
          if (p < 0 || chain[p] != kOpen) continue;
          const int other = g.input(i, 1 - slot).op;
          if (other >= 0 && other != p && nchwc_output(g, other, chain)) return kSummed;
        }
        return kNone;
      }
    }
    return kNone;  // not a fusable type (revise does not ask)
  }

  std::string name_;
  std::array<std::array<double, 5>, kNumClasses> coef_;
  std::unique_ptr<CostBackend> fallback_;
  ContextScratch scratch_;  // guarded by scratch_mu_
  std::mutex scratch_mu_;
};

}  // namespace

FittedWork fitted_work(const OpConfig& op) {
  FittedWork w;
  const int cls = class_of(op);
  if (cls < 0 || (op.weight_side && cls != kCopy)) return w;
  w.op_class = kClassNames[cls];
  if (cls == kCopy) {
    w.bytes = 4.0 * (elements(op.input_shapes) + elements(op.output_shapes));
    return w;
  }
  OpConfig main = op;
  if (op.type == OP_MATMUL || op.type == OP_BROADCAST_ADD) main.params.activation = ACT_NONE;
  const OpWork work = op_work(main);
  w.flops = work.flops;
  w.bytes = work.bytes;
  return w;
}

std::unique_ptr<CostBackend> make_fitted_backend(
    const std::string& name, const std::vector<std::string>& classes,
    const std::vector<std::vector<double>>& coefficients) {
  if (classes.size() != coefficients.size())
    throw EngineError("fitted backend: " + std::to_string(classes.size()) + " classes but " +
                      std::to_string(coefficients.size()) + " coefficient rows");
  std::array<std::array<double, 5>, kNumClasses> coef;
  std::array<bool, kNumClasses> seen{};
  for (size_t k = 0; k < classes.size(); ++k) {
    const auto* it = std::find(std::begin(kClassNames), std::end(kClassNames), classes[k]);
    if (it == std::end(kClassNames))
      throw EngineError("fitted backend: unknown op class '" + classes[k] +
                        "'; classes: conv, matmul, pool, eltwise, batchnorm, concat, copy");
    if (coefficients[k].size() != 3 && coefficients[k].size() != 5)
      throw EngineError("fitted backend: class '" + classes[k] +
                        "' needs 3 or 5 coefficients (ms, ms/GFLOP, ms/MB[, ms/MB above, "
                        "threshold MB])");
    for (double c : coefficients[k])
      if (!(c >= 0) || !std::isfinite(c))
        throw EngineError("fitted backend: class '" + classes[k] +
                          "' has a negative or non-finite coefficient");
    const int cls = static_cast<int>(it - std::begin(kClassNames));
    const auto& c = coefficients[k];
    coef[cls] = {c[0], c[1], c[2], c.size() == 5 ? c[3] : 0.0, c.size() == 5 ? c[4] : 0.0};
    seen[cls] = true;
  }
  for (int c = 0; c < kNumClasses; ++c)
    if (!seen[c])
      throw EngineError(std::string("fitted backend: no coefficients for op class '") +
                        kClassNames[c] + "'");
  return std::make_unique<FittedBackend>(name, coef);
}

}  // namespace taso
