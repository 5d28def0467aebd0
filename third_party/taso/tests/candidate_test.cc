// Rewrite candidates (candidate.h): building them from matches, their
// incremental hash and op count, and materialize.
#include "check.h"
#include "fixtures.h"

namespace taso_test {

namespace {

std::vector<Candidate> candidates(const Graph& g, const Rule& r, int max_ops = 0,
                                  bool incremental = true, int* matches = nullptr,
                                  std::vector<MatchedOps>* matched = nullptr) {
  std::vector<Candidate> out;
  const int n = for_each_candidate(g, r, max_ops, [&](Candidate&& c, const MatchedOps& ops) {
    out.push_back(std::move(c));
    if (matched) matched->push_back(ops);
    return true;
  }, incremental);
  if (matches) *matches = n;
  return out;
}

std::vector<int> op_types(const Graph& g) {
  std::vector<int> types;
  for (const NodePtr& n : g.nodes()) types.push_back(n->type);
  return types;
}

std::vector<Rule> some_rules() {
  return {double_relu(), commute_add(), fuse_conv_relu(), replace_unary(OP_RELU, OP_TANH),
          replace_unary(OP_TANH, OP_SIGMOID)};
}

}  // namespace

TEST(candidate_hash_and_op_count_match_the_built_graph) {
  int checked = 0;
  for (GraphPtr g : {conv_chain().graph, two_adds()}) {
    for (const Rule& r : some_rules()) {
      std::vector<MatchedOps> matched;
      std::vector<Candidate> eager = candidates(*g, r, 0, false);
      std::vector<Candidate> lazy = candidates(*g, r, 0, true, nullptr, &matched);
      REQUIRE(eager.size() == lazy.size());
      for (size_t k = 0; k < lazy.size(); ++k) {
        const Candidate& c = lazy[k];
        CHECK(!c.whole);
        CHECK(c.graph == nullptr);
        CHECK_EQ(c.removed.size(), r.src.size());
        CHECK_EQ(c.added.size(), r.dst.size());
        CHECK_EQ(matched[k].size(), r.src.size());
        HashScratch scratch;
        const uint64_t hash = candidate_hash(*g, c, &scratch);
        GraphPtr built = materialize(*g, c);
        CHECK(materialize(*g, c) == built);  // cached
        CHECK_EQ(hash, built->hash());
        CHECK_EQ(c.num_ops, built->num_ops());
        CHECK(built->hash() != g->hash());
        // The incremental record builds what the whole rebuild built.
        CHECK(eager[k].whole);
        CHECK_EQ(eager[k].graph->hash(), hash);
        CHECK(op_types(*eager[k].graph) == op_types(*built));
        ++checked;
      }
    }
  }
  CHECK_EQ(checked, 6 + 3);  // conv_chain: 1 + 1 + 3 + 1; two_adds: 2 + 1
}

TEST(candidate_fused_conv_has_the_fused_activation) {
  const ConvChain c = conv_chain();
  std::vector<Candidate> found = candidates(*c.graph, fuse_conv_relu());
  REQUIRE(found.size() == 1u);
  GraphPtr g = materialize(*c.graph, found[0]);
  CHECK_EQ(g->num_ops(), c.graph->num_ops() - 1);
  CHECK_EQ(g->index_of(c.conv1), -1);
  CHECK_EQ(g->index_of(c.relu1), -1);
  int fused = 0;
  for (const NodePtr& n : g->nodes())
    fused += n->type == OP_CONV2D && n->params.activation == ACT_RELU;
  CHECK_EQ(fused, 1);
  // Untouched ops are shared with the parent, not copied.
  CHECK(g->nodes()[g->index_of(c.relu3)] == c.graph->nodes()[c.graph->index_of(c.relu3)]);
  // The reader of the redirected tensor is a clone reading the target op.
  const Node& conv2 = g->node(g->index_of(c.conv2));
  CHECK(&conv2 != &c.graph->node(c.graph->index_of(c.conv2)));
  CHECK_EQ(conv2.inputs[0].guid, found[0].added[0]->guid);
  CHECK_EQ(redirected(found[0], {c.relu1, 0}).guid, found[0].added[0]->guid);
  CHECK_THROWS(redirected(found[0], {c.tanh, 0}), EngineError, "not mapped");
}

TEST(candidate_rejects_target_shapes_that_fail) {
  GraphBuilder b;
  TensorRef a = b.input("a", {2, 3});
  TensorRef w = b.weight("w", {3, 4});
  int64_t mm = b.add(OP_MATMUL, {}, {a, w});
  GraphPtr g = b.build({{mm, 0}});
  // matmul(a, b) -> matmul(b, a): [3,4] x [2,3] fails shape inference.
  const Rule swap = rule("swap", {pop(OP_MATMUL, {var(-1), var(-2)})},
                         {pop(OP_MATMUL, {var(-2), var(-1)})}, {{out(0), out(0)}});
  int matches = 0;
  CHECK(candidates(*g, swap, 0, true, &matches).empty());
  CHECK_EQ(matches, 1);
}

TEST(candidate_rejects_unmapped_outputs_in_use) {
  GraphBuilder b;
  TensorRef x = b.input("x", {4});
  int64_t r1 = b.add(OP_RELU, {}, {x});
  int64_t r2 = b.add(OP_RELU, {}, {{r1, 0}});
  int64_t t = b.add(OP_TANH, {}, {{r1, 0}});  // reads r1, which the rule drops
  GraphPtr g = b.build({{r2, 0}, {t, 0}});
  int matches = 0;
  CHECK(candidates(*g, double_relu(), 0, true, &matches).empty());
  CHECK_EQ(matches, 1);
}

TEST(candidate_respects_the_size_cap) {
  const ConvChain c = conv_chain();
  // relu(v) -> relu(relu(v)): one op more per rewrite.
  const Rule grow = rule("grow", {pop(OP_RELU, {var(-1)})},
                         {pop(OP_RELU, {var(-1)}), pop(OP_RELU, {out(0)})}, {{out(0), out(1)}});
  const int ops = c.graph->num_ops();
  CHECK_EQ(candidates(*c.graph, grow, 0).size(), 3u);
  CHECK_EQ(candidates(*c.graph, grow, ops + 1).size(), 3u);
  int matches = 0;
  CHECK(candidates(*c.graph, grow, ops, true, &matches).empty());
  CHECK_EQ(matches, 3);
  for (const Candidate& k : candidates(*c.graph, grow)) CHECK_EQ(k.num_ops, ops + 1);
}

TEST(candidate_that_leaves_dead_ops_is_built_whole) {
  const ConvChain c = conv_chain();
  // conv(x, w) -> relu(x): the weight loses its only reader.
  const Rule drop = rule("drop_conv", {pop(OP_CONV2D, {var(-1), var(-2)})},
                         {pop(OP_RELU, {var(-1)})}, {{out(0), out(0)}});
  std::vector<Candidate> found = candidates(*c.graph, drop);
  // conv2 reads relu1 [1,4,8,8] but outputs [1,4,4,4]: only conv1 qualifies.
  REQUIRE(found.size() == 1u);
  const Candidate& k = found[0];
  CHECK(k.whole);
  REQUIRE(k.graph != nullptr);
  CHECK(k.hashed);
  CHECK_EQ(k.hash, k.graph->hash());
  int weights = 0;
  for (const NodePtr& n : k.graph->nodes()) weights += n->type == OP_WEIGHT;
  CHECK_EQ(weights, 1);  // w1 is gone
  CHECK_EQ(k.num_ops, c.graph->num_ops());
}

TEST(candidate_dedup_key_is_a_function_of_the_graph) {
  const ConvChain a = conv_chain(), b = conv_chain();
  std::vector<uint64_t> terms;
  const uint64_t key = graph_dedup_key(*a.graph, &terms);
  CHECK_EQ(key, graph_dedup_key(*b.graph));
  CHECK_EQ(terms.size(), static_cast<size_t>(a.graph->size()));
  CHECK(key != graph_dedup_key(*two_adds()));
  // Rewrites give different keys from the parent's.
  for (const Candidate& k : candidates(*a.graph, replace_unary(OP_RELU, OP_TANH)))
    CHECK(graph_dedup_key(*materialize(*a.graph, k)) != key);
}

TEST(candidate_deep_key_matches_the_built_graph) {
  int checked = 0;
  for (GraphPtr g : {conv_chain().graph, two_adds()}) {
    DeepKeyScratch scratch;  // shared by every candidate of the parent
    const uint64_t parent = graph_deep_key(*g);
    for (const Rule& r : some_rules()) {
      for (const Candidate& c : candidates(*g, r)) {
        const uint64_t key = candidate_deep_key(*g, c, &scratch);
        CHECK(c.deep_keyed);
        CHECK_EQ(candidate_deep_key(*g, c, &scratch), key);  // cached
        GraphPtr built = materialize(*g, c);
        CHECK_EQ(key, graph_deep_key(*built));
        CHECK(key != parent);
        ++checked;
      }
    }
  }
  CHECK_EQ(checked, 6 + 3);
  // A function of the graph: equal graphs built apart have equal deep keys.
  CHECK_EQ(graph_deep_key(*conv_chain().graph), graph_deep_key(*conv_chain().graph));
  CHECK(graph_deep_key(*conv_chain().graph) != graph_deep_key(*two_adds()));
}

TEST(candidate_keys_kept_with_the_graph_are_those_computed_afresh) {
  // Graph::level_hashes is built on first use, one level or both at once,
  // and kept until release_caches: every order gives the same keys.
  const GraphPtr one_first = conv_chain().graph, both_at_once = conv_chain().graph;
  std::vector<uint64_t> terms;
  const uint64_t key = graph_dedup_key(*one_first, &terms);  // one level only
  const uint64_t deep = graph_deep_key(*both_at_once);        // both levels at once
  CHECK_EQ(graph_deep_key(*one_first), deep);                  // the second level added
  CHECK_EQ(graph_dedup_key(*both_at_once), key);
  const Graph::LevelHashes& levels = one_first->level_hashes(true);
  CHECK(levels.terms == terms);
  uint64_t sum = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    CHECK_EQ(levels.terms[i], mix64(levels.one[i]));
    sum += terms[i];
  }
  CHECK_EQ(levels.terms_sum, sum);
  one_first->release_caches();
  CHECK_EQ(graph_deep_key(*one_first), deep);
  CHECK_EQ(graph_dedup_key(*one_first), key);
}

TEST(candidate_for_each_rewrite_materializes_every_result) {
  const ConvChain c = conv_chain();
  std::vector<uint64_t> hashes;
  const int n = for_each_rewrite(*c.graph, replace_unary(OP_RELU, OP_TANH), 0,
                                 [&](GraphPtr g, const MatchedOps& ops) {
                                   CHECK_EQ(ops.size(), 1u);
                                   hashes.push_back(g->hash());
                                   return true;
                                 });
  CHECK_EQ(n, 3);
  REQUIRE(hashes.size() == 3u);
  CHECK(hashes[0] != hashes[1] && hashes[1] != hashes[2] && hashes[0] != hashes[2]);
}

}  // namespace taso_test
