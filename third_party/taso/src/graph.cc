// Graph construction, topological ordering, canonical hashing, cost, memory.
#include "taso/graph.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace taso {

namespace {

uint64_t hash_string(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a: stable across processes
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

uint64_t hash_params(int type, const OpParams& p) {
  uint64_t h = mix64(static_cast<uint64_t>(type) + 1);
  for (int v : {p.stride_h, p.stride_w, p.padding, p.activation, p.axis,
                p.kernel_h, p.kernel_w, p.count, p.groups})
    h = hash_combine(h, static_cast<uint64_t>(v));
  uint32_t eps;
  std::memcpy(&eps, &p.epsilon, sizeof(eps));
  h = hash_combine(h, eps);
  for (int v : p.perm) h = hash_combine(h, static_cast<uint64_t>(v) + 11);
  for (int64_t v : p.shape) h = hash_combine(h, static_cast<uint64_t>(v) + 13);
  for (int64_t v : p.sizes) h = hash_combine(h, static_cast<uint64_t>(v) + 17);
  if (type == OP_OPAQUE) h = hash_combine(h, hash_string(p.opaque_type));
  return h;
}

std::string describe(const Node& n) {
  std::ostringstream os;
  os << op_type_name(n.type) << " op " << n.guid;
  if (!n.name.empty()) os << " '" << n.name << "'";
  return os.str();
}

bool is_view(int type) {
  return type == OP_RESHAPE || type == OP_SPLIT || type == OP_TRANSPOSE;
}

}  // namespace

GraphPtr Graph::Create(std::vector<NodePtr> nodes,
                       std::vector<TensorRef> outputs) {
  std::shared_ptr<Graph> g(new Graph());
  const int n = static_cast<int>(nodes.size());
  // Guids are small positive integers (builder order, then max + 1 for each
  // op a rewrite creates), so a vector indexes them faster than a hash map.
  int64_t max_guid = 0;
  for (const NodePtr& node : nodes) {
    if (node->guid < 1) throw EngineError("op ids must be positive");
    max_guid = std::max(max_guid, node->guid);
  }
  std::vector<int> given(max_guid + 1, -1);  // guid -> given position
  for (int i = 0; i < n; ++i) {
    int& slot = given[nodes[i]->guid];
    if (slot >= 0) throw EngineError("duplicate op id " + std::to_string(nodes[i]->guid));
    slot = i;
  }
  for (const NodePtr& node : nodes) {
    for (const TensorRef& t : node->inputs) {
      int src = t.guid >= 1 && t.guid <= max_guid ? given[t.guid] : -1;
      if (src < 0)
        throw EngineError(describe(*node) + " reads op " + std::to_string(t.guid) +
                          ", which is not in the graph");
      if (t.index < 0 || t.index >= static_cast<int>(nodes[src]->outputs.size()))
        throw EngineError(describe(*node) + " reads output " + std::to_string(t.index) +
                          " of " + describe(*nodes[src]) + ", which has " +
                          std::to_string(nodes[src]->outputs.size()));
    }
  }
  // Depth-first post-order from each op in the given order: every op comes
  // right after the last of its inputs still missing, so the result is a
  // deterministic function of the given order, in O(n).
  enum : char { kNew, kOpen, kDone };
  std::vector<char> state(n, kNew);
  std::vector<std::pair<int, size_t>> stack;  // (op, next input to visit)
  g->nodes_.reserve(n);
  for (int root = 0; root < n; ++root) {
    if (state[root] != kNew) continue;
    stack.emplace_back(root, 0);
    state[root] = kOpen;
    while (!stack.empty()) {
      auto& [i, next] = stack.back();
      const auto& inputs = nodes[i]->inputs;
      if (next < inputs.size()) {
        int src = given[inputs[next++].guid];
        if (state[src] == kOpen) throw EngineError("the graph has a cycle");
        if (state[src] == kNew) {
          state[src] = kOpen;
          stack.emplace_back(src, 0);
        }
        continue;
      }
      state[i] = kDone;
      g->nodes_.push_back(std::move(nodes[i]));  // done: never read again
      stack.pop_back();
    }
  }

  g->index_.assign(max_guid + 1, -1);
  g->max_guid_ = max_guid;
  for (int i = 0; i < n; ++i) {
    const Node& node = *g->nodes_[i];
    g->index_[node.guid] = i;
    if (node.type != OP_INPUT && node.type != OP_WEIGHT) ++g->num_ops_;
  }
  for (const TensorRef& t : outputs) {
    int i = g->index_of(t.guid);
    if (i < 0 || t.index < 0 ||
        t.index >= static_cast<int>(g->nodes_[i]->outputs.size()))
      throw EngineError("graph output refers to a missing tensor (op " +
                        std::to_string(t.guid) + ", output " +
                        std::to_string(t.index) + ")");
  }
  g->outputs_ = std::move(outputs);

  g->weight_side_.assign(n, false);
  g->node_hashes_.assign(n, 0);
  g->types_.resize(n);
  g->input_begin_.resize(n + 1);
  g->input_begin_[0] = 0;
  uint64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const Node& node = *g->nodes_[i];
    uint64_t h = node_local_hash(node);
    bool ws = node.type != OP_INPUT;
    g->types_[i] = node.type;
    if (node.type >= 0 && node.type < kNumOpTypeSlots) ++g->type_counts_[node.type];
    g->input_begin_[i + 1] = g->input_begin_[i] + static_cast<int>(node.inputs.size());
    for (const TensorRef& t : node.inputs) {
      int src = g->index_[t.guid];
      g->inputs_.push_back(t);
      g->input_ops_.push_back(src);
      h = hash_input(h, g->node_hashes_[src], t.index);
      ws = ws && g->weight_side_[src];
    }
    g->node_hashes_[i] = h;
    g->weight_side_[i] = ws;
    total += mix64(h);  // order-independent: a multiset of op hashes
  }
  g->node_hash_sum_ = total;
  for (const TensorRef& t : g->outputs_)
    total = hash_output(total, g->node_hashes_[g->index_of(t.guid)], t.index);
  g->hash_ = total;
  return g;
}

uint64_t node_local_hash(const Node& node) {
  if (node.local_hash == 0) {
    uint64_t local = hash_params(node.type, node.params);
    if (node.type == OP_INPUT || node.type == OP_WEIGHT)
      local = hash_combine(local, hash_string(node.name));
    for (const Shape& s : node.outputs)
      for (int64_t d : s) local = hash_combine(local, static_cast<uint64_t>(d));
    node.local_hash = local | 1;  // never 0, which means "not computed"
  }
  return node.local_hash;
}

// A seqlock without fences (which ThreadSanitizer cannot check): the
// writer's release stores of the pair follow its acquire exchange of the
// sequence to odd, so a reader whose acquire loads see any of a writer's
// pair then sees the sequence changed, and discards what it read.
bool CostMemo::get(uint64_t backend, double* ms) const {
  const uint32_t seq = seq_.load(std::memory_order_acquire);
  if (seq & 1) return false;  // being written
  const uint64_t id = backend_.load(std::memory_order_acquire);
  const uint64_t bits = bits_.load(std::memory_order_acquire);
  if (seq_.load(std::memory_order_acquire) != seq || id != backend) return false;
  std::memcpy(ms, &bits, sizeof bits);
  return true;
}

void CostMemo::set(uint64_t backend, double ms) const {
  uint32_t seq = seq_.load(std::memory_order_relaxed);
  if ((seq & 1) || !seq_.compare_exchange_strong(seq, seq + 1, std::memory_order_acquire,
                                                 std::memory_order_relaxed))
    return;  // another thread is writing it
  uint64_t bits;
  std::memcpy(&bits, &ms, sizeof bits);
  backend_.store(backend, std::memory_order_release);
  bits_.store(bits, std::memory_order_release);
  seq_.store(seq + 2, std::memory_order_release);
}

void Graph::build_structure() const {
  // Consumers and per-type lists serve matching and analysis, not candidate
  // construction, so they are built on first use only: counted, then
  // filled in op order (a consumer's slots in order), as appending would.
  std::lock_guard<std::mutex> lock(index_mu_);
  if (indexed_.load(std::memory_order_relaxed)) return;  // built meanwhile
  const int n = size();
  consumer_begin_.assign(static_cast<size_t>(n) + 1, 0);
  type_begin_.assign(kNumOpTypeSlots + 1, 0);
  for (int i = 0; i < n; ++i) {
    const Node& node = *nodes_[i];
    if (node.type >= 0 && node.type < kNumOpTypeSlots) ++type_begin_[node.type + 1];
    for (const TensorRef& t : node.inputs) ++consumer_begin_[index_[t.guid] + 1];
  }
  for (int i = 0; i < n; ++i) consumer_begin_[i + 1] += consumer_begin_[i];
  for (int t = 0; t < kNumOpTypeSlots; ++t) type_begin_[t + 1] += type_begin_[t];
  consumer_list_.resize(static_cast<size_t>(consumer_begin_[n]));
  type_list_.resize(static_cast<size_t>(type_begin_[kNumOpTypeSlots]));
  std::vector<int> consumer_next(consumer_begin_.begin(), consumer_begin_.end() - 1);
  std::vector<int> type_next(type_begin_.begin(), type_begin_.end() - 1);
  for (int i = 0; i < n; ++i) {
    const Node& node = *nodes_[i];
    if (node.type >= 0 && node.type < kNumOpTypeSlots) type_list_[type_next[node.type]++] = i;
    for (size_t slot = 0; slot < node.inputs.size(); ++slot)
      consumer_list_[consumer_next[index_[node.inputs[slot].guid]]++] = {i, static_cast<int>(slot)};
  }
  is_output_.assign(n, false);
  for (const TensorRef& t : outputs_) is_output_[index_of(t.guid)] = true;
  indexed_.store(true, std::memory_order_release);
}

size_t Graph::build_ancestors() const {
  std::lock_guard<std::mutex> lock(index_mu_);
  if (const size_t built = ancestor_words_.load(std::memory_order_relaxed)) return built;
  const size_t n = nodes_.size(), words = (n + 63) / 64;
  ancestors_.assign(n * words, 0);
  for (size_t i = 0; i < n; ++i) {  // topological order: inputs come first
    uint64_t* row = &ancestors_[i * words];
    for (const TensorRef& t : nodes_[i]->inputs) {
      const size_t j = index_[t.guid];
      const uint64_t* from = &ancestors_[j * words];
      for (size_t w = 0; w < words; ++w) row[w] |= from[w];
      row[j >> 6] |= uint64_t{1} << (j & 63);
    }
  }
  ancestor_words_.store(words, std::memory_order_release);
  return words;
}

void Graph::build_level_hashes(bool two_levels) const {
  std::lock_guard<std::mutex> lock(index_mu_);
  int8_t built = levels_built_.load(std::memory_order_relaxed);
  const size_t n = nodes_.size();
  if (built < 1) {
    // Local hashes read from a flat copy: the nodes lie scattered in memory.
    std::vector<uint64_t> local(n);
    for (size_t i = 0; i < n; ++i) local[i] = node_local_hash(*nodes_[i]);
    levels_.one.resize(n);
    levels_.terms.resize(n);
    levels_.terms_sum = 0;
    for (size_t i = 0; i < n; ++i) {
      uint64_t h = local[i];
      for (int k = input_begin_[i]; k < input_begin_[i + 1]; ++k)
        h = hash_input(h, local[static_cast<size_t>(input_ops_[k])], inputs_[k].index);
      levels_.one[i] = h;
      levels_.terms[i] = mix64(h);
      levels_.terms_sum += levels_.terms[i];
    }
    built = 1;
  }
  if (two_levels && built < 2) {
    levels_.two.resize(n);
    levels_.two_sum = 0;
    for (size_t i = 0; i < n; ++i) {
      uint64_t h = hash_combine(node_local_hash(*nodes_[i]), kTwoLevelSeed);
      for (int k = input_begin_[i]; k < input_begin_[i + 1]; ++k)
        h = hash_input(h, levels_.one[static_cast<size_t>(input_ops_[k])], inputs_[k].index);
      levels_.two[i] = h;
      levels_.two_sum += mix64(h);
    }
    built = 2;
  }
  levels_built_.store(built, std::memory_order_release);
}

bool Graph::all_live() const {
  int8_t live = all_live_.load(std::memory_order_relaxed);
  if (live < 0) {  // threads that get here at once compute the same value
    live = 1;
    for (int i = 0; i < size() && live; ++i)
      if (nodes_[i]->type != OP_INPUT && consumers(i).empty() && !is_output(i)) live = 0;
    all_live_.store(live, std::memory_order_relaxed);
  }
  return live == 1;
}

void Graph::release_caches() const {
  std::lock_guard<std::mutex> lock(index_mu_);
  indexed_.store(false, std::memory_order_relaxed);
  std::vector<int>().swap(consumer_begin_);
  std::vector<std::pair<int, int>>().swap(consumer_list_);
  std::vector<bool>().swap(is_output_);
  std::vector<int>().swap(type_begin_);
  std::vector<int>().swap(type_list_);
  std::vector<uint64_t>().swap(ancestors_);
  ancestor_words_.store(0, std::memory_order_relaxed);
  levels_ = LevelHashes();
  levels_built_.store(0, std::memory_order_relaxed);
}

const Shape& Graph::shape(const TensorRef& t) const {
  return nodes_[index_[t.guid]]->outputs[t.index];
}

Span<int> Graph::ops_of_type(int type) const {
  if (type < 0 || type >= kNumOpTypeSlots) return {};
  index_structure();
  const int* all = type_list_.data();
  return {all + type_begin_[type], all + type_begin_[type + 1]};
}

OpConfig Graph::op_config(int i) const {
  const Node& node = *nodes_[i];
  OpConfig c;
  c.type = node.type;
  c.params = node.params;
  for (const TensorRef& t : node.inputs) c.input_shapes.push_back(shape(t));
  c.output_shapes = node.outputs;
  c.weight_side = weight_side_[i];
  return c;
}

std::vector<double> Graph::op_costs(CostBackend* backend) const {
  std::vector<double> costs = base_op_costs(backend);
  backend->in_context(*this, &costs);
  return costs;
}

std::vector<double> Graph::base_op_costs(CostBackend* backend) const {
  std::vector<double> costs(nodes_.size(), 0.0);
  for (int i = 0; i < size(); ++i) {
    int t = nodes_[i]->type;
    if (t == OP_INPUT || t == OP_WEIGHT || weight_side_[i]) continue;
    const Node& node = *nodes_[i];
    if (!node.cost.get(backend->instance_id(), &costs[i])) {
      costs[i] = backend->op_cost(op_config(i));
      node.cost.set(backend->instance_id(), costs[i]);
    }
  }
  return costs;
}

double Graph::cost(CostBackend* backend) const {
  double total = 0;
  for (double c : op_costs(backend)) total += c;
  return total;
}

MemoryEstimate Graph::memory() const {
  // Activations live from their producer to their last reader; views (reshape,
  // split, transpose) alias their input's storage and extend its lifetime.
  // Weight-side tensors are weights once preprocessed: the weights counted are
  // those read by ops that run at inference time.
  MemoryEstimate m;
  index_structure();
  const int n = size();
  std::vector<int> storage(n);
  std::vector<int> last_use(n, -1);
  std::vector<int64_t> bytes(n, 0);
  for (int i = 0; i < n; ++i) {
    const Node& node = *nodes_[i];
    storage[i] = i;
    if (weight_side_[i]) continue;
    if (is_view(node.type)) {
      storage[i] = storage[index_[node.inputs[0].guid]];
    } else {
      for (const Shape& s : node.outputs) bytes[i] += 4 * num_elements(s);
      m.activation_bytes += bytes[i];
    }
    for (const TensorRef& t : node.inputs) {
      int src = index_[t.guid];
      if (weight_side_[src]) {
        // Count each weight tensor once, at its first inference-time reader.
        bool first = true;
        for (auto [c, slot] : consumers(src))
          if (!weight_side_[c] && c < i) first = false;
        if (first) m.weight_bytes += 4 * num_elements(nodes_[src]->outputs[t.index]);
      } else {
        last_use[storage[src]] = i;
      }
    }
  }
  for (const TensorRef& t : outputs_) last_use[storage[index_[t.guid]]] = n;
  std::vector<std::vector<int>> frees(n + 1);
  for (int s = 0; s < n; ++s)
    if (bytes[s] > 0) frees[std::max(last_use[s], s)].push_back(s);
  int64_t live = 0;
  for (int i = 0; i < n; ++i) {
    live += bytes[i];
    m.peak_bytes = std::max(m.peak_bytes, live);
    for (int s : frees[i]) live -= bytes[s];
  }
  m.peak_bytes += m.weight_bytes;
  return m;
}

// ----------------------------------------------------------------- builder

const Node& GraphBuilder::get(int64_t guid) const {
  auto it = index_.find(guid);
  if (it == index_.end())
    throw EngineError("tensor refers to op " + std::to_string(guid) +
                      ", which this builder did not create");
  return *nodes_[it->second];
}

const Shape& GraphBuilder::shape(const TensorRef& t) const {
  const Node& n = get(t.guid);
  if (t.index < 0 || t.index >= static_cast<int>(n.outputs.size()))
    throw EngineError(std::string(op_type_name(n.type)) + " op " +
                      std::to_string(t.guid) + " has no output " +
                      std::to_string(t.index));
  return n.outputs[t.index];
}

int GraphBuilder::num_outputs(int64_t guid) const {
  return static_cast<int>(get(guid).outputs.size());
}

int64_t GraphBuilder::leaf(int type, const std::string& name,
                           const Shape& shape) {
  if (name.empty()) throw EngineError("inputs and weights need a name");
  if (names_.count(name))
    throw EngineError("the name '" + name + "' is already used");
  if (shape.empty()) throw EngineError("'" + name + "' has an empty shape");
  for (int64_t d : shape)
    if (d < 1)
      throw EngineError("'" + name + "' has a dimension < 1: " + shape_str(shape));
  try {
    num_elements(shape);  // throws beyond kMaxElements
  } catch (const EngineError& e) {
    throw EngineError("'" + name + "': " + e.what());
  }
  auto node = std::make_shared<Node>();
  node->guid = static_cast<int64_t>(nodes_.size()) + 1;
  node->type = type;
  node->outputs = {shape};
  node->name = name;
  names_[name] = node->guid;
  index_[node->guid] = static_cast<int>(nodes_.size());
  nodes_.push_back(node);
  return node->guid;
}

TensorRef GraphBuilder::input(const std::string& name, const Shape& shape) {
  return {leaf(OP_INPUT, name, shape), 0};
}

TensorRef GraphBuilder::weight(const std::string& name, const Shape& shape) {
  return {leaf(OP_WEIGHT, name, shape), 0};
}

int64_t GraphBuilder::add(int type, const OpParams& params,
                          const std::vector<TensorRef>& inputs) {
  if (type == OP_INPUT || type == OP_WEIGHT)
    throw EngineError("use input() or weight() for inputs and weights");
  std::vector<Shape> in;
  in.reserve(inputs.size());
  for (const TensorRef& t : inputs) in.push_back(shape(t));
  auto node = std::make_shared<Node>();
  node->outputs = infer_shapes(type, params, in);
  node->guid = static_cast<int64_t>(nodes_.size()) + 1;
  node->type = type;
  node->params = params;
  node->inputs = inputs;
  index_[node->guid] = static_cast<int>(nodes_.size());
  nodes_.push_back(node);
  return node->guid;
}

GraphPtr GraphBuilder::build(const std::vector<TensorRef>& outputs) const {
  std::vector<TensorRef> outs = outputs;
  if (outs.empty()) {
    std::vector<std::vector<bool>> used(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i)
      used[i].assign(nodes_[i]->outputs.size(), false);
    for (const NodePtr& n : nodes_)
      for (const TensorRef& t : n->inputs) used[index_.at(t.guid)][t.index] = true;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->type == OP_INPUT || nodes_[i]->type == OP_WEIGHT) continue;
      for (size_t k = 0; k < used[i].size(); ++k)
        if (!used[i][k]) outs.push_back({nodes_[i]->guid, static_cast<int>(k)});
    }
    if (outs.empty()) throw EngineError("the graph has no ops, hence no outputs");
  }
  for (const TensorRef& t : outs) shape(t);  // validates
  return Graph::Create(nodes_, outs);
}

}  // namespace taso

namespace taso {

GraphPtr merge_identical_ops(const GraphPtr& graph) {
  const Graph& g = *graph;
  const int n = g.size();
  // Ops that merge share their structural hash (Graph::node_hash covers the
  // type, parameters, output shapes and, recursively, the inputs), so only
  // a graph where two ops share one can have anything to merge.
  std::unordered_map<uint64_t, int> seen;
  seen.reserve(static_cast<size_t>(n));
  bool candidates = false;
  for (int i = 0; i < n && !candidates; ++i) {
    const int type = g.op_type(i);
    if (type == OP_INPUT || type == OP_WEIGHT) continue;
    candidates = !seen.emplace(g.node_hash(i), i).second;
  }
  if (!candidates) return graph;

  std::vector<int> kept_of(static_cast<size_t>(n), -1);  // op index -> kept position
  std::vector<int> kept;                                  // kept position -> op index
  kept.reserve(static_cast<size_t>(n));
  std::unordered_multimap<uint64_t, int> first;           // node hash -> kept position
  first.reserve(static_cast<size_t>(n));
  auto same = [&](int a, int b) {  // op b is op a, inputs read through the merges
    const Node& x = g.node(a);
    const Node& y = g.node(b);
    if (x.type != y.type || g.num_inputs(a) != g.num_inputs(b) || !(x.params == y.params))
      return false;
    for (int k = 0; k < g.num_inputs(a); ++k)
      if (kept_of[static_cast<size_t>(g.input_op(a, k))] !=
              kept_of[static_cast<size_t>(g.input_op(b, k))] ||
          g.input(a, k).index != g.input(b, k).index)
        return false;
    return true;
  };
  for (int i = 0; i < n; ++i) {
    const int type = g.op_type(i);
    if (type != OP_INPUT && type != OP_WEIGHT) {
      int found = -1;
      auto range = first.equal_range(g.node_hash(i));
      for (auto it = range.first; it != range.second && found < 0; ++it)
        if (same(kept[static_cast<size_t>(it->second)], i)) found = it->second;
      if (found >= 0) {
        kept_of[static_cast<size_t>(i)] = found;
        continue;
      }
      first.emplace(g.node_hash(i), static_cast<int>(kept.size()));
    }
    kept_of[static_cast<size_t>(i)] = static_cast<int>(kept.size());
    kept.push_back(i);
  }
  if (static_cast<int>(kept.size()) == n) return graph;

  std::vector<NodePtr> nodes;
  nodes.reserve(kept.size());
  for (size_t k = 0; k < kept.size(); ++k) {
    const Node& old = g.node(kept[k]);
    auto node = std::make_shared<Node>();
    node->guid = static_cast<int64_t>(k) + 1;
    node->type = old.type;
    node->params = old.params;
    node->outputs = old.outputs;
    node->name = old.name;
    node->local_hash = old.local_hash;  // covers no guid and no input
    node->inputs.reserve(old.inputs.size());
    for (int j = 0; j < g.num_inputs(kept[k]); ++j)
      node->inputs.push_back(
          {kept_of[static_cast<size_t>(g.input_op(kept[k], j))] + 1, g.input(kept[k], j).index});
    nodes.push_back(std::move(node));
  }
  std::vector<TensorRef> outputs;
  outputs.reserve(g.outputs().size());
  for (const TensorRef& t : g.outputs())
    outputs.push_back({kept_of[static_cast<size_t>(g.index_of(t.guid))] + 1, t.index});
  return Graph::Create(std::move(nodes), std::move(outputs));
}

}  // namespace taso
