// E-matching on a mirror of an e-graph (ematch.h): steps down and up,
// projections of a multi-output op, limits, applied matches, root
// restrictions, the cycle check, bad input as exceptions.
#include <stdexcept>

#include "check.h"
#include "taso/ematch.h"

namespace taso_test {

using taso::EMatcher;
using taso::EMatches;
using taso::EPattern;
using taso::EPatternOp;
using taso::EStep;
using taso::EStepKind;

namespace {

constexpr int32_t kOut = 0, kInput = 1, kConv = 2, kRelu = 3, kSplit = 4;
constexpr int32_t kConvSig = 0, kReluSig = 1, kSplitSig = 2;

// Classes 0 x, 1 w, 2 conv(x, w), 3 relu(2), 4 relu(x), 5 split(3),
// 6 = out 0 of 5, 7 = out 1 of 5, 8 conv(6, w); e-node n is in class n.
// `relu_reads_itself`: e-node 3 reads class 3 instead (a cycle).
void set_graph(EMatcher* m, bool relu_reads_itself = false) {
  const std::vector<int32_t> type = {kInput, kInput, kConv, kRelu, kRelu, kSplit, kOut, kOut, kConv};
  const std::vector<int32_t> cls = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<uint8_t> usable(9, 1);
  const std::vector<int32_t> out_index = {-1, -1, -1, -1, -1, -1, 0, 1, -1};
  const std::vector<int32_t> child_start = {0, 0, 0, 2, 3, 4, 5, 6, 7, 9};
  const std::vector<int32_t> children = {0, 1, relu_reads_itself ? 3 : 2, 0, 3, 5, 5, 6, 1};
  const std::vector<int32_t> order = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int32_t> class_start = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  m->set_graph(9, kOut, type, cls, usable, out_index, child_start, children, order,
               class_start, order);
  m->set_fit(kConvSig, 0, {0, 0, 1, 0, 0, 0, 0, 0, 1});
  m->set_fit(kReluSig, 0, {0, 0, 0, 1, 1, 0, 0, 0, 0});
  m->set_fit(kSplitSig, 0, {0, 0, 0, 0, 0, 1, 0, 0, 0});
}

EPatternOp op(int32_t type, int32_t sig, std::vector<std::pair<int32_t, int32_t>> inputs,
              bool projected = false) {
  EPatternOp o;
  o.type = type;
  o.signature = sig;
  o.projected = projected;
  o.inputs = std::move(inputs);
  return o;
}

EStep step(EStepKind kind, int32_t o, int32_t via = -1, int32_t slot = -1, int32_t index = 0,
           int32_t var = 0) {
  EStep s;
  s.kind = kind;
  s.op = o;
  s.via_op = via;
  s.slot = slot;
  s.index = index;
  s.var = var;
  return s;
}

// relu(conv(v0, v1)), found from the relu down.
EPattern relu_of_conv() {
  EPattern p;
  p.ops = {op(kConv, kConvSig, {{-1, 0}, {-2, 0}}), op(kRelu, kReluSig, {{0, 0}})};
  p.steps = {step(EStepKind::kScan, 1), step(EStepKind::kDown, 0, 1, 0)};
  p.num_vars = 2;
  p.var_order = {0, 1};
  return p;
}

}  // namespace

TEST(ematch_finds_a_chain_down_from_its_root) {
  EMatcher m;
  set_graph(&m);
  const int32_t p = m.add_pattern(relu_of_conv());
  const EMatches got = m.match(p, 100, -1);
  REQUIRE(got.count == 1u);
  CHECK(got.nodes == (std::vector<int32_t>{2, 3}));
  CHECK(got.vars == (std::vector<int32_t>{0, 1}));
}

TEST(ematch_goes_up_from_a_variable) {
  // conv(v0, v1) then relu reading it, planned conv first, relu up.
  EPattern pat = relu_of_conv();
  pat.steps = {step(EStepKind::kScan, 0), step(EStepKind::kUp, 1, 0, 0, 0)};
  EMatcher m;
  set_graph(&m);
  const EMatches got = m.match(m.add_pattern(pat), 100, -1);
  REQUIRE(got.count == 1u);
  CHECK(got.nodes == (std::vector<int32_t>{2, 3}));
  // relu(v0) with relu found up from v0 (bound by a scan of convs).
  EPattern up;
  up.ops = {op(kConv, kConvSig, {{-1, 0}, {-2, 0}}), op(kRelu, kReluSig, {{-1, 0}})};
  up.steps = {step(EStepKind::kScan, 0), step(EStepKind::kUp, 1, -1, 0, 0, 0)};
  up.num_vars = 2;
  up.var_order = {0, 1};
  const EMatches both = m.match(m.add_pattern(up), 100, -1);
  REQUIRE(both.count == 1u);  // conv(x, w) and relu(x): e-nodes 2 and 4
  CHECK(both.nodes == (std::vector<int32_t>{2, 4}));
}

TEST(ematch_reads_projections_of_a_multi_output_op) {
  // conv(out 0 of split(v1), v0): e-nodes 5 (split) and 8 (conv).
  EPattern p;
  p.ops = {op(kSplit, kSplitSig, {{-2, 0}}, true), op(kConv, kConvSig, {{0, 0}, {-1, 0}})};
  p.steps = {step(EStepKind::kScan, 1), step(EStepKind::kDown, 0, 1, 0, 0)};
  p.num_vars = 2;
  p.var_order = {0, 1};
  EMatcher m;
  set_graph(&m);
  const EMatches got = m.match(m.add_pattern(p), 100, -1);
  REQUIRE(got.count == 1u);
  CHECK(got.nodes == (std::vector<int32_t>{5, 8}));
  CHECK(got.vars == (std::vector<int32_t>{1, 3}));
  // Output 1 is not what the conv reads.
  p.steps[1].index = 1;
  p.ops[1].inputs[0].second = 1;
  CHECK_EQ(m.match(m.add_pattern(p), 100, -1).count, 0u);
}

TEST(ematch_limits_skips_applied_and_restricts_roots) {
  EPattern relu;
  relu.ops = {op(kRelu, kReluSig, {{-1, 0}})};
  relu.steps = {step(EStepKind::kScan, 0)};
  relu.num_vars = 1;
  relu.var_order = {0};
  EMatcher m;
  set_graph(&m);
  const int32_t p = m.add_pattern(relu);
  const EMatches all = m.match(p, 100, -1);
  REQUIRE(all.count == 2u);
  CHECK(all.nodes == (std::vector<int32_t>{3, 4}));  // e-node order
  const EMatches first = m.match(p, 1, -1);
  REQUIRE(first.count == 1u);
  CHECK(first.nodes == (std::vector<int32_t>{3}));
  m.add_applied(p, {3});
  const EMatches rest = m.match(p, 1, -1);  // the applied one is not counted
  REQUIRE(rest.count == 1u);
  CHECK(rest.nodes == (std::vector<int32_t>{4}));
  // Roots within class 0 and one reader step above: classes 2 and 4.
  m.set_within(0, {0}, 1);
  CHECK(m.match(p, 100, 0).nodes == (std::vector<int32_t>{4}));
  m.set_within(1, {2}, 1);  // class 3 reads class 2, but e-node 3 is applied
  CHECK_EQ(m.match(p, 100, 1).count, 0u);
  m.set_within(2, {2}, 0);
  CHECK_EQ(m.match(p, 100, 2).count, 0u);
}

TEST(ematch_refuses_a_variable_bound_to_a_matched_class) {
  // relu(conv(v0, v1)) where the relu reads its own class: the conv is not
  // below it any more; relu(v0) binds v0 to the relu's own class: a cycle.
  EPattern relu;
  relu.ops = {op(kRelu, kReluSig, {{-1, 0}})};
  relu.steps = {step(EStepKind::kScan, 0)};
  relu.num_vars = 1;
  relu.var_order = {0};
  EMatcher m;
  set_graph(&m, true);
  const EMatches got = m.match(m.add_pattern(relu), 100, -1);
  REQUIRE(got.count == 1u);
  CHECK(got.nodes == (std::vector<int32_t>{4}));
}

TEST(ematch_refuses_bad_input) {
  EMatcher m;
  CHECK_THROWS(m.match(0, 1, -1), std::invalid_argument, "pattern id");
  CHECK_THROWS(m.set_graph(1, 0, {1}, {2}, {1}, {-1}, {0, 0}, {}, {0}, {0, 1}, {0}),
               std::invalid_argument, "out of range");
  CHECK_THROWS(m.set_graph(1, 0, {1}, {0}, {1}, {-1}, {0, 1}, {}, {0}, {0, 1}, {0}),
               std::invalid_argument, "span");
  EPattern p = relu_of_conv();
  p.steps[1].via_op = 5;
  CHECK_THROWS(m.add_pattern(p), std::invalid_argument, "down step");
  p = relu_of_conv();
  p.ops[0].inputs[0].first = -7;
  CHECK_THROWS(m.add_pattern(p), std::invalid_argument, "variable");
  set_graph(&m);
  const int32_t ok = m.add_pattern(relu_of_conv());
  CHECK_THROWS(m.match(ok, 1, 9), std::invalid_argument, "within");
  CHECK_THROWS(m.set_within(0, {42}, 1), std::invalid_argument, "out of range");
  CHECK_THROWS(m.add_applied(ok + 1, {1}), std::invalid_argument, "pattern id");
}

}  // namespace taso_test
