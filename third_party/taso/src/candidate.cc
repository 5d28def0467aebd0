// Rewrite candidates: building one from a match, its incremental hash and
// dedup key, and the graph it describes.
#include "taso/candidate.h"

#include <algorithm>

#include "taso/recycle.h"

namespace taso {

TensorRef redirected(const Candidate& c, const TensorRef& t) {
  const TensorRef* found = nullptr;  // the last pair wins, as a map insert did
  for (const auto& [from, to] : c.redirect)
    if (from == t) found = &to;
  if (!found) throw EngineError("internal: a matched op's output in use is not mapped");
  return *found;
}

namespace {

// always built them: the parent's ops but the matched ones (`used`), each
// shared unless it reads a redirected tensor (then a clone, re-wired), then
// the target ops. Ops left dead are not removed here.
void build_nodes(const Graph& g, const std::vector<uint8_t>& used, const Candidate& c,
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
    clone->cost.clear();  // its context may differ; measure again (a copy's memo is empty)
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

// Turns the complete matches of one rule on one graph into candidates: the
// target ops instantiated (their shapes inferred), the redirects, and the
// result's op count, weight-side flips and hash or dedup key, computed from
// the parent's (or the result built whole where ops die or `incremental`
// is off).
class CandidateBuilder {
 public:
  CandidateBuilder(const Graph& g, const Rule& r, int max_ops, bool incremental,
                   CandidateScratch* scratch)
      : g_(g), r_(r), max_ops_(max_ops), incremental_(incremental), scratch_(scratch),
        mapped_from_(scratch->mapped_from), dst_reads_var_(scratch->dst_reads_var),
        dst_has_reader_(scratch->dst_has_reader) {
    dst_reads_var_.assign(static_cast<size_t>(r.num_variable_slots()), false);
    dst_has_reader_.assign(r.dst.size(), false);
    for (const PatternOp& op : r.dst)
      for (const PatternTensor& t : op.inputs) {
        if (t.op < 0) dst_reads_var_[-t.op] = true;
        else dst_has_reader_[t.op] = true;
      }
  }

  // Describes the rewrite of a complete match in *out (hash, op count;
  // the graph itself only when ops die or `incremental_` is off); returns
  // false if the match is rejected.
  bool build(const Match& match, Candidate* out) {
    for (size_t v = 0; v < match.bound.size(); ++v)
      if (match.is_bound[v] && match.used[g_.index_of(match.bound[v].guid)]) return false;
    // A variable computed from a matched op's output would, once the target
    // reads it, close a cycle: reject before building anything.
    for (size_t v = 0; v < match.bound.size(); ++v)
      if (match.is_bound[v] && reads_match(match, g_.index_of(match.bound[v].guid))) return false;

    // Source tensors visible outside the match must all be mapped (a rule
    // maps a few: a linear scan beats a hash map here).
    mapped_from_.clear();
    for (const auto& [s, d] : r_.mapped_outputs)
      mapped_from_.push_back({g_.node(match.ops[s.op]).guid, s.index});
    auto is_mapped = [&](const TensorRef& t) {
      return std::find(mapped_from_.begin(), mapped_from_.end(), t) != mapped_from_.end();
    };
    for (int i : match.ops) {
      const Node& node = g_.node(i);
      for (auto [c, slot] : g_.consumers(i))
        if (!match.used[c] && !is_mapped(g_.node(c).inputs[slot])) return false;
      if (g_.is_output(i))
        for (const TensorRef& t : g_.outputs())
          if (t.guid == node.guid && !is_mapped(t)) return false;
    }

    // Instantiate the target ops; a shape failure (or a parameter the op
    // cannot take) rejects the match, without an exception: try_infer_shapes
    // is the one shape check.
    // Scratch reused from match to match: the target ops built so far, and
    // their input shapes (one vector per arity, its shapes assigned in
    // place, so that their buffers are reused too).
    std::vector<std::shared_ptr<Node>>& dst = scratch_->targets;
    recycle_targets();
    int64_t next_guid = g_.max_guid() + 1;
    for (size_t j = 0; j < r_.dst.size(); ++j) {
      const PatternOp& pop = r_.dst[j];
      dst.push_back(take_target_node());
      Node* const node = dst.back().get();
      node->guid = next_guid++;
      node->type = pop.type;
      const size_t arity = pop.inputs.size();
      if (scratch_->inputs_by_arity.size() <= arity) scratch_->inputs_by_arity.resize(arity + 1);
      std::vector<Shape>& in = scratch_->inputs_by_arity[arity];
      in.resize(arity);
      node->inputs.reserve(arity);
      for (size_t k = 0; k < arity; ++k) {
        const PatternTensor& pt = pop.inputs[k];
        if (pt.op < 0) {
          node->inputs.push_back(match.bound[-pt.op]);
          in[k] = g_.shape(match.bound[-pt.op]);
        } else {
          const Node& src = *dst[pt.op];
          if (pt.index >= static_cast<int>(src.outputs.size())) return false;
          node->inputs.push_back({src.guid, pt.index});
          in[k] = src.outputs[pt.index];
        }
      }
      for (auto [key, value] : pop.params)
        if (!node->params.try_set(key, value)) return false;
      for (auto [key, s] : pop.copied) {
        const Node& from = g_.node(match.ops[s]);
        if (key == PM_EPSILON) {
          node->params.epsilon = from.params.epsilon;
        } else {
          std::vector<Shape> from_in;
          for (const TensorRef& t : from.inputs) from_in.push_back(g_.shape(t));
          int value;
          if (!from.params.try_get(key, from.type, from_in, &value) ||
              !node->params.try_set(key, value))
            return false;
        }
      }
      if (pop.type == OP_SPLIT && !split_sizes(match, static_cast<int>(j), &node->params))
        return false;
      if (!try_infer_shapes(node->type, node->params, in, &node->outputs)) return false;
      // Keys derived from shapes (NUMDIM, NUM_INPUTS, ...) act as checks.
      for (auto [key, value] : pop.params) {
        int actual;
        if (!node->params.try_get(key, node->type, in, &actual) || actual != value)
          return false;
      }
    }

    // Mapped tensors must keep their shapes.
    Candidate& c = *out;
    c.redirect.reserve(r_.mapped_outputs.size());
    for (const auto& [s, d] : r_.mapped_outputs) {
      TensorRef from{g_.node(match.ops[s.op]).guid, s.index};
      const Node& to = *dst[d.op];
      if (d.index >= static_cast<int>(to.outputs.size()) ||
          to.outputs[d.index] != g_.shape(from))
        return false;
      c.redirect.emplace_back(from, TensorRef{to.guid, d.index});
    }
    c.removed = match.ops;
    c.added.reserve(dst.size());
    for (std::shared_ptr<Node>& d : dst) c.added.push_back(std::move(d));
    dst.clear();
    if (incremental_ && nothing_dies(match)) {
      // Every op but the matched ones survives: the op count is known, and
      // the rewrite cannot close a cycle (a cycle would run from a target
      // op through a reader of a redirected tensor back to a variable the
      // target reads, i.e. a variable reading the match: rejected above).
      c.num_ops = g_.num_ops() - static_cast<int>(match.ops.size()) +
                  static_cast<int>(c.added.size());
      if (max_ops_ > 0 && c.num_ops > max_ops_) return false;
      describe_incrementally(match, &c);
    } else {
      std::vector<NodePtr> nodes;
      std::vector<TensorRef> outputs;
      build_nodes(g_, match.used, c, &nodes, &outputs);
      if (!nothing_dies(match)) nodes = live_nodes(std::move(nodes), outputs);
      if (max_ops_ > 0) {
        int ops = 0;
        for (const NodePtr& n : nodes) ops += n->type != OP_INPUT && n->type != OP_WEIGHT;
        if (ops > max_ops_) return false;
      }
      try {
        c.graph = Graph::Create(std::move(nodes), std::move(outputs));
      } catch (const EngineError&) {
        // A cycle: a guard only (a rewrite that passed the variables check
        // above cannot close one), off the hot path (dead ops or
        // incremental off).
        return false;
      }
      c.whole = true;
      c.hash = c.graph->hash();
      c.hashed = true;
      if (scratch_->lazy_hash) c.key = graph_dedup_key(*c.graph);
      c.num_ops = c.graph->num_ops();
    }
    return true;
  }

  // The target ops a rejected match left in the scratch (an accepted one
  // moved its own into its candidate) go back to the thread's pool
  // (recycle.h) for the next matches: most complete matches of a pair of
  // unconnected source ops (two relus) fail at their first target op's
  // shapes, and reusing its node spares the node's and its vectors'
  // allocations.
  void recycle_targets() {
    std::vector<std::shared_ptr<Node>>& dst = scratch_->targets;
    for (std::shared_ptr<Node>& node : dst) give_back_target_node(std::move(node));
    dst.clear();
  }

  // The weight-side flags of the target ops and the parent ops whose flag
  // flips (readers of redirected tensors and, only where a flag flipped,
  // their readers, scanned in the parent's order), then either the
  // candidate's canonical hash (candidate_hash) or, when enumerate_locations
  // defers hashes, its dedup key (graph_dedup_key, by difference: only the
  // matched ops, the readers of redirected tensors and the target ops have
  // a different term).
  void describe_incrementally(const Match& match, Candidate* c) {
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
      if (hs.stamp[i] == stamp || match.used[i]) return;
      hs.stamp[i] = stamp;
      ++pending;
      first = std::min(first, i);
    };
    for (int m : match.ops)
      for (auto [reader, slot] : g_.consumers(m)) mark(reader);
    for (int i = first; pending > 0; ++i) {
      if (hs.stamp[i] != stamp) continue;
      --pending;
      const Node& node = g_.node(i);
      bool ws = node.type != OP_INPUT;
      for (const TensorRef& t : node.inputs) {
        const int src = g_.index_of(t.guid);
        if (match.used[src]) {
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
    const std::vector<uint64_t>& keys = *scratch_->op_keys;
    uint64_t sum = scratch_->parent_key_sum;
    for (int m : match.ops) sum -= keys[m];
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
    for (int m : match.ops)
      for (auto [reader, slot] : g_.consumers(m)) {
        if (match.used[reader] || hs.stamp[reader] == stamp2) continue;
        hs.stamp[reader] = stamp2;
        const Node& node = g_.node(reader);
        uint64_t h = node.local_hash;
        for (const TensorRef& t : node.inputs) {
          const int src = g_.index_of(t.guid);
          h = hash_input(h, match.used[src] ? local_of(redirected(*c, t)) : g_.node(src).local_hash,
                         match.used[src] ? redirected(*c, t).index : t.index);
        }
        sum += mix64(h) - keys[reader];
      }
    c->key = hash_combine(sum, static_cast<uint64_t>(c->num_ops));
  }

  // True if op `i` is a matched op or transitively reads one.
  bool reads_match(const Match& match, int i) const {
    for (int m : match.ops)  // an op reads only ops before it (Graph's order)
      if (i == m || (m < i && g_.depends_on(i, m))) return true;
    return false;
  }

  // Split targets take their sizes from the source tensors they replace.
  // The sizes, by output index (the last mapping of an index wins), must
  // cover outputs 0, 1, ... without a gap, at least two of them.
  bool split_sizes(const Match& match, int j, OpParams* params) const {
    std::vector<int64_t>& sizes = scratch_->split_sizes;  // 0: no mapping yet
    sizes.clear();
    for (const auto& [s, d] : r_.mapped_outputs) {
      if (d.op != j) continue;
      const Shape& shape = g_.shape({g_.node(match.ops[s.op]).guid, s.index});
      if (params->axis < 0 || params->axis >= static_cast<int>(shape.size()))
        return false;
      // Outputs 0..k-1 take k mappings: an index outside is a gap.
      if (d.index < 0 || static_cast<size_t>(d.index) >= r_.mapped_outputs.size()) return false;
      if (static_cast<size_t>(d.index) >= sizes.size()) sizes.resize(d.index + 1, 0);
      sizes[d.index] = shape[params->axis];  // a dimension: >= 1
    }
    if (sizes.size() < 2 || std::find(sizes.begin(), sizes.end(), 0) != sizes.end())
      return false;
    params->sizes.assign(sizes.begin(), sizes.end());
    return true;
  }

  // True when every op of the rewritten graph still has a reader or is an
  // output, so that live_nodes would return the ops unchanged (in a DAG whose
  // every sink is an output, every op reaches an output). Needs the parent
  // to have that property (Graph::all_live) and checks what the rewrite
  // changes: the ops feeding the match (bound variables) may lose their
  // readers, and the target ops need one. Clones keep their readers: a
  // reader that was matched would make the clone a variable that reads the
  // match, which build() rejected before.
  bool nothing_dies(const Match& match) const {
    if (!g_.all_live()) return false;
    for (size_t v = 0; v < match.bound.size(); ++v) {
      if (!match.is_bound[v] || dst_reads_var_[v]) continue;
      const int u = g_.index_of(match.bound[v].guid);
      if (g_.node(u).type == OP_INPUT || g_.is_output(u)) continue;
      bool read = false;
      for (auto [c, slot] : g_.consumers(u)) read = read || !match.used[c];
      if (!read) return false;
    }
    for (size_t j = 0; j < r_.dst.size(); ++j) {
      if (dst_has_reader_[j]) continue;
      bool read = false;
      for (const auto& [s, d] : r_.mapped_outputs) {
        if (d.op != static_cast<int>(j)) continue;
        const int m = match.ops[s.op];
        const TensorRef from{g_.node(m).guid, s.index};
        for (auto [c, slot] : g_.consumers(m))
          read = read || (!match.used[c] && g_.node(c).inputs[slot] == from);
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
  const int max_ops_;
  const bool incremental_;
  CandidateScratch* const scratch_;
  // The buffers, in *scratch_ (shared by the rules of one MatchCache).
  std::vector<TensorRef>& mapped_from_;  // scratch of build()
  std::vector<bool>& dst_reads_var_;     // per variable: a target op reads it
  std::vector<bool>& dst_has_reader_;    // per target op: another target op reads it
};

}  // namespace

int for_each_candidate(const Graph& graph, const Rule& rule, int max_ops,
                       const std::function<bool(Candidate&&, const MatchedOps&)>& emit,
                       bool incremental, MatchCache* cache) {
  // Most rules of a large set cannot match: rule them out before setting up
  // a builder (which walks the rule's target pattern) or a cache.
  if (!may_match(graph, rule)) return 0;
  MatchCache own;  // without a shared cache: this rule's own memo and buffers
  MatchCache& shared = cache ? *cache : own;
  CandidateBuilder builder(graph, rule, max_ops, incremental, &shared.candidate);
  struct {
    const Graph& graph;
    const Rule& rule;
    CandidateBuilder& builder;
    MatchedOps& matched_guids;
    const std::function<bool(Candidate&&, const MatchedOps&)>& emit;
  } ctx{graph, rule, builder, shared.candidate.matched_guids, emit};
  // Captures one pointer, which std::function holds without allocating.
  // Each match's candidate comes from the thread's pool and, unless `emit`
  // kept it (moved it away), goes back to it (recycle.h).
  return for_each_match(graph, rule, &shared.params, &shared.match, [&ctx](const Match& match) {
    Candidate c = take_candidate();
    bool go_on = true;
    if (ctx.builder.build(match, &c)) {
      ctx.matched_guids.resize(ctx.rule.src.size());
      for (size_t s = 0; s < ctx.rule.src.size(); ++s)
        ctx.matched_guids[s] = ctx.graph.node(match.ops[s]).guid;
      go_on = ctx.emit(std::move(c), ctx.matched_guids);
    }
    give_back_candidate(&c);
    return go_on;
  }, /*skip_reading_match=*/true);
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
  const Graph::LevelHashes& levels = g.level_hashes(false);
  if (op_keys) *op_keys = levels.terms;
  return hash_combine(levels.terms_sum, static_cast<uint64_t>(g.num_ops()));
}

uint64_t graph_deep_key(const Graph& g) {
  return hash_combine(g.level_hashes(true).two_sum, static_cast<uint64_t>(g.num_ops()));
}

uint64_t candidate_deep_key(const Graph& g, const Candidate& c, DeepKeyScratch* s) {
  if (c.deep_keyed) return c.deep_key;
  if (c.whole) {
    c.deep_key = graph_deep_key(*materialize(g, c));
    c.deep_keyed = true;
    return c.deep_key;
  }
  const size_t n = static_cast<size_t>(g.size());
  if (s->parent != &g || s->stamp.size() != n) {
    s->parent = &g;
    s->levels = &g.level_hashes(true);
    s->stamp.assign(n, 0);
    s->new_one.resize(n);
    s->counter = 0;
  }
  const std::vector<uint64_t>& one_of_parent = s->levels->one;
  const std::vector<uint64_t>& two_of_parent = s->levels->two;
  // Stamps: `removed` marks the matched ops, `removed + 1` the readers of
  // redirected tensors (R1), `removed + 2` their other readers (R2).
  s->counter += 3;
  const int removed = s->counter - 2, r1 = removed + 1, r2 = removed + 2;
  const int64_t max_guid = g.max_guid();
  auto added_index = [max_guid](const TensorRef& t) {
    return static_cast<size_t>(t.guid - max_guid - 1);
  };
  uint64_t sum = s->levels->two_sum;
  for (int m : c.removed) {
    s->stamp[static_cast<size_t>(m)] = removed;
    sum -= mix64(two_of_parent[static_cast<size_t>(m)]);
  }
  // The target ops' one-level hashes: their inputs are variables (parent
  // ops the rewrite keeps) or earlier target ops.
  const size_t num_dst = c.added.size();
  s->added_one.resize(num_dst);
  for (size_t j = 0; j < num_dst; ++j) {
    const Node& node = *c.added[j];
    uint64_t h = node_local_hash(node);
    for (const TensorRef& t : node.inputs)
      h = hash_input(h, t.guid <= max_guid ? node_local_hash(g.node(g.index_of(t.guid)))
                                           : node_local_hash(*c.added[added_index(t)]),
                     t.index);
    s->added_one[j] = h;
  }
  // R1: the kept readers of matched ops, each with its new one-level hash.
  std::vector<int>& changed = s->changed;
  changed.clear();
  for (int m : c.removed)
    for (auto [reader, slot] : g.consumers(m)) {
      const size_t r = static_cast<size_t>(reader);
      if (s->stamp[r] == removed || s->stamp[r] == r1) continue;
      s->stamp[r] = r1;
      changed.push_back(reader);
    }
  const size_t num_r1 = changed.size();
  for (size_t k = 0; k < num_r1; ++k) {
    const Node& node = g.node(changed[k]);
    uint64_t h = node_local_hash(node);
    for (const TensorRef& t : node.inputs) {
      const int src = g.index_of(t.guid);
      if (s->stamp[static_cast<size_t>(src)] == removed) {
        const TensorRef to = redirected(c, t);
        h = hash_input(h, node_local_hash(*c.added[added_index(to)]), to.index);
      } else {
        h = hash_input(h, node_local_hash(g.node(src)), t.index);
      }
    }
    s->new_one[static_cast<size_t>(changed[k])] = h;
  }
  // R2: the other readers of R1 ops (none is a matched op: such an op would
  // read the match through a variable, which the builder rejects).
  for (size_t k = 0; k < num_r1; ++k)
    for (auto [reader, slot] : g.consumers(changed[k])) {
      const size_t r = static_cast<size_t>(reader);
      if (s->stamp[r] == removed || s->stamp[r] == r1 || s->stamp[r] == r2) continue;
      s->stamp[r] = r2;
      changed.push_back(reader);
    }
  // The one-level hash an op's reader sees in the candidate graph.
  auto one_of = [&](const TensorRef& t) -> std::pair<uint64_t, int> {
    if (t.guid > max_guid) return {s->added_one[added_index(t)], t.index};
    const int src = g.index_of(t.guid);
    const int stamp = s->stamp[static_cast<size_t>(src)];
    if (stamp == removed) {
      const TensorRef to = redirected(c, t);
      return {s->added_one[added_index(to)], to.index};
    }
    return {stamp == r1 ? s->new_one[static_cast<size_t>(src)]
                        : one_of_parent[static_cast<size_t>(src)],
            t.index};
  };
  for (int i : changed) {
    const Node& node = g.node(i);
    sum -= mix64(two_of_parent[static_cast<size_t>(i)]);
    uint64_t h = hash_combine(node_local_hash(node), kTwoLevelSeed);
    for (const TensorRef& t : node.inputs) {
      const auto [one, index] = one_of(t);
      h = hash_input(h, one, index);
    }
    sum += mix64(h);
  }
  for (size_t j = 0; j < num_dst; ++j) {
    const Node& node = *c.added[j];
    uint64_t h = hash_combine(node_local_hash(node), kTwoLevelSeed);
    for (const TensorRef& t : node.inputs) {
      const auto [one, index] = one_of(t);
      h = hash_input(h, one, index);
    }
    sum += mix64(h);
  }
  c.deep_key = hash_combine(sum, static_cast<uint64_t>(c.num_ops));
  c.deep_keyed = true;
  return c.deep_key;
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
    if (c.deep_keyed && graph_deep_key(*built) != c.deep_key)
      throw EngineError("internal: a candidate's incremental deep key differs "
                        "from its graph's");
    return built;
  }
  std::vector<uint8_t> used(parent.size(), 0);
  for (int i : c.removed) used[i] = 1;
  std::vector<NodePtr> nodes;
  std::vector<TensorRef> outputs;
  build_nodes(parent, used, c, &nodes, &outputs);
  c.graph = Graph::Create(std::move(nodes), std::move(outputs));
  if (c.graph->hash() != c.hash || c.graph->num_ops() != c.num_ops)
    throw EngineError("internal: a candidate's incremental hash or op count differs "
                      "from its graph's");
  return c.graph;
}

}  // namespace taso
