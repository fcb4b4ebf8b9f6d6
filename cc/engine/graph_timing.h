// The timing of a kernel's graph-API candidates at one micro-batch size with
// CUDA events: a warm-up run where an engine first runs in the process, a
// screening run that may drop or prune it (screening.h), further timed runs,
// and re-timing near the best. Used by DeviceBenchmark. No TensorFlow
// includes.
#ifndef TF_UCUDNN_ENGINE_GRAPH_TIMING_H_
#define TF_UCUDNN_ENGINE_GRAPH_TIMING_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cuda_runtime_api.h"
#include "cudnn.h"
#include "cc/engine/benchmark_table.h"
#include "cc/engine/graph_candidates.h"
#include "cc/engine/kernel_spec.h"
#include "cc/engine/status.h"

namespace ucudnn {

class GraphTiming {
 public:
  explicit GraphTiming(const KernelSpec& spec) : spec_(spec) {}

  // Appends the timed trials to *got (which holds the size's legacy results
  // under UCUDNN_ENGINES=all), adds to *pruned the engines dominated by
  // GraphSearchKnobs::prune_factor, and counts the plan executions in *runs.
  // With `log`, appends a line per trial: its times and what became of it.
  Status Time(cudnnHandle_t handle, cudaStream_t stream, const std::vector<GraphTrial>& trials,
              const void* a, const void* b, void* out, const FusionPointers& fusion,
              void* workspace, int64_t workspace_bytes, std::vector<Measured>* got,
              std::set<std::string>* pruned, int* runs, std::string* log);
  // Times the graph candidates of *got within kRetimeWindow of the fastest
  // again (screening.h, "Re-timing near the best"): kRetimeRounds rounds of
  // one run each, interleaved; each keeps the median. `trials` holds their
  // plans; operands as Time's.
  Status RetimeNearBest(cudnnHandle_t handle, cudaStream_t stream,
                        const std::vector<GraphTrial>& trials, const void* a, const void* b,
                        void* out, const FusionPointers& fusion, void* workspace,
                        int64_t workspace_bytes,
                        std::vector<Measured>* got, int* runs, std::string* log);

  // The pass's tensors in graph roles: forward (a, b, out) = (x, w, y);
  // backward-data (dy, w, dx); backward-filter (x, dy, dw).
  static void GraphRoles(Pass pass, const void* a, const void* b, const void* out,
                         const void** x, const void** w, const void** y);

 private:
  const KernelSpec& spec_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_GRAPH_TIMING_H_
