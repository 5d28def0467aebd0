// Pricing rewrite candidates without building them (CandidateCoster).
#include "taso/coster.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace taso {

CandidateCoster::CandidateCoster(const Graph& parent, CostBackend* backend)
    : parent_(parent), backend_(backend), context_free_(backend->context_free()) {
  if (context_free_) {
    costs_ = parent.op_costs(backend);
  } else {  // Graph::op_costs in two steps, keeping the costs before the revision
    base_ = parent.base_op_costs(backend);
    costs_ = base_;
    backend->in_context(parent, &costs_);
    view_pos_.assign(parent.size(), -1);
    for (int i = 0; i < parent.size(); ++i) {
      const Node& node = parent.node(i);
      parent_view_.add_op(node.type, &node.params, &node.outputs, parent.weight_side(i));
      for (const TensorRef& t : node.inputs)
        parent_view_.add_input(parent.index_of(t.guid), t.index);
    }
  }
  prefix_.push_back(0.0);
  for (int i = 0; i < parent.size(); ++i) {
    parent_magnitude_ += std::fabs(costs_[i]);
    parent_cost_ += costs_[i];  // as Graph::cost sums
    if (costs_[i] != 0) {  // adding 0 leaves a sum unchanged: skip free ops
      nonfree_.push_back(i);
      nonfree_costs_.push_back(costs_[i]);
      prefix_.push_back(parent_cost_);
    }
  }
  const size_t n = parent.size();
  used_.assign(n, 0);
  pulled_.assign(n, 0);
  special_.assign(n, 0);
  flip_.assign(n, 0);
  flip_cost_.assign(n, 0.0);
}

namespace {

// The prices of target ops, kept across candidates, parents and costers of
// one thread: a rewrite at each twin place of a repeated block adds ops of
// the same configuration, and a multi-location action prices the same
// rewrites again on every graph it builds, each time on fresh target nodes
// (whose cost memo is empty). Building an op's configuration (parameters
// and shapes copied) cost more than the analytic price itself. A slot is
// found by a hash of the backend, the node's local hash (type, parameters,
// output shapes) and the input shapes, and used only where the backend and
// the whole configuration are equal (epsilon by its bits, as OpConfig::key
// writes it): the backend's price of an equal configuration (op_cost is a
// function of it: memoized by its key, or computed) is the price. Each
// slot's configuration keeps its vectors' capacity from op to op.
struct PriceMemo {
  struct Slot {
    uint64_t backend = 0;  // CostBackend::instance_id(); 0: empty
    uint64_t hash = 0;
    OpConfig config;
    double ms = 0;
  };
  static constexpr size_t kSlots = 256;
  std::vector<Slot> slots = std::vector<Slot>(kSlots);
};
thread_local PriceMemo tl_prices;

bool same_bits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return x == y;
}

}  // namespace

const Shape& CandidateCoster::input_shape(const Candidate& c, const TensorRef& t) const {
  if (t.guid <= parent_.max_guid()) return parent_.shape(t);
  return c.added[static_cast<size_t>(t.guid - parent_.max_guid() - 1)]->outputs[t.index];
}

double CandidateCoster::added_cost(const Candidate& c, size_t j) const {
  if (c.added_ws[j]) return 0.0;
  const Node& node = *c.added[j];
  double ms;
  if (node.cost.get(backend_->instance_id(), &ms)) return ms;
  uint64_t hash = hash_combine(node_local_hash(node), backend_->instance_id());
  for (const TensorRef& t : node.inputs) {
    const Shape& shape = input_shape(c, t);
    hash = hash_combine(hash, shape.size());
    for (int64_t d : shape) hash = hash_combine(hash, static_cast<uint64_t>(d));
  }
  PriceMemo::Slot& slot = tl_prices.slots[hash % PriceMemo::kSlots];
  OpConfig& config = slot.config;
  bool same = slot.backend == backend_->instance_id() && slot.hash == hash &&
              config.type == node.type && config.params == node.params &&
              same_bits(config.params.epsilon, node.params.epsilon) &&
              config.output_shapes == node.outputs &&
              config.input_shapes.size() == node.inputs.size();
  for (size_t k = 0; k < node.inputs.size() && same; ++k)
    same = config.input_shapes[k] == input_shape(c, node.inputs[k]);
  if (!same) {
    slot.backend = 0;  // empty until priced (op_cost may throw)
    config.type = node.type;
    config.params = node.params;
    config.weight_side = false;
    config.input_shapes.resize(node.inputs.size());
    for (size_t k = 0; k < node.inputs.size(); ++k)
      config.input_shapes[k] = input_shape(c, node.inputs[k]);
    config.output_shapes = node.outputs;
    slot.ms = backend_->op_cost(config);
    slot.backend = backend_->instance_id();
    slot.hash = hash;
  }
  // The memo Graph::op_costs reads once the candidate is materialized.
  node.cost.set(backend_->instance_id(), slot.ms);
  return slot.ms;
}

// Graph::Create's depth-first placement, for the ops it moves: target op j
// and, before it, its inputs not placed yet. Parent ops below `bound` (the
// root being visited) are placed already.
void CandidateCoster::place_added(const Candidate& c, size_t j, int bound) {
  added_placed_[j] = 1;
  for (const TensorRef& t : c.added[j]->inputs) {
    if (t.guid <= parent_.max_guid()) {
      const int p = parent_.index_of(t.guid);
      if (p > bound && pulled_[p] != stamp_) place_parent(p, bound);
    } else {
      const size_t k = static_cast<size_t>(t.guid - parent_.max_guid() - 1);
      if (!added_placed_[k]) place_added(c, k, bound);
    }
  }
  block_.emplace_back(1, static_cast<int>(j));
}

void CandidateCoster::place_parent(int p, int bound) {
  // An ancestor of a variable: it reads no matched op (rewrite() rejected
  // variables that read the match), so its inputs are parent ops.
  pulled_[p] = stamp_;
  last_pulled_ = std::max(last_pulled_, p);
  for (const TensorRef& t : parent_.node(p).inputs) {
    const int q = parent_.index_of(t.guid);
    if (q > bound && pulled_[q] != stamp_) place_parent(q, bound);
  }
  block_.emplace_back(0, p);
}

// Stamps what candidate `c` changes in the parent (removed ops, clones,
// weight-side flips and their costs) and prices its target ops; returns the
// first parent position it changes.
int CandidateCoster::mark(const Candidate& c) {
  ++stamp_;
  int first = parent_.size();
  last_removed_ = -1;
  last_pulled_ = -1;
  for (int i : c.removed) {
    used_[i] = stamp_;
    first = std::min(first, i);
    last_removed_ = std::max(last_removed_, i);
  }
  for (int i : c.weight_side_flips) {
    flip_[i] = stamp_;
    special_[i] = stamp_;
    first = std::min(first, i);
    if (!parent_.weight_side(i)) {
      flip_cost_[i] = 0.0;  // now derives from weights only: free
    } else {
      const int t = parent_.node(i).type;
      OpConfig config = parent_.op_config(i);
      config.weight_side = false;
      flip_cost_[i] = t == OP_INPUT || t == OP_WEIGHT ? 0.0 : backend_->op_cost(config);
    }
  }
  // The readers of redirected tensors (clones): where target ops get placed.
  std::vector<int>& extra = extra_;
  extra.clear();
  for (int m : c.removed)
    for (auto [reader, slot] : parent_.consumers(m))
      if (used_[reader] != stamp_ && special_[reader] != stamp_) {
        special_[reader] = stamp_;
        extra.push_back(reader);
        first = std::min(first, reader);
      }
  for (int i : c.weight_side_flips) extra.push_back(i);
  std::sort(extra.begin(), extra.end());
  extra.erase(std::unique(extra.begin(), extra.end()), extra.end());
  added_placed_.assign(c.added.size(), 0);
  added_cost_.resize(c.added.size());
  for (size_t j = 0; j < c.added.size(); ++j) added_cost_[j] = added_cost(c, j);
  return first;
}

// Appends parent op p to the view: its own node (a clone's type, parameters
// and shapes are the parent node's), read through the redirects, with its
// context-free cost as the candidate graph's Graph::base_op_costs gives it
// (a clone is measured again there, with the parent node's configuration:
// the op_cost memo returns the parent node's value).
void CandidateCoster::view_parent(const Candidate& c, int p) {
  view_pos_[p] = view_.size();
  if (special_[p] != stamp_) {  // reads what it read in the parent, unchanged
    view_.add_op_of(parent_view_, p, [this](int q) { return view_pos(q); });
    view_costs_.push_back(base_[p]);
    return;
  }
  const Node& node = parent_.node(p);
  const bool flipped = flip_[p] == stamp_;
  view_.add_op(node.type, &node.params, &node.outputs,
               flipped ? !parent_.weight_side(p) : parent_.weight_side(p));
  for (const TensorRef& t : node.inputs) {
    const int src = parent_.index_of(t.guid);
    if (used_[src] == stamp_) {
      const TensorRef to = redirected(c, t);
      view_.add_input(added_pos_[static_cast<size_t>(to.guid - parent_.max_guid() - 1)],
                      to.index);
    } else {
      view_.add_input(view_pos(src), t.index);
    }
  }
  view_costs_.push_back(flipped ? flip_cost_[p] : base_[p]);
}

void CandidateCoster::view_added(const Candidate& c, size_t j) {
  const Node& node = *c.added[j];
  added_pos_[j] = view_.size();
  view_.add_op(node.type, &node.params, &node.outputs, c.added_ws[j] != 0);
  for (const TensorRef& t : node.inputs) {
    if (t.guid <= parent_.max_guid())
      view_.add_input(view_pos(parent_.index_of(t.guid)), t.index);
    else
      view_.add_input(added_pos_[static_cast<size_t>(t.guid - parent_.max_guid() - 1)],
                      t.index);
  }
  view_costs_.push_back(added_cost_[j]);
}

// The candidate graph as a view, op by op in Graph::Create's order (the
// walk of the context-free path below, over every op): the parent's ops
// before `first` unchanged, then the rest. Revised in context and summed in
// that order, as Graph::cost sums.
double CandidateCoster::cost_in_context(const Candidate& c, int first) {
  const int n = parent_.size();
  view_.assign_prefix(parent_view_, first, view_valid_);
  view_valid_ = view_first_ = first;
  view_costs_.assign(base_.begin(), base_.begin() + first);
  added_pos_.assign(c.added.size(), -1);
  auto flush = [&] {
    for (auto [kind, idx] : block_) {
      if (kind) view_added(c, static_cast<size_t>(idx));
      else view_parent(c, idx);
    }
    block_.clear();
  };
  for (int i = first; i < n; ++i) {
    if (used_[i] == stamp_ || pulled_[i] == stamp_) continue;
    if (special_[i] == stamp_) {
      for (const TensorRef& t : parent_.node(i).inputs) {
        if (used_[parent_.index_of(t.guid)] != stamp_) continue;
        const TensorRef to = redirected(c, t);
        const size_t j = static_cast<size_t>(to.guid - parent_.max_guid() - 1);
        if (!added_placed_[j]) place_added(c, j, i);
      }
      flush();
    }
    view_parent(c, i);
  }
  for (size_t j = 0; j < c.added.size(); ++j)
    if (!added_placed_[j]) place_added(c, j, n);
  flush();
  for (const TensorRef& t : parent_.outputs()) {
    const int src = parent_.index_of(t.guid);
    if (used_[src] == stamp_) {
      const TensorRef to = redirected(c, t);
      view_.add_output(added_pos_[static_cast<size_t>(to.guid - parent_.max_guid() - 1)],
                       to.index);
    } else {
      view_.add_output(view_pos(src), t.index);
    }
  }
  view_.finish();
  backend_->in_context(view_, &view_costs_);
  double total = 0;
  for (double v : view_costs_) total += v;
  return total;
}

bool CandidateCoster::estimate(const Candidate& c, double* value, double* bound) {
  if (c.whole || !context_free_) return false;
  mark(c);
  // cost(c) sums, in its order, every parent op's cost but the removed
  // ones' (a flipped op's flip_cost_), and the target ops'. The same terms
  // summed here by difference from the parent's sum. Each of the two sums
  // is off the exact one by at most n u M (n: the terms below, M: the sum
  // of their magnitudes, u = 2^-53), so they differ by at most
  // n DBL_EPSILON M.
  double delta = 0, magnitude = parent_magnitude_;
  size_t terms = static_cast<size_t>(parent_.size());
  for (int i : c.removed) {
    delta -= costs_[i];
    magnitude += std::fabs(costs_[i]);
  }
  for (int i : c.weight_side_flips) {
    delta += flip_cost_[i] - costs_[i];
    magnitude += std::fabs(flip_cost_[i]) + std::fabs(costs_[i]);
  }
  for (double v : added_cost_) {
    delta += v;
    magnitude += std::fabs(v);
  }
  terms += c.removed.size() + 2 * c.weight_side_flips.size() + added_cost_.size() + 4;
  const double v = parent_cost_ + delta;
  // That difference's bound, sixteen times over.
  const double b = 16.0 * static_cast<double>(terms) * DBL_EPSILON * magnitude;
  if (!std::isfinite(v) || !std::isfinite(b)) return false;
  *value = v;
  *bound = b;
  return true;
}

double CandidateCoster::cost(const Candidate& c) {
  if (c.whole) return materialize(parent_, c)->cost(backend_);  // built at enumeration
  const int first = mark(c);
  if (!context_free_) return cost_in_context(c, first);
  const std::vector<int>& extra = extra_;
  const int n = parent_.size();

  // The parent's sum up to the first change, then op by op.
  size_t k = std::lower_bound(nonfree_.begin(), nonfree_.end(), first) - nonfree_.begin();
  double total = prefix_[k];
  auto fold_block = [&] {
    for (auto [kind, idx] : block_) {
      const double v = kind ? added_cost_[idx] : costs_[idx];
      if (v != 0) total += v;
    }
    block_.clear();
  };
  size_t e = 0;
  while (k < nonfree_.size() || e < extra.size()) {
    // Past the last clone and flip (every one of them is in `extra`), the
    // last removed op and the last op pulled forward (only a clone's
    // targets pull ops, so none is pulled from here on), every op left
    // adds its parent cost: the tail below adds the same terms in the same
    // order, without the per-op checks.
    if (e == extra.size() && nonfree_[k] > std::max(last_removed_, last_pulled_)) break;
    int i;
    if (e < extra.size() && (k >= nonfree_.size() || extra[e] <= nonfree_[k])) {
      i = extra[e++];
      if (k < nonfree_.size() && nonfree_[k] == i) ++k;
    } else {
      i = nonfree_[k++];
    }
    if (special_[i] == stamp_) {
      // A reader of redirected tensors (a clone): the target ops it reads
      // that are not placed yet go right before it, as in Graph::Create.
      for (const TensorRef& t : parent_.node(i).inputs) {
        const int src = parent_.index_of(t.guid);
        if (used_[src] != stamp_) continue;
        const TensorRef to = redirected(c, t);
        const size_t j = static_cast<size_t>(to.guid - parent_.max_guid() - 1);
        if (!added_placed_[j]) place_added(c, j, i);
      }
      fold_block();
    }
    if (used_[i] == stamp_ || pulled_[i] == stamp_) continue;
    const double v = flip_[i] == stamp_ ? flip_cost_[i] : costs_[i];
    if (v != 0) total += v;
  }
  for (const size_t end = nonfree_costs_.size(); k < end; ++k) total += nonfree_costs_[k];
  // Target ops no clone reads come last, in Create's order.
  for (size_t j = 0; j < c.added.size(); ++j)
    if (!added_placed_[j]) place_added(c, j, n);
  fold_block();
  return total;
}

}  // namespace taso
