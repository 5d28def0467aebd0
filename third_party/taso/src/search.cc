// Backtracking search over rewrites, ordered by estimated cost.
#include "taso/search.h"

#include <chrono>
#include <memory>
#include <queue>
#include <unordered_set>

namespace taso {

namespace {

struct Entry {
  double cost;
  uint64_t order;  // FIFO among equal costs keeps the search deterministic
  GraphPtr graph;
  std::shared_ptr<const std::vector<int>> history;
};

struct Costlier {
  bool operator()(const Entry& a, const Entry& b) const {
    return a.cost != b.cost ? a.cost > b.cost : a.order > b.order;
  }
};

}  // namespace

SearchResult backtracking_search(GraphPtr graph, const std::vector<Rule>& rules,
                                 CostBackend* backend, const SearchOptions& opts) {
  if (!graph) throw EngineError("search needs a graph");
  if (opts.alpha < 1.0) throw EngineError("alpha must be >= 1");
  if (opts.budget < 0) throw EngineError("budget must be >= 0");
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
        .count();
  };
  const int max_ops = opts.max_ops > 0 ? opts.max_ops : 2 * graph->num_ops();

  SearchResult result;
  result.best = graph;
  result.initial_cost = result.best_cost = graph->cost(backend);
  auto best_history = std::make_shared<const std::vector<int>>();

  std::priority_queue<Entry, std::vector<Entry>, Costlier> queue;
  std::unordered_set<uint64_t> seen{graph->hash()};
  uint64_t order = 0;
  queue.push({result.initial_cost, order++, graph, best_history});
  result.trace.push_back({0, 0.0, result.best_cost});

  while (!queue.empty() && result.expansions < opts.budget) {
    if (opts.time_limit_s > 0 && elapsed() > opts.time_limit_s) break;
    Entry top = queue.top();
    queue.pop();
    ++result.expansions;
    if (top.cost < result.best_cost) {
      result.best_cost = top.cost;
      result.best = top.graph;
      best_history = top.history;
      result.trace.push_back({result.expansions, elapsed(), result.best_cost});
    }
    for (size_t x = 0; x < rules.size(); ++x) {
      for_each_rewrite(*top.graph, rules[x], max_ops, [&](GraphPtr c, const MatchedOps&) {
        if (!seen.insert(c->hash()).second) return true;
        double cost = c->cost(backend);
        if (cost < opts.alpha * result.best_cost) {
          auto history = std::make_shared<std::vector<int>>(*top.history);
          history->push_back(static_cast<int>(x));
          queue.push({cost, order++, std::move(c), std::move(history)});
          ++result.enqueued;
        }
        return true;
      });
    }
  }
  result.applied = *best_history;
  result.seconds = elapsed();
  result.trace.push_back({result.expansions, result.seconds, result.best_cost});
  return result;
}

}  // namespace taso
