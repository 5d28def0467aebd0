// The locations of a rule set on one graph (locations.h): order, dedup,
// caps, hashes on first use, costs.
#include <algorithm>
#include <cmath>
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

TEST(locations_of_the_first_rules_equal_the_full_enumerations) {
  const ConvChain c = conv_chain();
  // "first" drops the identity's twin of nothing, "copy" only duplicates of
  // "first": a prefix keeps the lists before it exactly, dedup included.
  const std::vector<Rule> rules = {replace_unary(OP_TANH, OP_TANH, "identity"),
                                   replace_unary(OP_RELU, OP_SIGMOID, "first"),
                                   replace_unary(OP_RELU, OP_SIGMOID, "copy"),
                                   double_relu(), fuse_conv_relu()};
  const Locations full = enumerate_locations(c.graph, rules, 200, 0);
  const auto full_hashes = full.hashes();
  for (int n = 0; n <= static_cast<int>(rules.size()); ++n) {
    const Locations part = enumerate_locations(c.graph, rules, 200, 0, true, n);
    REQUIRE(part.candidates.size() == rules.size());
    const auto hashes = part.hashes();
    for (size_t x = 0; x < rules.size(); ++x) {
      if (static_cast<int>(x) < n) {
        CHECK(hashes[x] == full_hashes[x]);
        CHECK(part.matched[x] == full.matched[x]);
        CHECK_EQ(part.num_matches[x], full.num_matches[x]);
      } else {
        CHECK_EQ(part.candidates[x].size(), 0u);
        CHECK_EQ(part.num_matches[x], 0);
      }
    }
  }
  // Past the rule count, or negative: every rule.
  CHECK(enumerate_locations(c.graph, rules, 200, 0, true, 9).hashes() == full_hashes);
  CHECK(enumerate_locations(c.graph, rules, 200, 0, true, -1).hashes() == full_hashes);
  // The copy's list is empty only because "first" is enumerated before it.
  CHECK_EQ(full.candidates[2].size(), 0u);
  const std::vector<Rule> copy_alone = {replace_unary(OP_RELU, OP_SIGMOID, "copy")};
  CHECK_EQ(enumerate_locations(c.graph, copy_alone, 200, 0).candidates[0].size(), 3u);
}

TEST(cheapest_location_is_the_first_least_cost_costing_only_what_may_be_it) {
  // Every rule's locations on conv_chain, under a context-free and a
  // context-dependent backend: the location std::min_element picks from
  // every candidate's cost, and estimates within their bounds.
  const ConvChain c = conv_chain();
  std::unique_ptr<CostBackend> analytic = make_analytic_backend("cpu");
  std::unique_ptr<CostBackend> context = fitted();
  const std::vector<Rule> rules = {replace_unary(OP_RELU, OP_TANH),
                                   replace_unary(OP_RELU, OP_SIGMOID), double_relu(),
                                   fuse_conv_relu(), replace_unary(OP_TANH, OP_RELU)};
  const Locations locs = enumerate_locations(c.graph, rules, 200, 0);
  for (CostBackend* backend : {analytic.get(), context.get()}) {
    const auto costs = locs.costs(backend);
    CandidateCoster coster(*c.graph, backend);
    for (size_t x = 0; x < rules.size(); ++x) {
      int costed = -1;
      const int got = cheapest_location(locs, static_cast<int>(x), backend, &costed);
      if (costs[x].empty()) {
        CHECK_EQ(got, -1);
        CHECK_EQ(costed, 0);
        continue;
      }
      CHECK_EQ(got, static_cast<int>(std::min_element(costs[x].begin(), costs[x].end()) -
                                     costs[x].begin()));
      CHECK(costed >= 1 && costed <= static_cast<int>(costs[x].size()));
      // The estimates hold their bounds; a context-dependent backend has none.
      for (size_t l = 0; l < costs[x].size(); ++l) {
        double value = 0, bound = 0;
        const bool estimated = coster.estimate(locs.candidates[x][l], &value, &bound);
        CHECK_EQ(estimated, backend == analytic.get());
        if (estimated) {
          CHECK(std::fabs(costs[x][l] - value) <= bound);
          CHECK(bound > 0 && bound < 1e-9 * std::fabs(value));
        }
      }
      if (backend == context.get()) CHECK_EQ(costed, static_cast<int>(costs[x].size()));
    }
  }
}

TEST(cheapest_location_skips_candidates_that_cannot_be_the_cheapest) {
  // relu(relu(x)) at 16x16 and at 4x4: dropping the larger relu saves more,
  // by far more than any rounding, so the other candidate is not costed.
  GraphBuilder b;
  TensorRef x = b.input("x", {1, 4, 16, 16});
  TensorRef y = b.input("y", {1, 4, 4, 4});
  const int64_t big = b.add(OP_RELU, {}, {{b.add(OP_RELU, {}, {x}), 0}});
  const int64_t small = b.add(OP_RELU, {}, {{b.add(OP_RELU, {}, {y}), 0}});
  const GraphPtr g = b.build({{big, 0}, {small, 0}});
  std::unique_ptr<CostBackend> analytic = make_analytic_backend("cpu");
  const Locations locs = enumerate_locations(g, {double_relu()}, 200, 0);
  const auto costs = locs.costs(analytic.get())[0];
  REQUIRE(costs.size() == 2u);
  CHECK(costs[0] != costs[1]);
  const int want = costs[0] < costs[1] ? 0 : 1;
  int costed = 0;
  CHECK_EQ(cheapest_location(locs, 0, analytic.get(), &costed), want);
  CHECK_EQ(costed, 1);
  // Under the context-dependent backend every candidate is costed.
  std::unique_ptr<CostBackend> context = fitted();
  const auto fitted_costs = locs.costs(context.get())[0];
  CHECK_EQ(cheapest_location(locs, 0, context.get(), &costed),
           fitted_costs[0] <= fitted_costs[1] ? 0 : 1);
  CHECK_EQ(costed, 2);
}

TEST(cheapest_location_keeps_the_first_of_exact_twins) {
  // Two relus of one input (twins: equal costs, bit for bit), each to tanh.
  GraphBuilder b;
  TensorRef x = b.input("x", {2, 16});
  const int64_t r1 = b.add(OP_RELU, {}, {x});
  const int64_t r2 = b.add(OP_RELU, {}, {x});
  const int64_t add = b.add(OP_EW_ADD, {}, {{r1, 0}, {r2, 0}});
  const GraphPtr g = b.build({{add, 0}});
  std::unique_ptr<CostBackend> analytic = make_analytic_backend("cpu");
  const Locations locs = enumerate_locations(g, {replace_unary(OP_RELU, OP_TANH)}, 200, 0);
  const auto costs = locs.costs(analytic.get())[0];
  REQUIRE(costs.size() == 2u);
  CHECK(std::memcmp(&costs[0], &costs[1], sizeof(double)) == 0);
  int costed = 0;
  CHECK_EQ(cheapest_location(locs, 0, analytic.get(), &costed), 0);
  CHECK_EQ(costed, 2);
}

}  // namespace taso_test
