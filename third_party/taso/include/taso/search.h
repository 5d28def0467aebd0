// TASO's cost-based backtracking search (thesis Algorithm 1).
//
// Thread safety: searches may run at once in several threads, sharing the
// graph, the rules and the backend (graph.h, cost.h); each returns what it
// returns alone. SearchOptions and SearchResult are plain values.
#ifndef TASO_SEARCH_H_
#define TASO_SEARCH_H_

#include <string>
#include <utility>
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
  // Queued candidates beyond this many are dropped, costliest first (0: no
  // cap). Results equal the uncapped search's whenever `dropped` is 0.
  int max_queued = 0;
  // True: a queued candidate is held as (parent graph, xfer, match index) and
  // rebuilt when popped, so memory grows with the expanded graphs, not with
  // the queue. False: every queued graph is held whole (TASO's way; kept to
  // compare against). Both give the same results.
  bool lazy_candidates = true;
  // How `SearchResult::applied` numbers locations: as enumerate_locations
  // does with this many locations per xfer (the environment's L).
  int max_locations = 200;
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
  // (xfer index, location), in the order applied to `best`. The location is
  // the candidate's index among enumerate_locations(parent, rules,
  // opts.max_locations, max_ops)'s results for the xfer, so that applying
  // the steps through Locations, one by one from the input, rebuilds `best`;
  // -1 when the candidate was past the first opts.max_locations.
  std::vector<std::pair<int, int>> applied;
  std::vector<TracePoint> trace;  // one point per improvement, plus the end
  int expansions = 0;
  int enqueued = 0;
  double seconds = 0;
  int64_t peak_queued = 0;   // most candidates queued at once
  int64_t peak_parents = 0;  // lazy: most parent graphs held at once for queued candidates
  int64_t dropped = 0;       // candidates dropped by max_queued
  int64_t seen = 0;          // distinct graphs (hashes) met
};

// Pops the cheapest graph, applies every xfer at every location, and queues
// each new (by canonical hash) result cheaper than alpha * best-so-far.
// Ties in cost pop in the order queued, so the search is deterministic.
SearchResult backtracking_search(GraphPtr graph, const std::vector<Rule>& rules,
                                 CostBackend* backend, const SearchOptions& opts);

}  // namespace taso

#endif  // TASO_SEARCH_H_
