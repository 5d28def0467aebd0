// The one shape check (try_infer_shapes) and the exception-free parameter
// accessors (ops.h): they fail exactly where their throwing forms throw.
#include <tuple>

#include "check.h"
#include "fixtures.h"

namespace taso_test {

namespace {

// infer_shapes' verdict: its outputs, or "" with `message` set.
bool inferred(int type, const OpParams& p, const std::vector<Shape>& in,
              std::vector<Shape>* out, std::string* message) {
  try {
    *out = infer_shapes(type, p, in);
    return true;
  } catch (const EngineError& e) {
    *message = e.what();
    return false;
  }
}

}  // namespace

TEST(ops_type_info_finds_each_row_by_its_type) {
  const std::vector<OpTypeInfo> table = op_type_table();
  for (const OpTypeInfo& row : table) {
    const OpTypeInfo* found = op_type_info(row.type);
    REQUIRE(found != nullptr);
    CHECK_EQ(found->type, row.type);
    CHECK(std::string(found->name) == row.name);
  }
  int known = 0;
  for (int type = -3; type < kNumOpTypeSlots + 3; ++type) {
    bool in_table = false;
    for (const OpTypeInfo& row : table) in_table = in_table || row.type == type;
    CHECK_EQ(op_type_info(type) != nullptr, in_table);
    known += in_table;
  }
  CHECK_EQ(known, static_cast<int>(table.size()));
}

TEST(ops_try_infer_shapes_fails_exactly_where_infer_shapes_throws) {
  OpParams none, axis1, split;
  axis1.axis = 1;
  split.axis = 0;
  split.sizes = {1, 2};
  const OpParams stride2 = conv_params(2);
  const std::vector<std::tuple<int, OpParams, std::vector<Shape>>> cases = {
      {OP_MATMUL, none, {{4, 8}, {8, 2}}},         {OP_MATMUL, none, {{4, 8}, {4, 8}}},
      {OP_MATMUL, none, {{2, 4, 8}, {3, 8, 4}}},   {OP_EW_ADD, none, {{2, 3}, {1, 3}}},
      {OP_EW_ADD, none, {{2, 3}, {2, 4}}},         {OP_CONCAT, axis1, {{2, 3}, {2, 5}}},
      {OP_CONCAT, axis1, {{2, 3}, {3, 3}}},        {OP_SPLIT, split, {{3, 4}}},
      {OP_SPLIT, split, {{4, 4}}},                 {OP_CONV2D, stride2, {{1, 4, 8, 8}, {6, 4, 3, 3}}},
      {OP_CONV2D, stride2, {{1, 6, 8, 8}, {4, 4, 3, 3}}}, {OP_RELU, none, {{2, 0}}},
      {OP_RELU, none, {{2}, {2}}},                 {OP_INPUT, none, {}},
  };
  int failures = 0;
  for (const auto& [type, params, in] : cases) {
    std::vector<Shape> expected, out;
    std::string message, why;
    const bool ok = inferred(type, params, in, &expected, &message);
    CHECK_EQ(try_infer_shapes(type, params, in, &out, &why), ok);
    CHECK_EQ(try_infer_shapes(type, params, in, &out), ok);  // no reason asked for
    if (ok) {
      CHECK(out == expected);
    } else {
      ++failures;
      // The exception names the op and carries the same reason.
      CHECK(message.find(std::string(op_type_name(type)) + ": " + why) == 0);
      CHECK(message.find("(input shapes:") != std::string::npos);
    }
  }
  CHECK_EQ(failures, 9);
  std::vector<Shape> out;
  CHECK_THROWS(infer_shapes(999, OpParams{}, {}), EngineError, "unknown operator type 999");
  CHECK(!try_infer_shapes(999, OpParams{}, {}, &out));
}

TEST(ops_try_get_and_try_set_fail_where_get_and_set_throw) {
  OpParams p;
  int value = 0;
  CHECK(p.try_get(PM_STRIDE_H, OP_CONV2D, {}, &value));
  CHECK_EQ(value, 1);
  CHECK(p.try_get(PM_KERNEL_H, OP_CONV2D, {{1, 4, 8, 8}, {4, 4, 5, 3}}, &value));
  CHECK_EQ(value, 5);
  CHECK(!p.try_get(PM_EPSILON, OP_BATCHNORM, {}, &value));
  CHECK_THROWS(p.get(PM_EPSILON, OP_BATCHNORM, {}), EngineError, "is not readable on");
  CHECK(p.try_set(PM_PERM, 213));
  CHECK(p.perm == (std::vector<int>{1, 0, 2}));
  CHECK(!p.try_set(PM_PERM, 203));  // a zero digit: left unchanged
  CHECK(p.perm == (std::vector<int>{1, 0, 2}));
  CHECK_THROWS(p.set(PM_PERM, 203), EngineError, "has a zero digit");
  CHECK_THROWS(p.set(PM_PERM, -1), EngineError, "must be positive");
  CHECK(!p.try_set(PM_EPSILON, 1));
  CHECK_THROWS(p.set(PM_EPSILON, 1), EngineError, "cannot be set on a target op");
}

}  // namespace taso_test
