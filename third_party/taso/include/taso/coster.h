// Pricing rewrite candidates without building their graphs.
#ifndef TASO_COSTER_H_
#define TASO_COSTER_H_

#include <utility>
#include <vector>

#include "taso/candidate.h"
#include "taso/cost.h"
#include "taso/graph.h"

namespace taso {

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
//
// Thread safety: not thread-safe; one coster per thread (it holds
// per-candidate scratch). Costers of different threads may share the
// parent graph and the backend (both thread-safe).
class CandidateCoster {
 public:
  CandidateCoster(const Graph& parent, CostBackend* backend);
  // Graph::cost of the parent.
  double parent_cost() const { return parent_cost_; }
  double cost(const Candidate& c);
  // cost(c) estimated from the parent's cost and what c changes (its
  // removed, added and flipped ops' costs), without cost(c)'s walk through
  // the parent's order to its end, and a bound on how far cost(c) lies from
  // it (the two sum in different orders): |cost(c) - *value| <= *bound,
  // sixteen times the textbook bound on the two sums' rounding together
  // (n u times the sum of the terms' magnitudes each). False, with nothing
  // set, where cost(c) is taken otherwise (a candidate built at
  // enumeration, a context-dependent backend) or a figure is not finite.
  bool estimate(const Candidate& c, double* value, double* bound);

 private:
  int mark(const Candidate& c);
  double cost_in_context(const Candidate& c, int first);
  // View position of parent op p in the candidate being laid out.
  int view_pos(int p) const { return p < view_first_ ? p : view_pos_[p]; }
  void view_parent(const Candidate& c, int p);
  void view_added(const Candidate& c, size_t j);
  // The shape of tensor `t` a target op of `c` reads: a parent tensor or
  // an earlier target op's output.
  const Shape& input_shape(const Candidate& c, const TensorRef& t) const;
  // Target op j's price (its cost memo, else the thread's price memo, else
  // the backend's op_cost); 0 where it derives from weights only.
  double added_cost(const Candidate& c, size_t j) const;
  void place_added(const Candidate& c, size_t j, int bound);
  void place_parent(int p, int bound);

  const Graph& parent_;
  CostBackend* backend_;
  bool context_free_;
  std::vector<double> costs_;   // parent.op_costs(backend)
  std::vector<int> nonfree_;    // parent indices with a non-zero cost, in order
  std::vector<double> nonfree_costs_;  // their costs, in that order
  std::vector<double> prefix_;  // prefix_[k]: the sum of the first k of them
  double parent_cost_ = 0;
  double parent_magnitude_ = 0;  // the sum of |costs_[i]| (estimate's bound)
  // Per-candidate scratch, stamped to avoid clearing.
  int stamp_ = 0;
  // The candidate's last removed op and last op pulled forward (-1: none).
  int last_removed_ = -1, last_pulled_ = -1;
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

}  // namespace taso

#endif  // TASO_COSTER_H_
