// The locations of every rule on one graph: enumeration with dedup.
#include "taso/locations.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "taso/coster.h"
#include "taso/recycle.h"

namespace taso {

namespace {

// The kept candidates by dedup key, each key's in the order kept: an
// open-addressed table of keys with a chain of (xfer, location) entries per
// key, flat, so that keeping a candidate allocates nothing per key (a
// std::unordered_map of vectors allocated a node and a vector for each).
class KeyBuckets {
 public:
  struct Entry {
    int x, l, next;  // next: the key's next entry, -1 at its last
  };
  // The first entry of `key`, or -1.
  int find(uint64_t key) const {
    if (slots_.empty()) return -1;
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].head < 0) return -1;
      if (slots_[i].key == key) return slots_[i].head;
    }
  }
  const Entry& entry(int e) const { return entries_[e]; }
  void add(uint64_t key, int x, int l) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    const int e = static_cast<int>(entries_.size());
    entries_.push_back({x, l, -1});
    size_t i = mix64(key) & mask_;
    while (slots_[i].head >= 0 && slots_[i].key != key) i = (i + 1) & mask_;
    Slot& slot = slots_[i];
    if (slot.head < 0) {
      slot = {key, e, e};
      ++used_;
    } else {
      entries_[slot.tail].next = e;
      slot.tail = e;
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    int head = -1, tail = -1;
  };
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(std::max<size_t>(64, 2 * old.size()), Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.head < 0) continue;
      size_t i = mix64(s.key) & mask_;
      while (slots_[i].head >= 0) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  std::vector<Entry> entries_;
  size_t mask_ = 0, used_ = 0;
};

}  // namespace

Locations::~Locations() {
  for (std::vector<Candidate>& list : candidates)
    for (Candidate& c : list) give_back_candidate(&c);
  for (std::vector<MatchedOps>& list : matched)
    for (MatchedOps& ops : list) give_back_matched_ops(&ops);
}

std::vector<std::vector<uint64_t>> Locations::hashes() const {
  std::vector<std::vector<uint64_t>> out(candidates.size());
  for (size_t x = 0; x < candidates.size(); ++x)
    for (const Candidate& c : candidates[x])
      out[x].push_back(candidate_hash(*parent, c, &hash_scratch));
  return out;
}

std::vector<uint64_t> Locations::hashes_of(int x) const {
  std::vector<uint64_t> out;
  out.reserve(candidates[static_cast<size_t>(x)].size());
  for (const Candidate& c : candidates[static_cast<size_t>(x)])
    out.push_back(candidate_hash(*parent, c, &hash_scratch));
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
                              int max_locations, int max_ops, bool incremental,
                              int num_rules) {
  if (!graph) throw EngineError("locations need a graph");
  if (max_locations < 1) throw EngineError("max_locations must be >= 1");
  Locations locs;
  locs.parent = graph;
  locs.candidates.resize(rules.size());
  locs.matched.resize(rules.size());
  locs.num_matches.resize(rules.size());
  MatchCache cache;
  // A candidate is a duplicate when its canonical hash equals the current
  // graph's or a kept candidate's. Equal graphs have equal dedup keys and
  // equal deep keys, so hashes are computed (candidate_hash) and compared
  // only where both are equal: most candidates' keys are unique, and their
  // hashes are left to first use (docs/engine.md, "Incremental
  // candidates").
  CandidateScratch& scratch = cache.candidate;
  scratch.lazy_hash = true;
  const Graph::LevelHashes& levels = graph->level_hashes(false);
  scratch.op_keys = &levels.terms;
  scratch.parent_key_sum = levels.terms_sum;
  const uint64_t parent_key = graph_dedup_key(*graph);
  KeyBuckets buckets;
  HashScratch& hs = locs.hash_scratch;
  // Equal dedup keys are told apart by their deep keys (graph_deep_key, a
  // few ops' terms) before the hashes (a scan of everything downstream)
  // are compared: on Inception-v3, each of its ~100 equal keys per
  // enumeration is a rewrite at a twin place in a repeated block.
  DeepKeyScratch deep;
  uint64_t parent_deep_key = 0;
  bool parent_deep_keyed = false;
  const size_t enumerated =
      num_rules < 0 ? rules.size() : std::min(rules.size(), static_cast<size_t>(num_rules));
  // One callback for every rule (built once: a lambda capturing this much
  // is held on the heap, and a set has ~1,700 rules), keeping rule x's.
  size_t x = 0;
  const std::function<bool(Candidate&&, const MatchedOps&)> emit =
      [&](Candidate&& c, const MatchedOps& ops) {
    auto& list = locs.candidates[x];
    bool duplicate = false;
    if (c.key == parent_key) {
      if (!parent_deep_keyed) {
        parent_deep_key = graph_deep_key(*graph);
        parent_deep_keyed = true;
      }
      duplicate = candidate_deep_key(*graph, c, &deep) == parent_deep_key &&
                  candidate_hash(*graph, c, &hs) == graph->hash();
    }
    for (int e = buckets.find(c.key); e >= 0 && !duplicate; e = buckets.entry(e).next) {
      const KeyBuckets::Entry& kept = buckets.entry(e);
      const Candidate& other = locs.candidates[kept.x][kept.l];
      duplicate = candidate_deep_key(*graph, other, &deep) ==
                      candidate_deep_key(*graph, c, &deep) &&
                  candidate_hash(*graph, other, &hs) == candidate_hash(*graph, c, &hs);
    }
    if (!duplicate) {
      buckets.add(c.key, static_cast<int>(x), static_cast<int>(list.size()));
      list.push_back(std::move(c));
      locs.matched[x].push_back(take_matched_ops(ops));
    }
    return static_cast<int>(list.size()) < max_locations;
  };
  for (x = 0; x < enumerated; ++x)
    locs.num_matches[x] = for_each_candidate(*graph, rules[x], max_ops, emit, incremental, &cache);
  return locs;
}


}  // namespace taso

namespace taso {

int cheapest_location(const Locations& locs, int x, CostBackend* backend, int* costed) {
  const std::vector<Candidate>& list = locs.candidates[static_cast<size_t>(x)];
  if (costed) *costed = 0;
  if (list.empty()) return -1;
  CandidateCoster coster(*locs.parent, backend);
  // Every candidate's estimate first; the least of estimate plus bound is
  // a ceiling on the cheapest exact cost.
  std::vector<double> value(list.size()), bound(list.size());
  bool estimated = true;
  double ceiling = INFINITY;
  for (size_t l = 0; l < list.size() && estimated; ++l) {
    estimated = coster.estimate(list[l], &value[l], &bound[l]);
    if (estimated) ceiling = std::min(ceiling, value[l] + bound[l]);
  }
  int best = -1;
  double best_cost = 0;
  for (size_t l = 0; l < list.size(); ++l) {
    // Its exact cost is at least value - bound, above the ceiling: dearer
    // than the candidate that set it, so neither the cheapest nor tied.
    if (estimated && value[l] - bound[l] > ceiling) continue;
    const double v = coster.cost(list[l]);
    if (costed) ++*costed;
    if (best < 0 || v < best_cost) {  // std::min_element's first least
      best = static_cast<int>(l);
      best_cost = v;
    }
  }
  return best;
}

EverywhereResult apply_everywhere(GraphPtr graph, const Rule& rule, int times,
                                  int max_locations, int max_ops, CostBackend* backend) {
  if (!backend) throw EngineError("apply_everywhere needs a cost backend");
  const std::vector<Rule> one{rule};
  EverywhereResult out;
  out.graph = std::move(graph);
  for (int step = 0; step < times; ++step) {
    Locations locs = enumerate_locations(out.graph, one, max_locations, max_ops);
    ++out.enumerations;
    if (locs.candidates[0].empty()) break;
    out.graph = locs.graph(0, cheapest_location(locs, 0, backend));
    out.hashes.push_back(out.graph->hash());
  }
  return out;
}

}  // namespace taso
