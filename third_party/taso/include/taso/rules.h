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
// it redirects, and the result's canonical hash and op count, computed
// incrementally. `materialize` builds the graph itself; enumeration builds
// none (docs/engine.md, "Locations").
struct Candidate {
  // Parent indices of the ops the result no longer has: the matched ops, in
  // source-pattern order, then (only when `graph` was built at once, see
  // below) nothing else is listed: dead ops are found by the full build.
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
  uint64_t hash = 0;  // equals materialize()'s Graph::hash()
  // True when `graph` was built at enumeration (the rewrite drops dead ops,
  // or incremental candidates were turned off): its cost is then the whole
  // graph's.
  bool whole = false;
  int num_ops = 0;    // equals materialize()'s Graph::num_ops()
  // Built at once when the rewrite leaves dead ops behind (the incremental
  // bookkeeping does not cover them); otherwise null until materialized.
  mutable GraphPtr graph;
};

// The rewritten graph of `c` on `parent` (cached in c.graph). Its nodes are
// exactly those the full rebuild produced before: the parent's untouched ops
// (shared), clones of the readers of redirected tensors, then the targets.
GraphPtr materialize(const Graph& parent, const Candidate& c);

// The cost of `c`'s graph under `backend`. `parent_costs` is
// parent.op_costs(backend) and `parent_cost` its sum. Context-free backends:
// the parent's cost minus the removed ops plus the added ones (and ops whose
// weight-side flag flipped): equal to the full graph's cost up to floating-
// point reassociation. Otherwise (the fitted backend, whose in_context
// prices an op by its neighbours) the graph is materialized and costed whole.
double candidate_cost(const Graph& parent, const Candidate& c, CostBackend* backend,
                      const std::vector<double>& parent_costs, double parent_cost);

// Calls `emit` with every rewrite the rule produces on `graph` and the ops
// its match bound, in match order, until it returns false. Results with a
// cycle, with more than `max_ops` ops (0: no cap), whose target shapes fail,
// or that would leave a matched op's unmapped output in use are skipped.
// `incremental` false builds every result whole (the engine before
// incremental candidates; kept to compare against). Returns the number of
// complete matches found (including skipped ones).
int for_each_candidate(const Graph& graph, const Rule& rule, int max_ops,
                       const std::function<bool(Candidate&&, const MatchedOps&)>& emit,
                       bool incremental = true);

// for_each_candidate with every result materialized.
int for_each_rewrite(const Graph& graph, const Rule& rule, int max_ops,
                     const std::function<bool(GraphPtr, const MatchedOps&)>& emit);

// The locations of every xfer on one graph: candidates[x][l] is what
// applying xfer x at location l produces. Duplicates (by canonical hash,
// against the current graph and every earlier candidate of this step) are
// dropped before indices are assigned; at most `max_locations` per xfer.
struct Locations {
  GraphPtr parent;
  std::vector<std::vector<Candidate>> candidates;
  std::vector<std::vector<MatchedOps>> matched;  // parallel to candidates
  std::vector<int> num_matches;  // complete matches before any filtering
  // The graph of location (x, l), built on first use.
  GraphPtr graph(int x, int l) const { return materialize(*parent, candidates[x][l]); }
  // Per xfer, the cost of every candidate (candidate_cost).
  std::vector<std::vector<double>> costs(CostBackend* backend) const;
};
Locations enumerate_locations(GraphPtr graph, const std::vector<Rule>& rules,
                              int max_locations, int max_ops, bool incremental = true);

}  // namespace taso

#endif  // TASO_RULES_H_
