// The descriptors of one kernel, made on first use and kept: legacy
// descriptors per (micro-batch size, math type), the filter's descriptors,
// and the finalized graph-API execution plans per (handle, size, engine,
// accumulate), with the graph spec each is built from. Owned by the kernel's
// PlanRunner; the autotuner times candidates with the same ones. Thread-safe.
// No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_DESCRIPTOR_CACHE_H_
#define TF_UCUDNN_ENGINE_DESCRIPTOR_CACHE_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cudnn.h"
#include "cc/engine/cudnn_descriptors.h"
#include "cc/engine/cudnn_graph.h"
#include "cc/engine/kernel_spec.h"
#include "cc/engine/status.h"

namespace ucudnn {

class DescriptorCache {
 public:
  DescriptorCache(const KernelSpec& spec, const PaddedGeometry& geometry)
      : spec_(spec), geometry_(geometry) {}

  // The legacy descriptors of `size` samples with `math_type`. Callers hold
  // the handle's mutex, not this cache's.
  Status GetDescriptors(int64_t size, int math_type, ConvDescriptors** out);
  // The filter's descriptors: TF's HWIO and cuDNN's layout, the float32
  // accumulator's, the bias and the ReLU.
  Status GetFilterDescriptors(FilterDescriptors** out);
  // The graph spec of `size` samples (accumulate: backward-filter's beta = 1;
  // transposed: the graph computes in the other layout).
  ConvGraphSpec GraphSpec(int64_t size, bool accumulate, bool transposed) const;
  // The cached execution plan of an engine at a size on a handle, made on
  // first use; a failure is kept, so that it is not rebuilt.
  Status GetGraphPlan(cudnnHandle_t handle, int64_t size, const GraphEngine& engine,
                      bool accumulate, const GraphPlan** out, GraphHostCosts* costs = nullptr);
  // Makes the plans of `engines` at `size` that GetGraphPlan would make on
  // `handle` and has not, on up to `threads` threads at once, each thread
  // finalizing with a plan-building handle of its own (GetPlanBuildHandles,
  // set to `handle`'s stream), and keeps them, and the failures, as
  // GetGraphPlan would. Fewer than two missing plans, or one thread: nothing
  // is done here. *costs adds each thread's host time (thread-seconds).
  Status BuildGraphPlans(cudnnHandle_t handle, int64_t size,
                         const std::vector<GraphEngine>& engines, bool accumulate, int threads,
                         GraphHostCosts* costs = nullptr);

 private:
  const KernelSpec spec_;
  const PaddedGeometry geometry_;
  std::mutex mu_;  // guards descriptors_, filter_descriptors_ and graph_plans_
  std::map<std::pair<int64_t, int>, std::unique_ptr<ConvDescriptors>> descriptors_;
  std::unique_ptr<FilterDescriptors> filter_descriptors_;
  // A finalized plan, or why it failed (plan nullptr), kept so that a
  // failure is not rebuilt.
  struct PlanEntry {
    std::unique_ptr<GraphPlan> plan;
    std::string error;
  };
  using PlanKey = std::tuple<cudnnHandle_t, int64_t, std::string, bool>;
  // (handle, size, engine name, accumulate) -> its plan.
  std::map<PlanKey, PlanEntry> graph_plans_;
  // The plan of `engine` at `size` finalized on `handle`, or why it failed.
  PlanEntry MakeEntry(cudnnHandle_t handle, int64_t size, const GraphEngine& engine,
                      bool accumulate, GraphHostCosts* costs) const;
  // The message of a plan that failed.
  std::string NoPlan(const GraphEngine& engine, int64_t size, const std::string& why) const;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_DESCRIPTOR_CACHE_H_
