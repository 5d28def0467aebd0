// Matching a rule's source pattern on a graph.
//
// Matching is a depth-first search over the source ops in pattern order;
// the ops tried for each pattern op are taken in the graph's topological
// order, from the neighbourhood of the ops matched above where it tells
// (the readers of a matched op or of a bound variable's tensor, what a
// later source op reading a matched op reads), else from every op of the
// type, so the sequence of matches is deterministic and the same either way.
//
// Thread safety: none of these types may be shared between threads while in
// use (each search or enumeration has its own). for_each_match reads the
// graph's lazily built indexes (Graph::consumers, ops_of_type,
// depends_on), so see Graph for sharing a graph.
#ifndef TASO_MATCH_H_
#define TASO_MATCH_H_

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "taso/graph.h"
#include "taso/pattern.h"

namespace taso {

// The ops of the current graph that one match of a rule's source pattern
// bound, as guids in source-pattern order.
using MatchedOps = std::vector<int64_t>;

// One complete match, as the matcher holds it while it calls back (views of
// its buffers, valid during the call only, on the matcher's thread).
struct Match {
  // Source op -> the graph index of the op it bound, in pattern order.
  const std::vector<int>& ops;
  // Graph index -> whether a source op bound it (1 or 0: bytes, not
  // std::vector<bool>'s bits, which the search reads and writes for every op
  // it tries).
  const std::vector<uint8_t>& used;
  // Variable v (indexed by -v, Rule::num_variable_slots entries): the tensor
  // it bound, where `is_bound[-v]`.
  const std::vector<TensorRef>& bound;
  const std::vector<uint8_t>& is_bound;
};

// Buffers the matcher reuses across the rules matched on one graph, so that
// matching a large rule set does not allocate them per rule. Not
// thread-safe: one matcher at a time.
struct MatchScratch {
  std::vector<TensorRef> bound;
  std::vector<uint8_t> is_bound, used;
  std::vector<int> mapped;
  std::vector<std::vector<int8_t>*> memo;  // per source op: its ParamMemo entry
  std::vector<std::vector<int>> local;  // per search depth: the ops to try
  // A node's input shapes for its parameter checks (kept between checks,
  // with their capacity).
  std::vector<Shape> shapes;
  // The producers of the variables bound above the last source op
  // (the search's fast path for a last op of fresh variables).
  std::vector<int> above;
};

// Memo of source-op parameter checks on one graph, shared by every rule
// matched on it: large rule sets constrain their source ops alike (a conv's
// kernel, stride, padding, activation), so each (op type, constraints) pair
// is checked once per node per graph instead of once per rule. Valid for
// one graph only. Not thread-safe: one matcher at a time.
class ParamMemo {
 public:
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

// Whether `graph` has, for every op type of `rule`'s source pattern, at
// least as many ops of that type as the pattern has: a cheap necessary
// condition for a match, which rules out most rules of a large set without
// a search or any per-rule set-up.
// It reads the graph's op counts per type (Graph::num_ops_of_type), kept
// since the graph's creation, so checking a whole rule set is cheap.
bool may_match(const Graph& graph, const Rule& rule);

// Calls `on_match` with every match of `rule`'s source pattern on `graph`, in
// match order, until it returns false. Element-wise source ops match
// equal-shaped operands only (rules are derived without broadcasting); a
// source op's parameter constraints are checked through `params` (valid for
// `graph` only). Returns the number of complete matches found.
// `skip_reading_match`: a complete match one of whose variables is, or
// transitively reads, a matched op is counted but not passed to `on_match`
// (a rewrite of it would close a cycle: the candidate builder rejects it
// first thing). Pairs of unconnected source ops (two relus anywhere) match
// thousands of times on a chain of blocks, nearly all such; skipping them
// here spares a call and a candidate each.
int for_each_match(const Graph& graph, const Rule& rule, ParamMemo* params,
                   MatchScratch* scratch,
                   const std::function<bool(const Match&)>& on_match,
                   bool skip_reading_match = false);

}  // namespace taso

#endif  // TASO_MATCH_H_
