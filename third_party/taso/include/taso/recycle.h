// Reusing the memory of rewrite candidates from one enumeration to the next.
//
// Every enumeration builds each candidate's target ops (a node, its inputs,
// its output shapes) and the candidate's own lists, and a step drops them
// all with its locations: on Inception-v3, some twenty allocations per
// candidate, 500-odd candidates a step. A candidate given back here keeps
// its lists' capacity, and its target nodes that nothing else holds (no
// graph was built from them) keep theirs, for the next candidates to fill.
// What is reused is memory only: every field a build reads is assigned
// again, so the candidates are those a fresh allocation gives.
//
// Thread safety: each thread has its own pools (take and give back on any
// thread; a candidate built on one thread may be given back on another).
// Once a thread's pools are destroyed (at its exit), take_* allocates and
// give_back_* frees, as without them. The pools are bounded, so a thread
// holds at most a few megabytes.
#ifndef TASO_RECYCLE_H_
#define TASO_RECYCLE_H_

#include <memory>

#include "taso/candidate.h"
#include "taso/graph.h"
#include "taso/match.h"

namespace taso {

// A node for a target op: a given-back one, emptied (default parameters,
// no inputs, no name, no cost memo, no local hash; its output shapes are
// stale, for shape inference to assign whole), or a new one. Its guid and
// type are the caller's to set.
std::shared_ptr<Node> take_target_node();

// Gives back `node` if `node` is its only owner, else only drops this
// reference. A node only the caller's builder has seen qualifies.
void give_back_target_node(std::shared_ptr<const Node>&& node);

// An empty candidate (every field as a default-constructed one has it),
// whose lists may have capacity.
Candidate take_candidate();

// Empties `c` into the pool: its target nodes are given back
// (give_back_target_node), its graph dropped, its lists kept. A candidate
// whose lists have no capacity (moved from) is left as it is.
void give_back_candidate(Candidate* c);

// `ops` copied into a given-back list where one is free.
MatchedOps take_matched_ops(const MatchedOps& ops);
void give_back_matched_ops(MatchedOps* ops);

}  // namespace taso

#endif  // TASO_RECYCLE_H_
