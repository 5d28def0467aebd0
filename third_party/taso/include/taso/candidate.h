// Rewrite candidates: what applying a rule at one match produces, described
// against the current graph without building the result (docs/engine.md,
// "Incremental candidates"), its canonical hash and dedup key computed
// incrementally, and the result built on demand (materialize).
//
// Thread safety: for_each_candidate and for_each_rewrite may run in several
// threads at once on one graph and rule set (each with its own MatchCache
// or none); the types below state theirs.
#ifndef TASO_CANDIDATE_H_
#define TASO_CANDIDATE_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "taso/graph.h"
#include "taso/match.h"
#include "taso/pattern.h"

namespace taso {

// One rewrite of a graph, described against that graph (its "parent")
// without building the result: what it removes, the ops it adds, the tensors
// it redirects, and the result's op count and canonical hash (or, from
// enumerate_locations, its dedup key, the hash being computed on first use),
// computed incrementally. `materialize` builds the graph itself; enumeration
// builds none (docs/engine.md, "Locations").
//
// Thread safety: its description (removed, added, redirect, flips, whole,
// num_ops, key) may be read by several threads at once (CandidateCoster
// reads only that); candidate_hash and materialize fill the `mutable`
// caches below (hash, graph) through a const reference, so they serve one
// thread at a time.
struct Candidate {
  // Parent indices of the matched ops, in source-pattern order: the ops the
  // result no longer has. Ops the rewrite leaves dead are not listed; a
  // rewrite that leaves any has its `graph` built at once (below), whose
  // full build drops them.
  std::vector<int> removed;
  // The target ops, with fresh guids (max_guid + 1, ...), in target order;
  // `added_ws[j]`: whether target op j derives only from weights.
  std::vector<NodePtr> added;
  std::vector<char> added_ws;
  // Source tensors visible outside the match -> their target replacements.
  std::vector<std::pair<TensorRef, TensorRef>> redirect;
  // Parent indices of ops the rewrite leaves in place (possibly re-wired)
  // whose weight-side flag flips (rare; their cost appears or vanishes).
  std::vector<int> weight_side_flips;
  // Equals materialize()'s Graph::hash() once `hashed`; enumerate_locations
  // leaves it to be computed on first use (candidate_hash), see `key`.
  mutable uint64_t hash = 0;
  mutable bool hashed = false;
  // A canonical fingerprint of the result that is cheap to compute
  // incrementally (graph_dedup_key: only the ops the rewrite touches
  // change it): equal graphs have equal keys, so two candidates' hashes need
  // comparing only when their keys are equal (docs/engine.md, "Incremental
  // candidates").
  uint64_t key = 0;
  // The result's graph_deep_key, computed on first use by candidate_deep_key
  // (enumerate_locations asks for it only where two dedup keys are equal).
  mutable uint64_t deep_key = 0;
  mutable bool deep_keyed = false;
  // True when `graph` was built at enumeration (the rewrite drops dead ops,
  // or incremental candidates were turned off): its cost is then the whole
  // graph's.
  bool whole = false;
  int num_ops = 0;    // equals materialize()'s Graph::num_ops()
  // Built at once when the rewrite leaves dead ops behind (the incremental
  // bookkeeping does not cover them); otherwise null until materialized.
  mutable GraphPtr graph;
};

// Where redirected tensor `t` (an output of a matched op of `c`) now comes
// from: the target tensor `c.redirect` pairs it with (the last pair wins).
// Throws EngineError if `t` is not redirected.
TensorRef redirected(const Candidate& c, const TensorRef& t);

// Scratch of candidate_hash, reusable across candidates of one parent.
// Thread safety: one user at a time.
struct HashScratch {
  std::vector<int> stamp, removed;
  int counter = 0;
  std::vector<uint64_t> new_hash, added_hash;
  std::vector<char> new_ws;
};

// The canonical hash of `c`'s result (Graph::hash of materialize(parent, c)),
// computed incrementally from the parent's per-op hashes, and cached in c.
uint64_t candidate_hash(const Graph& parent, const Candidate& c, HashScratch* scratch);

// Graph::hash's cheap companion: the wrapping sum over every op of mix64 of
// a hash of its local hash and its inputs' local hashes (one level of the
// Merkle hash, not all of it), combined with the op count. Graphs with equal
// canonical hashes have equal keys (up to 64-bit collisions, which the hash
// dedup already assumes away). `op_keys` (optional) receives each op's term.
uint64_t graph_dedup_key(const Graph& g, std::vector<uint64_t>* op_keys = nullptr);

// graph_dedup_key's two-level companion, for telling apart candidates whose
// dedup keys are equal without hashing them whole: the wrapping sum over
// every op of mix64 of a hash of its local hash and its inputs' one-level
// terms (graph_dedup_key's per-op hash before mixing), combined with the op
// count. A function of the graph alone, so equal graphs have equal deep
// keys. Two rewrites of the same rule at twin places (the repeated blocks
// of Inception-v3) have equal one-level keys but, where a named weight is
// two levels from what they change, different deep keys.
uint64_t graph_deep_key(const Graph& g);

// Scratch of candidate_deep_key, for candidates of one parent: the parent's
// per-op one- and two-level hashes and their sum (Graph::level_hashes, built
// on first use and kept with the parent), and per-candidate buffers.
// Thread safety: one user at a time.
struct DeepKeyScratch {
  const Graph* parent = nullptr;
  const Graph::LevelHashes* levels = nullptr;  // the parent's
  std::vector<int> stamp;
  int counter = 0;
  std::vector<uint64_t> new_one, added_one;  // per parent op, per target op
  std::vector<int> changed;
};

// graph_deep_key(materialize(parent, c)), computed by difference from the
// parent's (only the target ops, the readers of redirected tensors and
// their readers have different terms), and cached in c. A candidate built
// whole (Candidate::whole) is keyed from its graph.
uint64_t candidate_deep_key(const Graph& parent, const Candidate& c, DeepKeyScratch* scratch);

// The rewritten graph of `c` on `parent` (cached in c.graph). Its nodes are
// exactly those the full rebuild produced before: the parent's untouched ops
// (shared), clones of the readers of redirected tensors, then the targets.
GraphPtr materialize(const Graph& parent, const Candidate& c);

// Buffers the candidate builder reuses across the rules enumerated on one
// graph, and what enumerate_locations tells it about that graph. Not
// thread-safe: one builder at a time.
struct CandidateScratch {
  std::vector<TensorRef> mapped_from;
  std::vector<bool> dst_reads_var, dst_has_reader;
  MatchedOps matched_guids;
  // CandidateBuilder::build's target ops and, per arity, their input shapes.
  std::vector<std::shared_ptr<Node>> targets;
  std::vector<std::vector<Shape>> inputs_by_arity;
  // The split sizes a build gathers.
  std::vector<int64_t> split_sizes;
  HashScratch hash;
  // Per parent op, its term of graph_dedup_key (the parent's
  // Graph::level_hashes terms), and their sum: set by enumerate_locations
  // (lazy hashes) before the rules run.
  const std::vector<uint64_t>* op_keys = nullptr;
  uint64_t parent_key_sum = 0;
  // True: candidates get their dedup key (`key`), their hash on first use;
  // false: their hash at once.
  bool lazy_hash = false;
};

// What every rule enumerated on one graph shares: the memo of parameter
// checks and the buffers of matching and of building candidates. Valid for
// one graph only.
// Thread safety: one user at a time (a search or an enumeration owns one).
struct MatchCache {
  ParamMemo params;
  MatchScratch match;
  CandidateScratch candidate;
};

// Calls `emit` with every rewrite the rule produces on `graph` and the ops
// its match bound, in match order, until it returns false. Results with a
// cycle, with more than `max_ops` ops (0: no cap), whose target shapes fail,
// or that would leave a matched op's unmapped output in use are skipped.
// `incremental` false builds every result whole (the engine before
// incremental candidates; kept to compare against). Returns the number of
// complete matches found (including skipped ones).
// `cache` (optional) shares parameter checks and buffers between the rules
// enumerated on `graph`.
int for_each_candidate(const Graph& graph, const Rule& rule, int max_ops,
                       const std::function<bool(Candidate&&, const MatchedOps&)>& emit,
                       bool incremental = true, MatchCache* cache = nullptr);

// for_each_candidate with every result materialized.
int for_each_rewrite(const Graph& graph, const Rule& rule, int max_ops,
                     const std::function<bool(GraphPtr, const MatchedOps&)>& emit);

}  // namespace taso

#endif  // TASO_CANDIDATE_H_
