// Substitution rules ("xfers") as data: a source pattern, a target pattern
// over shared external variables, and the mapped outputs pairing source
// tensors visible outside a match with their target replacements.
//
// Thread safety: a Rule is a plain value; once built, concurrent reads
// (matching it on several graphs at once) are safe.
#ifndef TASO_PATTERN_H_
#define TASO_PATTERN_H_

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "taso/ops.h"

namespace taso {

// Output `index` of pattern op `op`; `op < 0` names external variable `op`.
struct PatternTensor {
  int op = -1;
  int index = 0;
};

struct PatternOp {
  int type = OP_INPUT;
  std::vector<PatternTensor> inputs;
  // Source ops: (key, value) equality constraints.
  // Target ops: (key, value) parameters to set.
  std::vector<std::pair<int, int>> params;
  // Target ops only: (key, source op) parameters copied from a matched op
  // (e.g. batch-norm epsilon into the folding ops).
  std::vector<std::pair<int, int>> copied;
};

// The most distinct op types a source pattern's summary (Rule::index) holds;
// a pattern with more is summarised by no summary (may_match reads it).
constexpr int kMaxSourceTypes = 6;

struct Rule {
  std::string name;
  std::vector<PatternOp> src;
  std::vector<PatternOp> dst;
  std::vector<std::pair<PatternTensor, PatternTensor>> mapped_outputs;
  // A summary of the patterns, filled by index() and read where a set of
  // ~1,700 rules is checked against one graph (may_match, the matcher's and
  // the candidate builder's set-up), so that those checks read no pattern
  // op, which lie scattered in memory: the source pattern's op types, each
  // with how many source ops have it, and num_variable_slots(). Unset
  // (num_source_types < 0, variable_slots 0) until index() runs; readers
  // then read the patterns. Call index() again after changing a pattern.
  std::array<std::pair<int, int>, kMaxSourceTypes> source_types{};
  int num_source_types = -1;
  int variable_slots = 0;
  // Throws EngineError naming the rule and the field at fault.
  void validate() const;
  // Fills the summary above from the patterns.
  void index();
  // One more than the largest variable number either pattern reads (-op of
  // its most negative PatternTensor::op): the size of per-variable tables.
  int num_variable_slots() const;
};

}  // namespace taso

#endif  // TASO_PATTERN_H_
