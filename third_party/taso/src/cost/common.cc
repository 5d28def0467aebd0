// Work counts, free-op conventions and the memoizing base of every backend.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "taso/cost.h"

namespace taso {

namespace {

double elements(const std::vector<Shape>& shapes) {
  double n = 0;
  for (const Shape& s : shapes) n += static_cast<double>(num_elements(s));
  return n;
}

}  // namespace

void GraphView::clear() {
  ops_.clear();
  inputs_.clear();
  outputs_.clear();
}

void GraphView::assign_prefix(const GraphView& from, int count, int valid) {
  const auto input_end = [&from](int k) {
    return k < from.size() ? static_cast<size_t>(from.ops_[k].first_input)
                           : from.inputs_.size();
  };
  valid = std::min({valid, count, size()});
  ops_.resize(valid);
  inputs_.resize(input_end(valid));
  ops_.insert(ops_.end(), from.ops_.begin() + valid, from.ops_.begin() + count);
  inputs_.insert(inputs_.end(), from.inputs_.begin() + input_end(valid),
                 from.inputs_.begin() + input_end(count));
  outputs_.clear();
}

void GraphView::finish() {
  for (Op& op : ops_) {
    op.num_consumers = op.num_matmul_consumers = 0;
    op.is_output = false;
  }
  for (const Op& op : ops_) {
    const int matmul = op.type == OP_MATMUL;
    for (int k = 0; k < op.num_inputs; ++k) {
      Op& producer = ops_[inputs_[op.first_input + k].op];
      ++producer.num_consumers;
      producer.num_matmul_consumers += matmul;
    }
  }
  for (const Ref& r : outputs_) ops_[r.op].is_output = true;
}

bool is_free_op(const OpConfig& op) {
  return is_free_op_type(op.type) || op.weight_side;
}

OpWork op_work(const OpConfig& op) {
  const OpTypeInfo* info = op_type_info(op.type);
  if (!info) throw EngineError("op_work: unknown operator type " + std::to_string(op.type));
  OpWork w;
  const double in = elements(op.input_shapes);
  const double out = elements(op.output_shapes);
  w.bytes = 4.0 * (in + out);
  w.kernels = 1;
  // By the kind of the op table; over the enum, without a default, so that a
  // new kind must say how its work is counted.
  switch (static_cast<OpKind>(info->kind)) {
    case KIND_CONV: {
      const Shape& k = op.input_shapes[1];
      // 2 FLOPs per multiply-add; each output reads C/g * kh * kw inputs.
      w.flops = 2.0 * out * static_cast<double>(k[1] * k[2] * k[3]);
      if (op.params.activation != ACT_NONE) w.flops += out;
      break;
    }
    case KIND_MATMUL: {
      const Shape& a = op.input_shapes[0];
      w.flops = 2.0 * out * static_cast<double>(a.back());
      if (op.params.activation != ACT_NONE) w.flops += out;
      break;
    }
    case KIND_POOL:
      w.flops = out * op.params.kernel_h * op.params.kernel_w;
      break;
    case KIND_ELTWISE:  // the table's FLOPs per output element (a bias add's
    case KIND_BATCHNORM:  // fused activation is not counted)
    case KIND_CONCAT:
      w.flops = info->flops_per_element * out;
      break;
    case KIND_OPAQUE:
      w.flops = static_cast<double>(op.params.opaque_flops);
      break;
    case KIND_LEAF:  // free types (is_free_op_type): zeroed below
    case KIND_COPY:
    case KIND_VIEW:
    case KIND_WEIGHT_TRANSFORM:
      break;
  }
  if (is_free_op(op)) {
    w.flops = w.bytes = 0;
    w.kernels = 0;
  }
  return w;
}

double CostBackend::op_cost(const OpConfig& op) {
  if (is_free_op(op)) return 0.0;
  if (computed()) {
    const double ms = measure(op);
    if (!(ms >= 0) || !std::isfinite(ms))
      throw EngineError(name() + " backend measured an invalid time for " + op.key());
    return ms;
  }
  const std::string key = op.key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  // One measurement at a time; another thread may have measured this
  // configuration while this one waited.
  std::lock_guard<std::mutex> measuring(measure_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  const double ms = measure(op);
  if (!(ms >= 0) || !std::isfinite(ms))
    throw EngineError(name() + " backend measured an invalid time for " + key);
  std::lock_guard<std::mutex> lock(mu_);
  cache_.emplace(key, ms);
  return ms;
}

void load_cost_cache(const std::string& path, const std::string& backend,
                     std::unordered_map<std::string, double>* cache) {
  std::ifstream in(path);
  if (!in) return;  // created on first measurement
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    size_t tab = line.rfind('\t');
    double ms = -1;
    if (tab != std::string::npos) {
      std::istringstream value(line.substr(tab + 1));
      value >> ms;
    }
    if (tab == std::string::npos || !(ms >= 0))
      throw EngineError(backend + ": corrupt cost cache " + path + " line " +
                        std::to_string(number));
    (*cache)[line.substr(0, tab)] = ms;
  }
}

void append_cost_cache(const std::string& path, const std::string& key, double ms) {
  std::ofstream out(path, std::ios::app);
  out.precision(17);
  out << key << '\t' << ms << '\n';
  if (!out) throw EngineError("cannot append to the cost cache " + path);
}

DeviceProfile device_profile(const std::string& name) {
  // Sustained single-stream figures, not datasheet peaks: a 2-core AVX2
  // server CPU running one thread; V100 and H100 at typical cuDNN
  // efficiency. launch_us is the fixed cost of one kernel/primitive call.
  if (name == "cpu") return {"cpu", 60.0, 12.0, 2.0};
  if (name == "v100") return {"v100", 11000.0, 750.0, 5.0};
  if (name == "h100") return {"h100", 40000.0, 2500.0, 4.0};
  throw EngineError("unknown device profile '" + name +
                    "'; valid profiles: cpu, v100, h100");
}

namespace {

class AnalyticBackend : public CostBackend {
 public:
  explicit AnalyticBackend(DeviceProfile profile) : profile_(std::move(profile)) {}
  std::string name() const override { return "analytic/" + profile_.name; }

 protected:
  bool computed() const override { return true; }
  double measure(const OpConfig& op) override {
    const OpWork w = op_work(op);
    const double compute_ms = w.flops / (profile_.peak_gflops * 1e6);
    const double memory_ms = w.bytes / (profile_.bandwidth_gbs * 1e6);
    return std::max(compute_ms, memory_ms) + w.kernels * profile_.launch_us * 1e-3;
  }

 private:
  DeviceProfile profile_;
};

}  // namespace

std::unique_ptr<CostBackend> make_analytic_backend(const std::string& profile) {
  return std::make_unique<AnalyticBackend>(device_profile(profile));
}

}  // namespace taso
