// Rule validation (pattern.h).
#include "check.h"
#include "fixtures.h"

namespace taso_test {

TEST(pattern_valid_rules_count_variable_slots) {
  CHECK_EQ(replace_unary(OP_RELU, OP_TANH).num_variable_slots(), 2);
  CHECK_EQ(commute_add().num_variable_slots(), 3);
  CHECK_EQ(fuse_conv_relu().num_variable_slots(), 3);
}

TEST(pattern_validate_rejects_malformed_rules) {
  Rule r = replace_unary(OP_RELU, OP_TANH);
  Rule empty_src = r;
  empty_src.src.clear();
  CHECK_THROWS(empty_src.validate(), EngineError, "has no source ops");
  Rule unbound = r;
  unbound.dst[0].inputs[0] = var(-2);  // the source binds -1 only
  CHECK_THROWS(unbound.validate(), EngineError, "which the source does not bind");
  Rule arity = r;
  arity.src[0].inputs.push_back(var(-2));  // relu takes one input
  CHECK_THROWS(arity.validate(), EngineError, "expected 1");
  Rule forward = double_relu();
  forward.src[0].inputs[0] = out(1);  // reads a later op
  CHECK_THROWS(forward.validate(), EngineError, "does not come before it");
  Rule missing = r;
  missing.mapped_outputs[0].second = out(3);
  CHECK_THROWS(missing.validate(), EngineError, "refers to a missing op");
  Rule unsettable = r;
  unsettable.dst[0].params.push_back({PM_EPSILON, 1});
  CHECK_THROWS(unsettable.validate(), EngineError, "cannot be set on a target op");
}

}  // namespace taso_test
