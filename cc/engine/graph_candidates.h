// Graph-API engines as candidates of one kernel at one micro-batch size: the
// engines proposed for it (UCUDNN_GRAPH_* as the kernel was created with; or
// a stored table's neighbouring candidates), their timing with CUDA events,
// screening and pruning (screening.h), and re-timing near the best. Their
// execution plans come from the kernel's DescriptorCache (cudnn_graph.h).
// Used by the Autotuner. No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_GRAPH_CANDIDATES_H_
#define TF_UCUDNN_ENGINE_GRAPH_CANDIDATES_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cuda_runtime_api.h"
#include "cudnn.h"
#include "cc/engine/benchmark_table.h"
#include "cc/engine/cudnn_graph.h"
#include "cc/engine/plan_runner.h"
#include "cc/engine/status.h"

namespace ucudnn {

// A proposed engine and its finalized plan at one size.
struct GraphTrial {
  GraphCandidate candidate;
  const GraphPlan* plan;
};

class GraphCandidates {
 public:
  // `runner` (the kernel's: its descriptors and graph plans) outlives this.
  explicit GraphCandidates(PlanRunner* runner)
      : spec_(runner->spec()), descriptors_(runner->descriptors()) {}

  // Engines the heuristics propose whose plans finalize within the limit (for
  // backward-filter also the accumulating plan). Engines in `pruned` are left
  // out; `log` as in ProposeGraphEngines. Host time goes to *costs;
  // *over_limit counts the candidates whose plan needs more workspace than
  // `workspace_limit`. With `given`, those candidates are tried instead of
  // the heuristics' (a stored table's neighbouring sizes: NeighbourCandidates).
  Status Propose(cudnnHandle_t handle, int64_t size, int64_t workspace_limit,
                 const std::set<std::string>& pruned, std::vector<GraphTrial>* trials,
                 std::string* log, GraphHostCosts* costs, int* over_limit,
                 const std::vector<GraphCandidate>* given = nullptr);
  // Appends the timed trials to *got (which holds the size's legacy results
  // under UCUDNN_ENGINES=all), adds to *pruned the engines dominated by
  // GraphSearchKnobs::prune_factor, and counts the plan executions in *runs.
  // With `log`, appends a line per trial: its times and what became of it.
  Status Time(cudnnHandle_t handle, cudaStream_t stream, const std::vector<GraphTrial>& trials,
              const void* a, const void* b, void* out, const void* bias, void* workspace,
              int64_t workspace_bytes, std::vector<Measured>* got,
              std::set<std::string>* pruned, int* runs, std::string* log);
  // Times the graph candidates of *got within kRetimeWindow of the fastest
  // again (screening.h, "Re-timing near the best"): kRetimeRounds rounds of
  // one run each, interleaved; each keeps the median. `trials` holds their
  // plans; operands as Time's.
  Status RetimeNearBest(cudnnHandle_t handle, cudaStream_t stream,
                        const std::vector<GraphTrial>& trials, const void* a, const void* b,
                        void* out, const void* bias, void* workspace, int64_t workspace_bytes,
                        std::vector<Measured>* got, int* runs, std::string* log);

  // The pass's tensors in graph roles: forward (a, b, out) = (x, w, y);
  // backward-data (dy, w, dx); backward-filter (x, dy, dw).
  static void GraphRoles(Pass pass, const void* a, const void* b, const void* out,
                         const void** x, const void** w, const void** y);

 private:
  // "device pass dtype layout" (e.g. "0 forward float32 NHWC", "0 forward+bias
  // bfloat16 NHWC"): where graph engines' loaded modules (Time) and fallback
  // lists (Propose) are shared between kernels.
  std::string KindPrefix(int device) const;

  const KernelSpec& spec_;
  DescriptorCache& descriptors_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_GRAPH_CANDIDATES_H_
