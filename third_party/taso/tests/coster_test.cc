// Pricing candidates without building them (coster.h): bit for bit the
// built graph's Graph::cost, under a context-free backend (analytic) and a
// context-dependent one (fitted).
#include <cstring>

#include "check.h"
#include "fixtures.h"

namespace taso_test {

namespace {

uint64_t bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Prices every candidate of every rule on `g` (costing before building, so
// that no memo of the built graph helps) and compares with the built graph.
int check_costs(const Graph& g, CostBackend* backend,
                const std::vector<Rule>& rules = {double_relu(), commute_add(),
                                                  fuse_conv_relu(),
                                                  replace_unary(OP_RELU, OP_TANH),
                                                  replace_unary(OP_TANH, OP_SIGMOID)}) {
  CandidateCoster coster(g, backend);
  CHECK_EQ(bits(coster.parent_cost()), bits(g.cost(backend)));
  int checked = 0;
  for (const Rule& r : rules) {
    std::vector<Candidate> found;
    for_each_candidate(g, r, 0, [&](Candidate&& c, const MatchedOps&) {
      found.push_back(std::move(c));
      return true;
    });
    std::vector<double> priced;
    for (const Candidate& c : found) priced.push_back(coster.cost(c));
    for (const Candidate& c : found) CHECK(c.graph == nullptr);  // priced, not built
    for (size_t k = 0; k < found.size(); ++k) {
      const double whole = materialize(g, found[k])->cost(backend);
      CHECK_EQ(bits(priced[k]), bits(whole));
      ++checked;
    }
  }
  return checked;
}

}  // namespace

TEST(coster_context_free_matches_built_graphs_bit_for_bit) {
  std::unique_ptr<CostBackend> analytic = make_analytic_backend("cpu");
  REQUIRE(analytic->context_free());
  CHECK_EQ(check_costs(*conv_chain().graph, analytic.get()), 6);
  CHECK_EQ(check_costs(*two_adds(), analytic.get()), 3);
}

// Rewrites early, late and in between on a longer graph: pairs of relus
// far apart, whose targets go before the first clone and pull the second
// relu's input forward, with every op after the last change summed as in
// the parent.
TEST(coster_prices_from_its_thread_memo_only_for_the_same_backend_and_op) {
  // Target ops are priced from a memo of this thread's earlier prices
  // (coster.cc, PriceMemo): two backends pricing the same rewrites in turn
  // must each get their own price, the one a graph of fresh nodes (whose
  // cost memos are empty) is costed at.
  std::unique_ptr<CostBackend> cpu = make_analytic_backend("cpu");
  std::unique_ptr<CostBackend> v100 = make_analytic_backend("v100");
  const GraphPtr g = conv_chain().graph;
  int checked = 0;
  for (int round = 0; round < 2; ++round) {
    for (CostBackend* backend : {cpu.get(), v100.get()}) {
      CandidateCoster coster(*g, backend);
      for (const Rule& r : {fuse_conv_relu(), replace_unary(OP_RELU, OP_TANH)}) {
        for_each_candidate(*g, r, 0, [&](Candidate&& c, const MatchedOps&) {
          const double priced = coster.cost(c);
          const GraphPtr built = materialize(*g, c);
          std::vector<NodePtr> fresh;
          for (const NodePtr& n : built->nodes()) fresh.push_back(std::make_shared<Node>(*n));
          const GraphPtr twin = Graph::Create(std::move(fresh), built->outputs());
          CHECK_EQ(bits(priced), bits(twin->cost(backend)));
          ++checked;
          return true;
        });
      }
    }
  }
  CHECK_EQ(checked, 2 * 2 * 4);  // 1 conv+relu fusion and 3 relus to tanh
  CHECK(bits(conv_chain().graph->cost(cpu.get())) != bits(conv_chain().graph->cost(v100.get())));
}

TEST(coster_matches_built_graphs_wherever_the_rewrite_lies) {
  const GraphPtr g = branching_chain(5);
  const std::vector<Rule> rules = {relu_pair_concat_split(0), relu_pair_concat_split(1),
                                   fuse_conv_relu(), replace_unary(OP_RELU, OP_TANH),
                                   commute_add()};
  std::unique_ptr<CostBackend> analytic = make_analytic_backend("cpu");
  std::unique_ptr<CostBackend> model = fitted();
  const int analytic_checked = check_costs(*g, analytic.get(), rules);
  CHECK_EQ(analytic_checked, check_costs(*g, model.get(), rules));
  CHECK_EQ(analytic_checked, 35);  // relu pairs of a block, conv+relu, relus, adds
}

TEST(coster_in_context_matches_built_graphs_bit_for_bit) {
  std::unique_ptr<CostBackend> model = fitted();
  REQUIRE(!model->context_free());
  CHECK_EQ(check_costs(*conv_chain().graph, model.get()), 6);
  CHECK_EQ(check_costs(*two_adds(), model.get()), 3);
}

TEST(coster_prices_the_fusion_cheaper_under_the_roofline) {
  const ConvChain c = conv_chain();
  std::unique_ptr<CostBackend> analytic = make_analytic_backend("cpu");
  CandidateCoster coster(*c.graph, analytic.get());
  std::vector<double> costs;
  for_each_candidate(*c.graph, fuse_conv_relu(), 0, [&](Candidate&& k, const MatchedOps&) {
    costs.push_back(coster.cost(k));
    return true;
  });
  REQUIRE(costs.size() == 1u);
  CHECK(costs[0] > 0);
  CHECK(costs[0] < coster.parent_cost());  // one kernel launch and one pass fewer
}

TEST(coster_prices_a_candidate_built_whole_from_its_graph) {
  const ConvChain c = conv_chain();
  const Rule drop = rule("drop_conv", {pop(OP_CONV2D, {var(-1), var(-2)})},
                         {pop(OP_RELU, {var(-1)})}, {{out(0), out(0)}});
  std::unique_ptr<CostBackend> model = fitted();
  CandidateCoster coster(*c.graph, model.get());
  int priced = 0;
  for_each_candidate(*c.graph, drop, 0, [&](Candidate&& k, const MatchedOps&) {
    REQUIRE(k.whole);
    CHECK_EQ(bits(coster.cost(k)), bits(k.graph->cost(model.get())));
    ++priced;
    return true;
  });
  CHECK_EQ(priced, 1);
}

}  // namespace taso_test
