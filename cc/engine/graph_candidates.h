// Graph-API engines as candidates of one kernel at one micro-batch size: the
// engines proposed for it (UCUDNN_GRAPH_* as the kernel was created with; or
// a stored table's neighbouring candidates) whose execution plans, from the
// kernel's DescriptorCache (cudnn_graph.h), finalize within the limit. Their
// timing is GraphTiming's. Used by DeviceBenchmark. No TensorFlow includes.
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

// The kind of convolution graph engines share loaded modules (GraphTiming)
// and fallback lists (GraphCandidates) by: "device pass dtype layout" (e.g.
// "0 forward float32 NHWC", "0 forward+bias bfloat16 NHWC").
std::string GraphKindPrefix(const KernelSpec& spec, int device);

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

 private:
  const KernelSpec& spec_;
  DescriptorCache& descriptors_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_GRAPH_CANDIDATES_H_
