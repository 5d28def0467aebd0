// RAII owners and error checks for the cudnn cost backend. Include only
// where TASO_WITH_CUDNN is defined (needs the CUDA, cuDNN and cuBLAS headers).
#ifndef TASO_SRC_COST_CUDNN_UTIL_H_
#define TASO_SRC_COST_CUDNN_UTIL_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <string>

#include "taso/ops.h"

namespace taso {
namespace cudnn_util {

// Turns a failed CUDA runtime, cuDNN or cuBLAS status into an EngineError
// "<owner>: <op>: <function> failed: <status name>: <description>".
class Checker {
 public:
  Checker(std::string owner, std::string op) : owner_(std::move(owner)), op_(std::move(op)) {}
  void set_op(std::string op) { op_ = std::move(op); }
  const std::string& op() const { return op_; }

  void check(cudaError_t e, const char* call) const {
    if (e != cudaSuccess) {
      cudaGetLastError();  // the error is reported here; do not leave it pending
      fail(call, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
    }
  }
  void check(cudnnStatus_t s, const char* call) const {
    if (s != CUDNN_STATUS_SUCCESS) fail(call, cudnnGetErrorString(s));
  }
  void check(cublasStatus_t s, const char* call) const {
    if (s != CUBLAS_STATUS_SUCCESS)
      fail(call, std::string(cublasGetStatusName(s)) + ": " + cublasGetStatusString(s));
  }

 private:
  [[noreturn]] void fail(const char* call, const std::string& status) const {
    // `call` is the checked expression; its function name is enough.
    std::string name(call);
    name = name.substr(0, name.find('('));
    throw EngineError(owner_ + ": " + op_ + ": " + name + " failed: " + status);
  }

  std::string owner_;
  std::string op_;
};

// Checks a CUDA/cuDNN/cuBLAS call with the Checker `ck_` in scope.
#define CK(call) ck_.check((call), #call)

// Owns one handle or descriptor (a pointer type) and destroys it once.
// `out()` hands the slot to a create function.
template <typename T, auto Destroy>
class Owned {
 public:
  Owned() = default;
  ~Owned() { reset(); }
  Owned(Owned&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = o.h_;
      o.h_ = nullptr;
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;

  T get() const { return h_; }
  T* out() {
    reset();
    return &h_;
  }

 private:
  void reset() {
    if (h_) Destroy(h_);  // destruction errors cannot be reported usefully
    h_ = nullptr;
  }
  T h_ = nullptr;
};

// Owns `bytes` of device memory (none for 0 bytes).
class Buffer {
 public:
  Buffer() = default;
  Buffer(size_t bytes, const Checker& ck) : bytes_(bytes) {
    if (bytes > 0) ck.check(cudaMalloc(&p_, bytes), "cudaMalloc");
  }
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) {
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = o.p_;
      bytes_ = o.bytes_;
      o.p_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
  }
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace cudnn_util
}  // namespace taso

#endif  // TASO_SRC_COST_CUDNN_UTIL_H_
