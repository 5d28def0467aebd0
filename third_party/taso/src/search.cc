// Backtracking search over rewrites, ordered by estimated cost.
//
// Memory: TASO holds every queued graph whole and never frees its queue; on
// NasNet-A at alpha 1.05 that is hundreds of thousands of graphs (gigabytes).
// Here, by default, a queued candidate is a small record naming its parent
// (a graph that was expanded), the xfer and the index of the rewrite among
// that xfer's results on the parent; it is rebuilt when popped. Rewrites are
// deterministic, so the rebuilt graph is the one that was costed (its hash
// is checked). Memory then grows with the number of expanded parents that
// still have queued children (at most the budget), and a cap on the queue
// (`max_queued`) bounds the records themselves.
#include "taso/search.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace taso {

namespace {

struct Entry {
  double cost;
  uint64_t order;  // FIFO among equal costs keeps the search deterministic
  GraphPtr graph;   // the candidate itself (root, or eager mode), else null
  GraphPtr parent;  // lazy mode: the expanded graph it was built from
  int xfer = -1;    // lazy mode: the rule applied to `parent`
  int index = -1;   // lazy mode: which result of for_each_candidate(parent, xfer)
  uint64_t hash = 0;
  int history = -1;  // node in the history arena; -1: nothing applied
};

struct Cheaper {
  bool operator()(const Entry& a, const Entry& b) const {
    return a.cost != b.cost ? a.cost < b.cost : a.order < b.order;
  }
};

// Rebuilds a lazy entry's graph: the `index`-th result of its xfer on its
// parent. The parent's indexes are freed after, unless it is `root` (the
// caller's graph, which other threads may be reading: Graph::release_caches).
GraphPtr rebuild(const Entry& e, const std::vector<Rule>& rules, int max_ops,
                 const Graph* root) {
  GraphPtr out;
  int k = 0;
  for_each_candidate(*e.parent, rules[e.xfer], max_ops, [&](Candidate&& c, const MatchedOps&) {
    if (k++ < e.index) return true;
    out = materialize(*e.parent, c);
    return false;
  });
  if (e.parent.get() != root) e.parent->release_caches();
  if (!out || out->hash() != e.hash)
    throw EngineError("search: a queued candidate could not be rebuilt identically");
  return out;
}

}  // namespace

SearchResult backtracking_search(GraphPtr graph, const std::vector<Rule>& rules,
                                 CostBackend* backend, const SearchOptions& opts) {
  if (!graph) throw EngineError("search needs a graph");
  if (opts.alpha < 1.0) throw EngineError("alpha must be >= 1");
  if (opts.budget < 0) throw EngineError("budget must be >= 0");
  if (opts.max_queued < 0) throw EngineError("max_queued must be >= 0");
  if (opts.max_locations < 1) throw EngineError("max_locations must be >= 1");
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
        .count();
  };
  const int max_ops = opts.max_ops > 0 ? opts.max_ops : 2 * graph->num_ops();

  SearchResult result;
  result.best = graph;
  result.initial_cost = result.best_cost = graph->cost(backend);
  int best_history = -1;
  // History arena: one node per queued candidate, shared by every
  // candidate's path.
  struct Step {
    int xfer;
    int location;  // as enumerate_locations numbers it on the parent; -1: past the cap
    int previous;  // node of the parent's path; -1: the input graph
  };
  std::vector<Step> history;

  std::set<Entry, Cheaper> queue;
  // Lazy mode: queued children per parent graph (how many parents are held).
  std::unordered_map<const Graph*, int> children;
  auto forget = [&](const Entry& e) {
    if (!e.parent) return;
    auto it = children.find(e.parent.get());
    if (--it->second == 0) children.erase(it);
  };
  std::unordered_set<uint64_t> seen{graph->hash()};
  uint64_t order = 0;
  {
    Entry root{result.initial_cost, order++, graph, nullptr};
    root.hash = graph->hash();
    queue.insert(std::move(root));
  }
  result.peak_queued = 1;
  result.trace.push_back({0, 0.0, result.best_cost});

  while (!queue.empty() && result.expansions < opts.budget) {
    if (opts.time_limit_s > 0 && elapsed() > opts.time_limit_s) break;
    Entry top = std::move(const_cast<Entry&>(*queue.begin()));
    queue.erase(queue.begin());
    forget(top);
    if (!top.graph) top.graph = rebuild(top, rules, max_ops, graph.get());
    top.parent.reset();
    ++result.expansions;
    // The popped graph's cost (Graph::cost); its candidates are priced
    // against it without being built (CandidateCoster).
    CandidateCoster coster(*top.graph, backend);
    const double top_cost = coster.parent_cost();
    if (top_cost < result.best_cost) {
      result.best_cost = top_cost;
      result.best = top.graph;
      best_history = top.history;
      result.trace.push_back({result.expansions, elapsed(), result.best_cost});
    }
    MatchCache match_cache;
    // The graphs met in this expansion, to number locations as
    // enumerate_locations does: a candidate equal to the popped graph or to
    // an earlier candidate of this expansion has no location, and each
    // xfer keeps at most opts.max_locations.
    std::unordered_set<uint64_t> step_seen{top.hash};
    for (size_t x = 0; x < rules.size(); ++x) {
      int index = 0, locations = 0;
      for_each_candidate(*top.graph, rules[x], max_ops, [&](Candidate&& c, const MatchedOps&) {
        const int k = index++;
        int location = -1;
        if (locations < opts.max_locations && step_seen.insert(c.hash).second)
          location = locations++;
        if (!seen.insert(c.hash).second) return true;
        double cost = coster.cost(c);
        if (cost < opts.alpha * result.best_cost) {
          history.push_back({static_cast<int>(x), location, top.history});
          Entry e{cost, order++, nullptr, nullptr};
          e.hash = c.hash;
          e.history = static_cast<int>(history.size()) - 1;
          if (opts.lazy_candidates) {
            e.parent = top.graph;
            e.xfer = static_cast<int>(x);
            e.index = k;
            ++children[top.graph.get()];
          } else {
            e.graph = materialize(*top.graph, c);
          }
          queue.insert(std::move(e));
          ++result.enqueued;
          if (opts.max_queued > 0 && static_cast<int64_t>(queue.size()) > opts.max_queued) {
            auto last = std::prev(queue.end());
            forget(*last);
            queue.erase(last);
            ++result.dropped;
          }
          result.peak_queued = std::max<int64_t>(result.peak_queued, queue.size());
          result.peak_parents = std::max<int64_t>(result.peak_parents, children.size());
        }
        return true;
      }, /*incremental=*/true, &match_cache);
    }
    // Its queued children only need it rebuilt, one xfer at a time (the
    // caller's graph keeps its indexes: other threads may be reading them).
    if (opts.lazy_candidates && top.graph != graph) top.graph->release_caches();
  }
  for (int h = best_history; h >= 0; h = history[h].previous)
    result.applied.emplace_back(history[h].xfer, history[h].location);
  std::reverse(result.applied.begin(), result.applied.end());
  result.seen = static_cast<int64_t>(seen.size());
  result.seconds = elapsed();
  result.trace.push_back({result.expansions, result.seconds, result.best_cost});
  return result;
}

}  // namespace taso
