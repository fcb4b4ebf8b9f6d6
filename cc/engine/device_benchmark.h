// The candidates of one kernel timed per micro-batch size on one GPU (the
// handle's): the legacy algorithms (LegacyCandidates) and the graph-API
// engines (GraphCandidates, GraphTiming) within the workspace limit, with one search
// workspace for all sizes (SearchWorkspace). The Autotuner runs one per GPU
// that benchmarks.
// No TensorFlow includes.
#ifndef TF_UCUDNN_ENGINE_DEVICE_BENCHMARK_H_
#define TF_UCUDNN_ENGINE_DEVICE_BENCHMARK_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <set>
#include <vector>

#include "cuda_runtime_api.h"
#include "cc/engine/benchmark_table.h"
#include "cc/engine/cudnn_handles.h"
#include "cc/engine/graph_candidates.h"
#include "cc/engine/graph_timing.h"
#include "cc/engine/legacy_candidates.h"
#include "cc/engine/pass_buffers.h"
#include "cc/engine/plan_runner.h"
#include "cc/engine/planner.h"
#include "cc/engine/status.h"

namespace ucudnn {

class DeviceBenchmark {
 public:
  // As Autotuner's: the kernel's runner, its seed and the seed's roomy rows;
  // all outlive this.
  DeviceBenchmark(PlanRunner* runner, const BenchmarkTable& seed, const PerfTable& seed_roomy)
      : spec_(runner->spec()),
        runner_(runner),
        legacy_(runner),
        graph_(runner),
        timing_(runner->spec()),
        seed_(seed),
        seed_roomy_(seed_roomy) {}

  // Benchmarks `sizes` on the handle's GPU into *got; adds to *pressured the
  // sizes measured with less search workspace than their candidates could
  // use within the limit, and to *pruned the graph engines screening pruned
  // (at the size that pruned them). With small_sizes_where_limited and
  // UCUDNN_ENGINES=auto, the sizes below the graph engines' (legacy only)
  // are benchmarked only where the workspace limit kept an engine out at a
  // larger size or no engine ran there.
  Status Run(CudnnHandle* handle, cudaStream_t stream, const std::vector<int64_t>& sizes,
             int64_t workspace_limit, const PassTensors& t, ScratchAllocator* scratch,
             bool small_sizes_where_limited, MeasuredSizes* got, std::set<int64_t>* pressured,
             PrunedEngines* pruned);

 private:
  const KernelSpec& spec_;
  PlanRunner* const runner_;
  LegacyCandidates legacy_;
  GraphCandidates graph_;
  GraphTiming timing_;
  const BenchmarkTable& seed_;
  const PerfTable& seed_roomy_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_DEVICE_BENCHMARK_H_
