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

// A start and a stop event, created on first use and destroyed with their
// owner; times runs of work enqueued on a stream (the benchmarks' timing).
class EventPair {
 public:
  EventPair() = default;
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
  }

  // Calls `run()` `runs` times between the two events on `stream` and waits
  // for them: *ms is the mean elapsed milliseconds per run, or -1 if a run
  // returned false (it stops there). `run` enqueues its work on `stream`.
  template <typename Run>
  Status TimeRuns(cudaStream_t stream, int runs, Run run, double* ms) {
    if (start_ == nullptr) UCUDNN_CUDA_OK(cudaEventCreate(&start_));
    if (stop_ == nullptr) UCUDNN_CUDA_OK(cudaEventCreate(&stop_));
    bool ran = true;
    UCUDNN_CUDA_OK(cudaEventRecord(start_, stream));
    for (int i = 0; ran && i < runs; ++i) ran = run();
    UCUDNN_CUDA_OK(cudaEventRecord(stop_, stream));
    UCUDNN_CUDA_OK(cudaEventSynchronize(stop_));
    float elapsed = 0;
    UCUDNN_CUDA_OK(cudaEventElapsedTime(&elapsed, start_, stop_));
    *ms = ran ? static_cast<double>(elapsed) / runs : -1.0;
    return Status();
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_CUDA_CHECK_H_
