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
          const std::function<bool(const Match&)>& on_match)
      : g_(g), r_(r), params_(params), scratch_(scratch), on_match_(on_match),
        bound_(scratch->bound), is_bound_(scratch->is_bound), mapped_(scratch->mapped),
        used_(scratch->used), memo_(scratch->memo),
        match_{mapped_, used_, bound_, is_bound_} {
    const size_t slots = static_cast<size_t>(r.num_variable_slots());
    bound_.assign(slots, TensorRef{});
    is_bound_.assign(slots, false);
    mapped_.assign(r.src.size(), -1);
    if (scratch->local.size() < r.src.size()) scratch->local.resize(r.src.size());
    used_.assign(g.size(), false);
    memo_.assign(r.src.size(), nullptr);
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
      return on_match_(match_);
    }
    const PatternOp& pop = r_.src[depth];
    // Ops reading an already matched op are found through its consumers,
    // which keeps the search local; otherwise scan all ops of the type.
    // Per-depth buffer (deeper levels of the search use their own).
    std::vector<int>& local = scratch_->local[depth];
    local.clear();
    const std::vector<int>* candidates = &g_.ops_of_type(pop.type);
    for (size_t k = 0; k < pop.inputs.size(); ++k) {
      const PatternTensor& pt = pop.inputs[k];
      if (pt.op < 0) continue;
      for (auto [c, slot] : g_.consumers(mapped_[pt.op]))
        if (slot == static_cast<int>(k)) local.push_back(c);
      std::sort(local.begin(), local.end());
      local.erase(std::unique(local.begin(), local.end()), local.end());
      candidates = &local;
      break;
    }
    for (int i : *candidates) {
      if (used_[i]) continue;
      const Node& node = g_.node(i);
      if (node.type != pop.type || node.inputs.size() != pop.inputs.size())
        continue;
      // Variables this candidate binds; an op has few inputs (Rule::validate
      // allows at most 8 to a source op), so no heap.
      std::array<int, 8> newly_bound;
      size_t num_newly_bound = 0;
      bool ok = true;
      for (size_t k = 0; k < pop.inputs.size() && ok; ++k) {
        const PatternTensor& pt = pop.inputs[k];
        const TensorRef& actual = node.inputs[k];
        if (pt.op >= 0) {
          ok = actual.guid == g_.node(mapped_[pt.op]).guid && actual.index == pt.index;
        } else if (is_bound_[-pt.op]) {
          ok = bound_[-pt.op] == actual;
        } else {
          is_bound_[-pt.op] = true;
          bound_[-pt.op] = actual;
          newly_bound[num_newly_bound++] = -pt.op;
        }
      }
      // Element-wise ops in a source pattern match equal-shaped operands
      // only: rules (TASO's and ours) are derived without broadcasting.
      if (ok && (pop.type == OP_EW_ADD || pop.type == OP_EW_MUL || pop.type == OP_EW_SUB ||
                 pop.type == OP_EW_DIV))
        ok = g_.shape(node.inputs[0]) == g_.shape(node.inputs[1]);
      if (ok && !pop.params.empty()) ok = params_match(depth, i);
      bool go_on = true;
      if (ok) {
        mapped_[depth] = i;
        used_[i] = true;
        go_on = dfs(depth + 1);
        used_[i] = false;
      }
      for (size_t b = 0; b < num_newly_bound; ++b) is_bound_[newly_bound[b]] = false;
      if (!go_on) return false;
    }
    return true;
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
      // Only a few keys read the input shapes: copy them only for those.
      std::vector<Shape> shapes;
      bool needs_shapes = false;
      for (auto [key, value] : r_.src[depth].params)
        needs_shapes = needs_shapes || key == PM_NUM_INPUTS || key == PM_NUMDIM ||
                       key == PM_KERNEL_H || key == PM_KERNEL_W || key == PM_GROUP;
      if (needs_shapes) {
        shapes.reserve(node.inputs.size());
        for (const TensorRef& t : node.inputs) shapes.push_back(g_.shape(t));
      }
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
  // The buffers, in *scratch_ (shared by the rules matched on one graph).
  std::vector<TensorRef>& bound_;  // indexed by -variable
  std::vector<bool>& is_bound_;
  std::vector<int>& mapped_;       // source op -> graph index
  std::vector<bool>& used_;        // graph index -> matched
  std::vector<std::vector<int8_t>*>& memo_;  // per source op: its memo, once used
  const Match match_;
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
  for (const PatternOp& op : rule.src) {
    size_t needed = 0;
    for (const PatternOp& other : rule.src) needed += other.type == op.type;
    if (graph.ops_of_type(op.type).size() < needed) return false;
  }
  return true;
}

int for_each_match(const Graph& graph, const Rule& rule, ParamMemo* params,
                   MatchScratch* scratch,
                   const std::function<bool(const Match&)>& on_match) {
  // A source needing more ops of some type than the graph has cannot match:
  // most rules of a large set are ruled out here without a search.
  if (!may_match(graph, rule)) return 0;
  return Matcher(graph, rule, params, scratch, on_match).run();
}

}  // namespace taso
