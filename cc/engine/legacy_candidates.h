// Legacy cuDNN algorithms as candidates of one kernel at one micro-batch
// size: the workspace they ask for, and their timing by
// cudnnFind*AlgorithmEx within the workspace limit (plus the bias epilogue
// that a legacy plan adds, which cudnnFind does not time), timed again with
// CUDA events where graph-API engines compete with them at the same size.
// Used by the Autotuner. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_LEGACY_CANDIDATES_H_
#define TF_UCUDNN_ENGINE_LEGACY_CANDIDATES_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_runtime_api.h"
#include "cudnn.h"
#include "cc/engine/benchmark_table.h"
#include "cc/engine/plan_runner.h"
#include "cc/engine/status.h"

namespace ucudnn {

class LegacyCandidates {
 public:
  // `runner` (the kernel's: its descriptors and operations) outlives this.
  explicit LegacyCandidates(PlanRunner* runner) : spec_(runner->spec()), runner_(runner) {}

  // The math type candidates are searched with: FP32 without TF32 stays on
  // FMA kernels; otherwise tensor cores may be used.
  int MathType() const;
  // The most workspace any algorithm asks for at this size (0 if none answers).
  Status MaxWorkspaceNeeded(cudnnHandle_t handle, int64_t size, int64_t* bytes);
  // cudnnFind*AlgorithmEx at `size` with a search workspace of
  // `workspace_bytes`: appends to *got the algorithms that ran within
  // `workspace_limit` (deterministic ones only where the kernel must be).
  Status Find(cudnnHandle_t handle, int64_t size, int64_t workspace_limit, const void* a,
              const void* b, void* out, void* workspace, int64_t workspace_bytes,
              std::vector<Measured>* got);
  // Mean ms of AddBias over `size` samples at `y` (the legacy candidates'
  // share of a forward pass with a bias and any ReLU, which cudnnFind does
  // not time).
  Status TimeAddBias(cudnnHandle_t handle, cudaStream_t stream, int64_t size, const void* bias,
                     void* y, double* ms);
  // The entries of *row from `first` on (Find's, at `size`) within
  // kLegacyRetimeFactor of the fastest of them, timed again as GraphTiming
  // times an engine: the micro-batch as a plan runs it (with the bias
  // epilogue), one warm-up run, then the mean of kLegacyTimedRuns behind a
  // StreamGate. cudnnFind's time of an algorithm carries 0.03-0.06 ms more
  // than its GPU time (ResNet-50's float16 stem on an H200: 0.055 against
  // 0.022 ms at 8 samples, 0.093 against 0.062 at 32), so the short calls of
  // a small micro-batch lost to engines timed on the GPU alone. An
  // algorithm that fails to run keeps Find's time. With `log`, a line per
  // entry timed again.
  Status Retime(cudnnHandle_t handle, cudaStream_t stream, int64_t size, const void* a,
                const void* b, void* out, const FusionPointers& fusion, void* workspace,
                size_t first, std::vector<Measured>* row, std::string* log);

 private:
  const KernelSpec& spec_;
  PlanRunner* const runner_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_LEGACY_CANDIDATES_H_
