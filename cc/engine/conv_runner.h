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
#include "cc/engine/cpu_pass.h"
#include "cc/engine/knobs.h"
#include "cc/engine/plan_records.h"
#include "cc/engine/planner.h"
#include "cc/engine/status.h"

#if GOOGLE_CUDA
#include "cc/engine/kernel_cache.h"
#endif

namespace ucudnn {

// Prints a plan record on stderr when UCUDNN_DEBUG_OUTPUT is on.
void LogPlan(const PlanRecord& record);

// What a front end knows about one call.
struct ConvRequest {
  Pass pass = Pass::kForward;
  ConvParams params;
  // The CUDA ordinal; on the CPU any number that tells the front end's CPU
  // devices apart (TF's: -1 - the device's id).
  int device = 0;
#if GOOGLE_CUDA
  cudaStream_t stream = nullptr;  // the caller's stream; nothing is synchronised
#endif
  std::string device_name;        // for plan records, e.g. "/device:GPU:0"
  // The planning knobs, resolved when the front end's kernel was created
  // (ResolvePlanningKnobs), with the numerics of this call. Under
  // workspace_limit = kAutoWorkspaceLimit the kernel plans within what
  // `scratch` can hand out when it is planned, and runs the fastest planned
  // plan that fits what it can hand out at each run.
  PlanningKnobs knobs;
};

// Runs `request`'s pass on the CPU (RunCpuPlan, cpu_pass.h: im2col + GEMM,
// in float32, with the fusion) over `tensors` (CpuPassTensors, cpu_pass.h):
// in micro-batches of knobs.micro_batch_size where it is forced, else the
// whole mini-batch; no workspace. The plan is recorded once per kernel
// (tf_ucudnn.plans(), UCUDNN_DEBUG_OUTPUT). An empty convolution
// (ConvParams::empty) is run only with a bias or statistics, whose result
// it writes. `parallel_for` shares the work among the front end's threads.
// Returns: InvalidArgument for a fusion the pass or the tensors cannot take
// (Fusion::Check) or an empty convolution with neither.
Status RunConvPassCpu(const ConvRequest& request, const CpuPassTensors& tensors,
                      const ParallelFor& parallel_for);

#if GOOGLE_CUDA

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
