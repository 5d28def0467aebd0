// TASO's cost-based backtracking search (thesis Algorithm 1).
#ifndef TASO_SEARCH_H_
#define TASO_SEARCH_H_

#include <string>
#include <vector>

#include "taso/cost.h"
#include "taso/graph.h"
#include "taso/rules.h"

namespace taso {

struct SearchOptions {
  double alpha = 1.05;  // relaxation: keep candidates cheaper than alpha * best
  int budget = 1000;    // graphs expanded (popped from the queue)
  int max_ops = 0;      // size cap; 0 means twice the input's op count
  double time_limit_s = 0;  // 0: no limit
};

struct TracePoint {
  int expansions;
  double seconds;
  double best_cost;
};

struct SearchResult {
  GraphPtr best;
  double initial_cost = 0;
  double best_cost = 0;
  std::vector<int> applied;  // xfer indices, in the order applied to `best`
  std::vector<TracePoint> trace;  // one point per improvement, plus the end
  int expansions = 0;
  int enqueued = 0;
  double seconds = 0;
};

// Pops the cheapest graph, applies every xfer at every location, and queues
// each new (by canonical hash) result cheaper than alpha * best-so-far.
SearchResult backtracking_search(GraphPtr graph, const std::vector<Rule>& rules,
                                 CostBackend* backend, const SearchOptions& opts);

}  // namespace taso

#endif  // TASO_SEARCH_H_
