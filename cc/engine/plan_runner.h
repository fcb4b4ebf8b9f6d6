// The plan runner of one kernel: executes a plan (a value chosen from the
// benchmark table) over the whole mini-batch on the caller's stream with the
// caller's memory, one path for every plan. The filter goes into cuDNN's
// layout (unless it is there already: XLA's custom calls), each micro-batch
// runs with its candidate (a legacy algorithm or a graph-API engine),
// backward-filter micro-batches accumulate (in float32 for float16/bfloat16
// where cuDNN allows), and the filter gradient goes back into TF's layout (or
// stays in cuDNN's). It owns the kernel's descriptor and graph-plan caches
// and runs each micro-batch through a MicroBatchRunner over them.
// Nothing is synchronised. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_PLAN_RUNNER_H_
#define TF_UCUDNN_ENGINE_PLAN_RUNNER_H_

#if GOOGLE_CUDA

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda_runtime_api.h"
#include "cudnn.h"
#include "cc/engine/benchmark_table.h"
#include "cc/engine/cudnn_handles.h"
#include "cc/engine/descriptor_cache.h"
#include "cc/engine/kernel_spec.h"
#include "cc/engine/micro_batch_runner.h"
#include "cc/engine/pass_buffers.h"
#include "cc/engine/pass_operations.h"
#include "cc/engine/planner.h"
#include "cc/engine/status.h"

namespace ucudnn {

// The statistics epilogue's sums over a plan's micro-batches: each
// micro-batch's graph writes its own sums (cleared before it), which
// cudnnAddTensor adds in float32 into the caller's; a plan of one micro-batch
// writes the caller's directly (PlanRunner::RunWithStatistics clears them
// where its engine adds into them).
class StatisticsSums {
 public:
  // Points *fusion at what the micro-batches write: with `several`, two
  // partial sums of `channels` floats from `scratch`, and the caller's sums
  // (t.sum, t.sum_of_squares) cleared to add them into; otherwise the
  // caller's.
  Status Begin(cudaStream_t stream, int64_t channels, bool several, const PassTensors& t,
               ScratchAllocator* scratch, FusionPointers* fusion);
  bool partial() const { return partial_ != nullptr; }
  Status ClearPartial(cudaStream_t stream);
  // Adds the micro-batch's sums into the caller's.
  Status AddPartial(cudnnHandle_t handle, const PassTensors& t);

 private:
  int64_t bytes_ = 0;
  float* partial_ = nullptr;
  float* partial_squares_ = nullptr;
  TensorDesc desc_;  // float32 [1, channels, 1, 1]
};

class PlanRunner {
 public:
  explicit PlanRunner(const KernelSpec& spec)
      : spec_(spec),
        geometry_(spec.params),
        descriptors_(spec, geometry_),
        ops_(spec, geometry_, &descriptors_),
        micro_batches_(spec_, &descriptors_, &ops_) {}
  PlanRunner(const PlanRunner&) = delete;
  PlanRunner& operator=(const PlanRunner&) = delete;

  const KernelSpec& spec() const { return spec_; }
  const PaddedGeometry& geometry() const { return geometry_; }
  DescriptorCache& descriptors() { return descriptors_; }
  PassOperations& operations() { return ops_; }

  // Bytes of the float32 accumulator (PassOperations::AccumulateFloat: the
  // float32 filter and a zero element) that a plan of several micro-batches
  // counts against its limit, or 0 where none is needed (float32, other
  // passes, or cuDNN refused the mixed types here once).
  int64_t AccumulatorBytes() const;

  // Runs `plan` (its micro-batches' `algo` index `algos`) over the whole
  // mini-batch. If its workspace cannot be allocated, runs the fastest plan
  // of `table` that can be (down to zero workspace). *ran is the plan that
  // ran.
  Status Run(CudnnHandle* handle, cudaStream_t stream, const Plan& plan, const PerfTable& table,
             const std::vector<CudnnAlgo>& algos, const PassTensors& tensors,
             ScratchAllocator* scratch, Plan* ran);

  // One micro-batch of `offset` samples in, run with `algo`
  // (MicroBatchRunner::Run). The handle must be held, on the stream.
  Status RunMicroBatch(cudnnHandle_t handle, cudaStream_t stream, const MicroBatch& mb,
                       const CudnnAlgo& algo, int64_t offset, bool accumulate, const void* a,
                       const void* b, void* out, const FusionPointers& fusion, void* workspace,
                       void* padded) {
    return micro_batches_.Run(handle, stream, mb, algo, offset, accumulate, a, b, out, fusion,
                              workspace, padded);
  }

 private:
  // Runs the micro-batch of a one-micro-batch plan whose engine fuses the
  // statistics into fusion.sum and fusion.sum_of_squares. An engine not yet
  // known runs once with its sums filled with NaN: finite sums after it mean
  // that it stores them (its later runs skip the two memsets); NaN means
  // that it adds into them, or that the output holds a NaN, and it runs
  // again on cleared sums, as it does from then on. The probe waits for the
  // stream once per engine and is skipped (sums cleared) while the stream is
  // being captured into a CUDA graph.
  Status RunWithStatistics(cudnnHandle_t handle, cudaStream_t stream, const MicroBatch& mb,
                           const CudnnAlgo& algo, const PassTensors& t, const void* b,
                           void* out, const FusionPointers& fusion, void* workspace,
                           void* padded);

  const KernelSpec spec_;
  const PaddedGeometry geometry_;
  DescriptorCache descriptors_;
  PassOperations ops_;
  MicroBatchRunner micro_batches_;  // over descriptors_ and ops_
  // Whether cuDNN takes cudnnOpTensor's T + T -> float and float -> T here:
  // 0 not yet known, 1 yes, -1 no (accumulate in T; AccumulatorBytes() is 0).
  std::atomic<int> float_accumulation_{0};
  // The statistics engines probed (RunWithStatistics): true where the engine
  // stores its sums.
  std::mutex stores_mu_;
  std::vector<std::pair<CudnnAlgo, bool>> engine_stores_sums_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_PLAN_RUNNER_H_
