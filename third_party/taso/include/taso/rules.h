// Substitution rules ("xfers"): patterns, matching, locations and apply.
//
// A rule has a source pattern and a target pattern over shared external
// variables, and a list of mapped outputs pairing source tensors visible
// outside the match with their target replacements. Matching is a depth-first
// search over the source ops in pattern order; candidates for each pattern op
// are scanned in the graph's topological order, so the list of matches, and
// hence every location index, is deterministic.
#ifndef TASO_RULES_H_
#define TASO_RULES_H_

#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "taso/graph.h"

namespace taso {

// Output `index` of pattern op `op`; `op < 0` names external variable `op`.
struct PatternTensor {
  int op = -1;
  int index = 0;
};

struct PatternOp {
  int type = OP_INPUT;
  std::vector<PatternTensor> inputs;
  // Source ops: (key, value) equality constraints.
  // Target ops: (key, value) parameters to set.
  std::vector<std::pair<int, int>> params;
  // Target ops only: (key, source op) parameters copied from a matched op
  // (e.g. batch-norm epsilon into the folding ops).
  std::vector<std::pair<int, int>> copied;
};

struct Rule {
  std::string name;
  std::vector<PatternOp> src;
  std::vector<PatternOp> dst;
  std::vector<std::pair<PatternTensor, PatternTensor>> mapped_outputs;
  // Throws EngineError naming the rule and the field at fault.
  void validate() const;
};

// The ops of the current graph that one match of a rule's source pattern
// bound, as guids in source-pattern order.
using MatchedOps = std::vector<int64_t>;

// One rewrite of a graph, described against that graph (its "parent")
// without building the result: what it removes, the ops it adds, the tensors
// it redirects, and the result's op count and canonical hash (or, from
// enumerate_locations, its dedup key, the hash being computed on first use),
// computed incrementally. `materialize` builds the graph itself; enumeration builds
// none (docs/engine.md, "Locations").
struct Candidate {
  // Parent indices of the matched ops, in source-pattern order: the ops the
  // result no longer has. Ops the rewrite leaves dead are not listed; a
  // rewrite that leaves any has its `graph` built at once (below), whose
  // full build drops them.
  std::vector<int> removed;
  // The target ops, with fresh guids (max_guid + 1, ...), in target order;
  // `added_ws[j]`: whether target op j derives only from weights.
  std::vector<NodePtr> added;
  std::vector<char> added_ws;
  // Source tensors visible outside the match -> their target replacements.
  std::vector<std::pair<TensorRef, TensorRef>> redirect;
  // Parent indices of ops the rewrite leaves in place (possibly re-wired)
  // whose weight-side flag flips (rare; their cost appears or vanishes).
  std::vector<int> weight_side_flips;
  // Equals materialize()'s Graph::hash() once `hashed`; enumerate_locations
  // leaves it to be computed on first use (candidate_hash), see `key`.
  mutable uint64_t hash = 0;
  mutable bool hashed = false;
  // A canonical fingerprint of the result that is cheap to compute
  // incrementally (graph_dedup_key: only the ops the rewrite touches
  // change it): equal graphs have equal keys, so two candidates' hashes need
  // comparing only when their keys are equal (docs/engine.md, "Incremental
  // candidates").
  uint64_t key = 0;
  // True when `graph` was built at enumeration (the rewrite drops dead ops,
  // or incremental candidates were turned off): its cost is then the whole
  // graph's.
  bool whole = false;
  int num_ops = 0;    // equals materialize()'s Graph::num_ops()
  // Built at once when the rewrite leaves dead ops behind (the incremental
  // bookkeeping does not cover them); otherwise null until materialized.
  mutable GraphPtr graph;
};

// Scratch of candidate_hash, reusable across candidates of one parent.
struct HashScratch {
  std::vector<int> stamp, removed;
  int counter = 0;
  std::vector<uint64_t> new_hash, added_hash;
  std::vector<char> new_ws;
};

// The canonical hash of `c`'s result (Graph::hash of materialize(parent, c)),
// computed incrementally from the parent's per-op hashes, and cached in c.
uint64_t candidate_hash(const Graph& parent, const Candidate& c, HashScratch* scratch);

// Graph::hash's cheap companion: the wrapping sum over every op of mix64 of
// a hash of its local hash and its inputs' local hashes (one level of the
// Merkle hash, not all of it), combined with the op count. Graphs with equal
// canonical hashes have equal keys (up to 64-bit collisions, which the hash
// dedup already assumes away). `op_keys` (optional) receives each op's term.
uint64_t graph_dedup_key(const Graph& g, std::vector<uint64_t>* op_keys = nullptr);

// The rewritten graph of `c` on `parent` (cached in c.graph). Its nodes are
// exactly those the full rebuild produced before: the parent's untouched ops
// (shared), clones of the readers of redirected tensors, then the targets.
GraphPtr materialize(const Graph& parent, const Candidate& c);

// Prices candidates of one parent graph under one backend, without building
// the candidate's graph, bit for bit the Graph::cost of materialize(parent,
// c). Both paths rely on knowing the candidate graph's own topological order
// (Graph::Create's, reproduced): the parent's order without the removed
// ops, with the target ops (and any ancestors of theirs that came later)
// moved right before their first reader, the rest of the targets last.
// Context-free backends (CostBackend::context_free): from the parent's per-op
// costs: the removed ops leave, the added ones (and the ops whose weight-side
// flag flipped) enter, and the sum is taken in that order, reusing the
// parent's prefix sums up to the first change. Context-dependent backends
// (fitted, which prices an op by its neighbours): the candidate graph is
// laid out flat in that order in a reusable GraphView (the parent's nodes and
// the target nodes, pointed to, not copied), each op with its context-free
// cost (the nodes' memos; a clone costs what the parent's node does, its
// configuration being the same), revised by CostBackend::in_context on the
// view and summed in order. The order matters twice: the revision's charges
// accumulate with `+=` in it, and floating-point sums depend on it. Only a
// candidate built at enumeration (Candidate::whole) is costed from its graph.
class CandidateCoster {
 public:
  CandidateCoster(const Graph& parent, CostBackend* backend);
  // Graph::cost of the parent.
  double parent_cost() const { return parent_cost_; }
  double cost(const Candidate& c);

 private:
  int mark(const Candidate& c);
  double cost_in_context(const Candidate& c, int first);
  // View position of parent op p in the candidate being laid out.
  int view_pos(int p) const { return p < view_first_ ? p : view_pos_[p]; }
  void view_parent(const Candidate& c, int p);
  void view_added(const Candidate& c, size_t j);
  double added_cost(const Candidate& c, size_t j) const;
  void place_added(const Candidate& c, size_t j, int bound);
  void place_parent(int p, int bound);

  const Graph& parent_;
  CostBackend* backend_;
  bool context_free_;
  std::vector<double> costs_;   // parent.op_costs(backend)
  std::vector<int> nonfree_;    // parent indices with a non-zero cost, in order
  std::vector<double> prefix_;  // prefix_[k]: the sum of the first k of them
  double parent_cost_ = 0;
  // Per-candidate scratch, stamped to avoid clearing.
  int stamp_ = 0;
  std::vector<int> used_, pulled_, special_;
  std::vector<double> flip_cost_;
  std::vector<int> flip_;
  std::vector<char> added_placed_;
  std::vector<double> added_cost_;
  std::vector<std::pair<int, int>> block_;  // (kind: 0 parent / 1 added, index)
  std::vector<int> extra_;  // parent ops the candidate re-wires or re-prices
  // Context-dependent backends: the parent's costs before the revision
  // (Graph::base_op_costs) and the parent as a view; the candidate's view
  // (its first view_valid_ ops are the parent view's: a candidate's ops
  // before its first change are the parent's, in the same positions, so only
  // the rest is laid out again), its per-op costs, the first parent
  // position it changes, and the view positions of the parent ops from there
  // on and of the target ops.
  std::vector<double> base_;
  GraphView parent_view_, view_;
  int view_valid_ = 0, view_first_ = 0;
  std::vector<double> view_costs_;
  std::vector<int> view_pos_, added_pos_;
};

// Buffers a rewriter (rules.cc) reuses across the rules enumerated on one
// graph, so that enumerating a large rule set does not allocate them per rule.
struct RewriterScratch {
  std::vector<TensorRef> bound, mapped_from;
  std::vector<bool> is_bound, used, dst_reads_var, dst_has_reader;
  std::vector<int> mapped;
  std::vector<std::vector<int8_t>*> memo;
  std::vector<int64_t> matched_guids;
  std::vector<std::vector<int>> local;  // per search depth: the ops to try
  HashScratch hash;
  // Per parent op, its term of graph_dedup_key, and the key: filled by
  // enumerate_locations (lazy hashes) before the rules run.
  std::vector<uint64_t> op_keys;
  uint64_t parent_key_sum = 0;
  bool lazy_hash = false;
};

// Memo of source-op parameter checks on one graph, shared by every rule
// enumerated on it: large rule sets constrain their source ops alike (a
// conv's kernel, stride, padding, activation), so each (op type,
// constraints) pair is checked once per node per graph instead of once per
// rule. Valid for one graph only; it also holds the
// rewriter's scratch buffers.
class MatchCache {
 public:
  RewriterScratch scratch;
  // Per node of a graph of `graph_size` ops: -1 unknown, 0 fails, 1 meets
  // `op`'s constraints.
  std::vector<int8_t>* memo(const PatternOp& op, int graph_size);

 private:
  struct KeyHash {
    size_t operator()(const std::vector<int>& key) const;
  };
  std::unordered_map<std::vector<int>, std::vector<int8_t>, KeyHash> memos_;
  std::vector<int> key_;
};

// Calls `emit` with every rewrite the rule produces on `graph` and the ops
// its match bound, in match order, until it returns false. Results with a
// cycle, with more than `max_ops` ops (0: no cap), whose target shapes fail,
// or that would leave a matched op's unmapped output in use are skipped.
// `incremental` false builds every result whole (the engine before
// incremental candidates; kept to compare against). Returns the number of
// complete matches found (including skipped ones).
// `cache` (optional) shares parameter checks between the rules enumerated
// on `graph`.
int for_each_candidate(const Graph& graph, const Rule& rule, int max_ops,
                       const std::function<bool(Candidate&&, const MatchedOps&)>& emit,
                       bool incremental = true, MatchCache* cache = nullptr);

// for_each_candidate with every result materialized.
int for_each_rewrite(const Graph& graph, const Rule& rule, int max_ops,
                     const std::function<bool(GraphPtr, const MatchedOps&)>& emit);

// The locations of every xfer on one graph: candidates[x][l] is what
// applying xfer x at location l produces. Duplicates (by canonical hash,
// against the current graph and every earlier candidate of this step) are
// dropped before indices are assigned; at most `max_locations` per xfer.
// Hashes are compared only between candidates with equal dedup keys
// (graph_dedup_key) and otherwise computed on first use (hashes(), graph()).
struct Locations {
  GraphPtr parent;
  std::vector<std::vector<Candidate>> candidates;
  std::vector<std::vector<MatchedOps>> matched;  // parallel to candidates
  std::vector<int> num_matches;  // complete matches before any filtering
  // The graph of location (x, l), built on first use.
  GraphPtr graph(int x, int l) const { return materialize(*parent, candidates[x][l]); }
  // Per xfer, the cost of every candidate (candidate_cost).
  std::vector<std::vector<double>> costs(CostBackend* backend) const;
  // Per xfer, the canonical hash of every candidate (candidate_hash).
  std::vector<std::vector<uint64_t>> hashes() const;
  // How many candidates hold a graph that was built after enumeration
  // (materialize, e.g. by graph()); those built at enumeration
  // (Candidate::whole) are not counted. Pricing (costs) builds none.
  int num_materialized() const;
  mutable HashScratch hash_scratch;
};
Locations enumerate_locations(GraphPtr graph, const std::vector<Rule>& rules,
                              int max_locations, int max_ops, bool incremental = true);

}  // namespace taso

#endif  // TASO_RULES_H_
