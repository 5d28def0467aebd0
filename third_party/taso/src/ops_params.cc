// Operator parameters: OpParams' reads and writes of pattern parameters.
#include "taso/ops.h"

#include <string>

namespace taso {

bool OpParams::try_get(int key, int op_type, const std::vector<Shape>& inputs,
                       int* value) const {
  switch (key) {
    case PM_OP_TYPE: *value = op_type; return true;
    case PM_NUM_INPUTS: *value = static_cast<int>(inputs.size()); return true;
    case PM_NUM_OUTPUTS:
      *value = op_type == OP_SPLIT ? static_cast<int>(sizes.size()) : 1;
      return true;
    case PM_STRIDE_H: *value = stride_h; return true;
    case PM_STRIDE_W: *value = stride_w; return true;
    case PM_PAD: *value = padding; return true;
    case PM_ACTI: *value = activation; return true;
    case PM_AXIS: *value = axis; return true;
    case PM_MERGE_GCONV_COUNT: *value = count; return true;
    case PM_PERM: {  // digits plus one, most significant first: [1, 0] -> 21
      int code = 0;
      for (int v : perm) code = code * 10 + v + 1;
      *value = code;
      return true;
    }
    case PM_NUMDIM:
      *value = inputs.empty() ? 0 : static_cast<int>(inputs[0].size());
      return true;
    case PM_KERNEL_H:
      *value = op_type == OP_CONV2D && inputs.size() == 2 && inputs[1].size() == 4
                   ? static_cast<int>(inputs[1][2])
                   : kernel_h;
      return true;
    case PM_KERNEL_W:
      *value = op_type == OP_CONV2D && inputs.size() == 2 && inputs[1].size() == 4
                   ? static_cast<int>(inputs[1][3])
                   : kernel_w;
      return true;
    case PM_GROUP:
      if (op_type == OP_MERGE_GCONV)
        *value = groups;
      else if (op_type == OP_CONV2D && inputs.size() == 2 && inputs[1][1] > 0)
        *value = static_cast<int>(inputs[0][1] / inputs[1][1]);
      else
        *value = 1;
      return true;
    default:
      return false;
  }
}

int OpParams::get(int key, int op_type, const std::vector<Shape>& inputs) const {
  int value;
  if (!try_get(key, op_type, inputs, &value))
    throw EngineError(std::string("parameter key ") + std::to_string(key) +
                      " is not readable on " + op_type_name(op_type));
  return value;
}

namespace {

// OpParams::set, reporting why not (when `why` is not null) instead of
// throwing.
bool set_param(OpParams* p, int key, int value, std::string* why) {
  switch (key) {
    case PM_STRIDE_H: p->stride_h = value; return true;
    case PM_STRIDE_W: p->stride_w = value; return true;
    case PM_PAD: p->padding = value; return true;
    case PM_ACTI: p->activation = value; return true;
    case PM_AXIS: p->axis = value; return true;
    case PM_KERNEL_H: p->kernel_h = value; return true;
    case PM_KERNEL_W: p->kernel_w = value; return true;
    case PM_MERGE_GCONV_COUNT: p->count = value; return true;
    case PM_GROUP: p->groups = value; return true;  // stored by merge_gconv only
    case PM_PERM: {
      if (value <= 0) {
        if (why) *why = "perm code must be positive, got " + std::to_string(value);
        return false;
      }
      std::vector<int> digits;
      for (int v = value; v > 0; v /= 10) {
        if (v % 10 == 0) {
          if (why) *why = "perm code " + std::to_string(value) + " has a zero digit";
          return false;
        }
        digits.insert(digits.begin(), v % 10 - 1);
      }
      p->perm = digits;
      return true;
    }
    // Derived from shapes, nothing to store.
    case PM_NUM_INPUTS: case PM_NUM_OUTPUTS: case PM_NUMDIM:
      return true;
    default:
      if (why) *why = "parameter key " + std::to_string(key) + " cannot be set on a target op";
      return false;
  }
}

}  // namespace

bool OpParams::try_set(int key, int value) { return set_param(this, key, value, nullptr); }

void OpParams::set(int key, int value) {
  std::string why;
  if (!set_param(this, key, value, &why)) throw EngineError(why);
}

bool OpParams::operator==(const OpParams& o) const {
  return stride_h == o.stride_h && stride_w == o.stride_w &&
         padding == o.padding && activation == o.activation &&
         axis == o.axis && kernel_h == o.kernel_h && kernel_w == o.kernel_w &&
         count == o.count && groups == o.groups && epsilon == o.epsilon && perm == o.perm &&
         shape == o.shape && sizes == o.sizes &&
         opaque_type == o.opaque_type && opaque_shapes == o.opaque_shapes &&
         opaque_flops == o.opaque_flops;
}

}  // namespace taso
