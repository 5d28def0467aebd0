// The learned GPU backend: per op class a linear model of kernels, FLOPs and
// bytes fitted to end-to-end CUDA-graph timings of whole graphs on one card
// in one precision (docs/engine.md, "The learned GPU backend"). Context
// free: the PyTorch runtime it models runs every op as its own kernel (a
// convolution with a fused ReLU is one cuDNN call), and its views (reshape,
// transpose, split) are free.
#include <algorithm>
#include <array>
#include <cmath>

#include "taso/cost.h"

namespace taso {

namespace {

const char* const kLearnedClasses[] = {"conv",      "matmul", "pool", "eltwise",
                                       "batchnorm", "concat", "copy"};
constexpr int kNumLearned = 7;
constexpr int kEltwiseClass = 3;

// The class of an op by its kind (the op table), -1 for kinds priced by the
// fallback (opaque ops) or never priced (free ones). Over the enum, without
// a default: a new kind must be given a class or none.
int learned_class(const OpConfig& op) {
  const OpTypeInfo* info = op_type_info(op.type);
  if (!info) return -1;
  switch (static_cast<OpKind>(info->kind)) {
    case KIND_CONV: return 0;
    case KIND_MATMUL: return 1;
    case KIND_POOL: return 2;
    case KIND_ELTWISE: return 3;
    case KIND_BATCHNORM: return 4;
    case KIND_CONCAT: return 5;
    case KIND_COPY: return 6;
    case KIND_LEAF:
    case KIND_VIEW:
    case KIND_WEIGHT_TRANSFORM:
    case KIND_OPAQUE:
      return -1;
  }
  return -1;
}

double num_outputs(const OpConfig& op) {
  double n = 0;
  for (const Shape& s : op.output_shapes) n += static_cast<double>(num_elements(s));
  return n;
}

class LearnedBackend : public CostBackend {
 public:
  LearnedBackend(std::string name, std::array<std::array<double, 3>, kNumLearned> coef,
                 std::string fallback)
      : name_(std::move(name)), coef_(coef), fallback_(make_analytic_backend(fallback)) {}

  std::string name() const override { return "learned/" + name_; }

 protected:
  bool computed() const override { return true; }
  double measure(const OpConfig& op) override {
    const int cls = learned_class(op);
    if (cls < 0) return fallback_->op_cost(op);
    const FittedWork w = fitted_work(op);
    double ms = linear(cls, w.flops, w.bytes);
    // An activation the runtime runs as a second kernel: after a matmul or
    // a bias add always, after a convolution unless it is a ReLU (one cuDNN
    // call, torch.cudnn_convolution_relu).
    const int act = op.params.activation;
    const bool second = (op.type == OP_MATMUL || op.type == OP_BROADCAST_ADD)
                            ? act != ACT_NONE
                            : op.type == OP_CONV2D && act != ACT_NONE && act != ACT_RELU;
    if (second) {
      const double out = num_outputs(op);
      ms += linear(kEltwiseClass, out, 8.0 * out);
    }
    return ms;
  }

 private:
  double linear(int cls, double flops, double bytes) const {
    const auto& c = coef_[cls];
    return c[0] + c[1] * flops * 1e-9 + c[2] * bytes * 1e-6;
  }

  std::string name_;
  std::array<std::array<double, 3>, kNumLearned> coef_;
  std::unique_ptr<CostBackend> fallback_;
};

}  // namespace

std::unique_ptr<CostBackend> make_learned_backend(
    const std::string& name, const std::vector<std::string>& classes,
    const std::vector<std::vector<double>>& coefficients, const std::string& fallback) {
  if (classes.size() != coefficients.size())
    throw EngineError("learned backend: " + std::to_string(classes.size()) + " classes but " +
                      std::to_string(coefficients.size()) + " coefficient rows");
  std::array<std::array<double, 3>, kNumLearned> coef{};
  std::array<bool, kNumLearned> seen{};
  for (size_t k = 0; k < classes.size(); ++k) {
    const auto* it = std::find(std::begin(kLearnedClasses), std::end(kLearnedClasses),
                               classes[k]);
    if (it == std::end(kLearnedClasses))
      throw EngineError("learned backend: unknown op class '" + classes[k] +
                        "'; classes: conv, matmul, pool, eltwise, batchnorm, concat, copy");
    if (coefficients[k].size() != 3)
      throw EngineError("learned backend: class '" + classes[k] +
                        "' needs 3 coefficients (ms per kernel, ms/GFLOP, ms/MB)");
    for (double c : coefficients[k])
      if (!(c >= 0) || !std::isfinite(c))
        throw EngineError("learned backend: class '" + classes[k] +
                          "' has a negative or non-finite coefficient");
    const int cls = static_cast<int>(it - std::begin(kLearnedClasses));
    coef[cls] = {coefficients[k][0], coefficients[k][1], coefficients[k][2]};
    seen[cls] = true;
  }
  for (int c = 0; c < kNumLearned; ++c)
    if (!seen[c])
      throw EngineError(std::string("learned backend: no coefficients for op class '") +
                        kLearnedClasses[c] + "'");
  return std::make_unique<LearnedBackend>(name, coef, fallback);
}

}  // namespace taso
