// Legacy cuDNN algorithms as candidates of one kernel at one micro-batch
// size: the workspace they ask for, and their timing by
// cudnnFind*AlgorithmEx within the workspace limit (plus the bias epilogue
// that a legacy plan adds, which cudnnFind does not time). Used by the
// Autotuner. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_LEGACY_CANDIDATES_H_
#define TF_UCUDNN_ENGINE_LEGACY_CANDIDATES_H_

#if GOOGLE_CUDA

#include <cstdint>
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

 private:
  const KernelSpec& spec_;
  PlanRunner* const runner_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_LEGACY_CANDIDATES_H_
