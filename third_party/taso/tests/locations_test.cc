// The locations of a rule set on one graph (locations.h): order, dedup,
// caps, hashes on first use, costs.
#include <cstring>

#include "check.h"
#include "fixtures.h"

namespace taso_test {

TEST(locations_lists_every_rule_in_match_order) {
  const ConvChain c = conv_chain();
  const std::vector<Rule> rules = {double_relu(), replace_unary(OP_RELU, OP_TANH),
                                   fuse_conv_relu()};
  Locations locs = enumerate_locations(c.graph, rules, 200, 0);
  REQUIRE(locs.candidates.size() == 3u);
  CHECK_EQ(locs.candidates[0].size(), 1u);
  CHECK_EQ(locs.candidates[1].size(), 3u);
  CHECK_EQ(locs.candidates[2].size(), 1u);
  CHECK(locs.num_matches == (std::vector<int>{1, 3, 1}));
  REQUIRE(locs.matched[1].size() == 3u);
  CHECK(locs.matched[1][0] == MatchedOps{c.relu1});
  CHECK(locs.matched[1][2] == MatchedOps{c.relu3});
  CHECK(locs.matched[2][0] == (MatchedOps{c.conv1, c.relu1}));
  // Hashes on first use equal the built graphs'; building counts.
  const auto hashes = locs.hashes();
  CHECK_EQ(locs.num_materialized(), 0);
  for (size_t x = 0; x < rules.size(); ++x)
    for (size_t l = 0; l < locs.candidates[x].size(); ++l)
      CHECK_EQ(hashes[x][l], locs.graph(static_cast<int>(x), static_cast<int>(l))->hash());
  CHECK_EQ(locs.num_materialized(), 5);
}

TEST(locations_drops_duplicates_of_the_graph_and_of_earlier_candidates) {
  const ConvChain c = conv_chain();
  // An identity rewrite gives the graph itself; a copy of a rule gives only
  // results the original gave already.
  const std::vector<Rule> rules = {replace_unary(OP_TANH, OP_TANH, "identity"),
                                   replace_unary(OP_RELU, OP_SIGMOID, "first"),
                                   replace_unary(OP_RELU, OP_SIGMOID, "copy")};
  Locations locs = enumerate_locations(c.graph, rules, 200, 0);
  CHECK_EQ(locs.candidates[0].size(), 0u);
  CHECK_EQ(locs.candidates[1].size(), 3u);
  CHECK_EQ(locs.candidates[2].size(), 0u);
  CHECK(locs.num_matches == (std::vector<int>{1, 3, 3}));
}

TEST(locations_caps_each_rule) {
  const ConvChain c = conv_chain();
  Locations locs = enumerate_locations(c.graph, {replace_unary(OP_RELU, OP_TANH)}, 2, 0);
  CHECK_EQ(locs.candidates[0].size(), 2u);
  CHECK_EQ(locs.matched[0].size(), 2u);
  CHECK_THROWS(enumerate_locations(c.graph, {double_relu()}, 0, 0), EngineError,
               "max_locations");
  CHECK_THROWS(enumerate_locations(nullptr, {double_relu()}, 1, 0), EngineError,
               "need a graph");
}

TEST(locations_incremental_and_whole_agree) {
  const ConvChain c = conv_chain();
  const std::vector<Rule> rules = {double_relu(), replace_unary(OP_RELU, OP_TANH),
                                   fuse_conv_relu(), commute_add()};
  std::unique_ptr<CostBackend> model = fitted();
  Locations lazy = enumerate_locations(c.graph, rules, 200, 0, true);
  Locations whole = enumerate_locations(c.graph, rules, 200, 0, false);
  CHECK(lazy.hashes() == whole.hashes());
  CHECK(lazy.matched == whole.matched);
  const auto a = lazy.costs(model.get()), b = whole.costs(model.get());
  REQUIRE(a.size() == b.size());
  for (size_t x = 0; x < a.size(); ++x) {
    REQUIRE(a[x].size() == b[x].size());
    for (size_t l = 0; l < a[x].size(); ++l)
      CHECK(std::memcmp(&a[x][l], &b[x][l], sizeof(double)) == 0);
  }
  CHECK_EQ(lazy.num_materialized(), 0);  // costs built nothing
}

}  // namespace taso_test
