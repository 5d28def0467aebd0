// What the cudnn cost backend runs for one op configuration, as plain host
// data (descriptor dimensions, GEMM sizes, copy geometry). Kept free of CUDA
// headers so that it is compiled, and tested, in every build; cudnn.cc turns
// a plan into cuDNN/cuBLAS/CUDA runtime calls.
#ifndef TASO_SRC_COST_CUDNN_PLAN_H_
#define TASO_SRC_COST_CUDNN_PLAN_H_

#include <cstddef>
#include <string>
#include <vector>

#include "taso/ops.h"

namespace taso {

// Dimensions of a packed (NCHW-ordered) float32 cuDNN tensor descriptor.
using Dims = std::vector<int>;

enum class CudnnKind {
  kConv,        // cudnnConvolution[BiasActivation]Forward (+ activation)
  kGemm,        // cublasSgemmStridedBatched (+ cudnnActivationForward)
  kPool,        // cudnnPoolingForward (+ cudnnActivationForward)
  kActivation,  // cudnnActivationForward
  kOpTensor,    // cudnnOpTensor
  kBatchNorm,   // cudnnBatchNormalizationForwardInference
  kConcat,      // one cudaMemcpy2DAsync per input
  kAnalytic,    // not measured: the analytic roofline of the device
};

struct CudnnPlan {
  CudnnKind kind = CudnnKind::kAnalytic;
  int activation = ACT_NONE;  // applied after the main call (or fused)
  // Conv: activation ACT_RELU runs fused in cudnnConvolutionBiasActivationForward
  // (zero bias); sigmoid and tanh run as a second cudnnActivationForward.
  bool fused_activation = false;

  // Conv and pool. cuDNN pads symmetrically; an asymmetric SAME padding
  // (TF splits an odd total with the extra row at the bottom/right) is
  // planned as symmetric padding of the smaller side over an input that is
  // larger by the difference: output shape and MACs are exact, the explicit
  // pad copy a framework would add is not charged.
  Dims x, w, y;  // conv: input, filter [O, C/g, kh, kw], output
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
  int window_h = 0, window_w = 0;  // pool
  int groups = 1;                  // conv
  bool max_pool = false;

  // GEMM, row-major C[b] = A[b] (m x k) * B[b] (k x n).
  int batch = 1, m = 0, n = 0, k = 0;

  // OpTensor: C = op(alpha1 * A, alpha2 * B); A has C's shape, B broadcasts
  // (dims equal to C's or 1). Dims are collapsed to 4 or 5.
  Dims a, b, c;
  bool multiply = false;  // false: CUDNN_OP_TENSOR_ADD
  float alpha1 = 1.f, alpha2 = 1.f;
  // Set when the plan only approximates the op (documented in docs/engine.md).
  std::string approximation;

  // Batch norm: x is y; vec is [1, C, 1, 1].
  Dims vec;
  double epsilon = 0;

  // Concat: `rows` rows; input i contributes `widths[i]` contiguous bytes to
  // each output row of `out_width` bytes.
  size_t rows = 0;
  std::vector<size_t> widths;
  size_t out_width = 0;

  // A one-line description (tests and diagnostics).
  std::string describe() const;
};

// Plans one non-free op. Throws EngineError for ops the backend cannot run
// or dimensions beyond cuDNN's int range.
CudnnPlan plan_cudnn_op(const OpConfig& op);

// Number of floats of a packed tensor with these dims.
size_t dims_elements(const Dims& d);

}  // namespace taso

#endif  // TASO_SRC_COST_CUDNN_PLAN_H_
