// The memo key of an operator configuration (OpConfig::key).
#include "taso/ops.h"

#include <charconv>
#include <cstdint>
#include <cstring>

namespace taso {

namespace {
// Appends the decimal form of `v`, as std::ostream's operator<< writes it.
void append_int(std::string* out, int64_t v) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, res.ptr);
}
}  // namespace

std::string OpConfig::key() const {
  // Built by appending (it is computed for every op priced, every step):
  // the same text an ostringstream wrote before (cost cache files and the
  // onednn reference table are keyed by it).
  std::string os;
  os.reserve(160);
  os += op_type_name(type);
  os += "|s";
  append_int(&os, params.stride_h);
  os += ',';
  append_int(&os, params.stride_w);
  os += "|p";
  append_int(&os, params.padding);
  os += "|a";
  append_int(&os, params.activation);
  os += "|x";
  append_int(&os, params.axis);
  os += "|k";
  append_int(&os, params.kernel_h);
  os += ',';
  append_int(&os, params.kernel_w);
  os += "|c";
  append_int(&os, params.count);
  os += ',';
  append_int(&os, params.groups);
  os += "|e";
  // Exact bits of epsilon: two values that print alike must not collide.
  uint32_t eps_bits;
  std::memcpy(&eps_bits, &params.epsilon, sizeof(eps_bits));
  append_int(&os, eps_bits);
  os += "|perm";
  for (int v : params.perm) {
    os += ',';
    append_int(&os, v);
  }
  os += "|shape";
  for (int64_t v : params.shape) {
    os += ',';
    append_int(&os, v);
  }
  os += "|sizes";
  for (int64_t v : params.sizes) {
    os += ',';
    append_int(&os, v);
  }
  if (type == OP_OPAQUE) {
    os += '|';
    os += params.opaque_type;
    os += "|f";
    append_int(&os, params.opaque_flops);
  }
  os += "|in";
  for (const auto& s : input_shapes) {  // shape_str
    os += '[';
    for (size_t i = 0; i < s.size(); ++i) {
      if (i) os += ',';
      append_int(&os, s[i]);
    }
    os += ']';
  }
  os += "|w";
  os += weight_side ? '1' : '0';
  return os;
}

}  // namespace taso
