// The locations of every rule on one graph: enumeration with dedup.
#include "taso/locations.h"

#include <unordered_map>

#include "taso/coster.h"

namespace taso {

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
  CandidateScratch& scratch = cache.candidate;
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
