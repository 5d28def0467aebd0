// The locations of every rule on one graph (docs/engine.md, "Locations").
#ifndef TASO_LOCATIONS_H_
#define TASO_LOCATIONS_H_

#include <vector>

#include "taso/candidate.h"
#include "taso/cost.h"
#include "taso/graph.h"
#include "taso/pattern.h"

namespace taso {

// The locations of every xfer on one graph: candidates[x][l] is what
// applying xfer x at location l produces. Duplicates (by canonical hash,
// against the current graph and every earlier candidate of this step) are
// dropped before indices are assigned; at most `max_locations` per xfer.
// Hashes are compared only between candidates with equal dedup keys
// (graph_dedup_key) and otherwise computed on first use (hashes(), graph()).
//
// Thread safety: costs() only reads (the candidates' descriptions), so it
// may run in several threads at once, beside any other call. hashes(),
// graph() and num_materialized() read or fill caches (the candidates'
// hashes and graphs, `hash_scratch`): one thread at a time among them.
struct Locations {
  GraphPtr parent;
  std::vector<std::vector<Candidate>> candidates;
  std::vector<std::vector<MatchedOps>> matched;  // parallel to candidates
  std::vector<int> num_matches;  // complete matches before any filtering
  // The graph of location (x, l), built on first use.
  GraphPtr graph(int x, int l) const { return materialize(*parent, candidates[x][l]); }
  // Per xfer, the cost of every candidate (candidate_cost).
  std::vector<std::vector<double>> costs(CostBackend* backend) const;
  // Per xfer, the canonical hash of every candidate (candidate_hash).
  std::vector<std::vector<uint64_t>> hashes() const;
  // The canonical hash of every candidate of xfer `x` (hashes()[x] alone).
  std::vector<uint64_t> hashes_of(int x) const;
  // How many candidates hold a graph that was built after enumeration
  // (materialize, e.g. by graph()); those built at enumeration
  // (Candidate::whole) are not counted. Pricing (costs) builds none.
  int num_materialized() const;
  mutable HashScratch hash_scratch;

  Locations() = default;
  Locations(const Locations&) = default;
  Locations(Locations&&) = default;
  Locations& operator=(const Locations&) = default;
  Locations& operator=(Locations&&) = default;
  // Gives the candidates and matched-op lists back to this thread's pools
  // (recycle.h), for the next enumerations to fill.
  ~Locations();
};

// Enumerates the locations of every rule on `graph` (at most
// `max_locations` per rule; results with more than `max_ops` ops are
// skipped, 0: no cap; `incremental` as in for_each_candidate). Thread-safe:
// enumerations may run at once in several threads on one graph and rule
// set; each returns a Locations of its own.
//
// `num_rules` >= 0 enumerates the first `num_rules` rules only, leaving the
// others' lists empty (`candidates` still has one list per rule). A rule's
// list depends on the rules before it alone (a candidate is dropped as a
// duplicate of the current graph or of an earlier candidate, of its own
// rule or of an earlier one), so those lists are exactly the full
// enumeration's: translating a route's step of rule x needs rules 0..x
// only. Negative: every rule.
Locations enumerate_locations(GraphPtr graph, const std::vector<Rule>& rules,
                              int max_locations, int max_ops, bool incremental = true,
                              int num_rules = -1);

// The location of xfer x's cheapest candidate in `locs`, the first among
// equals (the std::min_element of locs.costs(backend)[x]), or -1 where x has
// none. Only candidates that may be the cheapest are costed exactly: a
// candidate whose estimate (CandidateCoster::estimate) lies, bound
// included, above another's estimate plus its bound is dearer than that
// one, so it is skipped; where some candidate has no estimate, every one is
// costed. `costed` (optional) receives how many were costed exactly.
int cheapest_location(const Locations& locs, int x, CostBackend* backend,
                      int* costed = nullptr);

// What apply_everywhere did: the graph it ended at, the canonical hash of
// the graph after each application, and how many enumerations it ran.
struct EverywhereResult {
  GraphPtr graph;
  std::vector<uint64_t> hashes;
  int enumerations = 0;
};

// `rule` applied again and again from `graph`, each time at its cheapest
// location (the first among equals) of enumerate_locations(graph, {rule},
// max_locations, max_ops), `times` times or until it has no location: a
// multi-location action in one call. Exactly what that loop of
// enumerations, costs() and graph() gives step by step; the cheapest
// location is found by cheapest_location, which costs exactly only the
// candidates that may be it. Thread-safe as enumerate_locations is.
EverywhereResult apply_everywhere(GraphPtr graph, const Rule& rule, int times,
                                  int max_locations, int max_ops, CostBackend* backend);

}  // namespace taso

#endif  // TASO_LOCATIONS_H_
