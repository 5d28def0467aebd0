// The operator table (kOpTypes), the checks of its columns against each
// other, and the enum and parameter-key names handed to Python with it.
#include "taso/ops.h"

#include <iterator>

namespace taso {

namespace {

// The operator table (OpTypeInfo in ops.h). Order: as Python lists types.
constexpr const char* kConvLike = "stride_h stride_w padding activation";
constexpr const char* kPoolLike = "stride_h stride_w padding activation kernel_h kernel_w";
constexpr OpTypeInfo kOpTypes[] = {
    // type, name, inputs, outputs, params, free, weight_only, pattern,
    //   kind, FLOPs per element, activation
    {OP_INPUT, "input", 0, 1, "", true, false, false, KIND_LEAF, 0, ACT_NONE},
    {OP_WEIGHT, "weight", 0, 1, "", true, false, false, KIND_LEAF, 0, ACT_NONE},
    {OP_CONV2D, "conv2d", 2, 1, kConvLike, false, false, true, KIND_CONV, 0, ACT_NONE},
    {OP_POOL_MAX, "maxpool", 1, 1, kPoolLike, false, false, true, KIND_POOL, 0, ACT_NONE},
    {OP_POOL_AVG, "avgpool", 1, 1, kPoolLike, false, false, true, KIND_POOL, 0, ACT_NONE},
    {OP_RELU, "relu", 1, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_RELU},
    {OP_SIGMOID, "sigmoid", 1, 1, "", false, false, true, KIND_ELTWISE, 4, ACT_SIGMOID},
    {OP_TANH, "tanh", 1, 1, "", false, false, true, KIND_ELTWISE, 4, ACT_TANH},
    {OP_BATCHNORM, "batchnorm", 5, 1, "epsilon", false, false, true, KIND_BATCHNORM, 2,
     ACT_NONE},
    {OP_CONCAT, "concat", -1, 1, "axis", false, false, true, KIND_CONCAT, 1, ACT_NONE},
    {OP_SPLIT, "split", 1, -1, "axis sizes", true, false, true, KIND_COPY, 0, ACT_NONE},
    {OP_RESHAPE, "reshape", 1, 1, "shape", true, false, true, KIND_VIEW, 0, ACT_NONE},
    {OP_TRANSPOSE, "transpose", 1, 1, "perm", true, false, true, KIND_COPY, 0, ACT_NONE},
    {OP_EW_ADD, "add", 2, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_NONE},
    {OP_EW_MUL, "mul", 2, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_NONE},
    {OP_EW_SUB, "sub", 2, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_NONE},
    {OP_EW_DIV, "div", 2, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_NONE},
    {OP_MATMUL, "matmul", 2, 1, "activation", false, false, true, KIND_MATMUL, 0, ACT_NONE},
    {OP_SCALAR_MUL, "scalar_mul", 2, 1, "", false, false, true, KIND_ELTWISE, 1, ACT_NONE},
    {OP_ENLARGE, "enlarge", 2, 1, "", true, true, true, KIND_WEIGHT_TRANSFORM, 0, ACT_NONE},
    {OP_MERGE_GCONV, "merge_gconv", 1, 1, "count groups", true, true, true,
     KIND_WEIGHT_TRANSFORM, 0, ACT_NONE},
    {OP_FUSE_CONV_BN_ALPHA_VAR, "fuse_conv_bn_alpha_var", 3, 1, "epsilon", true, true, true,
     KIND_WEIGHT_TRANSFORM, 0, ACT_NONE},
    {OP_FUSE_CONV_BN_BIAS, "fuse_conv_bn_bias", 4, 1, "epsilon", true, true, true,
     KIND_WEIGHT_TRANSFORM, 0, ACT_NONE},
    {OP_BROADCAST_ADD, "broadcast_add", 2, 1, "activation", false, false, true, KIND_ELTWISE,
     1, ACT_NONE},
    {OP_OPAQUE, "opaque", -1, -1, "opaque_type opaque_shapes opaque_flops", false, false,
     false, KIND_OPAQUE, 0, ACT_NONE},
};

// The columns checked against each other, at compile time: a row that
// contradicts itself does not build.
constexpr bool kind_is_free(int kind) {
  return kind == KIND_LEAF || kind == KIND_COPY || kind == KIND_VIEW ||
         kind == KIND_WEIGHT_TRANSFORM;
}
constexpr bool kind_counts_elements(int kind) {  // op_work: FLOPs per output element
  return kind == KIND_ELTWISE || kind == KIND_BATCHNORM || kind == KIND_CONCAT;
}
constexpr bool every_row(bool (*check)(const OpTypeInfo&)) {
  for (const OpTypeInfo& t : kOpTypes)
    if (!check(t)) return false;
  return true;
}
constexpr bool unique_types() {
  for (size_t i = 0; i < std::size(kOpTypes); ++i)
    for (size_t j = 0; j < i; ++j)
      if (kOpTypes[i].type == kOpTypes[j].type) return false;
  return true;
}
static_assert(unique_types(), "an operator type has two rows");
static_assert(every_row([](const OpTypeInfo& t) {
                return t.type >= 0 && t.type < kNumOpTypeSlots;
              }),
              "an operator type is outside [0, kNumOpTypeSlots)");
static_assert(every_row([](const OpTypeInfo& t) {
                return t.kind >= KIND_LEAF && t.kind <= KIND_OPAQUE;
              }),
              "an operator's kind is not an OpKind");
static_assert(every_row([](const OpTypeInfo& t) { return t.free == kind_is_free(t.kind); }),
              "free must hold exactly for leaves, copies, views and weight transforms");
static_assert(every_row([](const OpTypeInfo& t) {
                return t.weight_only == (t.kind == KIND_WEIGHT_TRANSFORM);
              }),
              "weight_only must hold exactly for weight transforms");
static_assert(every_row([](const OpTypeInfo& t) {
                return (t.num_inputs == 0) == (t.kind == KIND_LEAF);
              }),
              "leaves, and only leaves, take no inputs");
static_assert(every_row([](const OpTypeInfo& t) {
                return kind_counts_elements(t.kind) ? t.flops_per_element > 0
                                                    : t.flops_per_element == 0;
              }),
              "FLOPs per element: positive for element-wise, batch-norm and concat "
              "kinds, 0 for the others");
static_assert(every_row([](const OpTypeInfo& t) {
                return t.activation == ACT_NONE ||
                       (t.activation >= ACT_SIGMOID && t.activation <= ACT_TANH &&
                        t.kind == KIND_ELTWISE && t.num_inputs == 1);
              }),
              "only unary element-wise ops apply an activation");

constexpr EnumName kOpKinds[] = {
    {KIND_LEAF, "leaf"},       {KIND_CONV, "conv"},
    {KIND_MATMUL, "matmul"},   {KIND_POOL, "pool"},
    {KIND_ELTWISE, "eltwise"}, {KIND_BATCHNORM, "batchnorm"},
    {KIND_CONCAT, "concat"},   {KIND_COPY, "copy"},
    {KIND_VIEW, "view"},       {KIND_WEIGHT_TRANSFORM, "weight_transform"},
    {KIND_OPAQUE, "opaque"},
};
constexpr bool kinds_in_value_order() {
  for (size_t i = 0; i < std::size(kOpKinds); ++i)
    if (kOpKinds[i].value != static_cast<int>(i)) return false;
  return std::size(kOpKinds) == KIND_OPAQUE + 1;
}
static_assert(kinds_in_value_order(), "every OpKind has a name, in value order");

constexpr EnumName kActivations[] = {
    {ACT_NONE, "NONE"}, {ACT_SIGMOID, "SIGMOID"}, {ACT_RELU, "RELU"}, {ACT_TANH, "TANH"}};
constexpr EnumName kPaddings[] = {{PAD_SAME, "SAME"}, {PAD_VALID, "VALID"}};
constexpr ParamKeyInfo kRuleParamKeys[] = {
    {PM_NUM_INPUTS, "num_inputs", false}, {PM_NUM_OUTPUTS, "num_outputs", false},
    {PM_GROUP, "group", false},           {PM_KERNEL_H, "kernel_h", false},
    {PM_KERNEL_W, "kernel_w", false},     {PM_STRIDE_H, "stride_h", false},
    {PM_STRIDE_W, "stride_w", false},     {PM_PAD, "padding", false},
    {PM_ACTI, "activation", false},       {PM_NUMDIM, "numdim", false},
    {PM_AXIS, "axis", false},             {PM_PERM, "perm", false},
    {PM_MERGE_GCONV_COUNT, "count", false}, {PM_EPSILON, "epsilon", true},
};

}  // namespace

std::vector<OpTypeInfo> op_type_table() {
  return {std::begin(kOpTypes), std::end(kOpTypes)};
}

namespace {

// Row of each type in kOpTypes (-1: none), by type value: shape inference
// and the cost backends look a type up for every op they see.
struct TypeRows {
  int row[kNumOpTypeSlots];
};
constexpr TypeRows type_rows() {
  TypeRows rows{};
  for (int t = 0; t < kNumOpTypeSlots; ++t) rows.row[t] = -1;
  for (size_t i = 0; i < std::size(kOpTypes); ++i)
    if (kOpTypes[i].type >= 0 && kOpTypes[i].type < kNumOpTypeSlots)
      rows.row[kOpTypes[i].type] = static_cast<int>(i);
  return rows;
}
constexpr TypeRows kTypeRows = type_rows();
static_assert(every_row([](const OpTypeInfo& t) { return t.type >= 0 && t.type < kNumOpTypeSlots; }),
              "an operator type is outside [0, kNumOpTypeSlots)");

}  // namespace

const OpTypeInfo* op_type_info(int type) {
  if (type < 0 || type >= kNumOpTypeSlots) return nullptr;
  const int row = kTypeRows.row[type];
  return row < 0 ? nullptr : &kOpTypes[row];
}

std::vector<EnumName> activation_names() {
  return {std::begin(kActivations), std::end(kActivations)};
}

std::vector<EnumName> padding_names() {
  return {std::begin(kPaddings), std::end(kPaddings)};
}

std::vector<EnumName> op_kind_names() {
  return {std::begin(kOpKinds), std::end(kOpKinds)};
}

std::vector<ParamKeyInfo> rule_param_keys() {
  return {std::begin(kRuleParamKeys), std::end(kRuleParamKeys)};
}

const char* op_type_name(int type) {
  const OpTypeInfo* t = op_type_info(type);
  return t ? t->name : "unknown";
}

int op_type_from_name(const std::string& name) {
  for (const auto& t : kOpTypes)
    if (name == t.name) return t.type;
  return -1;
}

bool is_valid_op_type(int type) { return op_type_info(type) != nullptr; }

int num_inputs_expected(int type) {
  const OpTypeInfo* t = op_type_info(type);
  return t ? t->num_inputs : -1;
}

bool is_pattern_op_type(int type) {
  const OpTypeInfo* t = op_type_info(type);
  return t && t->pattern;
}

bool is_free_op_type(int type) {
  const OpTypeInfo* t = op_type_info(type);
  return t && t->free;
}

}  // namespace taso
