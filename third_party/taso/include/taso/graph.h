// Immutable computation graphs, their builder and the canonical hash.
//
// Ops are shared, immutable nodes; a graph is a topologically ordered list of
// them. A rewrite copies the list (cheap: shared pointers), drops the matched
// ops, clones only their consumers and appends the new ops, so the original
// graph is never touched and candidate graphs cost little to build.
//
// Thread safety: TensorRef and MemoryEstimate are plain values; Node,
// CostMemo, Graph and GraphBuilder state theirs below.
#ifndef TASO_GRAPH_H_
#define TASO_GRAPH_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "taso/cost.h"
#include "taso/ops.h"

namespace taso {

// A read-only run of consecutive elements (C++20's std::span, for C++17):
// what a graph's flat indexes hand out per op or per type.
template <typename T>
class Span {
 public:
  Span() = default;
  Span(const T* begin, const T* end) : begin_(begin), end_(end) {}
  const T* begin() const { return begin_; }
  const T* end() const { return end_; }
  bool empty() const { return begin_ == end_; }
  size_t size() const { return static_cast<size_t>(end_ - begin_); }
  const T& operator[](size_t k) const { return begin_[k]; }

 private:
  const T* begin_ = nullptr;
  const T* end_ = nullptr;
};

// Output `index` of the op with id `guid` in the same graph.
struct TensorRef {
  int64_t guid = 0;
  int index = 0;
  bool operator==(const TensorRef& o) const {
    return guid == o.guid && index == o.index;
  }
  bool operator!=(const TensorRef& o) const { return !(*this == o); }
};

// One node's memo of its context-free cost under one backend: (backend
// instance id, cost in ms), written as a pair and read as a pair.
//
// Thread-safe: nodes are shared by every graph that contains them, and
// graphs by every thread that holds them, so threads costing graphs that
// share a node under different backends race for its memo. It is a seqlock
// over atomics: a reader sees a complete pair or a miss (then asks the
// backend, which memoizes by configuration, so the cost is the same either
// way); a writer that finds another writing leaves the memo to it. A copy
// starts empty.
class CostMemo {
 public:
  CostMemo() = default;
  CostMemo(const CostMemo&) {}
  CostMemo& operator=(const CostMemo&) {
    clear();
    return *this;
  }
  // The cost memoized for backend instance `backend`, if any.
  bool get(uint64_t backend, double* ms) const;
  void set(uint64_t backend, double ms) const;
  void clear() const { set(0, 0.0); }

 private:
  mutable std::atomic<uint32_t> seq_{0};  // odd while a writer writes
  mutable std::atomic<uint64_t> backend_{0};  // CostBackend::instance_id(); 0: none
  mutable std::atomic<uint64_t> bits_{0};     // the cost's bits
};

// One op. Thread safety: immutable once its graph is created (Graph::Create
// sets local_hash before anything can share the node), but for the cost
// memo, which is thread-safe (CostMemo).
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
  // recomputed per graph and never memoized here.
  CostMemo cost;
  // Hash of type, parameters, output shapes and name (not of the inputs),
  // computed once per node; 0 until then.
  mutable uint64_t local_hash = 0;
};
using NodePtr = std::shared_ptr<const Node>;

struct MemoryEstimate {
  int64_t weight_bytes = 0;      // tensors the inference reads as weights
  int64_t activation_bytes = 0;  // all activations materialised (no reuse)
  int64_t peak_bytes = 0;        // weights + live activations at the peak
};

// An immutable graph.
//
// Thread-safe for concurrent use through const references and GraphPtr
// (what every reader gets): its lazily built indexes (consumers, per-type
// lists, ancestor bitsets, all_live) are built once, under a lock, by the
// first thread to need them. The one exception is release_caches(), which
// frees them and so may only be called on a graph no other thread uses.
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
  // (consumer index, input slot) pairs per op index and output, in the
  // order of the consumers, then of their input slots.
  Span<std::pair<int, int>> consumers(int i) const {
    index_structure();
    const std::pair<int, int>* all = consumer_list_.data();
    return {all + consumer_begin_[i], all + consumer_begin_[i + 1]};
  }
  bool is_output(int i) const {
    index_structure();
    return is_output_[i];
  }
  // True if op `i` transitively reads op `j` (i != j). Ancestor bitsets are
  // built on first use (n^2/8 bytes), then each query is O(1).
  bool depends_on(int i, int j) const {
    const size_t words = index_ancestors();
    return (ancestors_[static_cast<size_t>(i) * words + (j >> 6)] >> (j & 63)) & 1;
  }
  // True when every op but the graph inputs has a reader or is an output,
  // i.e. every op is live (computed once; the rewriter's fast path).
  bool all_live() const;
  // True when every input derives only from weights (see OpConfig).
  bool weight_side(int i) const { return weight_side_[i]; }
  // Op i's type, its inputs and the index of the op each input reads,
  // from flat arrays (node(i) holds the same): the matcher tries thousands
  // of ops per graph, and these fit in the cache where the nodes do not.
  int op_type(int i) const { return types_[i]; }
  int num_inputs(int i) const { return input_begin_[i + 1] - input_begin_[i]; }
  const TensorRef& input(int i, int k) const { return inputs_[input_begin_[i] + k]; }
  int input_op(int i, int k) const { return input_ops_[input_begin_[i] + k]; }
  // Indices of ops of a type, in topological order.
  Span<int> ops_of_type(int type) const;
  // ops_of_type(type).size(), from a count kept since creation (may_match
  // asks it for every rule of a set).
  int num_ops_of_type(int type) const {
    return type >= 0 && type < kNumOpTypeSlots ? type_counts_[type] : 0;
  }

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
  // Per op, its hash one and two levels deep, what the candidate module's
  // dedup and deep keys sum (candidate.h: graph_dedup_key, graph_deep_key):
  // `one[i]` hashes op i's local hash with its inputs' local hashes, and
  // `terms[i]` is mix64(one[i]); `two[i]` hashes its local hash (seeded
  // apart) with its inputs' `one`. `terms_sum` and `two_sum` are the
  // wrapping sums of `terms` and of mix64(two[i]). Built on first use
  // (`two` and `two_sum` only where `two_levels` asks) and kept with the
  // graph, like the indexes: a graph that materialize builds from a
  // candidate is keyed there, to check the candidate's key, and again when
  // it is enumerated, and those are one computation.
  struct LevelHashes {
    std::vector<uint64_t> one, terms, two;
    uint64_t terms_sum = 0, two_sum = 0;
  };
  const LevelHashes& level_hashes(bool two_levels) const {
    const int8_t built = levels_built_.load(std::memory_order_acquire);
    if (built < (two_levels ? 2 : 1)) build_level_hashes(two_levels);
    return levels_;
  }
  // Frees the lazily built indexes (consumers, per-type lists, ancestor
  // bitsets, level hashes); they are rebuilt on next use. The search calls
  // it on graphs it built itself and keeps only as parents of queued
  // candidates. Not thread-safe: only for a graph no other thread is using.
  void release_caches() const;

 private:
  Graph() = default;
  void index_structure() const {
    if (!indexed_.load(std::memory_order_acquire)) build_structure();
  }
  void build_structure() const;
  // The words per row of ancestors_ (built on first use).
  size_t index_ancestors() const {
    const size_t words = ancestor_words_.load(std::memory_order_acquire);
    return words > 0 ? words : build_ancestors();
  }
  size_t build_ancestors() const;
  void build_level_hashes(bool two_levels) const;
  std::vector<NodePtr> nodes_;
  std::vector<TensorRef> outputs_;
  std::vector<int> index_;  // guid -> position, -1 if absent
  std::vector<uint64_t> node_hashes_;
  std::vector<bool> weight_side_;
  std::vector<int> types_, input_begin_, input_ops_;  // op_type, num_inputs, input_op
  std::array<int, kNumOpTypeSlots> type_counts_{};   // num_ops_of_type
  std::vector<TensorRef> inputs_;                     // input
  // Built lazily, under index_mu_, by index_structure() (the consumer
  // and per-type lists, is_output_; then indexed_ is set), index_ancestors()
  // (ancestors_; then ancestor_words_ is set) and level_hashes() (levels_;
  // then levels_built_ is set): a thread that reads a flag set (acquire)
  // sees what it guards.
  mutable std::mutex index_mu_;
  mutable std::atomic<bool> indexed_{false};
  // Flat lists, each op's (each type's) a run of the list: op i's consumers
  // are consumer_list_[consumer_begin_[i], consumer_begin_[i + 1]), the ops
  // of type t type_list_[type_begin_[t], type_begin_[t + 1]). A few
  // allocations a graph where a list per op took one per op: matching a
  // rule on a graph built for it (a multi-location action, one rule at a
  // time) builds them for that one rule.
  mutable std::vector<int> consumer_begin_;
  mutable std::vector<std::pair<int, int>> consumer_list_;
  mutable std::vector<bool> is_output_;
  mutable std::vector<int> type_begin_;
  mutable std::vector<int> type_list_;
  mutable std::vector<uint64_t> ancestors_;  // row i: bitset of i's ancestors
  mutable std::atomic<size_t> ancestor_words_{0};
  mutable LevelHashes levels_;                // level_hashes()
  mutable std::atomic<int8_t> levels_built_{0};  // the levels built: 0, 1 or 2
  mutable std::atomic<int8_t> all_live_{-1};  // -1: not computed yet
  uint64_t hash_ = 0;
  uint64_t node_hash_sum_ = 0;
  int num_ops_ = 0;
  int64_t max_guid_ = 0;
};
using GraphPtr = std::shared_ptr<const Graph>;

// Builds a graph op by op; each call checks shapes at once.
// Thread safety: not thread-safe (one thread builds); the graphs it builds
// are (Graph).
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

// `graph` with identical ops merged (common-subexpression elimination): of
// the ops with the same type, parameters and inputs (inputs read through
// earlier merges), the first in topological order is kept and every reader
// of the others reads it instead, in one pass (merging two ops makes their
// readers identical, and those come later). Inputs and weights are never
// merged. Returns `graph` itself where nothing merges; otherwise a new graph
// of the kept ops in `graph`'s order, op k with guid k + 1, as a builder
// adding them in that order numbers them.
GraphPtr merge_identical_ops(const GraphPtr& graph);

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
// The seed of an op's two-level hash (Graph::LevelHashes::two), combined
// with its local hash: distinct from its one-level hash, so that the deep
// key is not the dedup key in disguise.
constexpr uint64_t kTwoLevelSeed = 0x5bd1e9955bd1e995ULL;

}  // namespace taso

#endif  // TASO_GRAPH_H_
