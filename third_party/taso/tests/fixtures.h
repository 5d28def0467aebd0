// Small graphs and rules shared by the engine's C++ unit tests.
#ifndef TASO_TESTS_FIXTURES_H_
#define TASO_TESTS_FIXTURES_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "taso/cost.h"
#include "taso/graph.h"
#include "taso/rules.h"

namespace taso_test {

using namespace taso;

inline PatternTensor var(int v) { return PatternTensor{v, 0}; }
inline PatternTensor out(int op, int index = 0) { return PatternTensor{op, index}; }

inline PatternOp pop(int type, std::vector<PatternTensor> inputs,
                     std::vector<std::pair<int, int>> params = {}) {
  PatternOp p;
  p.type = type;
  p.inputs = std::move(inputs);
  p.params = std::move(params);
  return p;
}

inline Rule rule(std::string name, std::vector<PatternOp> src, std::vector<PatternOp> dst,
                 std::vector<std::pair<PatternTensor, PatternTensor>> mapped) {
  Rule r;
  r.name = std::move(name);
  r.src = std::move(src);
  r.dst = std::move(dst);
  r.mapped_outputs = std::move(mapped);
  r.validate();
  return r;
}

// unary(v) -> other(v): a one-op replacement.
inline Rule replace_unary(int from, int to, const std::string& name = "replace") {
  return rule(name, {pop(from, {var(-1)})}, {pop(to, {var(-1)})}, {{out(0), out(0)}});
}

// relu(relu(v)) -> relu(v).
inline Rule double_relu() {
  return rule("double_relu", {pop(OP_RELU, {var(-1)}), pop(OP_RELU, {out(0)})},
              {pop(OP_RELU, {var(-1)})}, {{out(1), out(0)}});
}

// ew_add(a, b) -> ew_add(b, a).
inline Rule commute_add() {
  return rule("commute_add", {pop(OP_EW_ADD, {var(-1), var(-2)})},
              {pop(OP_EW_ADD, {var(-2), var(-1)})}, {{out(0), out(0)}});
}

// A stride-1 SAME conv without activation followed by relu -> one conv
// with a fused relu.
inline Rule fuse_conv_relu() {
  const std::vector<std::pair<int, int>> same1 = {
      {PM_STRIDE_H, 1}, {PM_STRIDE_W, 1}, {PM_PAD, PAD_SAME}};
  std::vector<std::pair<int, int>> src_params = same1, dst_params = same1;
  src_params.push_back({PM_ACTI, ACT_NONE});
  dst_params.push_back({PM_ACTI, ACT_RELU});
  return rule("fuse_conv_relu",
              {pop(OP_CONV2D, {var(-1), var(-2)}, src_params), pop(OP_RELU, {out(0)})},
              {pop(OP_CONV2D, {var(-1), var(-2)}, dst_params)}, {{out(1), out(0)}});
}

inline OpParams conv_params(int stride) {
  OpParams p;
  p.stride_h = p.stride_w = stride;
  p.padding = PAD_SAME;
  return p;
}

// x[1,4,8,8] -> conv(w1, stride 1) -> relu -> conv(w2, stride 2) -> relu
//   -> relu -> tanh; output: the tanh.
struct ConvChain {
  GraphPtr graph;
  int64_t conv1 = 0, relu1 = 0, conv2 = 0, relu2 = 0, relu3 = 0, tanh = 0;
};

inline ConvChain conv_chain() {
  ConvChain c;
  GraphBuilder b;
  TensorRef x = b.input("x", {1, 4, 8, 8});
  TensorRef w1 = b.weight("w1", {4, 4, 3, 3});
  TensorRef w2 = b.weight("w2", {4, 4, 3, 3});
  c.conv1 = b.add(OP_CONV2D, conv_params(1), {x, w1});
  c.relu1 = b.add(OP_RELU, {}, {{c.conv1, 0}});
  c.conv2 = b.add(OP_CONV2D, conv_params(2), {{c.relu1, 0}, w2});
  c.relu2 = b.add(OP_RELU, {}, {{c.conv2, 0}});
  c.relu3 = b.add(OP_RELU, {}, {{c.relu2, 0}});
  c.tanh = b.add(OP_TANH, {}, {{c.relu3, 0}});
  c.graph = b.build({{c.tanh, 0}});
  return c;
}

// Two branches of the same shape from one input, added: x -> relu -> a,
// x -> sigmoid -> b, a + b; plus a + x from the add (a second add).
inline GraphPtr two_adds() {
  GraphBuilder b;
  TensorRef x = b.input("x", {2, 16});
  int64_t a = b.add(OP_RELU, {}, {x});
  int64_t s = b.add(OP_SIGMOID, {}, {x});
  int64_t add1 = b.add(OP_EW_ADD, {}, {{a, 0}, {s, 0}});
  int64_t add2 = b.add(OP_EW_ADD, {}, {{add1, 0}, x});
  return b.build({{add2, 0}});
}

// relu(v1), relu(v2) -> split(relu(concat(v1, v2))) along `axis`: a pair
// of unconnected source ops, which matches every two relus (those reading
// each other are skipped), and whose split takes its sizes from the relus'
// outputs.
inline Rule relu_pair_concat_split(int axis) {
  return rule("relu_pair_" + std::to_string(axis),
              {pop(OP_RELU, {var(-1)}), pop(OP_RELU, {var(-2)})},
              {pop(OP_CONCAT, {var(-1), var(-2)}, {{PM_AXIS, axis}, {PM_NUM_INPUTS, 2}}),
               pop(OP_RELU, {out(0)}),
               pop(OP_SPLIT, {out(1)}, {{PM_AXIS, axis}, {PM_NUM_OUTPUTS, 2}})},
              {{out(0), out(2, 0)}, {out(1), out(2, 1)}});
}

// `blocks` blocks from x[1,4,8,8], each two branches from the previous
// block's output p: a = relu(conv3x3(p)) [1,4,8,8] and b = relu(conv1x1(p))
// [1,8,8,8], joined by p' = a + conv1x1(b) [1,4,8,8]; output: the last p'.
// Its relus pair along axis 1 (N, H, W agree) and, of equal channels only,
// along axis 0; most pairs read each other.
inline GraphPtr branching_chain(int blocks) {
  GraphBuilder b;
  TensorRef p = b.input("x", {1, 4, 8, 8});
  for (int k = 0; k < blocks; ++k) {
    const std::string n = std::to_string(k);
    const TensorRef wa = b.weight("wa" + n, {4, 4, 3, 3});
    const TensorRef wb = b.weight("wb" + n, {8, 4, 1, 1});
    const TensorRef wc = b.weight("wc" + n, {4, 8, 1, 1});
    const int64_t a = b.add(OP_RELU, {}, {{b.add(OP_CONV2D, conv_params(1), {p, wa}), 0}});
    const int64_t r = b.add(OP_RELU, {}, {{b.add(OP_CONV2D, conv_params(1), {p, wb}), 0}});
    const int64_t c = b.add(OP_CONV2D, conv_params(1), {{r, 0}, wc});
    p = {b.add(OP_EW_ADD, {}, {{a, 0}, {c, 0}}), 0};
  }
  return b.build({p});
}

inline std::unique_ptr<CostBackend> fitted() {
  const std::vector<std::string> classes = {"conv",      "matmul", "pool", "eltwise",
                                            "batchnorm", "concat", "copy"};
  std::vector<std::vector<double>> coefficients;
  for (size_t k = 0; k < classes.size(); ++k)
    coefficients.push_back({0.01 * static_cast<double>(k + 1), 0.5, 0.25});
  return make_fitted_backend("test", classes, coefficients);
}

}  // namespace taso_test

#endif  // TASO_TESTS_FIXTURES_H_
