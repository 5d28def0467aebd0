// cuDNN/cuBLAS (GPU) cost backend: compiled in with -DTASO_WITH_CUDNN
// (setup.py defines it when the CUDA runtime, cuDNN and cuBLAS are found).
//
// Each op configuration is planned on the host (cudnn_plan.h), run on GPU 0
// with the cuDNN/cuBLAS call a framework would use, and timed with CUDA
// events on the backend's own stream, after `warmup` runs: the median of
// `repeats` replays of a CUDA graph of kRunsPerGraph runs (divided by their
// number), or, without graph timing, of `repeats` single runs. Same
// conventions as the oneDNN backend: free ops are never measured, measurements are memoized by OpConfig::key() and optionally
// appended to a "key<TAB>ms" cache file. Plain host C++ (no nvcc): every
// kernel comes from a library or from cudaMemcpy2DAsync. Every CUDA, cuDNN
// and cuBLAS failure is an EngineError naming the op and the call.
#include "taso/cost.h"

#ifdef TASO_WITH_CUDNN

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <iostream>
#include <vector>

#include "cudnn_plan.h"
#include "cudnn_util.h"

#endif  // TASO_WITH_CUDNN

namespace taso {

#ifndef TASO_WITH_CUDNN

bool cudnn_available() { return false; }

const char kNotBuilt[] =
    "the cudnn cost backend is not built: setup.py found no CUDA runtime, "
    "cuDNN and cuBLAS (set CUDA_HOME and reinstall)";

std::unique_ptr<CostBackend> make_cudnn_backend(const std::string&, int, int, bool) {
  throw EngineError(kNotBuilt);
}

void cudnn_check_descriptors(const OpConfig&) { throw EngineError(kNotBuilt); }

#else  // TASO_WITH_CUDNN

bool cudnn_available() { return true; }

namespace {

using cudnn_util::Buffer;
using cudnn_util::Checker;
using cudnn_util::Owned;

using TensorDesc = Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Owned<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;
using ActDesc = Owned<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;
using OpDesc = Owned<cudnnOpTensorDescriptor_t, cudnnDestroyOpTensorDescriptor>;
using CudnnHandle = Owned<cudnnHandle_t, cudnnDestroy>;
using CublasHandle = Owned<cublasHandle_t, cublasDestroy>;
using Stream = Owned<cudaStream_t, cudaStreamDestroy>;
using Event = Owned<cudaEvent_t, cudaEventDestroy>;
using CudaGraph = Owned<cudaGraph_t, cudaGraphDestroy>;
using CudaGraphExec = Owned<cudaGraphExec_t, cudaGraphExecDestroy>;

// Graph timing: runs of one op captured into one CUDA graph, so that a
// replay measures the GPU's work for them back to back, without the host's
// launch of each call.
constexpr int kRunsPerGraph = 20;

// Largest convolution workspace offered to the algorithm search (and never
// more than half of the free device memory).
constexpr size_t kMaxWorkspaceBytes = size_t{1} << 30;

const float kOne = 1.f;
const float kZero = 0.f;

TensorDesc make_tensor(const Dims& d, const Checker& ck_) {
  TensorDesc t;
  CK(cudnnCreateTensorDescriptor(t.out()));
  std::vector<int> strides(d.size());
  int stride = 1;
  for (size_t i = d.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= d[i];
  }
  CK(cudnnSetTensorNdDescriptor(t.get(), CUDNN_DATA_FLOAT, static_cast<int>(d.size()), d.data(),
                                strides.data()));
  return t;
}

ActDesc make_activation(int act, const Checker& ck_) {
  cudnnActivationMode_t mode = act == ACT_RELU      ? CUDNN_ACTIVATION_RELU
                               : act == ACT_SIGMOID ? CUDNN_ACTIVATION_SIGMOID
                                                    : CUDNN_ACTIVATION_TANH;
  ActDesc a;
  CK(cudnnCreateActivationDescriptor(a.out()));
  CK(cudnnSetActivationDescriptor(a.get(), mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  return a;
}

// Output dims cuDNN derives must be the engine's (else the plan is wrong).
void expect_output(const Dims& got, const Dims& want, const char* call, const Checker& ck) {
  if (got != want)
    throw EngineError("cudnn backend: " + ck.op() + ": " + call +
                      " disagrees with the planned output shape");
}

// Every cuDNN descriptor of one plan. Building them needs no device (cuDNN
// descriptors are host objects), so plans are checked against the real
// library on machines without a GPU too (cudnn_check_descriptors).
struct Descriptors {
  TensorDesc x, y, a, b, c, vec, bias;
  FilterDesc w;
  ConvDesc conv;
  PoolDesc pool;
  ActDesc act;
  OpDesc op;
};

Descriptors make_descriptors(const CudnnPlan& p, const Checker& ck_) {
  Descriptors d;
  if (p.activation != ACT_NONE) d.act = make_activation(p.activation, ck_);
  Dims out(4);
  switch (p.kind) {
    case CudnnKind::kConv:
      d.x = make_tensor(p.x, ck_);
      d.y = make_tensor(p.y, ck_);
      CK(cudnnCreateFilterDescriptor(d.w.out()));
      CK(cudnnSetFilter4dDescriptor(d.w.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, p.w[0],
                                    p.w[1], p.w[2], p.w[3]));
      CK(cudnnCreateConvolutionDescriptor(d.conv.out()));
      CK(cudnnSetConvolution2dDescriptor(d.conv.get(), p.pad_h, p.pad_w, p.stride_h, p.stride_w,
                                         1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
      CK(cudnnSetConvolutionGroupCount(d.conv.get(), p.groups));
      CK(cudnnGetConvolution2dForwardOutputDim(d.conv.get(), d.x.get(), d.w.get(), &out[0],
                                               &out[1], &out[2], &out[3]));
      expect_output(out, p.y, "cudnnGetConvolution2dForwardOutputDim", ck_);
      if (p.fused_activation) d.bias = make_tensor({1, p.y[1], 1, 1}, ck_);
      break;
    case CudnnKind::kPool:
      d.x = make_tensor(p.x, ck_);
      d.y = make_tensor(p.y, ck_);
      CK(cudnnCreatePoolingDescriptor(d.pool.out()));
      CK(cudnnSetPooling2dDescriptor(
          d.pool.get(), p.max_pool ? CUDNN_POOLING_MAX : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING,
          CUDNN_NOT_PROPAGATE_NAN, p.window_h, p.window_w, p.pad_h, p.pad_w, p.stride_h,
          p.stride_w));
      CK(cudnnGetPooling2dForwardOutputDim(d.pool.get(), d.x.get(), &out[0], &out[1], &out[2],
                                           &out[3]));
      expect_output(out, p.y, "cudnnGetPooling2dForwardOutputDim", ck_);
      break;
    case CudnnKind::kGemm:
      if (p.activation != ACT_NONE) d.y = make_tensor(p.y, ck_);
      break;
    case CudnnKind::kActivation:
      d.x = make_tensor(p.x, ck_);
      break;
    case CudnnKind::kOpTensor:
      d.a = make_tensor(p.a, ck_);
      d.b = make_tensor(p.b, ck_);
      d.c = make_tensor(p.c, ck_);
      CK(cudnnCreateOpTensorDescriptor(d.op.out()));
      CK(cudnnSetOpTensorDescriptor(d.op.get(),
                                    p.multiply ? CUDNN_OP_TENSOR_MUL : CUDNN_OP_TENSOR_ADD,
                                    CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN));
      break;
    case CudnnKind::kBatchNorm:
      d.x = make_tensor(p.x, ck_);
      d.vec = make_tensor(p.vec, ck_);
      break;
    case CudnnKind::kConcat:
    case CudnnKind::kAnalytic:
      break;
  }
  return d;
}

class CudnnBackend : public CostBackend {
 public:
  CudnnBackend(const std::string& cache_path, int warmup, int repeats, bool graph_timing)
      : ck_("cudnn backend", "setup"), cache_path_(cache_path), warmup_(warmup),
        repeats_(repeats), graph_timing_(graph_timing) {
    if (warmup < 0 || repeats < 1)
      throw EngineError("cudnn backend: warmup must be >= 0 and repeats >= 1");
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear it for anyone else in the process
      throw EngineError(std::string("cudnn backend: no CUDA device: cudaGetDeviceCount: ") +
                        cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
    }
    if (count < 1)
      throw EngineError("cudnn backend: no CUDA device: cudaGetDeviceCount found 0 devices");
    CK(cudaSetDevice(device_));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, device_));
    device_name_ = prop.name;
    // Ops the backend cannot run (opaque) fall back to the roofline of the
    // closest profiled GPU generation.
    fallback_ = make_analytic_backend(prop.major >= 9 ? "h100" : "v100");
    CK(cudaStreamCreateWithFlags(stream_.out(), cudaStreamNonBlocking));
    CK(cudaEventCreate(start_.out()));
    CK(cudaEventCreate(stop_.out()));
    CK(cudnnCreate(cudnn_.out()));
    CK(cudnnSetStream(cudnn_.get(), stream_.get()));
    CK(cublasCreate(cublas_.out()));
    CK(cublasSetStream(cublas_.get(), stream_.get()));
    // TF32 tensor cores for float32 GEMMs, as TensorFlow allows by default
    // and as cuDNN's default math type allows for convolutions.
    CK(cublasSetMathMode(cublas_.get(), CUBLAS_TF32_TENSOR_OP_MATH));
    if (!cache_path_.empty()) load_cost_cache(cache_path_, "cudnn backend", &cache_);
  }

  std::string name() const override { return "cudnn"; }

 protected:
  double measure(const OpConfig& op) override {
    std::lock_guard<std::mutex> lock(measure_mu_);
    const CudnnPlan plan = plan_cudnn_op(op);
    double ms;
    if (plan.kind == CudnnKind::kAnalytic) {
      ms = fallback_->op_cost(op);
    } else {
      ck_.set_op(std::string(op_type_name(op.type)) + " (op " + op.key() + ")");
      CK(cudaSetDevice(device_));  // the calling thread may be new
      ms = run_plan(plan);
      ck_.set_op("setup");
    }
    if (!cache_path_.empty()) append_cost_cache(cache_path_, op.key(), ms);
    return ms;
  }

 private:
  // A device buffer of `floats` floats, every element 0.01 (finite, no
  // denormals: garbage could skew the timing).
  Buffer filled(size_t floats) {
    Buffer b(floats * sizeof(float), ck_);
    const size_t chunk = std::min<size_t>(floats, size_t{1} << 22);
    if (staging_.size() < chunk) staging_.assign(chunk, 0.01f);
    for (size_t done = 0; done < floats; done += chunk) {
      const size_t n = std::min(chunk, floats - done);
      CK(cudaMemcpy(static_cast<float*>(b.get()) + done, staging_.data(), n * sizeof(float),
                    cudaMemcpyHostToDevice));
    }
    return b;
  }
  Buffer filled(const Dims& d) { return filled(dims_elements(d)); }

  // Times `run` (which enqueues work on stream_) with CUDA events.
  template <typename F>
  double time(F&& run) {
    for (int i = 0; i < warmup_; ++i) run();
    CK(cudaStreamSynchronize(stream_.get()));
    if (graph_timing_) {
      try {
        return time_graph(run);
      } catch (const EngineError& e) {
        // A call that cannot be captured: this op is timed launch by launch.
        std::cerr << "cudnn backend: graph timing failed, timing launches instead: "
                  << e.what() << "\n";
        CK(cudaStreamSynchronize(stream_.get()));
      }
    }
    return median_ms(run, 1);
  }

  // The median of `repeats_` samples, each the time between a pair of events
  // around `enqueue` divided by the `runs` it enqueues.
  template <typename G>
  double median_ms(G& enqueue, int runs) {
    std::vector<double> samples;
    for (int i = 0; i < repeats_; ++i) {
      CK(cudaEventRecord(start_.get(), stream_.get()));
      enqueue();
      CK(cudaEventRecord(stop_.get(), stream_.get()));
      CK(cudaEventSynchronize(stop_.get()));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, start_.get(), stop_.get()));
      samples.push_back(static_cast<double>(ms) / runs);
    }
    std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
    return samples[samples.size() / 2];
  }

  // The median over `repeats` replays of a CUDA graph of kRunsPerGraph
  // runs, divided by kRunsPerGraph (after one untimed replay).
  template <typename F>
  double time_graph(F& run) {
    CudaGraph graph;
    CK(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal));
    try {
      for (int k = 0; k < kRunsPerGraph; ++k) run();
    } catch (...) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream_.get(), &partial);  // leave the stream usable
      if (partial) cudaGraphDestroy(partial);
      cudaGetLastError();
      throw;
    }
    CK(cudaStreamEndCapture(stream_.get(), graph.out()));
    CudaGraphExec exec;
    CK(cudaGraphInstantiateWithFlags(exec.out(), graph.get(), 0));
    auto replay = [&] { CK(cudaGraphLaunch(exec.get(), stream_.get())); };
    replay();
    CK(cudaStreamSynchronize(stream_.get()));
    return median_ms(replay, kRunsPerGraph);
  }

  double run_plan(const CudnnPlan& p) {
    const Descriptors d = make_descriptors(p, ck_);
    switch (p.kind) {
      case CudnnKind::kConv: return run_conv(p, d);
      case CudnnKind::kPool: return run_pool(p, d);
      case CudnnKind::kGemm: return run_gemm(p, d);
      case CudnnKind::kActivation: return run_activation(p, d);
      case CudnnKind::kOpTensor: return run_op_tensor(p, d);
      case CudnnKind::kBatchNorm: return run_batchnorm(p, d);
      case CudnnKind::kConcat: return run_concat(p);
      case CudnnKind::kAnalytic: break;
    }
    throw EngineError("cudnn backend: unexpected plan " + p.describe());
  }

  double run_conv(const CudnnPlan& p, const Descriptors& d) {
    Buffer x = filled(p.x), w = filled(p.w), y = filled(p.y);
    // Fastest algorithm within the workspace limit (results come sorted by
    // time); its math type (tensor ops or not) is kept with it.
    size_t free_bytes = 0, total_bytes = 0;
    CK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const size_t limit = std::min(kMaxWorkspaceBytes, free_bytes / 2);
    Buffer search_ws(limit, ck_);
    int max_algos = 0, returned = 0;
    CK(cudnnGetConvolutionForwardAlgorithmMaxCount(cudnn_.get(), &max_algos));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(std::max(max_algos, 1)));
    CK(cudnnFindConvolutionForwardAlgorithmEx(cudnn_.get(), d.x.get(), x.get(), d.w.get(),
                                              w.get(), d.conv.get(), d.y.get(), y.get(),
                                              max_algos, &returned, perf.data(),
                                              search_ws.get(), limit));
    const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
    for (int i = 0; i < returned && !best; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= limit) best = &perf[i];
    if (!best)
      throw EngineError("cudnn backend: " + ck_.op() +
                        ": cudnnFindConvolutionForwardAlgorithmEx found no algorithm within " +
                        std::to_string(limit >> 20) + " MiB of workspace");
    const cudnnConvolutionFwdAlgo_t algo = best->algo;
    const size_t ws_bytes = best->memory;
    CK(cudnnSetConvolutionMathType(d.conv.get(), best->mathType));
    search_ws = Buffer();  // give the search workspace back before timing
    Buffer ws(ws_bytes, ck_);

    if (p.fused_activation) {
      // y = relu(conv(x, w) + 0 * z + bias), bias zero: one cuDNN call.
      Buffer bias(static_cast<size_t>(p.y[1]) * sizeof(float), ck_);
      CK(cudaMemset(bias.get(), 0, bias.bytes()));
      return time([&] {
        CK(cudnnConvolutionBiasActivationForward(
            cudnn_.get(), &kOne, d.x.get(), x.get(), d.w.get(), w.get(), d.conv.get(), algo,
            ws.get(), ws_bytes, &kZero, d.y.get(), y.get(), d.bias.get(), bias.get(),
            d.act.get(), d.y.get(), y.get()));
      });
    }
    return time([&] {
      CK(cudnnConvolutionForward(cudnn_.get(), &kOne, d.x.get(), x.get(), d.w.get(), w.get(),
                                 d.conv.get(), algo, ws.get(), ws_bytes, &kZero, d.y.get(),
                                 y.get()));
      if (p.activation != ACT_NONE)
        CK(cudnnActivationForward(cudnn_.get(), d.act.get(), &kOne, d.y.get(), y.get(), &kZero,
                                  d.y.get(), y.get()));
    });
  }

  double run_pool(const CudnnPlan& p, const Descriptors& d) {
    Buffer x = filled(p.x), y = filled(p.y);
    return time([&] {
      CK(cudnnPoolingForward(cudnn_.get(), d.pool.get(), &kOne, d.x.get(), x.get(), &kZero,
                             d.y.get(), y.get()));
      if (p.activation != ACT_NONE)
        CK(cudnnActivationForward(cudnn_.get(), d.act.get(), &kOne, d.y.get(), y.get(), &kZero,
                                  d.y.get(), y.get()));
    });
  }

  double run_gemm(const CudnnPlan& p, const Descriptors& d) {
    const long long batch = p.batch, m = p.m, n = p.n, k = p.k;
    Buffer a = filled(static_cast<size_t>(batch * m * k));
    Buffer b = filled(static_cast<size_t>(batch * k * n));
    Buffer c = filled(static_cast<size_t>(batch * m * n));
    // Row-major C = A B is column-major C^T = B^T A^T: swap the operands.
    return time([&] {
      CK(cublasSgemmStridedBatched(cublas_.get(), CUBLAS_OP_N, CUBLAS_OP_N, p.n, p.m, p.k, &kOne,
                                   static_cast<const float*>(b.get()), p.n, k * n,
                                   static_cast<const float*>(a.get()), p.k, m * k, &kZero,
                                   static_cast<float*>(c.get()), p.n, m * n, p.batch));
      if (p.activation != ACT_NONE)
        CK(cudnnActivationForward(cudnn_.get(), d.act.get(), &kOne, d.y.get(), c.get(), &kZero,
                                  d.y.get(), c.get()));
    });
  }

  double run_activation(const CudnnPlan& p, const Descriptors& d) {
    Buffer x = filled(p.x), y = filled(p.x);
    return time([&] {
      CK(cudnnActivationForward(cudnn_.get(), d.act.get(), &kOne, d.x.get(), x.get(), &kZero,
                                d.x.get(), y.get()));
    });
  }

  double run_op_tensor(const CudnnPlan& p, const Descriptors& d) {
    Buffer a = filled(p.a), b = filled(p.b), c = filled(p.c);
    return time([&] {
      CK(cudnnOpTensor(cudnn_.get(), d.op.get(), &p.alpha1, d.a.get(), a.get(), &p.alpha2,
                       d.b.get(), b.get(), &kZero, d.c.get(), c.get()));
    });
  }

  double run_batchnorm(const CudnnPlan& p, const Descriptors& d) {
    Buffer x = filled(p.x), y = filled(p.x);
    Buffer scale = filled(p.vec), bias = filled(p.vec), mean = filled(p.vec),
           var = filled(p.vec);
    const double eps = std::max(p.epsilon, static_cast<double>(CUDNN_BN_MIN_EPSILON));
    return time([&] {
      CK(cudnnBatchNormalizationForwardInference(
          cudnn_.get(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, d.x.get(), x.get(), d.x.get(),
          y.get(), d.vec.get(), scale.get(), bias.get(), mean.get(), var.get(), eps));
    });
  }

  double run_concat(const CudnnPlan& p) {
    std::vector<Buffer> inputs;
    for (size_t width : p.widths) inputs.push_back(filled(p.rows * width / sizeof(float)));
    Buffer out = filled(p.rows * p.out_width / sizeof(float));
    return time([&] {
      size_t offset = 0;
      for (size_t i = 0; i < inputs.size(); ++i) {
        CK(cudaMemcpy2DAsync(static_cast<char*>(out.get()) + offset, p.out_width,
                             inputs[i].get(), p.widths[i], p.widths[i], p.rows,
                             cudaMemcpyDeviceToDevice, stream_.get()));
        offset += p.widths[i];
      }
    });
  }

  // Declared first: destroyed last, after every resource that reports to it.
  Checker ck_;
  int device_ = 0;
  std::string device_name_;
  // Handles: destroyed in reverse order, the library handles before the
  // stream they are bound to.
  Stream stream_;
  Event start_, stop_;
  CudnnHandle cudnn_;
  CublasHandle cublas_;
  std::string cache_path_;
  int warmup_;
  int repeats_;
  bool graph_timing_;
  std::unique_ptr<CostBackend> fallback_;
  std::vector<float> staging_;
  std::mutex measure_mu_;
};

}  // namespace

std::unique_ptr<CostBackend> make_cudnn_backend(const std::string& cache_path, int warmup,
                                                int repeats, bool graph_timing) {
  return std::make_unique<CudnnBackend>(cache_path, warmup, repeats, graph_timing);
}

void cudnn_check_descriptors(const OpConfig& op) {
  const CudnnPlan plan = plan_cudnn_op(op);
  Checker ck("cudnn backend", std::string(op_type_name(op.type)) + " (op " + op.key() + ")");
  make_descriptors(plan, ck);
}

#endif  // TASO_WITH_CUDNN

}  // namespace taso
