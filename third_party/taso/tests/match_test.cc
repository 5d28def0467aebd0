// Matching source patterns (match.h).
#include <algorithm>

#include "check.h"
#include "fixtures.h"

namespace taso_test {

namespace {

// Every match of `r` on `g`, as the guids of the ops bound.
std::vector<std::vector<int64_t>> matches(const Graph& g, const Rule& r, int* count = nullptr,
                                          int stop_after = -1) {
  ParamMemo memo;
  MatchScratch scratch;
  std::vector<std::vector<int64_t>> found;
  const int n = for_each_match(g, r, &memo, &scratch, [&](const Match& m) {
    std::vector<int64_t> guids;
    for (int i : m.ops) {
      CHECK(m.used[i]);
      guids.push_back(g.node(i).guid);
    }
    found.push_back(guids);
    return static_cast<int>(found.size()) != stop_after;
  });
  if (count) *count = n;
  return found;
}

}  // namespace

TEST(match_chains_in_topological_order) {
  const ConvChain c = conv_chain();
  int count = 0;
  const auto found = matches(*c.graph, double_relu(), &count);
  // relu2 -> relu3 is the only relu reading a relu.
  REQUIRE(found.size() == 1u);
  CHECK_EQ(count, 1);
  CHECK(found[0] == (std::vector<int64_t>{c.relu2, c.relu3}));
  const auto relus = matches(*c.graph, replace_unary(OP_RELU, OP_TANH));
  REQUIRE(relus.size() == 3u);
  CHECK_EQ(relus[0][0], c.relu1);
  CHECK_EQ(relus[1][0], c.relu2);
  CHECK_EQ(relus[2][0], c.relu3);
}

TEST(may_match_counts_each_source_op_type) {
  const ConvChain c = conv_chain();  // 2 convs, 3 relus, 1 tanh
  CHECK(may_match(*c.graph, double_relu()));
  CHECK(may_match(*c.graph, fuse_conv_relu()));
  CHECK(!may_match(*c.graph, replace_unary(OP_SIGMOID, OP_TANH)));
  CHECK(!may_match(*c.graph, commute_add()));
  // Two tanh ops in a row: the chain has one tanh, so no search and no match.
  const Rule two_tanh = rule("two_tanh", {pop(OP_TANH, {var(-1)}), pop(OP_TANH, {out(0)})},
                             {pop(OP_TANH, {var(-1)})}, {{out(1), out(0)}});
  CHECK(!may_match(*c.graph, two_tanh));
  int count = -1;
  CHECK(matches(*c.graph, two_tanh, &count).empty());
  CHECK_EQ(count, 0);
}

TEST(may_match_reads_the_rules_summary_alike) {
  const ConvChain c = conv_chain();  // 2 convs, 3 relus, 1 tanh
  const Rule two_tanh = rule("two_tanh", {pop(OP_TANH, {var(-1)}), pop(OP_TANH, {out(0)})},
                             {pop(OP_TANH, {var(-1)})}, {{out(1), out(0)}});
  const Rule three_relus =
      rule("three_relus", {pop(OP_RELU, {var(-1)}), pop(OP_RELU, {out(0)}), pop(OP_RELU, {out(1)})},
           {pop(OP_RELU, {var(-1)})}, {{out(2), out(0)}});
  const Rule four_relus = rule("four_relus",
                               {pop(OP_RELU, {var(-1)}), pop(OP_RELU, {out(0)}),
                                pop(OP_RELU, {out(1)}), pop(OP_RELU, {out(2)})},
                               {pop(OP_RELU, {var(-1)})}, {{out(3), out(0)}});
  int checked = 0;
  for (const Rule& plain : {double_relu(), fuse_conv_relu(), replace_unary(OP_SIGMOID, OP_TANH),
                            commute_add(), two_tanh, three_relus, four_relus}) {
    Rule indexed = plain;
    indexed.index();
    CHECK(plain.num_source_types < 0);
    CHECK(indexed.num_source_types > 0);
    CHECK_EQ(indexed.num_variable_slots(), plain.num_variable_slots());
    CHECK_EQ(may_match(*c.graph, indexed), may_match(*c.graph, plain));
    checked += may_match(*c.graph, indexed);
  }
  CHECK_EQ(checked, 3);  // double_relu, fuse_conv_relu, three_relus
  // Counts per type: three relus of one type, one entry.
  Rule indexed = three_relus;
  indexed.index();
  CHECK_EQ(indexed.num_source_types, 1);
  CHECK_EQ(indexed.source_types[0].second, 3);
}

TEST(match_binds_variables_to_tensors) {
  const ConvChain c = conv_chain();
  ParamMemo memo;
  MatchScratch scratch;
  std::vector<TensorRef> inputs;
  for_each_match(*c.graph, fuse_conv_relu(), &memo, &scratch, [&](const Match& m) {
    REQUIRE(m.is_bound.size() == 3u);
    CHECK(m.is_bound[1] && m.is_bound[2]);
    inputs.push_back(m.bound[1]);
    inputs.push_back(m.bound[2]);
    return true;
  });
  // Only the stride-1 conv meets the constraints; it reads x and w1.
  REQUIRE(inputs.size() == 2u);
  CHECK_EQ(c.graph->node(c.graph->index_of(inputs[0].guid)).name, std::string("x"));
  CHECK_EQ(c.graph->node(c.graph->index_of(inputs[1].guid)).name, std::string("w1"));
}

TEST(match_checks_parameters_once_per_node_and_constraint) {
  const ConvChain c = conv_chain();
  ParamMemo memo;
  MatchScratch scratch;
  const Rule r = fuse_conv_relu();
  for_each_match(*c.graph, r, &memo, &scratch, [](const Match&) { return true; });
  // The memo of the conv's constraints says which convs pass.
  std::vector<int8_t>* entry = memo.memo(r.src[0], c.graph->size());
  REQUIRE(entry != nullptr);
  CHECK_EQ(static_cast<int>((*entry)[c.graph->index_of(c.conv1)]), 1);
  CHECK_EQ(static_cast<int>((*entry)[c.graph->index_of(c.conv2)]), 0);
  // The same (type, constraints) pair is the same entry.
  CHECK(memo.memo(fuse_conv_relu().src[0], c.graph->size()) == entry);
}

TEST(match_stops_when_asked) {
  const ConvChain c = conv_chain();
  int count = 0;
  const auto found = matches(*c.graph, replace_unary(OP_RELU, OP_TANH), &count, 2);
  CHECK_EQ(found.size(), 2u);
  CHECK_EQ(count, 2);
}

TEST(match_requires_equal_shapes_for_elementwise_ops) {
  GraphBuilder b;
  TensorRef x = b.input("x", {2, 8});
  TensorRef y = b.input("y", {1, 8});  // broadcast along the first axis
  int64_t broadcast = b.add(OP_EW_ADD, {}, {x, y});
  int64_t same = b.add(OP_EW_ADD, {}, {{broadcast, 0}, x});
  GraphPtr g = b.build({{same, 0}});
  const auto found = matches(*g, commute_add());
  REQUIRE(found.size() == 1u);
  CHECK_EQ(found[0][0], same);
}

TEST(match_rules_out_patterns_needing_more_ops_than_the_graph_has) {
  GraphPtr g = two_adds();
  // Three relus in a row: the graph has one relu.
  const Rule triple = rule("triple", {pop(OP_RELU, {var(-1)}), pop(OP_RELU, {out(0)}),
                                      pop(OP_RELU, {out(1)})},
                           {pop(OP_RELU, {var(-1)})}, {{out(2), out(0)}});
  int count = -1;
  CHECK(matches(*g, triple, &count).empty());
  CHECK_EQ(count, 0);
}

// Source ops that read no matched op are sought near the matched ones
// (Matcher::find_local): among the readers of a bound variable's tensor, or
// among what a later source op that also reads a matched op reads. The
// matches and their order are those of scanning every op of the type.
TEST(match_finds_unconnected_source_ops_through_their_neighbours) {
  GraphBuilder b;
  const TensorRef x = b.input("x", {1, 8}), y = b.input("y", {1, 8});
  const int64_t r1 = b.add(OP_RELU, {}, {x});
  const int64_t r2 = b.add(OP_RELU, {}, {y});
  const int64_t r3 = b.add(OP_RELU, {}, {x});
  const int64_t a1 = b.add(OP_EW_ADD, {}, {{r1, 0}, {r2, 0}});
  const int64_t a2 = b.add(OP_EW_ADD, {}, {{r3, 0}, {r1, 0}});
  const int64_t a3 = b.add(OP_EW_ADD, {}, {{r2, 0}, {r3, 0}});
  const GraphPtr g = b.build({{a1, 0}, {a2, 0}, {a3, 0}});
  // Two relus summed by an add: the second relu is what the first's add
  // reads at slot 1.
  const Rule summed = rule(
      "summed_relus",
      {pop(OP_RELU, {var(-1)}), pop(OP_RELU, {var(-2)}), pop(OP_EW_ADD, {out(0), out(1)})},
      {pop(OP_EW_ADD, {var(-1), var(-2)})}, {{out(2), out(0)}});
  int count = 0;
  CHECK(matches(*g, summed, &count) ==
        (std::vector<std::vector<int64_t>>{{r1, r2, a1}, {r2, r3, a3}, {r3, r1, a2}}));
  CHECK_EQ(count, 3);
  // Two relus of one input: the second is among the readers of x.
  const Rule shared = rule("shared_input", {pop(OP_RELU, {var(-1)}), pop(OP_RELU, {var(-1)})},
                           {pop(OP_RELU, {var(-1)})}, {{out(0), out(0)}, {out(1), out(0)}});
  CHECK(matches(*g, shared, &count) == (std::vector<std::vector<int64_t>>{{r1, r3}, {r3, r1}}));
  CHECK_EQ(count, 2);
}

// skip_reading_match: complete matches one of whose variables reads a
// matched op are counted but not passed on.
TEST(match_skips_matches_whose_variables_read_the_match) {
  const ConvChain c = conv_chain();  // relu1 -> ... -> relu3: every pair is ordered
  const Rule two = rule("two_relus", {pop(OP_RELU, {var(-1)}), pop(OP_RELU, {var(-2)})},
                        {pop(OP_RELU, {var(-1)})}, {{out(0), out(0)}, {out(1), out(0)}});
  int count = 0;
  CHECK_EQ(matches(*c.graph, two, &count).size(), 6u);
  CHECK_EQ(count, 6);
  ParamMemo memo;
  MatchScratch scratch;
  int called = 0;
  const int n = for_each_match(*c.graph, two, &memo, &scratch,
                               [&](const Match&) { return ++called > 0; },
                               /*skip_reading_match=*/true);
  CHECK_EQ(n, 6);
  CHECK_EQ(called, 0);
}

// A last source op that reads only variables no other source op reads
// (Matcher::dfs_fresh_last, which decides the reading check before binding
// anything) finds what scanning every tuple of ops in graph order finds:
// the same complete matches counted, the same ones passed on, in the same
// order, the same count where the callback stops the search.
TEST(match_fresh_last_op_equals_scanning_every_tuple) {
  // Relus side by side: r1 and r3 read x, r2 reads y, r4 reads r1; adds of
  // two of them, and of the inputs.
  GraphBuilder b;
  const TensorRef x = b.input("x", {1, 8}), y = b.input("y", {1, 8});
  const int64_t r1 = b.add(OP_RELU, {}, {x});
  const int64_t r2 = b.add(OP_RELU, {}, {y});
  const int64_t r3 = b.add(OP_RELU, {}, {x});
  const int64_t r4 = b.add(OP_RELU, {}, {{r1, 0}});
  const int64_t a1 = b.add(OP_EW_ADD, {}, {{r2, 0}, {r3, 0}});
  const int64_t a2 = b.add(OP_EW_ADD, {}, {x, y});
  const int64_t a3 = b.add(OP_EW_ADD, {}, {{r4, 0}, {a1, 0}});
  const GraphPtr side_by_side = b.build({{a2, 0}, {a3, 0}});
  const GraphPtr chain = branching_chain(4);
  const Rule relu_relu_add =
      rule("relu_relu_add",
           {pop(OP_RELU, {var(-1)}), pop(OP_RELU, {var(-2)}), pop(OP_EW_ADD, {var(-3), var(-4)})},
           {pop(OP_RELU, {var(-1)})}, {{out(0), out(0)}});
  struct Case {
    GraphPtr graph;
    Rule rule;
    std::vector<int> types;  // of the source ops
  };
  const std::vector<Case> cases = {
      {chain, relu_pair_concat_split(1), {OP_RELU, OP_RELU}},
      {side_by_side, relu_pair_concat_split(0), {OP_RELU, OP_RELU}},
      {side_by_side, relu_relu_add, {OP_RELU, OP_RELU, OP_EW_ADD}},
      {chain, replace_unary(OP_RELU, OP_TANH), {OP_RELU}}};
  for (const Case& c : cases) {
    const Graph& g = *c.graph;
    // Tuples of ops, one per source op (of its type), in scanning order:
    // distinct, element-wise ops with equal-shaped operands.
    std::vector<std::vector<int>> tuples = {{}};
    for (int type : c.types) {
      std::vector<std::vector<int>> longer;
      for (const std::vector<int>& t : tuples)
        for (int i : g.ops_of_type(type)) {
          if (std::find(t.begin(), t.end(), i) != t.end()) continue;
          if (type == OP_EW_ADD && !(g.shape(g.input(i, 0)) == g.shape(g.input(i, 1))))
            continue;
          std::vector<int> u = t;
          u.push_back(i);
          longer.push_back(u);
        }
      tuples = longer;
    }
    // Passed on: no input of a matched op is, or reads, a matched op.
    std::vector<std::vector<int>> passed;
    for (const std::vector<int>& t : tuples) {
      bool reads = false;
      for (int i : t)
        for (int k = 0; k < g.num_inputs(i); ++k)
          for (int m : t) reads = reads || g.input_op(i, k) == m || g.depends_on(g.input_op(i, k), m);
      if (!reads) passed.push_back(t);
    }
    CHECK(!passed.empty());
    CHECK(passed.size() < tuples.size() || c.types.size() == 1);
    for (int stop_after : {-1, 1, static_cast<int>(passed.size()) / 2 + 1}) {
      ParamMemo memo;
      MatchScratch scratch;
      std::vector<std::vector<int>> found;
      const int n = for_each_match(g, c.rule, &memo, &scratch, [&](const Match& m) {
        found.push_back(m.ops);
        for (size_t v = 0; v < m.bound.size(); ++v) {  // bound: what the matched ops read
          if (!m.is_bound[v]) continue;
          bool read = false;
          for (int i : m.ops)
            for (int k = 0; k < g.num_inputs(i); ++k) read = read || g.input(i, k) == m.bound[v];
          CHECK(read);
        }
        return static_cast<int>(found.size()) != stop_after;
      }, /*skip_reading_match=*/true);
      const size_t kept = stop_after < 0 ? passed.size() : static_cast<size_t>(stop_after);
      CHECK(found == std::vector<std::vector<int>>(passed.begin(), passed.begin() + kept));
      // Counted: every tuple scanned, up to the last one passed on where
      // the callback stopped the search.
      const size_t scanned =
          stop_after < 0 ? tuples.size()
                         : static_cast<size_t>(std::find(tuples.begin(), tuples.end(),
                                                         passed[kept - 1]) - tuples.begin()) + 1;
      CHECK_EQ(n, static_cast<int>(scanned));
      for (uint8_t used : scratch.used) CHECK(!used);
    }
  }
}

// The matcher's buffer of matched ops is cleared by the search itself, not
// per rule: a callback that throws leaves it clean too, so the next rules
// matched with the same scratch find what a fresh scratch finds.
TEST(match_scratch_is_clean_after_a_callback_throws) {
  const GraphPtr g = branching_chain(3);
  const std::vector<Rule> rules = {relu_pair_concat_split(1), fuse_conv_relu(),
                                   replace_unary(OP_RELU, OP_TANH)};
  ParamMemo memo;
  MatchScratch scratch;
  for (const Rule& r : rules) {
    for (int throw_at : {1, 2, 5}) {
      int seen = 0;
      CHECK_THROWS(for_each_match(*g, r, &memo, &scratch, [&](const Match&) -> bool {
                     if (++seen == throw_at) throw EngineError("stop here");
                     return true;
                   }),
                   EngineError, "stop here");
      for (bool used : scratch.used) CHECK(!used);
    }
    std::vector<std::vector<int64_t>> found;
    const int n = for_each_match(*g, r, &memo, &scratch, [&](const Match& m) {
      std::vector<int64_t> guids;
      for (int i : m.ops) guids.push_back(g->node(i).guid);
      found.push_back(guids);
      return true;
    });
    int fresh_count = 0;
    CHECK(found == matches(*g, r, &fresh_count));
    CHECK_EQ(n, fresh_count);
    CHECK(n > 0);
  }
}

}  // namespace taso_test
