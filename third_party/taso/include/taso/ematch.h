// E-matching: rules' source patterns matched on a compact mirror of an
// e-graph (docs/benchmark.md, "Equality saturation").
//
// The e-graph itself lives in Python (xflowrl/search/eqsat/egraph.py); the
// matcher holds a copy of what matching reads, replaced whole by
// set_graph() once per saturation iteration (after the e-graph's rebuild):
// per e-node its op type (an int code of the caller's), canonical class,
// whether it is usable (alive and not filtered), its child classes and,
// for a projection e-node (the caller's `out_type`), the output index it
// projects; per class its e-nodes in the caller's order. What an op of a
// pattern requires of one e-node alone (type, arity, parameter
// constraints, equal element-wise operand shapes) is the caller's too: a
// "signature" is a bit per e-node (set_fit), so that the parameter
// semantics are written once, in Python.
//
// match() enumerates a pattern's matches in exactly the order of the
// Python reference matcher (`Rewrite.matches`, a depth-first search over
// the pattern's planned steps) and stops at `limit`; tests/search check
// that both return the same matches on real e-graphs for every rule of
// the shipped sets.
//
// Thread safety: an EMatcher is not safe to use from two threads at once
// (match() fills per-graph caches); distinct EMatchers share nothing.
// Every error (an index out of range, a malformed pattern) is a
// std::invalid_argument; nothing aborts.
#ifndef TASO_EMATCH_H_
#define TASO_EMATCH_H_

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace taso {

// One source op of a pattern. An input is (op, output index) for another
// source op (op >= 0) or (-1 - v, 0) for pattern variable v.
struct EPatternOp {
  int32_t type = 0;       // op type code
  int32_t signature = 0;  // set_fit's signature: type, arity, own conditions
  bool projected = false; // a multi-output op read through projections (split)
  std::vector<std::pair<int32_t, int32_t>> inputs;
};

// How the search finds the e-nodes a source op may bind (Python's _Step).
enum class EStepKind : int32_t { kScan = 0, kDown = 1, kUp = 2 };
struct EStep {
  EStepKind kind = EStepKind::kScan;
  int32_t op = 0;       // source op placed by this step
  int32_t via_op = -1;  // down: the placed consumer; up: the placed producer (-1: a variable)
  int32_t slot = -1;    // down: the consumer's input slot
  int32_t index = 0;    // the output index read
  int32_t var = 0;      // up through a variable: its number v (>= 0)
};

struct EPattern {
  std::vector<EPatternOp> ops;
  std::vector<EStep> steps;
  int32_t num_vars = 0;
  // Variables in the order a match binds them (their numbers): the order
  // of match()'s variable classes.
  std::vector<int32_t> var_order;
};

// The matches found by one match() call: match m binds source op j to
// e-node nodes[m * num_ops + j] and variable var_order[k] to class
// vars[m * num_vars + k].
struct EMatches {
  size_t count = 0;
  std::vector<int32_t> nodes;
  std::vector<int32_t> vars;
};

class EMatcher {
 public:
  // The e-graph to match, replacing the last one (caches are dropped; the
  // signatures' bits and the applied matches stay). Arrays per e-node n <
  // num_nodes: type[n], cls[n] (canonical class id, < num_class_ids),
  // usable[n], out_index[n] (for an e-node of `out_type`: the index it
  // projects, or -1 where the e-graph's memo no longer holds it, a merged
  // e-node; read for those only), children children[child_start[n] .. child_start[n+1]).
  // Classes: class_order lists the classes (as the caller iterates them);
  // class c's e-nodes are class_nodes[class_start[k] .. class_start[k+1])
  // for c = class_order[k].
  void set_graph(int32_t num_class_ids, int32_t out_type, const std::vector<int32_t>& type,
                 const std::vector<int32_t>& cls, const std::vector<uint8_t>& usable,
                 const std::vector<int32_t>& out_index,
                 const std::vector<int32_t>& child_start,
                 const std::vector<int32_t>& children,
                 const std::vector<int32_t>& class_order,
                 const std::vector<int32_t>& class_start,
                 const std::vector<int32_t>& class_nodes);
  // Signature `signature`'s bits for e-nodes first .. first + bits.size():
  // 1 where the e-node may be an op of that signature by itself. Bits of
  // e-nodes past those set read 0.
  void set_fit(int32_t signature, size_t first, const std::vector<uint8_t>& bits);
  // Registers a pattern; returns its id. Checked here (op, variable and
  // step indices in range; every op placed once).
  int32_t add_pattern(const EPattern& pattern);
  // A named set of classes (`within` of match()): `classes` and those up
  // to `steps` reader steps above them in the current graph.
  void set_within(int32_t id, const std::vector<int32_t>& classes, int32_t steps);
  // Match (pattern, nodes) is left out of later match() calls.
  void add_applied(int32_t pattern, const std::vector<int32_t>& nodes);
  // At most `limit` matches of `pattern`, depth first over its steps; those
  // added by add_applied are skipped and not counted. within >= 0: the
  // pattern's first (scan) step only takes e-nodes whose class is in that
  // set_within set.
  EMatches match(int32_t pattern, size_t limit, int32_t within);
  int32_t num_patterns() const { return static_cast<int32_t>(patterns_.size()); }

 private:
  struct Search;
  bool fits(int32_t signature, int32_t node) const;
  int32_t out_class(int32_t tuple_class, int32_t index) const;
  const std::vector<int32_t>& scan(int32_t signature);
  const std::vector<int32_t>& parents_of(int32_t cls, int32_t type) const;
  const std::vector<int32_t>& class_members(int32_t cls) const;

  // The graph.
  int32_t num_class_ids_ = 0;
  int32_t out_type_ = -1;
  std::vector<int32_t> type_, cls_, out_index_, child_start_, children_;
  std::vector<uint8_t> usable_;
  std::vector<std::vector<int32_t>> members_;          // class -> e-nodes
  std::unordered_map<int32_t, std::vector<int32_t>> by_type_;
  std::unordered_map<uint64_t, std::vector<int32_t>> parents_;  // (class, type) -> readers
  std::unordered_map<uint64_t, int32_t> outs_;  // (tuple class, index) -> class
  std::vector<std::vector<int32_t>> readers_;   // class -> reading classes
  // Caches of the graph.
  std::unordered_map<int32_t, std::vector<int32_t>> scans_;
  std::unordered_map<uint64_t, std::vector<int32_t>> scans_within_;
  std::unordered_map<int32_t, std::vector<uint8_t>> within_;
  // Kept across graphs.
  std::vector<std::vector<uint8_t>> fit_;
  std::vector<EPattern> patterns_;
  std::unordered_map<int32_t, int32_t> signature_type_;
  struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };
  std::vector<std::unordered_set<std::vector<int32_t>, VecHash>> applied_;
};

}  // namespace taso

#endif  // TASO_EMATCH_H_
