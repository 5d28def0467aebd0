// Matching a rule's source pattern: a depth-first search with a memo of
// parameter checks.
#include "taso/match.h"

#include <algorithm>
#include <array>

namespace taso {

namespace {

class Matcher {
 public:
  Matcher(const Graph& g, const Rule& r, ParamMemo* params, MatchScratch* scratch,
          const std::function<bool(const Match&)>& on_match, bool skip_reading_match)
      : g_(g), r_(r), params_(params), scratch_(scratch), on_match_(on_match),
        skip_reading_match_(skip_reading_match),
        bound_(scratch->bound), is_bound_(scratch->is_bound), mapped_(scratch->mapped),
        used_(scratch->used), memo_(scratch->memo),
        match_{mapped_, used_, bound_, is_bound_},
        fresh_last_(last_reads_fresh_variables(r)) {
    const size_t slots = static_cast<size_t>(r.num_variable_slots());
    bound_.assign(slots, TensorRef{});
    is_bound_.assign(slots, 0);
    mapped_.assign(r.src.size(), -1);
    if (scratch->local.size() < r.src.size()) scratch->local.resize(r.src.size());
    // The search leaves every entry false again (each op it marks is
    // unmarked on the way back, and ~Matcher unmarks what an exception
    // left marked), so a buffer of the graph's size needs no clearing: of
    // the ~1,700 rules of a set, hundreds get this far on every graph.
    if (used_.size() != static_cast<size_t>(g.size())) used_.assign(g.size(), 0);
    memo_.assign(r.src.size(), nullptr);
  }
  ~Matcher() {
    // What a throwing on_match left marked: at most the ops mapped at the
    // depths it was called from (entries of deeper, finished depths are
    // unmarked already; clearing them again is harmless).
    for (int m : mapped_)
      if (m >= 0) used_[m] = 0;
  }

  int run() {
    dfs(0);
    return matches_;
  }

 private:
  // Returns false once on_match asked to stop.
  bool dfs(size_t depth) {
    if (depth == r_.src.size()) {
      ++matches_;
      if (skip_reading_match_ && variable_reads_match()) return true;
      return on_match_(match_);
    }
    if (fresh_last_ && depth + 1 == r_.src.size()) return dfs_fresh_last(depth);
    const PatternOp& pop = r_.src[depth];
    // Ops reading an already matched op are found through its consumers,
    // which keeps the search local; otherwise scan all ops of the type.
    // Per-depth buffer (deeper levels of the search use their own).
    std::vector<int>& local = scratch_->local[depth];
    local.clear();
    Span<int> candidates = g_.ops_of_type(pop.type);
    if (find_local(depth, &local)) {
      std::sort(local.begin(), local.end());
      local.erase(std::unique(local.begin(), local.end()), local.end());
      candidates = {local.data(), local.data() + local.size()};
    }
    for (int i : candidates) {
      if (used_[i]) continue;
      // The graph's flat arrays, not the node: most ops tried fail here or
      // on their inputs, and the nodes are scattered in memory.
      if (g_.op_type(i) != pop.type ||
          g_.num_inputs(i) != static_cast<int>(pop.inputs.size()))
        continue;
      // Variables this candidate binds; an op has few inputs (Rule::validate
      // allows at most 8 to a source op), so no heap.
      std::array<int, 8> newly_bound;
      size_t num_newly_bound = 0;
      bool ok = true;
      for (size_t k = 0; k < pop.inputs.size() && ok; ++k) {
        const PatternTensor& pt = pop.inputs[k];
        const TensorRef& actual = g_.input(i, static_cast<int>(k));
        if (pt.op >= 0) {
          ok = g_.input_op(i, static_cast<int>(k)) == mapped_[pt.op] && actual.index == pt.index;
        } else if (is_bound_[-pt.op]) {
          ok = bound_[-pt.op] == actual;
        } else {
          is_bound_[-pt.op] = 1;
          bound_[-pt.op] = actual;
          newly_bound[num_newly_bound++] = -pt.op;
        }
      }
      if (ok && element_wise(pop.type)) ok = equal_operands(i);
      if (ok && !pop.params.empty()) ok = params_match(depth, i);
      bool go_on = true;
      if (ok) {
        mapped_[depth] = i;
        used_[i] = 1;
        go_on = dfs(depth + 1);
        used_[i] = 0;
      }
      for (size_t b = 0; b < num_newly_bound; ++b) is_bound_[newly_bound[b]] = 0;
      if (!go_on) return false;
    }
    return true;
  }

  // Element-wise ops in a source pattern match equal-shaped operands only
  // (equal_operands): rules (TASO's and ours) are derived without
  // broadcasting.
  static bool element_wise(int type) {
    return type == OP_EW_ADD || type == OP_EW_MUL || type == OP_EW_SUB || type == OP_EW_DIV;
  }
  bool equal_operands(int i) const { return g_.shape(g_.input(i, 0)) == g_.shape(g_.input(i, 1)); }

  // Whether the last source op reads only variables that no other source
  // op reads, each once (the second relu of relu(a), relu(b)).
  static bool last_reads_fresh_variables(const Rule& r) {
    if (r.src.empty()) return false;
    const PatternOp& last = r.src.back();
    for (size_t k = 0; k < last.inputs.size(); ++k) {
      const int var = last.inputs[k].op;
      if (var >= 0) return false;
      for (size_t k2 = 0; k2 < k; ++k2)
        if (last.inputs[k2].op == var) return false;
      for (size_t s = 0; s + 1 < r.src.size(); ++s)
        for (const PatternTensor& other : r.src[s].inputs)
          if (other.op == var) return false;
    }
    return true;
  }

  // dfs at the last source op when it reads fresh variables only: every
  // op of its type that fits (arity, equal element-wise shapes, parameters:
  // its variables bind whatever it reads) is a complete match, found where
  // the general loop would find it (find_local knows no neighbourhood for
  // such an op, so the general loop too tries every op of the type), and
  // variable_reads_match's answer for it is worked out before anything is
  // bound: a variable bound above is the op or reads it, or the op reads a
  // matched op. A match that check rejects (on a chain of blocks, nearly
  // every pair of two unconnected ops) is counted without binding, marking
  // or recursing. The same matches, in the same order, the same count and
  // the same calls of `on_match` as the general search.
  bool dfs_fresh_last(size_t depth) {
    const PatternOp& pop = r_.src[depth];
    const int arity = static_cast<int>(pop.inputs.size());
    const bool check_shapes = element_wise(pop.type);
    // The variables bound above: their producers, and whether one of them
    // is a matched op or reads one (then the check rejects every match here).
    std::vector<int>& above = scratch_->above;
    above.clear();
    bool rejected_above = false;
    if (skip_reading_match_) {
      for (size_t v = 0; v < bound_.size(); ++v) {
        if (!is_bound_[v]) continue;
        const int p = g_.index_of(bound_[v].guid);
        above.push_back(p);
        rejected_above = rejected_above || used_[p];
        for (size_t s = 0; s < depth && !rejected_above; ++s)
          rejected_above = mapped_[s] < p && g_.depends_on(p, mapped_[s]);
      }
    }
    for (int i : g_.ops_of_type(pop.type)) {
      if (used_[i]) continue;
      if (g_.op_type(i) != pop.type || g_.num_inputs(i) != arity) continue;
      if (check_shapes && !equal_operands(i)) continue;
      if (!pop.params.empty() && !params_match(depth, i)) continue;
      ++matches_;
      if (skip_reading_match_ && (rejected_above || reads_match(depth, i, above))) continue;
      for (int k = 0; k < arity; ++k) {
        const int var = -pop.inputs[k].op;
        is_bound_[var] = 1;
        bound_[var] = g_.input(i, k);
      }
      mapped_[depth] = i;
      used_[i] = 1;
      const bool go_on = on_match_(match_);
      used_[i] = 0;
      for (int k = 0; k < arity; ++k) is_bound_[-pop.inputs[k].op] = 0;
      if (!go_on) return false;
    }
    return true;
  }

  // variable_reads_match's answer for op `i` at the last depth, its
  // variables fresh, the variables bound above produced by `above`: one of
  // those is `i` or reads it, or an input of `i` is, or reads, a matched op
  // (an op reads only ops before it, so `i` is never among its inputs'
  // ancestors).
  bool reads_match(size_t depth, int i, const std::vector<int>& above) const {
    for (int p : above)
      if (p == i || (i < p && g_.depends_on(p, i))) return true;
    for (int k = 0, n = g_.num_inputs(i); k < n; ++k) {
      const int q = g_.input_op(i, k);
      if (used_[q]) return true;
      for (size_t s = 0; s < depth; ++s)
        if (mapped_[s] < q && g_.depends_on(q, mapped_[s])) return true;
    }
    return false;
  }

  // Fills `local` with a superset of the ops that source op `depth` can
  // match given the ops matched above it, found from those ops'
  // neighbourhood instead of by scanning every op of its type; returns
  // false where none is known (then every op of the type is tried). Sorted,
  // such a list keeps the scan's order (both ascend in graph order), so the
  // matches, their order and their number are those of the scan. In order
  // of preference:
  // - the op reads a matched op: that op's readers at the same input slot;
  // - the op reads a variable bound above: the readers of its tensor's
  //   producer at that slot (two convs of one input);
  // - a later source op reads both this op and a matched one (two matmuls
  //   whose outputs one add sums): the ops that the matched op's readers of
  //   that type read at this op's slot.
  bool find_local(size_t depth, std::vector<int>* local) const {
    const PatternOp& pop = r_.src[depth];
    for (size_t k = 0; k < pop.inputs.size(); ++k) {
      const PatternTensor& pt = pop.inputs[k];
      if (pt.op < 0) continue;
      for (auto [c, slot] : g_.consumers(mapped_[pt.op]))
        if (slot == static_cast<int>(k)) local->push_back(c);
      return true;
    }
    for (size_t k = 0; k < pop.inputs.size(); ++k) {
      const PatternTensor& pt = pop.inputs[k];
      if (!is_bound_[-pt.op]) continue;
      for (auto [c, slot] : g_.consumers(g_.index_of(bound_[-pt.op].guid)))
        if (slot == static_cast<int>(k)) local->push_back(c);
      return true;
    }
    for (size_t later = depth + 1; later < r_.src.size(); ++later) {
      const PatternOp& reader = r_.src[later];
      int this_slot = -1, matched_slot = -1;
      for (size_t k = 0; k < reader.inputs.size(); ++k) {
        const int op = reader.inputs[k].op;
        if (op == static_cast<int>(depth) && this_slot < 0) this_slot = static_cast<int>(k);
        if (op >= 0 && op < static_cast<int>(depth) && matched_slot < 0)
          matched_slot = static_cast<int>(k);
      }
      if (this_slot < 0 || matched_slot < 0) continue;
      const int matched = mapped_[reader.inputs[matched_slot].op];
      for (auto [c, slot] : g_.consumers(matched)) {
        if (slot != matched_slot) continue;
        if (g_.op_type(c) != reader.type ||
            g_.num_inputs(c) != static_cast<int>(reader.inputs.size()))
          continue;
        local->push_back(g_.input_op(c, this_slot));
      }
      return true;
    }
    return false;
  }

  // Whether a bound variable is, or transitively reads, a matched op (the
  // candidate builder's first check, CandidateBuilder::build).
  // An op reads only ops before it in the graph's (topological) order, so
  // the ancestor bitsets are looked up only for matched ops before p.
  bool variable_reads_match() const {
    for (size_t v = 0; v < bound_.size(); ++v) {
      if (!is_bound_[v]) continue;
      const int p = g_.index_of(bound_[v].guid);
      if (used_[p]) return true;
      for (int m : mapped_)
        if (m < p && g_.depends_on(p, m)) return true;
    }
    return false;
  }

  // Whether node `i` meets the parameter constraints of source op `depth`.
  // They do not depend on the bindings, so each (op, node) pair is checked
  // once per graph and remembered: deep levels of the search revisit the
  // same nodes many times.
  bool params_match(size_t depth, int i) {
    if (!memo_[depth]) memo_[depth] = params_->memo(r_.src[depth], g_.size());
    std::vector<int8_t>& memo = *memo_[depth];
    if (memo[i] < 0) {
      const Node& node = g_.node(i);
      // Only a few keys read the input shapes: copy them only for those,
      // into the scratch's vectors (assigned in place, so that their
      // buffers are reused from node to node); the other keys get none.
      static const std::vector<Shape> kNoShapes;
      bool needs_shapes = false;
      for (auto [key, value] : r_.src[depth].params)
        needs_shapes = needs_shapes || key == PM_NUM_INPUTS || key == PM_NUMDIM ||
                       key == PM_KERNEL_H || key == PM_KERNEL_W || key == PM_GROUP;
      if (needs_shapes) {
        scratch_->shapes.resize(node.inputs.size());
        for (size_t k = 0; k < node.inputs.size(); ++k)
          scratch_->shapes[k] = g_.shape(node.inputs[k]);
      }
      const std::vector<Shape>& shapes = needs_shapes ? scratch_->shapes : kNoShapes;
      memo[i] = 1;
      for (auto [key, value] : r_.src[depth].params)
        if (node.params.get(key, node.type, shapes) != value) {
          memo[i] = 0;
          break;
        }
    }
    return memo[i] == 1;
  }

  const Graph& g_;
  const Rule& r_;
  ParamMemo* const params_;
  MatchScratch* const scratch_;
  const std::function<bool(const Match&)>& on_match_;
  const bool skip_reading_match_;
  // The buffers, in *scratch_ (shared by the rules matched on one graph).
  std::vector<TensorRef>& bound_;  // indexed by -variable
  std::vector<uint8_t>& is_bound_;
  std::vector<int>& mapped_;       // source op -> graph index
  std::vector<uint8_t>& used_;     // graph index -> matched
  std::vector<std::vector<int8_t>*>& memo_;  // per source op: its memo, once used
  const Match match_;
  // The last source op reads fresh variables only (dfs_fresh_last).
  const bool fresh_last_;
  int matches_ = 0;
};

}  // namespace

size_t ParamMemo::KeyHash::operator()(const std::vector<int>& key) const {
  uint64_t h = 0;
  for (int v : key) h = hash_combine(h, static_cast<uint64_t>(static_cast<uint32_t>(v)));
  return static_cast<size_t>(h);
}

std::vector<int8_t>* ParamMemo::memo(const PatternOp& op, int graph_size) {
  key_.clear();
  key_.push_back(op.type);
  for (auto [key, value] : op.params) {
    key_.push_back(key);
    key_.push_back(value);
  }
  auto it = memos_.find(key_);
  if (it == memos_.end())
    it = memos_.emplace(key_, std::vector<int8_t>(graph_size, -1)).first;
  return &it->second;
}

bool may_match(const Graph& graph, const Rule& rule) {
  if (rule.num_source_types >= 0) {  // the rule's summary (Rule::index)
    for (int k = 0; k < rule.num_source_types; ++k)
      if (graph.num_ops_of_type(rule.source_types[k].first) < rule.source_types[k].second)
        return false;
    return true;
  }
  const std::vector<PatternOp>& src = rule.src;
  // A type the graph lacks rules most rules out: one pass finds it before
  // the ops of repeated types are counted.
  for (const PatternOp& op : src)
    if (graph.num_ops_of_type(op.type) < 1) return false;
  for (size_t i = 0; i < src.size(); ++i) {
    int needed = 1;
    bool first = true;  // count each type once, at its first op
    for (size_t j = 0; j < src.size() && first; ++j) {
      if (src[j].type != src[i].type || j == i) continue;
      if (j < i) first = false;
      else ++needed;
    }
    if (first && needed > 1 && graph.num_ops_of_type(src[i].type) < needed) return false;
  }
  return true;
}

int for_each_match(const Graph& graph, const Rule& rule, ParamMemo* params,
                   MatchScratch* scratch,
                   const std::function<bool(const Match&)>& on_match,
                   bool skip_reading_match) {
  // A source needing more ops of some type than the graph has cannot match:
  // most rules of a large set are ruled out here without a search.
  if (!may_match(graph, rule)) return 0;
  return Matcher(graph, rule, params, scratch, on_match, skip_reading_match).run();
}

}  // namespace taso
