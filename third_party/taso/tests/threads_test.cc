// Searches and enumerations running at once in several threads, sharing the
// root graph (and so its nodes and their cost memos), the rules and the
// backends, give what they give alone. scripts/engine_tests.sh runs it
// under AddressSanitizer; SANITIZE=thread runs it under ThreadSanitizer,
// which reports any data race.
#include <cstring>
#include <thread>

#include "check.h"
#include "fixtures.h"
#include "taso/search.h"

namespace taso_test {

namespace {

// `blocks` times: conv (stride 1) -> relu -> relu, from x[1,8,8,8].
GraphPtr conv_blocks(int blocks) {
  GraphBuilder b;
  TensorRef t = b.input("x", {1, 8, 8, 8});
  for (int k = 0; k < blocks; ++k) {
    TensorRef w = b.weight("w" + std::to_string(k), {8, 8, 3, 3});
    int64_t conv = b.add(OP_CONV2D, conv_params(1), {t, w});
    int64_t r1 = b.add(OP_RELU, {}, {{conv, 0}});
    int64_t r2 = b.add(OP_RELU, {}, {{r1, 0}});
    t = {r2, 0};
  }
  return b.build({t});
}

std::vector<Rule> search_rules() {
  return {double_relu(), fuse_conv_relu(), replace_unary(OP_RELU, OP_TANH),
          replace_unary(OP_TANH, OP_RELU, "back")};
}

uint64_t bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

struct Outcome {
  uint64_t best_hash = 0, best_cost = 0;
  std::vector<std::pair<int, int>> applied;  // (xfer, location) per step
  int expansions = 0, enqueued = 0;
  int64_t seen = 0;
  bool operator==(const Outcome& o) const {
    return best_hash == o.best_hash && best_cost == o.best_cost && applied == o.applied &&
           expansions == o.expansions && enqueued == o.enqueued && seen == o.seen;
  }
};

Outcome search(GraphPtr g, const std::vector<Rule>& rules, CostBackend* backend) {
  SearchOptions opts;
  opts.alpha = 1.05;
  opts.budget = 60;
  const SearchResult r = backtracking_search(g, rules, backend, opts);
  return {r.best->hash(), bits(r.best_cost), r.applied, r.expansions, r.enqueued, r.seen};
}

}  // namespace

TEST(threads_searches_at_once_give_what_they_give_alone) {
  const std::vector<Rule> rules = search_rules();
  std::unique_ptr<CostBackend> analytic = make_analytic_backend("cpu");
  std::unique_ptr<CostBackend> model = fitted();
  // Alone, each on a graph of its own (no memo shared with the others).
  const Outcome alone_analytic = search(conv_blocks(4), rules, analytic.get());
  const Outcome alone_fitted = search(conv_blocks(4), rules, model.get());
  CHECK(alone_analytic.expansions > 10);
  CHECK(!alone_analytic.applied.empty());
  CHECK(!alone_fitted.applied.empty());
  // At once, all on one graph, two threads per backend.
  GraphPtr shared = conv_blocks(4);
  std::vector<Outcome> outcomes(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      outcomes[k] = search(shared, rules, k % 2 ? model.get() : analytic.get());
    });
  for (std::thread& t : threads) t.join();
  CHECK(outcomes[0] == alone_analytic);
  CHECK(outcomes[2] == alone_analytic);
  CHECK(outcomes[1] == alone_fitted);
  CHECK(outcomes[3] == alone_fitted);
}

TEST(threads_enumerations_at_once_give_what_they_give_alone) {
  const std::vector<Rule> rules = search_rules();
  std::unique_ptr<CostBackend> model = fitted();
  const Locations alone = enumerate_locations(conv_blocks(6), rules, 200, 0);
  const auto alone_hashes = alone.hashes();
  const auto alone_costs = alone.costs(model.get());
  GraphPtr shared = conv_blocks(6);
  std::vector<std::vector<std::vector<uint64_t>>> hashes(4);
  std::vector<std::vector<std::vector<double>>> costs(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      const Locations locs = enumerate_locations(shared, rules, 200, 0);
      hashes[k] = locs.hashes();
      costs[k] = locs.costs(model.get());
    });
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < 4; ++k) {
    CHECK(hashes[k] == alone_hashes);
    REQUIRE(costs[k].size() == alone_costs.size());
    for (size_t x = 0; x < costs[k].size(); ++x) {
      REQUIRE(costs[k][x].size() == alone_costs[x].size());
      for (size_t l = 0; l < costs[k][x].size(); ++l)
        CHECK_EQ(bits(costs[k][x][l]), bits(alone_costs[x][l]));
    }
  }
}

TEST(threads_one_locations_priced_at_once_while_hashed) {
  const std::vector<Rule> rules = search_rules();
  std::unique_ptr<CostBackend> model = fitted();
  const Locations alone = enumerate_locations(conv_blocks(6), rules, 200, 0);
  const auto alone_costs = alone.costs(model.get());
  const auto alone_hashes = alone.hashes();
  // costs() only reads: three threads price one Locations while this one
  // fills its hashes (candidate_hash writes the candidates' hash caches).
  const Locations shared = enumerate_locations(conv_blocks(6), rules, 200, 0);
  std::vector<std::vector<std::vector<double>>> costs(3);
  std::vector<std::thread> threads;
  for (int k = 0; k < 3; ++k)
    threads.emplace_back([&, k] { costs[k] = shared.costs(model.get()); });
  const auto hashes = shared.hashes();
  for (std::thread& t : threads) t.join();
  CHECK(hashes == alone_hashes);
  for (int k = 0; k < 3; ++k) {
    REQUIRE(costs[k].size() == alone_costs.size());
    for (size_t x = 0; x < costs[k].size(); ++x) {
      REQUIRE(costs[k][x].size() == alone_costs[x].size());
      for (size_t l = 0; l < costs[k][x].size(); ++l)
        CHECK_EQ(bits(costs[k][x][l]), bits(alone_costs[x][l]));
    }
  }
}

TEST(threads_cost_memo_is_read_and_written_whole) {
  CostMemo memo;
  double ms = -1;
  CHECK(!memo.get(7, &ms));
  memo.set(7, 2.5);
  CHECK(memo.get(7, &ms));
  CHECK_EQ(ms, 2.5);
  CHECK(!memo.get(8, &ms));
  const CostMemo copy = memo;  // a copy starts empty
  CHECK(!copy.get(7, &ms));
  // Writers of two backends race; a reader sees one of the pairs whole.
  std::thread a([&] {
    for (int i = 0; i < 20000; ++i) memo.set(1, 1.0);
  });
  std::thread b([&] {
    for (int i = 0; i < 20000; ++i) memo.set(2, 2.0);
  });
  int torn = 0;
  for (int i = 0; i < 20000; ++i) {
    double v = 0;
    if (memo.get(1, &v) && v != 1.0) ++torn;
    if (memo.get(2, &v) && v != 2.0) ++torn;
  }
  a.join();
  b.join();
  CHECK_EQ(torn, 0);
}

}  // namespace taso_test
