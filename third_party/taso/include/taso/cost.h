// Cost backends: the runtime of one operator configuration, in milliseconds.
//
// Graph cost is the sum of op costs (TASO's model). Weight-side ops and views
// (reshape, split, transpose folded into the consumer, as in TASO) cost zero;
// each backend only sees the configurations that actually run. A backend that
// models a runtime's fusions (the fitted backend) then revises the per-op
// costs in graph context (CostBackend::in_context); Graph::op_costs applies
// it, so every consumer of costs (Graph::cost, op_costs, the search, the
// candidate costs of Locations) sees the same numbers.
//
// Thread safety: OpWork, DeviceProfile and FittedWork are plain values and
// the free functions keep no state but the timing cache file (written under
// the measuring backend's lock); GraphView and CostBackend state theirs
// below.
#ifndef TASO_COST_H_
#define TASO_COST_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "taso/ops.h"

namespace taso {

class Graph;

// FLOPs, bytes moved and kernel launches of one op; shared by the analytic
// model and the diagnostics of the measured backends.
struct OpWork {
  double flops = 0;
  double bytes = 0;  // bytes read + written, float32
  int kernels = 0;
};
OpWork op_work(const OpConfig& op);

// True for ops that cost nothing by TASO's conventions regardless of backend:
// weight-side ops and every type the op table marks free (inputs, weights,
// views, weight transforms: is_free_op_type).
bool is_free_op(const OpConfig& op);

// A graph's ops as CostBackend::in_context reads them, flat and without
// guids: op i's inputs name ops by their position, the positions are the
// graph's topological order, and readers are counted, not listed.
// CandidateCoster (rules.h) fills one for a rewrite candidate in the order
// Graph::Create would give its graph, so that a context-dependent backend
// prices the candidate without the graph being built; Graph's own
// in_context reads the Graph itself. Both are read through the same
// accessors (size, type, inputs, reader counts, outputs), so a backend
// writes its revision once, as a template over the two.
//
// Thread safety: not thread-safe while being filled; once finished,
// concurrent reads are safe.
class GraphView {
 public:
  struct Op {
    int type = OP_INPUT;
    const OpParams* params = nullptr;
    const std::vector<Shape>* outputs = nullptr;  // the op's output shapes
    int first_input = 0, num_inputs = 0;          // into inputs_
    int num_consumers = 0;  // inputs of other ops that read it
    int num_matmul_consumers = 0;  // those of matmuls
    bool weight_side = false;
    bool is_output = false;
  };
  // Output `index` of the op at position `op`.
  struct Ref {
    int op = 0;
    int index = 0;
  };

  // Empties the view, keeping its buffers (no allocation once they are large
  // enough).
  void clear();
  // Makes the view the first `count` ops of `from` (with their inputs, no
  // outputs), given that its first `valid` ops are already those of `from`:
  // only what differs is copied.
  void assign_prefix(const GraphView& from, int count, int valid);
  // Appends an op; its inputs follow with add_input (producers come first).
  void add_op(int type, const OpParams* params, const std::vector<Shape>* outputs,
              bool weight_side) {
    Op& op = ops_.emplace_back();  // in place: no copy of a half-written struct
    op.type = type;
    op.params = params;
    op.outputs = outputs;
    op.first_input = static_cast<int>(inputs_.size());
    op.weight_side = weight_side;
  }
  void add_input(int op, int index) {
    inputs_.push_back({op, index});
    ++ops_.back().num_inputs;
  }
  void add_output(int op, int index) { outputs_.push_back({op, index}); }
  // Appends op `i` of `from`, its inputs renamed by `position` (a function
  // from `from`'s positions to this view's).
  template <class Position>
  void add_op_of(const GraphView& from, int i, const Position& position) {
    const Op& op = from.ops_[i];
    add_op(op.type, op.params, op.outputs, op.weight_side);
    for (int k = 0; k < op.num_inputs; ++k) {
      const Ref& r = from.inputs_[op.first_input + k];
      inputs_.push_back({position(r.op), r.index});
    }
    ops_.back().num_inputs = op.num_inputs;
  }
  // Counts each op's readers (one per input read, as Graph::consumers lists
  // them) and sets the is_output flags; call once every op, input and
  // output has been added.
  void finish();

  int size() const { return static_cast<int>(ops_.size()); }
  int type(int i) const { return ops_[i].type; }
  const OpParams& params(int i) const { return *ops_[i].params; }
  bool weight_side(int i) const { return ops_[i].weight_side; }
  int num_inputs(int i) const { return ops_[i].num_inputs; }
  const Ref& input(int i, int k) const { return inputs_[ops_[i].first_input + k]; }
  const Shape& output_shape(int i, int k) const { return (*ops_[i].outputs)[k]; }
  const std::vector<Shape>& output_shapes(int i) const { return *ops_[i].outputs; }
  const Shape& input_shape(int i, int k) const {
    const Ref& r = input(i, k);
    return output_shape(r.op, r.index);
  }
  int num_consumers(int i) const { return ops_[i].num_consumers; }
  // How many of those readers are matmuls (the fitted backend folds a
  // transpose that only matmuls read into them).
  int num_matmul_consumers(int i) const { return ops_[i].num_matmul_consumers; }
  bool is_output(int i) const { return ops_[i].is_output; }
  int num_graph_outputs() const { return static_cast<int>(outputs_.size()); }
  const Ref& graph_output(int k) const { return outputs_[k]; }

 private:
  std::vector<Op> ops_;
  std::vector<Ref> inputs_;
  std::vector<Ref> outputs_;
};

// A cost model.
//
// Thread-safe: op_cost may be called from several threads at once (the
// memo is locked; measurements are serialized, one at a time per backend,
// so a measuring backend never times two kernels at once, and a
// configuration is measured once), and so may in_context (a backend whose
// revision keeps scratch locks it). Subclasses keep that promise.
class CostBackend {
 public:
  CostBackend() : instance_id_(next_instance_id()) {}
  virtual ~CostBackend() = default;
  // Unique per backend object in this process (never reused, unlike its
  // address): the key of per-node cost memos.
  uint64_t instance_id() const { return instance_id_; }
  virtual std::string name() const = 0;
  // Runtime in milliseconds of one op; memoized by OpConfig::key(), except
  // where the backend computes it (`computed`).
  double op_cost(const OpConfig& op);
  size_t num_measured() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cache_.size();
  }
  // Revises `costs` (op_cost of every op of `graph`, 0 for free ops, aligned
  // with graph.nodes()) to what the modelled runtime pays in this graph: ops
  // it fuses into a producer cost 0, views it materialises cost a copy.
  // Default: nothing changes (TASO's context-free per-op sum).
  virtual void in_context(const Graph& graph, std::vector<double>* costs) {
    (void)graph;
    (void)costs;
  }
  // The same revision of the same graph given as a view (aligned with the
  // view's positions): must change `costs` exactly as in_context of the
  // Graph the view describes would, bit for bit (CandidateCoster relies on
  // it). Default: nothing changes.
  virtual void in_context(const GraphView& view, std::vector<double>* costs) {
    (void)view;
    (void)costs;
  }
  // True when in_context changes nothing, so a graph's cost is a plain sum
  // of per-op costs and a rewrite's cost is the parent's minus the removed
  // ops plus the added ones (rules.h, Candidate). Backends that override
  // in_context return false.
  virtual bool context_free() const { return true; }

 protected:
  // Measures (or computes) one configuration. Never called for free ops;
  // never called by two threads at once (op_cost holds measure_mu_), unless
  // `computed`.
  virtual double measure(const OpConfig& op) = 0;
  // True when measure() is a cheap, pure, thread-safe function of the
  // configuration (the analytic roofline): op_cost then calls it directly,
  // without the memo, whose key (OpConfig::key, a string) and locked lookup
  // cost more than the formula. Costs are the same either way; nothing is
  // memoized (num_measured stays 0).
  virtual bool computed() const { return false; }
  // The memo, by OpConfig::key(): guarded by mu_ once the backend is built
  // (a constructor may fill it, e.g. from a cache file, without the lock).
  std::unordered_map<std::string, double> cache_;
  mutable std::mutex mu_;

 private:
  static uint64_t next_instance_id() {
    static std::atomic<uint64_t> next{1};
    return next++;
  }
  const uint64_t instance_id_;
  std::mutex measure_mu_;  // held while measure() runs
};

// Deterministic roofline model: max(flops / peak, bytes / bandwidth) plus a
// per-kernel launch overhead. Profiles: "cpu" (this class of 2-core x86 CPU),
// "v100", "h100".
struct DeviceProfile {
  std::string name;
  double peak_gflops;     // per second
  double bandwidth_gbs;   // GB per second
  double launch_us;       // per kernel
};
DeviceProfile device_profile(const std::string& name);

std::unique_ptr<CostBackend> make_analytic_backend(const std::string& profile);

// Fitted CPU model (docs/engine.md, "The fitted backend"): per op class
// ("conv", "matmul", "pool", "eltwise", "batchnorm", "concat", "copy") a
// piecewise-linear model ms = c[0] + c[1] * GFLOP + c[2] * MB
// + c[3] * max(0, MB - c[4]) over op_work() (c[3], c[4] optional: working
// sets beyond a cache size run slower per byte),
// fitted by least squares to single-op onnxruntime timings
// (experiments/fit_cost_model.py), plus onnxruntime's fusions in graph
// context: batch-norm, bias add, a residual add and an activation that
// follow a conv (whose output nothing else reads) are folded into it,
// a transpose read only by matmuls is folded into them, and split and other
// transposes are real copies. `name` is reported as "fitted/<name>". Every
// class must be given; unknown classes throw EngineError.
std::unique_ptr<CostBackend> make_fitted_backend(
    const std::string& name, const std::vector<std::string>& classes,
    const std::vector<std::vector<double>>& coefficients);
// Learned GPU model (docs/engine.md, "The learned GPU backend"): per op
// class ("conv", "matmul", "pool", "eltwise", "batchnorm", "concat", "copy")
// ms = c[0] + c[1] * GFLOP + c[2] * MB over fitted_work(), fitted to
// end-to-end CUDA-graph timings of whole graphs on one card in one
// precision (xflowrl.measure.learned_fit), plus a second element-wise
// kernel for an activation the PyTorch runtime does not fuse (any after a
// matmul or bias add; any but ReLU after a convolution). Context free and
// computed (no memo). Ops of no class (opaque) are priced by the analytic
// roofline of `fallback` ("h100", ...). `name` is reported as
// "learned/<name>". Every class must be given; unknown classes throw.
std::unique_ptr<CostBackend> make_learned_backend(
    const std::string& name, const std::vector<std::string>& classes,
    const std::vector<std::vector<double>>& coefficients, const std::string& fallback);
// What the fitted backend prices for one op: its class ("" for ops it does
// not fit: free ones, weight-side ones, opaque ones, which it prices with the
// analytic cpu roofline) and the FLOPs and bytes of op_work(), without the
// activation of a matmul or bias add (a separate element-wise kernel), and
// for split and transpose the bytes of a copy. The fitting script uses it,
// so fit and prediction share their features.
struct FittedWork {
  std::string op_class;
  double flops = 0;
  double bytes = 0;
};
FittedWork fitted_work(const OpConfig& op);

// oneDNN (CPU) measurement: one pinned thread, thread CPU time, the median
// of three rounds of timed batches (`repeats` in all) after warm-up, memoized, optionally cached on disk at `cache_path`
// (a text file of "key<TAB>ms" lines; empty path: no disk cache). A non-empty
// `reference_path` is a table in the same format loaded read-only (it wins
// over the cache; a missing file throws). Throws EngineError when the engine
// was built without oneDNN.
std::unique_ptr<CostBackend> make_onednn_backend(const std::string& cache_path,
                                                 int warmup, int repeats,
                                                 const std::string& reference_path = "");
bool onednn_available();

// cuDNN/cuBLAS measurement on GPU 0, same conventions (docs/engine.md lists
// what each op runs). Throws EngineError when the engine was built without
// CUDA or no GPU is visible. `graph_timing` (the default): time each op's
// runs replayed from a CUDA graph (the GPU's time, without the host's
// launches); false: one run per pair of events, launch included.
std::unique_ptr<CostBackend> make_cudnn_backend(const std::string& cache_path,
                                                int warmup, int repeats,
                                                bool graph_timing = true);
bool cudnn_available();

// What the cudnn backend would run for `op` (descriptor dims, GEMM sizes, any
// approximation), as one line. Host-only: available in every build.
std::string cudnn_plan_description(const OpConfig& op);
// Builds the cuDNN descriptors of that plan and checks that cuDNN derives the
// planned output dims. Needs the cudnn build but no device; throws EngineError.
void cudnn_check_descriptors(const OpConfig& op);

// The on-disk timing cache of the measured backends: "key<TAB>ms" lines.
// Loading a missing file is a no-op; a malformed line throws EngineError
// naming `backend`, the file and the line.
void load_cost_cache(const std::string& path, const std::string& backend,
                     std::unordered_map<std::string, double>* cache);
void append_cost_cache(const std::string& path, const std::string& key, double ms);

}  // namespace taso

#endif  // TASO_COST_H_
