// One pass of one convolution on a GPU, for any front end: find (or create) the
// kernel, plan it on first use (benchmark database or benchmark, then
// Workspace Reuse), record the plan, and run it on the caller's stream with the
// caller's memory. The TensorFlow OpKernel (cc/kernels/conv_kernels.cc) and the
// XLA FFI handler (cc/xla/xla_ffi_conv.cc) both call RunConvPass. No
// TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_CONV_RUNNER_H_
#define TF_UCUDNN_ENGINE_CONV_RUNNER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cc/engine/conv_params.h"
#include "cc/engine/knobs.h"
#include "cc/engine/plan_records.h"
#include "cc/engine/planner.h"
#include "cc/engine/status.h"

#if GOOGLE_CUDA
#include "cc/engine/kernel_cache.h"
#endif

namespace ucudnn {

// The label of a batch-size policy in plan records: "powerOfTwo",
// "forced 8", ...
std::string PolicyLabel(BatchSizePolicy policy, int64_t micro_batch_size);

// Prints a plan record on stderr when UCUDNN_DEBUG_OUTPUT is on.
void LogPlan(const PlanRecord& record);

#if GOOGLE_CUDA

// What a front end knows about one call.
struct ConvRequest {
  Pass pass = Pass::kForward;
  ConvParams params;
  int device = 0;                 // CUDA ordinal
  cudaStream_t stream = nullptr;  // the caller's stream; nothing is synchronised
  std::string device_name;        // for plan records, e.g. "/device:GPU:0"
  bool allow_tf32 = true;
  bool deterministic = false;
  // Bytes (the whole budget in a WD group), or kAutoWorkspaceLimit: plan
  // within what `scratch` can hand out when the kernel is planned, and run the
  // fastest planned plan that fits what it can hand out at each run.
  int64_t workspace_limit = 0;
  BatchSizePolicy policy = BatchSizePolicy::kPowerOfTwo;
  int64_t micro_batch_size = 0;   // > 0: forced micro-batches of this size
  int64_t total_workspace = 0;    // > 0: the Workspace Division group's budget in bytes
  // The knobs as read when the front end's kernel was created (knobs.h).
  EngineSet engines = EngineSet::kAuto;
  GraphSearchKnobs graph;
};

// Other GPUs that benchmark a share of the micro-batch sizes
// (UCUDNN_BENCHMARK_DEVICES); called only when the kernel must benchmark.
// The front end keeps whatever backs the peers alive until RunConvPass returns.
using PeersProvider = std::function<Status(std::vector<BenchmarkPeer>* peers)>;

// Runs `request`'s pass over `tensors` (see PassTensors). `scratch` gives the
// benchmark's buffers and the plan's workspace; its ReleaseAll() is called
// between planning and running, so a front end whose allocator can give
// memory back early (TF's) holds only the plan's workspace while it runs.
// If the plan's workspace cannot be allocated, a plan that fits runs instead,
// and a warning says so once per kernel on stderr. Under workspace_limit=auto
// the plan is chosen from what is free before allocating, and a step down
// from the planned plan is logged once per kernel.
Status RunConvPass(const ConvRequest& request, const PassTensors& tensors,
                   ScratchAllocator* scratch, const PeersProvider& peers = nullptr);

#endif  // GOOGLE_CUDA

}  // namespace ucudnn

#endif  // TF_UCUDNN_ENGINE_CONV_RUNNER_H_
