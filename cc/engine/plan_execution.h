// Executing a plan: the buffers every pass needs besides its workspace, and
// (in plan_execution.cc) CudnnKernel::Run, the one path that runs a plan's
// micro-batches, legacy algorithms and graph-API engines alike, on the
// caller's stream with the caller's memory. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_PLAN_EXECUTION_H_
#define TF_UCUDNN_ENGINE_PLAN_EXECUTION_H_

#if GOOGLE_CUDA

#include <cstdint>

#include "cuda_runtime_api.h"
#include "cc/engine/conv_params.h"
#include "cc/engine/pass_buffers.h"
#include "cc/engine/status.h"

namespace ucudnn {

// Buffers a pass needs besides workspace: the filter in cuDNN's layout, and a
// padded input (or input gradient) micro-batch when padding is asymmetric.
struct PassScratch {
  void* filter = nullptr;
  void* padded = nullptr;
};

// Bytes of the filter's copy in cuDNN's layout that a pass allocates before
// its workspace (0 where the filter is in that layout already).
int64_t FilterCopyBytes(const ConvParams& p, const PassTensors& t);
// The filter's copy in cuDNN's layout, unless the caller's filter is in that
// layout already (t.filter_in_cudnn_layout: XLA's custom calls).
Status AllocateFilter(const ConvParams& p, const PassTensors& t, ScratchAllocator* scratch,
                      PassScratch* ps);

// The zeroed buffer of one explicitly padded micro-batch of up to `max_size`
// samples, when padding is asymmetric.
Status AllocatePadded(const ConvParams& p, bool asymmetric, int64_t max_size,
                      int64_t padded_sample_elems, cudaStream_t stream,
                      ScratchAllocator* scratch, PassScratch* ps);

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_PLAN_EXECUTION_H_
