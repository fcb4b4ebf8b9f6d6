// cuDNN handles: one per (device, stream) for the ops, a second one for
// benchmarking on behalf of other GPUs' kernels, and those that build plans
// on threads. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_CUDNN_HANDLES_H_
#define TF_UCUDNN_ENGINE_CUDNN_HANDLES_H_

#if GOOGLE_CUDA

#include <mutex>
#include <string>
#include <vector>

#include "cuda_runtime_api.h"
#include "cudnn.h"
#include "cc/engine/status.h"

namespace ucudnn {

// One cuDNN handle per (device, stream), with the mutex that serialises its use
// (a handle may not be used by two threads at once).
struct CudnnHandle {
  cudnnHandle_t handle = nullptr;
  std::mutex mu;
};
// The ops' handle of (device, stream).
Status GetCudnnHandle(int device, cudaStream_t stream, CudnnHandle** out);
// A second handle of (device, stream), used only to benchmark for kernels of
// other GPUs (UCUDNN_BENCHMARK_DEVICES), so that it never waits on the ops'.
Status GetBenchmarkHandle(int device, cudaStream_t stream, CudnnHandle** out);

// `count` further handles of (device, stream), made once and kept, that
// finalize execution plans on threads of their own (a handle may not be used
// by two threads at once; DescriptorCache::BuildGraphPlans). A plan finalized
// with one runs with any handle of its device.
Status GetPlanBuildHandles(int device, cudaStream_t stream, int count,
                           std::vector<CudnnHandle*>* out);

// cudnnGetVersion() as "9.19.0".
std::string CudnnVersionString();

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_CUDNN_HANDLES_H_
