// One micro-batch of a kernel's plan on cuDNN: its convolution with a legacy
// algorithm (cudnnConvolution*) or a graph-API engine (an execution plan of
// the kernel's graph-plan cache), the explicitly padded copy where the
// padding is asymmetric, and the bias (and ReLU) epilogue. PlanRunner runs
// a plan's micro-batches through it. Nothing is synchronised. No TensorFlow
// includes.
#ifndef TF_UCUDNN_ENGINE_MICRO_BATCH_RUNNER_H_
#define TF_UCUDNN_ENGINE_MICRO_BATCH_RUNNER_H_

#if GOOGLE_CUDA

#include <cstdint>

#include "cuda_runtime_api.h"
#include "cudnn.h"
#include "cc/engine/benchmark_table.h"
#include "cc/engine/descriptor_cache.h"
#include "cc/engine/kernel_spec.h"
#include "cc/engine/pass_operations.h"
#include "cc/engine/planner.h"
#include "cc/engine/status.h"

namespace ucudnn {

class MicroBatchRunner {
 public:
  // The kernel's spec, descriptor and graph-plan caches, and pass
  // operations; all outlive this (PlanRunner owns them).
  MicroBatchRunner(const KernelSpec& spec, DescriptorCache* descriptors, PassOperations* ops)
      : spec_(spec), descriptors_(*descriptors), ops_(*ops) {}

  // One micro-batch of `offset` samples in, run with `algo`: its convolution,
  // and the bias (and ReLU) epilogue where the kernel has one
  // (ConvParams::fusion); the statistics epilogue (graph engines only) writes
  // this micro-batch's sums into fusion.sum and fusion.sum_of_squares. The handle must be held, on the stream.
  Status Run(cudnnHandle_t handle, cudaStream_t stream, const MicroBatch& mb,
             const CudnnAlgo& algo, int64_t offset, bool accumulate, const void* a,
             const void* b, void* out, const FusionPointers& fusion, void* workspace,
             void* padded);

 private:
  // Run of a graph-API engine.
  Status RunGraph(cudnnHandle_t handle, cudaStream_t stream, const MicroBatch& mb,
                  const GraphEngine& engine, int64_t offset, bool accumulate, const void* a,
                  const void* b, void* out, const FusionPointers& fusion, void* workspace,
             void* padded);

  const KernelSpec& spec_;
  DescriptorCache& descriptors_;
  PassOperations& ops_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_MICRO_BATCH_RUNNER_H_
