// Reusing candidates' memory across enumerations (recycle.h): what comes
// back is empty, what another owner holds never comes back, and
// enumerations on reused memory equal those on fresh memory.
#include <cstring>

#include "check.h"
#include "fixtures.h"
#include "taso/recycle.h"

namespace taso_test {

namespace {

uint64_t bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Everything an enumeration returned, with the target ops' fields and the
// costs' bits.
struct Snapshot {
  std::vector<int> num_matches;
  std::vector<std::vector<MatchedOps>> matched;
  std::vector<std::vector<uint64_t>> hashes, keys, costs, fitted_costs;
  std::vector<std::vector<int>> num_ops;
  std::vector<std::vector<std::vector<int>>> removed, flips;
  std::vector<std::vector<std::vector<char>>> added_ws;
  // Per candidate, per target op: guid, type, inputs, outputs, split sizes.
  std::vector<std::vector<std::vector<std::vector<int64_t>>>> added;

  bool operator==(const Snapshot& o) const {
    return num_matches == o.num_matches && matched == o.matched && hashes == o.hashes &&
           keys == o.keys && costs == o.costs && fitted_costs == o.fitted_costs &&
           num_ops == o.num_ops && removed == o.removed && flips == o.flips &&
           added_ws == o.added_ws && added == o.added;
  }
};

std::vector<int64_t> describe(const Node& n) {
  std::vector<int64_t> out = {n.guid, n.type, n.params.axis};
  for (const TensorRef& t : n.inputs) out.insert(out.end(), {t.guid, t.index});
  out.push_back(-1);
  for (const Shape& s : n.outputs) {
    out.insert(out.end(), s.begin(), s.end());
    out.push_back(-2);
  }
  out.insert(out.end(), n.params.sizes.begin(), n.params.sizes.end());
  return out;
}

Snapshot snapshot(const Locations& locs, CostBackend* analytic, CostBackend* model) {
  Snapshot s;
  s.num_matches = locs.num_matches;
  s.matched = locs.matched;
  for (const auto& row : locs.costs(analytic)) {
    s.costs.emplace_back();
    for (double v : row) s.costs.back().push_back(bits(v));
  }
  for (const auto& row : locs.costs(model)) {
    s.fitted_costs.emplace_back();
    for (double v : row) s.fitted_costs.back().push_back(bits(v));
  }
  s.hashes = locs.hashes();
  for (const auto& row : locs.candidates) {
    s.keys.emplace_back();
    s.num_ops.emplace_back();
    s.removed.emplace_back();
    s.flips.emplace_back();
    s.added_ws.emplace_back();
    s.added.emplace_back();
    for (const Candidate& c : row) {
      s.keys.back().push_back(c.key);
      s.num_ops.back().push_back(c.num_ops);
      s.removed.back().push_back(c.removed);
      s.flips.back().push_back(c.weight_side_flips);
      s.added_ws.back().push_back(c.added_ws);
      s.added.back().emplace_back();
      for (const NodePtr& n : c.added) s.added.back().back().push_back(describe(*n));
    }
  }
  return s;
}

}  // namespace

TEST(recycled_enumerations_equal_fresh_ones) {
  const GraphPtr g = branching_chain(4);
  const std::vector<Rule> rules = {relu_pair_concat_split(0), relu_pair_concat_split(1),
                                   fuse_conv_relu(), replace_unary(OP_RELU, OP_TANH),
                                   commute_add()};
  std::unique_ptr<CostBackend> analytic = make_analytic_backend("cpu");
  std::unique_ptr<CostBackend> model = fitted();
  for (int max_locations : {200, 3}) {
    // A fresh backend's memos are empty: the first snapshot prices every
    // target op anew, as do the later ones (their nodes are new or reused,
    // and a reused node's memo is emptied).
    Snapshot first;
    GraphPtr kept;
    std::vector<std::vector<int64_t>> kept_nodes;
    {
      Locations locs = enumerate_locations(g, rules, max_locations, 0);
      first = snapshot(locs, analytic.get(), model.get());
      // A built candidate's nodes belong to its graph too: never reused.
      REQUIRE(!locs.candidates[1].empty());
      kept = locs.graph(1, 0);
      for (const NodePtr& n : kept->nodes()) kept_nodes.push_back(describe(*n));
    }
    for (int round = 0; round < 3; ++round) {
      Locations locs = enumerate_locations(g, rules, max_locations, 0);
      CHECK(snapshot(locs, analytic.get(), model.get()) == first);
      Locations whole = enumerate_locations(g, rules, max_locations, 0, false);
      CHECK(whole.hashes() == first.hashes);
      CHECK(whole.matched == first.matched);
    }
    std::vector<std::vector<int64_t>> now;
    for (const NodePtr& n : kept->nodes()) now.push_back(describe(*n));
    CHECK(now == kept_nodes);
    // Every candidate still builds to its hash and prices to its cost.
    Locations locs = enumerate_locations(g, rules, max_locations, 0);
    const auto costs = locs.costs(analytic.get());
    for (size_t x = 0; x < rules.size(); ++x)
      for (size_t l = 0; l < locs.candidates[x].size(); ++l) {
        const GraphPtr built = locs.graph(static_cast<int>(x), static_cast<int>(l));
        CHECK_EQ(built->hash(), first.hashes[x][l]);
        CHECK_EQ(bits(built->cost(analytic.get())), bits(costs[x][l]));
      }
  }
}

TEST(given_back_target_nodes_come_back_empty_and_shared_ones_never) {
  std::shared_ptr<Node> n = take_target_node();
  n->guid = 7;
  n->type = OP_SPLIT;
  n->params.axis = 1;
  n->params.sizes = {2, 2};
  n->inputs = {{3, 0}};
  n->outputs = {{1, 2}, {1, 2}};
  n->name = "t";
  n->cost.set(42, 1.5);
  n->local_hash = 9;
  Node* const address = n.get();
  // Another owner: only this reference is dropped.
  NodePtr other = n;
  give_back_target_node(NodePtr(n));
  CHECK_EQ(n.use_count(), 2);
  CHECK(n->inputs.size() == 1u && n->params.sizes.size() == 2u && n->local_hash == 9u);
  double ms = 0;
  CHECK(n->cost.get(42, &ms) && ms == 1.5);
  other.reset();
  // The only owner: back to the pool, emptied, and the next node taken.
  give_back_target_node(std::move(n));
  std::shared_ptr<Node> again = take_target_node();
  REQUIRE(again.get() == address);
  CHECK_EQ(again.use_count(), 1);
  CHECK(again->params == OpParams());
  CHECK(again->params.sizes.capacity() >= 2u);  // the point: capacity kept
  CHECK(again->inputs.empty());
  CHECK(again->name.empty());
  CHECK_EQ(again->local_hash, 0u);
  CHECK(!again->cost.get(42, &ms));
}

TEST(given_back_candidates_come_back_empty) {
  Candidate c = take_candidate();
  c.removed = {1, 2};
  c.added.push_back(take_target_node());
  c.added_ws = {1};
  c.redirect.push_back({{1, 0}, {9, 0}});
  c.weight_side_flips = {4};
  c.hash = c.key = c.deep_key = 5;
  c.hashed = c.deep_keyed = c.whole = true;
  c.num_ops = 3;
  const int* buffer = c.removed.data();
  give_back_candidate(&c);
  Candidate again = take_candidate();
  REQUIRE(again.removed.data() == buffer);
  CHECK(again.removed.empty() && again.removed.capacity() >= 2u);
  CHECK(again.added.empty() && again.added_ws.empty() && again.redirect.empty() &&
        again.weight_side_flips.empty());
  CHECK(again.hash == 0u && again.key == 0u && again.deep_key == 0u);
  CHECK(!again.hashed && !again.deep_keyed && !again.whole);
  CHECK_EQ(again.num_ops, 0);
  CHECK(again.graph == nullptr);
  // A candidate moved from has nothing to give: left as it is.
  Candidate moved = std::move(again);
  give_back_candidate(&again);
  CHECK(again.removed.capacity() == 0u);
  MatchedOps ops = take_matched_ops({4, 5, 6});
  CHECK(ops == (MatchedOps{4, 5, 6}));
  give_back_matched_ops(&ops);
  CHECK(take_matched_ops({8}) == MatchedOps{8});
}

}  // namespace taso_test
