// Turns a failed cuDNN or CUDA runtime call into the engine's Status, naming
// the call: the cuDNN backend and its graph-API candidates share these. And
// CUDA events for timing, destroyed with their owner.
#ifndef TF_UCUDNN_ENGINE_CUDA_CHECK_H_
#define TF_UCUDNN_ENGINE_CUDA_CHECK_H_

#if GOOGLE_CUDA

#include <string>

#include "cuda_runtime_api.h"
#include "cudnn.h"
#include "cc/kernels/engine/status.h"

#define UCUDNN_CUDNN_OK(expr)                                                          \
  do {                                                                                 \
    cudnnStatus_t _s = (expr);                                                         \
    if (_s != CUDNN_STATUS_SUCCESS) {                                                  \
      return ::ucudnn::Status::Internal(std::string("cuDNN error in ") + #expr + ": " + \
                                        cudnnGetErrorString(_s));                      \
    }                                                                                  \
  } while (0)

#define UCUDNN_CUDA_OK(expr)                                                           \
  do {                                                                                 \
    cudaError_t _e = (expr);                                                           \
    if (_e != cudaSuccess) {                                                           \
      return ::ucudnn::Status::Internal(std::string("CUDA error in ") + #expr + ": " +  \
                                        cudaGetErrorString(_e));                       \
    }                                                                                  \
  } while (0)

namespace ucudnn {

// A start and a stop event (cudaEventCreate by the user; destroyed here).
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() = default;
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_CUDA_CHECK_H_
