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

// Calls `emit` with every rewritten graph the rule produces on `graph` and
// the ops its match bound, in match order, until it returns false. Results with a cycle, with more than
// `max_ops` ops (0: no cap), whose target shapes fail, or that would leave a
// matched op's unmapped output in use are skipped. Returns the number of
// complete matches found (including skipped ones).
int for_each_rewrite(const Graph& graph, const Rule& rule, int max_ops,
                     const std::function<bool(GraphPtr, const MatchedOps&)>& emit);

// The locations of every xfer on one graph: candidates[x][l] is the graph
// that applying xfer x at location l produces. Duplicates (by canonical
// hash, against the current graph and every earlier candidate of this step)
// are dropped before indices are assigned; at most `max_locations` per xfer.
struct Locations {
  std::vector<std::vector<GraphPtr>> candidates;
  std::vector<std::vector<MatchedOps>> matched;  // parallel to candidates
  std::vector<int> num_matches;  // complete matches before any filtering
};
Locations enumerate_locations(const Graph& graph, const std::vector<Rule>& rules,
                              int max_locations, int max_ops);

}  // namespace taso

#endif  // TASO_RULES_H_
