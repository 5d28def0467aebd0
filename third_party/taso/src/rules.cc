// Rule validation, pattern matching and graph rewriting.
#include "taso/rules.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>

namespace taso {

namespace {

[[noreturn]] void rule_error(const Rule& r, const std::string& what) {
  throw EngineError("rule '" + r.name + "': " + what);
}

void validate_pattern(const Rule& r, const std::vector<PatternOp>& ops,
                      const char* side, int min_var) {
  for (size_t j = 0; j < ops.size(); ++j) {
    const PatternOp& op = ops[j];
    std::string where = std::string(side) + " op " + std::to_string(j);
    if (!is_pattern_op_type(op.type))
      rule_error(r, where + " has an unusable type " + std::to_string(op.type));
    int expected = num_inputs_expected(op.type);
    if (expected >= 0 && static_cast<int>(op.inputs.size()) != expected)
      rule_error(r, where + " (" + op_type_name(op.type) + ") has " +
                        std::to_string(op.inputs.size()) + " inputs, expected " +
                        std::to_string(expected));
    for (const PatternTensor& t : op.inputs) {
      if (t.op >= static_cast<int>(j))
        rule_error(r, where + " reads op " + std::to_string(t.op) +
                          ", which does not come before it");
      if (t.op < min_var)
        rule_error(r, where + " reads variable " + std::to_string(t.op) +
                          ", out of range");
      if (t.op >= 0 && (t.index < 0 || (ops[t.op].type != OP_SPLIT && t.index != 0)))
        rule_error(r, where + " reads output " + std::to_string(t.index) +
                          " of op " + std::to_string(t.op));
    }
  }
}

// Where redirected tensor `t` (an output of a matched op) now comes from.
TensorRef redirected(const Candidate& c, const TensorRef& t) {
  const TensorRef* found = nullptr;  // the last pair wins, as a map insert did
  for (const auto& [from, to] : c.redirect)
    if (from == t) found = &to;
  if (!found) throw EngineError("internal: a matched op's output in use is not mapped");
  return *found;
}

// The rewritten graph's nodes and outputs, in the order the engine has
// always built them: the parent's ops but the matched ones (`used`), each
// shared unless it reads a redirected tensor (then a clone, re-wired), then
// the target ops. Ops left dead are not removed here.
void build_nodes(const Graph& g, const std::vector<bool>& used, const Candidate& c,
                 std::vector<NodePtr>* nodes, std::vector<TensorRef>* outputs) {
  nodes->reserve(g.size() + c.added.size());
  for (int i = 0; i < g.size(); ++i) {
    if (used[i]) continue;
    const NodePtr& node = g.nodes()[i];
    bool touched = false;
    for (const TensorRef& t : node->inputs) touched = touched || used[g.index_of(t.guid)];
    if (!touched) {
      nodes->push_back(node);
      continue;
    }
    auto clone = std::make_shared<Node>(*node);
    clone->cost_backend = 0;  // its context may differ; measure again
    // local_hash stays valid: it does not cover the inputs.
    for (TensorRef& t : clone->inputs)
      if (used[g.index_of(t.guid)]) t = redirected(c, t);
    nodes->push_back(std::move(clone));
  }
  for (const NodePtr& d : c.added) nodes->push_back(d);
  *outputs = g.outputs();
  for (TensorRef& t : *outputs)
    if (used[g.index_of(t.guid)]) t = redirected(c, t);
}

class Rewriter {
 public:
  Rewriter(const Graph& g, const Rule& r, int max_ops,
           const std::function<bool(Candidate&&, const MatchedOps&)>& emit,
           bool incremental, MatchCache* cache)
      : g_(g), r_(r), max_ops_(max_ops), emit_(emit), incremental_(incremental),
        cache_(cache), scratch_(cache ? &cache->scratch : &own_scratch_),
        matched_guids_(scratch_->matched_guids), mapped_from_(scratch_->mapped_from),
        bound_(scratch_->bound), is_bound_(scratch_->is_bound),
        mapped_(scratch_->mapped), used_(scratch_->used), memo_(scratch_->memo),
        dst_reads_var_(scratch_->dst_reads_var), dst_has_reader_(scratch_->dst_has_reader) {
    int min_var = 0;
    for (const auto* side : {&r.src, &r.dst})
      for (const PatternOp& op : *side)
        for (const PatternTensor& t : op.inputs) min_var = std::min(min_var, t.op);
    bound_.assign(-min_var + 1, TensorRef{});
    is_bound_.assign(-min_var + 1, false);
    mapped_.assign(r.src.size(), -1);
    if (scratch_->local.size() < r.src.size()) scratch_->local.resize(r.src.size());
    used_.assign(g.size(), false);
    memo_.assign(r.src.size(), nullptr);
    dst_reads_var_.assign(-min_var + 1, false);
    dst_has_reader_.assign(r.dst.size(), false);
    for (const PatternOp& op : r.dst)
      for (const PatternTensor& t : op.inputs) {
        if (t.op < 0) dst_reads_var_[-t.op] = true;
        else dst_has_reader_[t.op] = true;
      }
  }

  int run() {
    dfs(0);
    return matches_;
  }

 private:
  // Returns false once emit asked to stop.
  bool dfs(size_t depth) {
    if (depth == r_.src.size()) {
      ++matches_;
      return rewrite();
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
      // Variables this candidate binds; an op has few inputs, so no heap.
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

  // Describes the rewrite of the current complete match (hash, op count;
  // the graph itself only when ops die or `incremental_` is off); returns
  // what emit returned, or true if the match is rejected.
  bool rewrite() {
    for (size_t v = 0; v < bound_.size(); ++v)
      if (is_bound_[v] && used_[g_.index_of(bound_[v].guid)]) return true;
    // A variable computed from a matched op's output would, once the target
    // reads it, close a cycle: reject before building anything.
    for (size_t v = 0; v < bound_.size(); ++v)
      if (is_bound_[v] && reads_match(g_.index_of(bound_[v].guid))) return true;

    // Source tensors visible outside the match must all be mapped (a rule
    // maps a few: a linear scan beats a hash map here).
    mapped_from_.clear();
    for (const auto& [s, d] : r_.mapped_outputs)
      mapped_from_.push_back({g_.node(mapped_[s.op]).guid, s.index});
    auto is_mapped = [&](const TensorRef& t) {
      return std::find(mapped_from_.begin(), mapped_from_.end(), t) != mapped_from_.end();
    };
    for (int i : mapped_) {
      const Node& node = g_.node(i);
      for (auto [c, slot] : g_.consumers(i))
        if (!used_[c] && !is_mapped(g_.node(c).inputs[slot])) return true;
      if (g_.is_output(i))
        for (const TensorRef& t : g_.outputs())
          if (t.guid == node.guid && !is_mapped(t)) return true;
    }

    // Instantiate the target ops; a shape failure rejects the match.
    std::vector<std::shared_ptr<Node>> dst;
    int64_t next_guid = g_.max_guid() + 1;
    QuietShapeErrors quiet;
    try {
      for (size_t j = 0; j < r_.dst.size(); ++j) {
        const PatternOp& pop = r_.dst[j];
        auto node = std::make_shared<Node>();
        node->guid = next_guid++;
        node->type = pop.type;
        std::vector<Shape> in;
        in.reserve(pop.inputs.size());
        node->inputs.reserve(pop.inputs.size());
        for (const PatternTensor& pt : pop.inputs) {
          if (pt.op < 0) {
            node->inputs.push_back(bound_[-pt.op]);
            in.push_back(g_.shape(bound_[-pt.op]));
          } else {
            const Node& src = *dst[pt.op];
            if (pt.index >= static_cast<int>(src.outputs.size())) return true;
            node->inputs.push_back({src.guid, pt.index});
            in.push_back(src.outputs[pt.index]);
          }
        }
        for (auto [key, value] : pop.params) node->params.set(key, value);
        for (auto [key, s] : pop.copied) {
          const Node& from = g_.node(mapped_[s]);
          if (key == PM_EPSILON) {
            node->params.epsilon = from.params.epsilon;
          } else {
            std::vector<Shape> from_in;
            for (const TensorRef& t : from.inputs) from_in.push_back(g_.shape(t));
            node->params.set(key, from.params.get(key, from.type, from_in));
          }
        }
        if (pop.type == OP_SPLIT && !split_sizes(static_cast<int>(j), &node->params))
          return true;
        if (shapes_surely_fail(node->type, node->params, in)) return true;
        node->outputs = infer_shapes(node->type, node->params, in);
        // Keys derived from shapes (NUMDIM, NUM_INPUTS, ...) act as checks.
        for (auto [key, value] : pop.params)
          if (node->params.get(key, node->type, in) != value) return true;
        dst.push_back(std::move(node));
      }
    } catch (const EngineError&) {
      return true;
    }

    // Mapped tensors must keep their shapes.
    Candidate c;
    c.redirect.reserve(r_.mapped_outputs.size());
    for (const auto& [s, d] : r_.mapped_outputs) {
      TensorRef from{g_.node(mapped_[s.op]).guid, s.index};
      const Node& to = *dst[d.op];
      if (d.index >= static_cast<int>(to.outputs.size()) ||
          to.outputs[d.index] != g_.shape(from))
        return true;
      c.redirect.emplace_back(from, TensorRef{to.guid, d.index});
    }
    c.removed = mapped_;
    c.added.assign(dst.begin(), dst.end());
    if (incremental_ && nothing_dies()) {
      // Every op but the matched ones survives: the op count is known, and
      // the rewrite cannot close a cycle (a cycle would run from a target
      // op through a reader of a redirected tensor back to a variable the
      // target reads, i.e. a variable reading the match: rejected above).
      c.num_ops = g_.num_ops() - static_cast<int>(mapped_.size()) +
                  static_cast<int>(dst.size());
      if (max_ops_ > 0 && c.num_ops > max_ops_) return true;
      describe_incrementally(&c);
    } else {
      std::vector<NodePtr> nodes;
      std::vector<TensorRef> outputs;
      build_nodes(g_, used_, c, &nodes, &outputs);
      if (!nothing_dies()) nodes = live_nodes(std::move(nodes), outputs);
      if (max_ops_ > 0) {
        int ops = 0;
        for (const NodePtr& n : nodes) ops += n->type != OP_INPUT && n->type != OP_WEIGHT;
        if (ops > max_ops_) return true;
      }
      try {
        c.graph = Graph::Create(std::move(nodes), std::move(outputs));
      } catch (const EngineError&) {
        return true;  // the rewrite closed a cycle
      }
      c.whole = true;
      c.hash = c.graph->hash();
      c.hashed = true;
      if (scratch_->lazy_hash) c.key = graph_dedup_key(*c.graph);
      c.num_ops = c.graph->num_ops();
    }
    matched_guids_.resize(r_.src.size());
    for (size_t s = 0; s < r_.src.size(); ++s) matched_guids_[s] = g_.node(mapped_[s]).guid;
    return emit_(std::move(c), matched_guids_);
  }

  // The weight-side flags of the target ops and the parent ops whose flag
  // flips (readers of redirected tensors and, only where a flag flipped,
  // their readers, scanned in the parent's order), then either the
  // candidate's canonical hash (candidate_hash) or, when enumerate_locations
  // defers hashes, its dedup key (graph_dedup_key, by difference: only the
  // matched ops, the readers of redirected tensors and the target ops have
  // a different term).
  void describe_incrementally(Candidate* c) {
    const size_t num_dst = c->added.size();
    c->added_ws.assign(num_dst, 0);
    for (size_t j = 0; j < num_dst; ++j) {
      bool ws = true;  // targets are never inputs
      for (const TensorRef& t : c->added[j]->inputs)
        ws = ws && (t.guid <= g_.max_guid()
                        ? g_.weight_side(g_.index_of(t.guid))
                        : c->added_ws[static_cast<size_t>(t.guid - g_.max_guid() - 1)]);
      c->added_ws[j] = ws;
    }
    HashScratch& hs = scratch_->hash;
    if (hs.stamp.size() != static_cast<size_t>(g_.size())) {
      hs.stamp.assign(g_.size(), 0);
      hs.removed.assign(g_.size(), 0);
      hs.new_hash.assign(g_.size(), 0);
      hs.new_ws.assign(g_.size(), 0);
    }
    const int stamp = ++hs.counter;
    int pending = 0, first = g_.size();
    auto mark = [&](int i) {
      if (hs.stamp[i] == stamp || used_[i]) return;
      hs.stamp[i] = stamp;
      ++pending;
      first = std::min(first, i);
    };
    for (int m : mapped_)
      for (auto [reader, slot] : g_.consumers(m)) mark(reader);
    for (int i = first; pending > 0; ++i) {
      if (hs.stamp[i] != stamp) continue;
      --pending;
      const Node& node = g_.node(i);
      bool ws = node.type != OP_INPUT;
      for (const TensorRef& t : node.inputs) {
        const int src = g_.index_of(t.guid);
        if (used_[src]) {
          const TensorRef to = redirected(*c, t);
          ws = ws && c->added_ws[static_cast<size_t>(to.guid - g_.max_guid() - 1)];
        } else {
          ws = ws && (hs.stamp[src] == stamp ? hs.new_ws[src] : g_.weight_side(src));
        }
      }
      hs.new_ws[i] = ws;
      if (ws == g_.weight_side(i)) continue;
      c->weight_side_flips.push_back(i);
      for (auto [reader, slot] : g_.consumers(i)) mark(reader);
    }
    if (!scratch_->lazy_hash) {
      candidate_hash(g_, *c, &hs);
      return;
    }
    // The dedup key by difference.
    const std::vector<uint64_t>& keys = scratch_->op_keys;
    uint64_t sum = scratch_->parent_key_sum;
    for (int m : mapped_) sum -= keys[m];
    auto local_of = [&](const TensorRef& t) {
      return t.guid <= g_.max_guid()
                 ? g_.node(g_.index_of(t.guid)).local_hash
                 : node_local_hash(*c->added[static_cast<size_t>(t.guid - g_.max_guid() - 1)]);
    };
    for (const NodePtr& d : c->added) {
      uint64_t h = node_local_hash(*d);
      for (const TensorRef& t : d->inputs) h = hash_input(h, local_of(t), t.index);
      sum += mix64(h);
    }
    const int stamp2 = ++hs.counter;
    for (int m : mapped_)
      for (auto [reader, slot] : g_.consumers(m)) {
        if (used_[reader] || hs.stamp[reader] == stamp2) continue;
        hs.stamp[reader] = stamp2;
        const Node& node = g_.node(reader);
        uint64_t h = node.local_hash;
        for (const TensorRef& t : node.inputs) {
          const int src = g_.index_of(t.guid);
          h = hash_input(h, used_[src] ? local_of(redirected(*c, t)) : g_.node(src).local_hash,
                         used_[src] ? redirected(*c, t).index : t.index);
        }
        sum += mix64(h) - keys[reader];
      }
    c->key = hash_combine(sum, static_cast<uint64_t>(c->num_ops));
  }

  // Whether node `i` meets the parameter constraints of source op `depth`.
  // They do not depend on the bindings, so each (op, node) pair is checked
  // once per rewriter and remembered: deep levels of the search revisit the
  // same nodes many times.
  bool params_match(size_t depth, int i) {
    if (!memo_[depth]) {
      if (cache_) {
        memo_[depth] = cache_->memo(r_.src[depth], g_.size());
      } else {
        if (params_ok_.empty()) params_ok_.resize(r_.src.size());
        params_ok_[depth].assign(g_.size(), -1);
        memo_[depth] = &params_ok_[depth];
      }
    }
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

  // True if op `i` is a matched op or transitively reads one.
  bool reads_match(int i) const {
    for (int m : mapped_)
      if (i == m || g_.depends_on(i, m)) return true;
    return false;
  }

  // Split targets take their sizes from the source tensors they replace.
  bool split_sizes(int j, OpParams* params) const {
    std::map<int, int64_t> sizes;
    for (const auto& [s, d] : r_.mapped_outputs) {
      if (d.op != j) continue;
      const Shape& shape = g_.shape({g_.node(mapped_[s.op]).guid, s.index});
      if (params->axis < 0 || params->axis >= static_cast<int>(shape.size()))
        return false;
      sizes[d.index] = shape[params->axis];
    }
    if (sizes.size() < 2 || sizes.rbegin()->first != static_cast<int>(sizes.size()) - 1)
      return false;
    params->sizes.clear();
    for (auto [k, v] : sizes) params->sizes.push_back(v);
    return true;
  }

  // True when every op of the rewritten graph still has a reader or is an
  // output, so that live_nodes would return the ops unchanged (in a DAG whose
  // every sink is an output, every op reaches an output). Needs the parent
  // to have that property (Graph::all_live) and checks what the rewrite
  // changes: the ops feeding the match (bound variables) may lose their
  // readers, and the target ops need one. Clones keep their readers: a
  // reader that was matched would make the clone a variable that reads the
  // match, which rewrite() rejected before.
  bool nothing_dies() const {
    if (!g_.all_live()) return false;
    for (size_t v = 0; v < bound_.size(); ++v) {
      if (!is_bound_[v] || dst_reads_var_[v]) continue;
      const int u = g_.index_of(bound_[v].guid);
      if (g_.node(u).type == OP_INPUT || g_.is_output(u)) continue;
      bool read = false;
      for (auto [c, slot] : g_.consumers(u)) read = read || !used_[c];
      if (!read) return false;
    }
    for (size_t j = 0; j < r_.dst.size(); ++j) {
      if (dst_has_reader_[j]) continue;
      bool read = false;
      for (const auto& [s, d] : r_.mapped_outputs) {
        if (d.op != static_cast<int>(j)) continue;
        const int m = mapped_[s.op];
        const TensorRef from{g_.node(m).guid, s.index};
        for (auto [c, slot] : g_.consumers(m))
          read = read || (!used_[c] && g_.node(c).inputs[slot] == from);
        if (g_.is_output(m))
          for (const TensorRef& t : g_.outputs()) read = read || t == from;
      }
      if (!read) return false;
    }
    return true;
  }

  // Drops ops (but never graph inputs) that no output depends on, e.g. a
  // weight whose only reader was rewritten away.
  static std::vector<NodePtr> live_nodes(std::vector<NodePtr> nodes,
                                         const std::vector<TensorRef>& outputs) {
    int64_t max_guid = 0;
    for (const NodePtr& n : nodes) max_guid = std::max(max_guid, n->guid);
    std::vector<int> pos(max_guid + 1, -1);
    for (size_t i = 0; i < nodes.size(); ++i) pos[nodes[i]->guid] = static_cast<int>(i);
    std::vector<bool> live(nodes.size(), false);
    std::vector<int> stack;
    for (const TensorRef& t : outputs)
      if (t.guid <= max_guid && pos[t.guid] >= 0) stack.push_back(pos[t.guid]);
    while (!stack.empty()) {
      int i = stack.back();
      stack.pop_back();
      if (live[i]) continue;
      live[i] = true;
      for (const TensorRef& t : nodes[i]->inputs)
        if (t.guid <= max_guid && pos[t.guid] >= 0 && !live[pos[t.guid]])
          stack.push_back(pos[t.guid]);
    }
    std::vector<NodePtr> kept;
    kept.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i)
      if (live[i] || nodes[i]->type == OP_INPUT) kept.push_back(std::move(nodes[i]));
    return kept;
  }

  const Graph& g_;
  const Rule& r_;
  int max_ops_;
  const std::function<bool(Candidate&&, const MatchedOps&)>& emit_;
  const bool incremental_;
  std::vector<std::vector<int8_t>> params_ok_;  // without a cache: per source op, -1/0/1
  MatchCache* const cache_;                    // or null: params_ok_ holds the memos
  RewriterScratch own_scratch_;                // used without a cache
  RewriterScratch* const scratch_;
  // The buffers, in *scratch_ (shared by the rules of one MatchCache).
  MatchedOps& matched_guids_;
  std::vector<TensorRef>& mapped_from_;  // scratch of rewrite()
  std::vector<TensorRef>& bound_;  // indexed by -variable
  std::vector<bool>& is_bound_;
  std::vector<int>& mapped_;       // source op -> graph index
  std::vector<bool>& used_;        // graph index -> matched
  std::vector<std::vector<int8_t>*>& memo_;  // per source op: its memo, once used
  std::vector<bool>& dst_reads_var_;   // per variable: a target op reads it
  std::vector<bool>& dst_has_reader_;  // per target op: another target op reads it
  int matches_ = 0;
};

}  // namespace

void Rule::validate() const {
  if (src.empty()) rule_error(*this, "has no source ops");
  if (dst.empty()) rule_error(*this, "has no target ops");
  if (mapped_outputs.empty()) rule_error(*this, "maps no outputs");
  int min_var = -1000;
  validate_pattern(*this, src, "source", min_var);
  validate_pattern(*this, dst, "target", min_var);
  for (const PatternOp& op : src) {
    if (!op.copied.empty()) rule_error(*this, "source ops cannot copy parameters");
    if (op.inputs.size() > 8) rule_error(*this, "a source op has more than 8 inputs");
  }
  for (const PatternOp& op : dst) {
    for (auto [key, s] : op.copied)
      if (s < 0 || s >= static_cast<int>(src.size()))
        rule_error(*this, "a target op copies from source op " +
                              std::to_string(s) + ", out of range");
    OpParams probe;
    for (auto [key, value] : op.params) probe.set(key, value);  // throws if unsettable
  }
  for (const auto& [s, d] : mapped_outputs) {
    if (s.op < 0 || s.op >= static_cast<int>(src.size()) || d.op < 0 ||
        d.op >= static_cast<int>(dst.size()))
      rule_error(*this, "a mapped output refers to a missing op");
  }
  // Every variable the target reads must be bound by the source.
  std::vector<int> src_vars;
  for (const PatternOp& op : src)
    for (const PatternTensor& t : op.inputs)
      if (t.op < 0) src_vars.push_back(t.op);
  for (const PatternOp& op : dst)
    for (const PatternTensor& t : op.inputs)
      if (t.op < 0 && std::find(src_vars.begin(), src_vars.end(), t.op) == src_vars.end())
        rule_error(*this, "the target reads variable " + std::to_string(t.op) +
                              ", which the source does not bind");
}

size_t MatchCache::KeyHash::operator()(const std::vector<int>& key) const {
  uint64_t h = 0;
  for (int v : key) h = hash_combine(h, static_cast<uint64_t>(static_cast<uint32_t>(v)));
  return static_cast<size_t>(h);
}

std::vector<int8_t>* MatchCache::memo(const PatternOp& op, int graph_size) {
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

int for_each_candidate(const Graph& graph, const Rule& rule, int max_ops,
                       const std::function<bool(Candidate&&, const MatchedOps&)>& emit,
                       bool incremental, MatchCache* cache) {
  // A source needing more ops of some type than the graph has cannot match:
  // most rules of a large set are ruled out here without a search.
  for (const PatternOp& op : rule.src) {
    size_t needed = 0;
    for (const PatternOp& other : rule.src) needed += other.type == op.type;
    if (graph.ops_of_type(op.type).size() < needed) return 0;
  }
  return Rewriter(graph, rule, max_ops, emit, incremental, cache).run();
}

int for_each_rewrite(const Graph& graph, const Rule& rule, int max_ops,
                     const std::function<bool(GraphPtr, const MatchedOps&)>& emit) {
  return for_each_candidate(graph, rule, max_ops,
                            [&](Candidate&& c, const MatchedOps& ops) {
                              return emit(materialize(graph, c), ops);
                            });
}

uint64_t candidate_hash(const Graph& g, const Candidate& c, HashScratch* hs) {
  if (c.hashed) return c.hash;
  // The target ops are hashed from the parent's hashes of what they read;
  // then the readers of redirected tensors and everything downstream of them
  // are re-hashed in one scan in the parent's topological order (not past an
  // op whose hash comes out unchanged), and the parent's sum of op hashes is
  // corrected by the differences (Graph::node_hash_sum).
  if (hs->stamp.size() != static_cast<size_t>(g.size())) {
    hs->stamp.assign(g.size(), 0);
    hs->removed.assign(g.size(), 0);
    hs->new_hash.assign(g.size(), 0);
    hs->new_ws.assign(g.size(), 0);
  }
  const int stamp = ++hs->counter;
  for (int m : c.removed) hs->removed[m] = stamp;
  const size_t num_dst = c.added.size();
  std::vector<uint64_t>& added_hash = hs->added_hash;
  added_hash.resize(num_dst);
  uint64_t sum = g.node_hash_sum();
  for (int m : c.removed) sum -= mix64(g.node_hash(m));
  for (size_t j = 0; j < num_dst; ++j) {
    const Node& node = *c.added[j];
    uint64_t h = node_local_hash(node);
    for (const TensorRef& t : node.inputs) {
      if (t.guid <= g.max_guid())  // a variable: a parent tensor
        h = hash_input(h, g.node_hash(g.index_of(t.guid)), t.index);
      else  // an earlier target op
        h = hash_input(h, added_hash[static_cast<size_t>(t.guid - g.max_guid() - 1)], t.index);
    }
    added_hash[j] = h;
    sum += mix64(h);
  }
  // Readers always come after what they read, so one scan in the parent's
  // order from the first reader visits every affected op after its inputs.
  int pending = 0, first = g.size();
  auto mark = [&](int i) {
    if (hs->stamp[i] == stamp || hs->removed[i] == stamp) return;
    hs->stamp[i] = stamp;
    ++pending;
    first = std::min(first, i);
  };
  for (int m : c.removed)
    for (auto [reader, slot] : g.consumers(m)) mark(reader);
  for (int i = first; pending > 0; ++i) {
    if (hs->stamp[i] != stamp) continue;
    --pending;
    const Node& node = g.node(i);
    uint64_t h = node.local_hash;  // set when the parent was created
    for (const TensorRef& t : node.inputs) {
      const int src = g.index_of(t.guid);
      if (hs->removed[src] == stamp) {  // a redirected tensor
        const TensorRef to = redirected(c, t);
        h = hash_input(h, added_hash[static_cast<size_t>(to.guid - g.max_guid() - 1)], to.index);
      } else {
        h = hash_input(h, hs->stamp[src] == stamp ? hs->new_hash[src] : g.node_hash(src),
                       t.index);
      }
    }
    hs->new_hash[i] = h;
    if (h == g.node_hash(i)) continue;
    sum += mix64(h) - mix64(g.node_hash(i));
    for (auto [reader, slot] : g.consumers(i)) mark(reader);
  }
  uint64_t total = sum;
  for (const TensorRef& t : g.outputs()) {
    const int src = g.index_of(t.guid);
    if (hs->removed[src] == stamp) {
      const TensorRef to = redirected(c, t);
      total = hash_output(total, added_hash[static_cast<size_t>(to.guid - g.max_guid() - 1)],
                          to.index);
    } else {
      total = hash_output(total, hs->stamp[src] == stamp ? hs->new_hash[src] : g.node_hash(src),
                          t.index);
    }
  }
  c.hash = total;
  c.hashed = true;
  return total;
}

uint64_t graph_dedup_key(const Graph& g, std::vector<uint64_t>* op_keys) {
  if (op_keys) op_keys->resize(g.size());
  uint64_t sum = 0;
  for (int i = 0; i < g.size(); ++i) {
    const Node& node = g.node(i);
    uint64_t h = node_local_hash(node);
    for (const TensorRef& t : node.inputs)
      h = hash_input(h, node_local_hash(g.node(g.index_of(t.guid))), t.index);
    const uint64_t term = mix64(h);
    if (op_keys) (*op_keys)[i] = term;
    sum += term;
  }
  return hash_combine(sum, static_cast<uint64_t>(g.num_ops()));
}

GraphPtr materialize(const Graph& parent, const Candidate& c) {
  if (c.graph) return c.graph;
  if (!c.hashed) {
    HashScratch scratch;
    candidate_hash(parent, c, &scratch);
    // Every applied candidate checks the dedup key's bookkeeping too.
    const GraphPtr built = materialize(parent, c);
    if (graph_dedup_key(*built) != c.key)
      throw EngineError("internal: a candidate's incremental dedup key differs "
                        "from its graph's");
    return built;
  }
  std::vector<bool> used(parent.size(), false);
  for (int i : c.removed) used[i] = true;
  std::vector<NodePtr> nodes;
  std::vector<TensorRef> outputs;
  build_nodes(parent, used, c, &nodes, &outputs);
  c.graph = Graph::Create(std::move(nodes), std::move(outputs));
  if (c.graph->hash() != c.hash || c.graph->num_ops() != c.num_ops)
    throw EngineError("internal: a candidate's incremental hash or op count differs "
                      "from its graph's");
  return c.graph;
}

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
    parent_cost_ += costs_[i];  // as Graph::cost sums
    if (costs_[i] != 0) {  // adding 0 leaves a sum unchanged: skip free ops
      nonfree_.push_back(i);
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

double CandidateCoster::added_cost(const Candidate& c, size_t j) const {
  if (c.added_ws[j]) return 0.0;
  const Node& node = *c.added[j];
  if (node.cost_backend != backend_->instance_id()) {
    // The memo Graph::op_costs reads once the candidate is materialized.
    OpConfig config;
    config.type = node.type;
    config.params = node.params;
    for (const TensorRef& t : node.inputs) {
      if (t.guid <= parent_.max_guid()) {
        config.input_shapes.push_back(parent_.shape(t));
      } else {
        const Node& src = *c.added[t.guid - parent_.max_guid() - 1];
        config.input_shapes.push_back(src.outputs[t.index]);
      }
    }
    config.output_shapes = node.outputs;
    node.cost_ms = backend_->op_cost(config);
    node.cost_backend = backend_->instance_id();
  }
  return node.cost_ms;
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
  for (int i : c.removed) {
    used_[i] = stamp_;
    first = std::min(first, i);
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
  // Target ops no clone reads come last, in Create's order.
  for (size_t j = 0; j < c.added.size(); ++j)
    if (!added_placed_[j]) place_added(c, j, n);
  fold_block();
  return total;
}

std::vector<std::vector<uint64_t>> Locations::hashes() const {
  std::vector<std::vector<uint64_t>> out(candidates.size());
  for (size_t x = 0; x < candidates.size(); ++x)
    for (const Candidate& c : candidates[x])
      out[x].push_back(candidate_hash(*parent, c, &hash_scratch));
  return out;
}

int Locations::num_materialized() const {
  int count = 0;
  for (const auto& row : candidates)
    for (const Candidate& c : row) count += !c.whole && c.graph != nullptr;
  return count;
}

std::vector<std::vector<double>> Locations::costs(CostBackend* backend) const {
  CandidateCoster coster(*parent, backend);
  std::vector<std::vector<double>> out(candidates.size());
  for (size_t x = 0; x < candidates.size(); ++x) {
    out[x].reserve(candidates[x].size());
    for (const Candidate& c : candidates[x]) out[x].push_back(coster.cost(c));
  }
  return out;
}

Locations enumerate_locations(GraphPtr graph, const std::vector<Rule>& rules,
                              int max_locations, int max_ops, bool incremental) {
  if (!graph) throw EngineError("locations need a graph");
  if (max_locations < 1) throw EngineError("max_locations must be >= 1");
  Locations locs;
  locs.parent = graph;
  locs.candidates.resize(rules.size());
  locs.matched.resize(rules.size());
  locs.num_matches.resize(rules.size());
  MatchCache cache;
  // A candidate is a duplicate when its canonical hash equals the current
  // graph's or a kept candidate's. Equal graphs have equal dedup keys, so
  // hashes are computed (candidate_hash) and compared only within a key's
  // bucket: most candidates' keys are unique, and their hashes are left to
  // first use (docs/engine.md, "Incremental candidates").
  RewriterScratch& scratch = cache.scratch;
  scratch.lazy_hash = true;
  const uint64_t parent_key = graph_dedup_key(*graph, &scratch.op_keys);
  scratch.parent_key_sum = 0;
  for (uint64_t k : scratch.op_keys) scratch.parent_key_sum += k;
  std::unordered_map<uint64_t, std::vector<std::pair<int, int>>> buckets;
  HashScratch& hs = locs.hash_scratch;
  for (size_t x = 0; x < rules.size(); ++x) {
    auto& list = locs.candidates[x];
    auto& matched = locs.matched[x];
    locs.num_matches[x] = for_each_candidate(*graph, rules[x], max_ops,
                                             [&](Candidate&& c, const MatchedOps& ops) {
      bool duplicate = false;
      if (c.key == parent_key)
        duplicate = candidate_hash(*graph, c, &hs) == graph->hash();
      auto it = buckets.find(c.key);
      if (it != buckets.end())
        for (auto [bx, bl] : it->second) {
          if (duplicate) break;
          duplicate = candidate_hash(*graph, locs.candidates[bx][bl], &hs) ==
                      candidate_hash(*graph, c, &hs);
        }
      if (!duplicate) {
        buckets[c.key].emplace_back(static_cast<int>(x), static_cast<int>(list.size()));
        list.push_back(std::move(c));
        matched.push_back(ops);
      }
      return static_cast<int>(list.size()) < max_locations;
    }, incremental, &cache);
  }
  return locs;
}

}  // namespace taso
