// Identical ops merged (graph.h: merge_identical_ops) and a rule applied at
// all its locations in one call (locations.h: apply_everywhere).
#include <algorithm>

#include "check.h"
#include "fixtures.h"

namespace taso_test {

namespace {

// relu(x) twice, a tanh of each (identical once the relus merge), their
// sum, plus a sigmoid of x that nothing matches; the second tanh is also an
// output.
struct Twice {
  GraphPtr graph;
  int64_t relu1 = 0, relu2 = 0, tanh1 = 0, tanh2 = 0, sigmoid = 0, add = 0, out = 0;
};

Twice twice() {
  Twice t;
  GraphBuilder b;
  TensorRef x = b.input("x", {2, 16});
  t.relu1 = b.add(OP_RELU, {}, {x});
  t.sigmoid = b.add(OP_SIGMOID, {}, {x});
  t.relu2 = b.add(OP_RELU, {}, {x});
  t.tanh1 = b.add(OP_TANH, {}, {{t.relu1, 0}});
  t.tanh2 = b.add(OP_TANH, {}, {{t.relu2, 0}});
  t.add = b.add(OP_EW_ADD, {}, {{t.tanh1, 0}, {t.tanh2, 0}});
  t.out = b.add(OP_EW_ADD, {}, {{t.add, 0}, {t.sigmoid, 0}});
  t.graph = b.build({{t.out, 0}, {t.tanh2, 0}});
  return t;
}

}  // namespace

TEST(merge_keeps_the_first_of_identical_ops_and_merges_their_readers) {
  const Twice t = twice();
  GraphPtr merged = merge_identical_ops(t.graph);
  REQUIRE(merged != t.graph);
  // relu2 and then tanh2 (identical once relu2 is relu1) are gone.
  CHECK_EQ(merged->num_ops(), t.graph->num_ops() - 2);
  CHECK_EQ(merged->size(), t.graph->size() - 2);
  // The kept ops in the graph's order, numbered 1, 2, ... as a builder would.
  for (int i = 0; i < merged->size(); ++i) CHECK_EQ(merged->node(i).guid, i + 1);
  int adds = 0;
  for (int i = 0; i < merged->size(); ++i) {
    const Node& n = merged->node(i);
    if (n.type != OP_EW_ADD || adds++) continue;
    // The first add now reads one tanh twice.
    REQUIRE(n.inputs.size() == 2u);
    CHECK(n.inputs[0] == n.inputs[1]);
  }
  CHECK_EQ(adds, 2);
  // An output of a merged op reads the kept one.
  REQUIRE(merged->outputs().size() == 2u);
  CHECK_EQ(merged->node(merged->index_of(merged->outputs()[1].guid)).type, OP_TANH);
  // Merging again changes nothing, and returns the graph itself.
  CHECK(merge_identical_ops(merged) == merged);
  // The same as a builder adding the kept ops in that order builds.
  GraphBuilder b;
  TensorRef x = b.input("x", {2, 16});
  int64_t relu = b.add(OP_RELU, {}, {x});
  int64_t sigmoid = b.add(OP_SIGMOID, {}, {x});
  int64_t tanh = b.add(OP_TANH, {}, {{relu, 0}});
  int64_t add = b.add(OP_EW_ADD, {}, {{tanh, 0}, {tanh, 0}});
  int64_t out = b.add(OP_EW_ADD, {}, {{add, 0}, {sigmoid, 0}});
  CHECK_EQ(merged->hash(), b.build({{out, 0}, {tanh, 0}})->hash());
}

TEST(merge_leaves_distinct_ops_and_leaves_alone) {
  GraphBuilder b;
  TensorRef x = b.input("x", {2, 16});
  TensorRef y = b.input("y", {2, 16});
  int64_t rx = b.add(OP_RELU, {}, {x});
  int64_t ry = b.add(OP_RELU, {}, {y});
  int64_t s = b.add(OP_EW_ADD, {}, {{rx, 0}, {ry, 0}});
  int64_t t = b.add(OP_EW_ADD, {}, {{ry, 0}, {rx, 0}});  // other order: not identical
  GraphPtr g = b.build({{s, 0}, {t, 0}});
  CHECK(merge_identical_ops(g) == g);
  const ConvChain c = conv_chain();
  CHECK(merge_identical_ops(c.graph) == c.graph);
}

TEST(apply_everywhere_is_the_loop_of_cheapest_single_rule_steps) {
  std::unique_ptr<CostBackend> analytic = make_analytic_backend("cpu");
  const ConvChain c = conv_chain();
  const Rule rule = replace_unary(OP_RELU, OP_TANH);
  for (int times : {0, 1, 2, 3, 5}) {
    GraphPtr g = c.graph;
    std::vector<uint64_t> hashes;
    int enumerations = 0;
    for (int k = 0; k < times; ++k) {
      Locations locs = enumerate_locations(g, {rule}, 200, 0);
      ++enumerations;
      if (locs.candidates[0].empty()) break;
      const std::vector<double> costs = locs.costs(analytic.get())[0];
      g = locs.graph(0, static_cast<int>(std::min_element(costs.begin(), costs.end()) -
                                         costs.begin()));
      hashes.push_back(g->hash());
    }
    EverywhereResult r = apply_everywhere(c.graph, rule, times, 200, 0, analytic.get());
    CHECK(r.hashes == hashes);
    CHECK_EQ(r.enumerations, enumerations);
    CHECK_EQ(r.graph->hash(), g->hash());
  }
  // Three relus: after three steps none is left, and a fourth finds nothing.
  EverywhereResult r = apply_everywhere(c.graph, rule, 5, 200, 0, analytic.get());
  CHECK_EQ(r.hashes.size(), 3u);
  CHECK_EQ(r.enumerations, 4);
  for (int i = 0; i < r.graph->size(); ++i) CHECK(r.graph->op_type(i) != OP_RELU);
  CHECK_THROWS(apply_everywhere(c.graph, rule, 1, 200, 0, nullptr), EngineError,
               "cost backend");
}

}  // namespace taso_test
