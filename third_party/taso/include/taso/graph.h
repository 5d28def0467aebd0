// Immutable computation graphs, their builder and the canonical hash.
//
// Ops are shared, immutable nodes; a graph is a topologically ordered list of
// them. A rewrite copies the list (cheap: shared pointers), drops the matched
// ops, clones only their consumers and appends the new ops, so the original
// graph is never touched and candidate graphs cost little to build.
#ifndef TASO_GRAPH_H_
#define TASO_GRAPH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "taso/cost.h"
#include "taso/ops.h"

namespace taso {

// Output `index` of the op with id `guid` in the same graph.
struct TensorRef {
  int64_t guid = 0;
  int index = 0;
  bool operator==(const TensorRef& o) const {
    return guid == o.guid && index == o.index;
  }
  bool operator!=(const TensorRef& o) const { return !(*this == o); }
};

struct Node {
  int64_t guid = 0;  // unique within a graph; kept by ops a rewrite leaves alone
  int type = OP_INPUT;
  OpParams params;
  std::vector<TensorRef> inputs;
  std::vector<Shape> outputs;  // inferred output shapes
  std::string name;            // inputs and weights only

  // Cost memo of the context-free op cost (CostBackend::op_cost). It depends
  // only on its parameters, its input shapes and whether its inputs derive
  // from weights, all fixed for the node's lifetime (a rewrite clones any op
  // whose inputs change), so graphs that share the node share the
  // measurement. Context-dependent adjustments (CostBackend::in_context) are
  // recomputed per graph and never memoized here. Single-threaded use only.
  mutable uint64_t cost_backend = 0;  // CostBackend::instance_id(); 0: none
  // Hash of type, parameters, output shapes and name (not of the inputs),
  // computed once per node; 0 until then.
  mutable uint64_t local_hash = 0;
  mutable double cost_ms = 0;
};
using NodePtr = std::shared_ptr<const Node>;

struct MemoryEstimate {
  int64_t weight_bytes = 0;      // tensors the inference reads as weights
  int64_t activation_bytes = 0;  // all activations materialised (no reuse)
  int64_t peak_bytes = 0;        // weights + live activations at the peak
};

class Graph {
 public:
  // Validates the nodes (unique positive guids, inputs that exist), orders
  // them topologically (a deterministic function of the given order) and
  // computes hashes. Shapes are the caller's to check: the builder and the
  // rewriter infer every new op's shapes before calling. Throws EngineError,
  // naming the op, on a dangling input or a cycle.
  static std::shared_ptr<const Graph> Create(std::vector<NodePtr> nodes,
                                             std::vector<TensorRef> outputs);

  const std::vector<NodePtr>& nodes() const { return nodes_; }
  const std::vector<TensorRef>& outputs() const { return outputs_; }
  const Node& node(int i) const { return *nodes_[i]; }
  int size() const { return static_cast<int>(nodes_.size()); }
  // Index of an op in nodes(), or -1.
  int index_of(int64_t guid) const {
    return guid >= 0 && guid < static_cast<int64_t>(index_.size()) ? index_[guid] : -1;
  }
  const Shape& shape(const TensorRef& t) const;
  // Ops that compute (excludes inputs and weights).
  int num_ops() const { return num_ops_; }
  int64_t max_guid() const { return max_guid_; }
  uint64_t hash() const { return hash_; }
  // The order-independent part of hash(): the wrapping sum of mix64(node
  // hash) over every op, before the outputs are combined in. Incremental
  // candidates (rules.h) update it by difference.
  uint64_t node_hash_sum() const { return node_hash_sum_; }
  uint64_t node_hash(int i) const { return node_hashes_[i]; }
  // (consumer index, input slot) pairs per op index and output.
  const std::vector<std::pair<int, int>>& consumers(int i) const {
    index_structure();
    return consumers_[i];
  }
  bool is_output(int i) const {
    index_structure();
    return is_output_[i];
  }
  // True if op `i` transitively reads op `j` (i != j). Ancestor bitsets are
  // built on first use (n^2/8 bytes), then each query is O(1).
  bool depends_on(int i, int j) const {
    index_ancestors();
    return (ancestors_[static_cast<size_t>(i) * ancestor_words_ + (j >> 6)] >> (j & 63)) & 1;
  }
  // True when every op but the graph inputs has a reader or is an output,
  // i.e. every op is live (computed once; the rewriter's fast path).
  bool all_live() const;
  // True when every input derives only from weights (see OpConfig).
  bool weight_side(int i) const { return weight_side_[i]; }
  // Indices of ops of a type, in topological order.
  const std::vector<int>& ops_of_type(int type) const;

  OpConfig op_config(int i) const;
  // Sum of op_costs: the one graph cost every consumer uses.
  double cost(CostBackend* backend) const;
  // Per-op costs: op_cost of each op (0 for free ones), then the backend's
  // in-context revision (CostBackend::in_context).
  std::vector<double> op_costs(CostBackend* backend) const;
  // The per-op costs before the in-context revision: op_cost of each op
  // (memoized in the nodes), 0 for free ones.
  std::vector<double> base_op_costs(CostBackend* backend) const;
  MemoryEstimate memory() const;
  // Frees the lazily built indexes (consumers, per-type lists, ancestor
  // bitsets); they are rebuilt on next use. The search calls it on graphs it
  // keeps only as parents of queued candidates. Single-threaded use only.
  void release_caches() const;

 private:
  Graph() = default;
  void index_structure() const;
  void index_ancestors() const;
  std::vector<NodePtr> nodes_;
  std::vector<TensorRef> outputs_;
  std::vector<int> index_;  // guid -> position, -1 if absent
  std::vector<uint64_t> node_hashes_;
  std::vector<bool> weight_side_;
  // Built lazily by index_structure() (single-threaded use).
  mutable bool indexed_ = false;
  mutable std::vector<std::vector<std::pair<int, int>>> consumers_;
  mutable std::vector<bool> is_output_;
  mutable std::vector<std::vector<int>> by_type_;  // indexed by op type
  mutable std::vector<uint64_t> ancestors_;  // row i: bitset of i's ancestors
  mutable size_t ancestor_words_ = 0;
  mutable int8_t all_live_ = -1;  // -1: not computed yet
  uint64_t hash_ = 0;
  uint64_t node_hash_sum_ = 0;
  int num_ops_ = 0;
  int64_t max_guid_ = 0;
};
using GraphPtr = std::shared_ptr<const Graph>;

// Builds a graph op by op; each call checks shapes at once.
class GraphBuilder {
 public:
  TensorRef input(const std::string& name, const Shape& shape);
  TensorRef weight(const std::string& name, const Shape& shape);
  // Adds an op; returns its guid. Throws EngineError on bad shapes.
  int64_t add(int type, const OpParams& params,
              const std::vector<TensorRef>& inputs);
  const Shape& shape(const TensorRef& t) const;
  int num_outputs(int64_t guid) const;
  // Outputs default to every op output that nothing consumes.
  GraphPtr build(const std::vector<TensorRef>& outputs) const;

 private:
  const Node& get(int64_t guid) const;
  int64_t leaf(int type, const std::string& name, const Shape& shape);
  std::vector<NodePtr> nodes_;
  std::unordered_map<int64_t, int> index_;
  std::unordered_map<std::string, int64_t> names_;
};

// 64-bit mixing used by the hash (splitmix64 finaliser).
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The canonical hash's building blocks (docs/engine.md, "Canonical hash"),
// shared by Graph::Create and the incremental candidates of rules.cc so that
// both compute the same values.
inline uint64_t hash_combine(uint64_t seed, uint64_t v) {
  return mix64(seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}
// Hash of an op's type, parameters, output shapes and name (not its inputs);
// memoized in Node::local_hash.
uint64_t node_local_hash(const Node& node);
// What reading output `index` of an op whose hash is `input_hash` adds to a
// reader's hash `h`.
inline uint64_t hash_input(uint64_t h, uint64_t input_hash, int index) {
  return hash_combine(hash_combine(h, input_hash), static_cast<uint64_t>(index));
}
// What output `index` of an op whose hash is `h` adds to a graph's hash.
inline uint64_t hash_output(uint64_t total, uint64_t h, int index) {
  return hash_combine(total, hash_combine(h, static_cast<uint64_t>(index)));
}

}  // namespace taso

#endif  // TASO_GRAPH_H_
