// cuDNN/cuBLAS cost backend: compiled in with -DTASO_WITH_CUDNN (setup.py
// defines it when the CUDA runtime, cuDNN and cuBLAS are found).
#include "taso/cost.h"

namespace taso {

#ifndef TASO_WITH_CUDNN

bool cudnn_available() { return false; }

std::unique_ptr<CostBackend> make_cudnn_backend(const std::string&, int, int) {
  throw EngineError(
      "the cudnn cost backend is not built: setup.py found no CUDA runtime, "
      "cuDNN and cuBLAS (set CUDA_HOME and reinstall)");
}

#endif  // TASO_WITH_CUDNN

}  // namespace taso
