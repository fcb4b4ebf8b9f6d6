// The graph-API candidates of a kernel proposed at one size: the heuristics'
// engines (or given ones) whose plans finalize within the limit (see
// graph_candidates.h). Their timing is GraphTiming's; running a micro-batch
// with one is PlanRunner's.
#if GOOGLE_CUDA

#include "cc/engine/graph_candidates.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "cc/engine/cuda_check.h"
#include "cc/engine/knobs.h"

namespace ucudnn {
namespace {

// The fallback lists queried in this process, by kind of convolution: device,
// pass, data type, layout, graph layout, numerics, grouped, dilated (see
// Propose and FallbackEngines).
std::mutex fallback_mu;
std::map<std::string, FallbackEngines>& SharedFallbackEngines() {
  static auto* lists = new std::map<std::string, FallbackEngines>;
  return *lists;
}

}  // namespace

std::string GraphKindPrefix(const KernelSpec& spec, int device) {
  return std::to_string(device) + " " + PassName(spec.pass) + spec.params.fusion.Name() + " " +
         DTypeName(spec.params.dtype) + " " + LayoutName(spec.params.layout);
}

Status GraphCandidates::Propose(cudnnHandle_t handle, int64_t size, int64_t workspace_limit,
                                const std::set<std::string>& pruned,
                                std::vector<GraphTrial>* trials, std::string* log,
                                GraphHostCosts* costs, int* over_limit,
                                const std::vector<GraphCandidate>* given) {
  trials->clear();
  *over_limit = 0;
  GraphNumerics numerics;
  // Float32 without TF32 keeps the legacy path's float arithmetic.
  numerics.strict_float = spec_.params.dtype == DType::kFloat && !spec_.allow_tf32;
  numerics.deterministic = spec_.deterministic;
  // Reductions and prologues other than float16's genstats pattern build
  // only through runtime compilation.
  numerics.runtime_compilation =
      spec_.params.fusion.statistics() || spec_.params.fusion.input_scale_bias();
  int device = 0;
  UCUDNN_CUDA_OK(cudaGetDevice(&device));
  // The tensors' layout, then the other one (transposed candidates).
  std::vector<GraphCandidate> candidates;
  const GraphLayouts layouts = spec_.graph.layouts;
  if (given != nullptr) {
    candidates = *given;
    if (log != nullptr) *log += " the stored neighbouring sizes' candidates\n";
  }
  for (bool transposed : {false, true}) {
    if (given != nullptr) break;
    if (layouts == (transposed ? GraphLayouts::kNative : GraphLayouts::kTransposed)) continue;
    // Sums, and the prologue's channels, in the tensors' layout.
    if (transposed && (spec_.params.fusion.statistics() || spec_.params.fusion.input_scale_bias())) {
      continue;
    }
    const ConvGraphSpec spec = descriptors_.GraphSpec(size, false, transposed);
    std::vector<GraphCandidate> got;
    std::string layout_log;
    // The fallback list of this kind of convolution, if another kernel (or
    // size) of it queried one (FallbackEngines, cudnn_graph.h).
    const std::string kind =
        GraphKindPrefix(spec_, device) + (transposed ? " transposed" : "") +
        (numerics.strict_float ? " strict" : "") + (numerics.deterministic ? " determ" : "") +
        (spec_.params.groups > 1 ? " grouped" : "") +
        (spec_.params.dilation_h > 1 || spec_.params.dilation_w > 1 ? " dilated" : "");
    // The shared list once it is listed (never changed after: read without
    // the lock), else a new one, queried into `queried` and then shared.
    FallbackEngines queried;
    FallbackEngines* fallback = &queried;
    {
      std::lock_guard<std::mutex> lock(fallback_mu);
      FallbackEngines& shared = SharedFallbackEngines()[kind];
      if (shared.listed) fallback = &shared;
    }
    UCUDNN_RETURN_IF_ERROR(ProposeGraphEngines(handle, spec, numerics, spec_.graph.search,
                                               fallback, &got,
                                               log != nullptr ? &layout_log : nullptr, costs));
    if (fallback == &queried) {
      std::lock_guard<std::mutex> lock(fallback_mu);
      FallbackEngines& shared = SharedFallbackEngines()[kind];
      if (!shared.listed) shared = std::move(queried);
    }
    if (!layout_log.empty()) {
      *log += std::string(" in ") + LayoutName(spec.graph_layout) + ":\n" + layout_log;
    }
    candidates.insert(candidates.end(), got.begin(), got.end());
  }
  if (numerics.runtime_compilation) {
    // Each run-time compiled plan costs about 0.5 s of host time unless the
    // driver's JIT cache holds its kernels: they are compiled on threads at
    // once (UCUDNN_PLAN_BUILD_THREADS), then taken from the cache below.
    int threads = 1;
    UCUDNN_RETURN_IF_ERROR(ReadPlanBuildThreads(&threads));
    std::vector<GraphEngine> engines;
    for (const GraphCandidate& c : candidates) {
      if (!pruned.count(c.engine.Name())) engines.push_back(c.engine);
    }
    UCUDNN_RETURN_IF_ERROR(
        descriptors_.BuildGraphPlans(handle, size, engines, false, threads, costs));
  }
  for (const GraphCandidate& c : candidates) {
    if (pruned.count(c.engine.Name())) continue;
    const GraphPlan* plan = nullptr;
    const Status built = descriptors_.GetGraphPlan(handle, size, c.engine, false, &plan, costs);
    if (!built.ok()) {
      if (log != nullptr) *log += "  " + c.engine.Name() + ": no plan: " + built.message() + "\n";
      continue;
    }
    if (plan->workspace_bytes() > workspace_limit) {
      ++*over_limit;
      continue;
    }
    if (spec_.pass == Pass::kBackwardFilter && size < spec_.params.batch) {
      // Later micro-batches accumulate into the filter gradient (beta = 1).
      const GraphPlan* accumulating = nullptr;
      if (!descriptors_.GetGraphPlan(handle, size, c.engine, true, &accumulating, costs).ok()) {
        continue;
      }
      if (accumulating->workspace_bytes() > plan->workspace_bytes()) continue;
    }
    trials->push_back({c, plan});
  }
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
