// Rule validation.
#include "taso/pattern.h"

#include <algorithm>

namespace taso {

namespace {

[[noreturn]] void rule_error(const Rule& r, const std::string& what) {
  throw EngineError("rule '" + r.name + "': " + what);
}

void validate_pattern(const Rule& r, const std::vector<PatternOp>& ops,
                      const char* side, int min_var) {
  for (size_t j = 0; j < ops.size(); ++j) {
    const PatternOp& op = ops[j];
    std::string where = std::string(side) + " op " + std::to_string(j);
    if (!is_pattern_op_type(op.type))
      rule_error(r, where + " has an unusable type " + std::to_string(op.type));
    int expected = num_inputs_expected(op.type);
    if (expected >= 0 && static_cast<int>(op.inputs.size()) != expected)
      rule_error(r, where + " (" + op_type_name(op.type) + ") has " +
                        std::to_string(op.inputs.size()) + " inputs, expected " +
                        std::to_string(expected));
    for (const PatternTensor& t : op.inputs) {
      if (t.op >= static_cast<int>(j))
        rule_error(r, where + " reads op " + std::to_string(t.op) +
                          ", which does not come before it");
      if (t.op < min_var)
        rule_error(r, where + " reads variable " + std::to_string(t.op) +
                          ", out of range");
      if (t.op >= 0 && (t.index < 0 || (ops[t.op].type != OP_SPLIT && t.index != 0)))
        rule_error(r, where + " reads output " + std::to_string(t.index) +
                          " of op " + std::to_string(t.op));
    }
  }
}

}  // namespace

void Rule::index() {
  variable_slots = 0;
  variable_slots = num_variable_slots();
  num_source_types = 0;
  for (const PatternOp& op : src) {
    int k = 0;
    while (k < num_source_types && source_types[k].first != op.type) ++k;
    if (k == num_source_types) {
      if (num_source_types == kMaxSourceTypes) {  // too many to summarise
        num_source_types = -1;
        return;
      }
      source_types[num_source_types++] = {op.type, 0};
    }
    ++source_types[k].second;
  }
}

int Rule::num_variable_slots() const {
  if (variable_slots > 0) return variable_slots;
  int min_var = 0;
  for (const auto* side : {&src, &dst})
    for (const PatternOp& op : *side)
      for (const PatternTensor& t : op.inputs) min_var = std::min(min_var, t.op);
  return -min_var + 1;
}

void Rule::validate() const {
  if (src.empty()) rule_error(*this, "has no source ops");
  if (dst.empty()) rule_error(*this, "has no target ops");
  if (mapped_outputs.empty()) rule_error(*this, "maps no outputs");
  int min_var = -1000;
  validate_pattern(*this, src, "source", min_var);
  validate_pattern(*this, dst, "target", min_var);
  for (const PatternOp& op : src) {
    if (!op.copied.empty()) rule_error(*this, "source ops cannot copy parameters");
    if (op.inputs.size() > 8) rule_error(*this, "a source op has more than 8 inputs");
  }
  for (const PatternOp& op : dst) {
    for (auto [key, s] : op.copied)
      if (s < 0 || s >= static_cast<int>(src.size()))
        rule_error(*this, "a target op copies from source op " +
                              std::to_string(s) + ", out of range");
    OpParams probe;
    for (auto [key, value] : op.params) probe.set(key, value);  // throws if unsettable
  }
  for (const auto& [s, d] : mapped_outputs) {
    if (s.op < 0 || s.op >= static_cast<int>(src.size()) || d.op < 0 ||
        d.op >= static_cast<int>(dst.size()))
      rule_error(*this, "a mapped output refers to a missing op");
  }
  // Every variable the target reads must be bound by the source.
  std::vector<int> src_vars;
  for (const PatternOp& op : src)
    for (const PatternTensor& t : op.inputs)
      if (t.op < 0) src_vars.push_back(t.op);
  for (const PatternOp& op : dst)
    for (const PatternTensor& t : op.inputs)
      if (t.op < 0 && std::find(src_vars.begin(), src_vars.end(), t.op) == src_vars.end())
        rule_error(*this, "the target reads variable " + std::to_string(t.op) +
                              ", which the source does not bind");
}

}  // namespace taso
