// The per-thread pools of candidates, target nodes and matched-op lists.
#include "taso/recycle.h"

#include <utility>
#include <vector>

namespace taso {

namespace {

// Bounds on what one thread keeps: a few steps' worth of Inception-v3's
// candidates (a node with its vectors is some 400 bytes).
constexpr size_t kMaxNodes = 1 << 13;
constexpr size_t kMaxCandidates = 1 << 12;
constexpr size_t kMaxMatched = 1 << 12;

struct Pools {
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<Candidate> candidates;
  std::vector<MatchedOps> matched;
};

// The thread's pools, created on first use. The pointer and the flag are
// trivially destructible, so they may be read at any time in the thread's
// life, also after the owner below has destroyed the pools (a candidate
// freed by another thread-local's destructor then finds none).
thread_local Pools* tl_pools = nullptr;
thread_local bool tl_pools_gone = false;

struct PoolsOwner {
  ~PoolsOwner() {
    delete tl_pools;
    tl_pools = nullptr;
    tl_pools_gone = true;
  }
};
thread_local PoolsOwner tl_owner;

Pools* pools() {
  if (tl_pools || tl_pools_gone) return tl_pools;
  (void)&tl_owner;  // constructed here, so that it destroys the pools at thread exit
  tl_pools = new Pools;
  return tl_pools;
}

}  // namespace

std::shared_ptr<Node> take_target_node() {
  Pools* p = pools();
  if (!p || p->nodes.empty()) return std::make_shared<Node>();
  std::shared_ptr<Node> node = std::move(p->nodes.back());
  p->nodes.pop_back();
  return node;
}

void give_back_target_node(std::shared_ptr<const Node>&& node) {
  Pools* p = pools();
  // use_count 1: no graph, candidate or other thread holds it (and none can
  // get it: the engine keeps no weak references to nodes).
  if (!p || !node || node.use_count() != 1 || p->nodes.size() >= kMaxNodes) {
    node.reset();
    return;
  }
  // Every target node is created non-const (take_target_node).
  std::shared_ptr<Node> n = std::const_pointer_cast<Node>(std::move(node));
  static const OpParams kDefaults;
  n->params = kDefaults;  // a copy keeps the vectors' capacity
  n->inputs.clear();
  n->name.clear();
  n->cost.clear();
  n->local_hash = 0;
  p->nodes.push_back(std::move(n));
}

Candidate take_candidate() {
  Pools* p = pools();
  if (!p || p->candidates.empty()) return Candidate();
  Candidate c = std::move(p->candidates.back());
  p->candidates.pop_back();
  return c;
}

void give_back_candidate(Candidate* c) {
  c->graph.reset();  // may leave the target nodes to c alone
  for (NodePtr& node : c->added) give_back_target_node(std::move(node));
  Pools* p = pools();
  if (!p || c->removed.capacity() == 0 || p->candidates.size() >= kMaxCandidates) return;
  c->removed.clear();
  c->added.clear();
  c->added_ws.clear();
  c->redirect.clear();
  c->weight_side_flips.clear();
  c->hash = 0;
  c->hashed = false;
  c->key = 0;
  c->deep_key = 0;
  c->deep_keyed = false;
  c->whole = false;
  c->num_ops = 0;
  p->candidates.push_back(std::move(*c));
}

MatchedOps take_matched_ops(const MatchedOps& ops) {
  Pools* p = pools();
  if (!p || p->matched.empty()) return ops;
  MatchedOps out = std::move(p->matched.back());
  p->matched.pop_back();
  out.assign(ops.begin(), ops.end());
  return out;
}

void give_back_matched_ops(MatchedOps* ops) {
  Pools* p = pools();
  if (!p || ops->capacity() == 0 || p->matched.size() >= kMaxMatched) return;
  ops->clear();
  p->matched.push_back(std::move(*ops));
}

}  // namespace taso
