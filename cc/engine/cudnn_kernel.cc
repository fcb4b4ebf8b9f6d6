// The kernel cache entry: a benchmark table from the Autotuner (merged with
// its seed), the plan chosen from it, and Workspace Division's replanning.
#if GOOGLE_CUDA

#include "cc/engine/cudnn_kernel.h"

#include <algorithm>
#include <string>
#include <utility>

#include "cc/engine/autotune.h"

namespace ucudnn {
namespace {

KernelSpec MakeSpec(Pass pass, const ConvParams& params, bool allow_tf32, bool deterministic,
                    EngineSet engines, const GraphSearchKnobs& graph) {
  KernelSpec spec;
  spec.pass = pass;
  spec.params = params;
  spec.allow_tf32 = allow_tf32;
  spec.deterministic = deterministic;
  spec.engines = engines;
  spec.graph = graph;
  return spec;
}

}  // namespace

CudnnKernel::CudnnKernel(Pass pass, const ConvParams& params, bool allow_tf32,
                         bool deterministic, EngineSet engines, const GraphSearchKnobs& graph)
    : spec_(MakeSpec(pass, params, allow_tf32, deterministic, engines, graph)), runner_(spec_) {}

Plan CudnnKernel::PlanWithin(int64_t limit) const {
  return BestPlanWithAccumulator(table_.table, spec_.params.batch, limit,
                                 runner_.AccumulatorBytes());
}

Plan CudnnKernel::ForcedPlanWithin(int64_t max_size, int64_t limit) const {
  return ForcedPlanWithAccumulator(table_.table, spec_.params.batch, max_size, limit,
                                   runner_.AccumulatorBytes());
}

std::vector<Plan> CudnnKernel::FrontWithAccumulator() const {
  return ParetoFrontWithAccumulator(table_.table, spec_.params.batch,
                                    runner_.AccumulatorBytes());
}

Status CudnnKernel::EnsurePlanned(CudnnHandle* handle, cudaStream_t stream,
                                  BatchSizePolicy policy, int64_t forced_micro_batch,
                                  int64_t workspace_limit, const PassTensors& t,
                                  ScratchAllocator* scratch,
                                  const std::vector<BenchmarkPeer>& peers,
                                  bool small_sizes_where_limited, bool* planned_now) {
  std::unique_lock<std::mutex> bench_lock(bench_mu_);
  *planned_now = false;
  if (benchmarked_) return Status();
  const ConvParams& p = spec_.params;
  if (p.empty()) {
    // Front ends return the empty or zero result of a zero-size convolution
    // themselves (ConvParams::empty()); there is nothing to benchmark.
    return Status::InvalidArgument("zero-size convolution " + p.ToString() +
                                   " reached the cuDNN engine");
  }
  const std::vector<int64_t> sizes =
      forced_micro_batch > 0 ? ForcedMicroBatchSizes(p.batch, forced_micro_batch)
                             : MicroBatchSizes(policy, p.batch);
  // The sizes the stored table of this convolution lacks (all without one).
  const bool small_rule = small_sizes_where_limited && forced_micro_batch == 0;
  const bool whole_batch_first = WholeBatchFirst(p);
  // Sizes measured under memory pressure are measured again (with room now,
  // they replace the stored rows).
  const std::vector<int64_t> to_benchmark =
      seed_.seeded()
          ? SizesToBenchmark(seed_.roomy(), sizes,
                             whole_batch_first ? p.batch : std::min(kMinGraphMicroBatch, p.batch),
                             small_rule && (spec_.engines == EngineSet::kAuto || whole_batch_first))
          : sizes;
  // Rows of a failed earlier attempt go; the Autotuner makes a new table.
  table_ = BenchmarkTable();
  BenchmarkTable measured;
  if (!to_benchmark.empty()) {
    Autotuner autotuner(&runner_, seed_.table(), seed_.roomy());
    UCUDNN_RETURN_IF_ERROR(autotuner.Benchmark(handle, stream, to_benchmark, workspace_limit, t,
                                               scratch, peers, small_rule, &measured));
  }
  table_ = PlanningTable(std::move(measured), seed_.seeded(), seed_.table(),
                         forced_micro_batch > 0, sizes, policy, p.batch, &benchmarked_sizes_);
  reused_sizes_ = static_cast<int>(table_.table.size()) - benchmarked_sizes_;
  Plan plan = forced_micro_batch > 0 ? ForcedPlanWithin(forced_micro_batch, workspace_limit)
                                     : PlanWithin(workspace_limit);
  if (plan.empty()) {
    return Status::Internal("no cuDNN algorithm ran for " + std::string(PassName(spec_.pass)) +
                            " " + p.ToString() + " within a workspace limit of " +
                            std::to_string(workspace_limit) + " bytes");
  }
  current_.Set(std::move(plan), workspace_limit);
  benchmarked_ = true;
  *planned_now = true;
  return Status();
}

void CudnnKernel::Seed(PerfTable table, std::vector<CudnnAlgo> algos,
                       std::set<int64_t> pressured, PrunedEngines pruned) {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  if (benchmarked_) return;
  seed_.Set(std::move(table), std::move(algos), std::move(pressured), std::move(pruned));
}

bool CudnnKernel::planned() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return benchmarked_;
}

std::vector<int> CudnnKernel::benchmark_devices() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return table_.devices;
}

bool CudnnKernel::seeded() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return seed_.seeded();
}

int CudnnKernel::reused_sizes() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return reused_sizes_;
}

int CudnnKernel::benchmarked_sizes() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return benchmarked_sizes_;
}

std::set<int64_t> CudnnKernel::pressured_sizes() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return table_.pressured;
}

PrunedEngines CudnnKernel::pruned_engines() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return table_.pruned;
}

Status CudnnKernel::Replan(int64_t workspace_limit) {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  if (!benchmarked_) {
    return Status::InvalidArgument("the kernel has not been benchmarked yet: run it once first");
  }
  Plan plan = PlanWithin(workspace_limit);
  if (plan.empty()) {
    return Status::InvalidArgument("no benchmarked plan of " + spec_.params.ToString() +
                                   " fits in " + std::to_string(workspace_limit) + " bytes");
  }
  current_.SetDivided(std::move(plan), workspace_limit);
  return Status();
}

Plan CudnnKernel::PlanFitting(int64_t bytes) const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  if (!benchmarked_) return Plan();
  return PlanWithin(bytes);
}

Plan CudnnKernel::LeastWorkspacePlan() const {
  const std::vector<Plan> front = ParetoFront();
  return front.empty() ? Plan() : front.front();
}

std::vector<Plan> CudnnKernel::ParetoFront() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  if (!benchmarked_) return {};
  return FrontWithAccumulator();
}

Status CudnnKernel::Run(CudnnHandle* handle, cudaStream_t stream, const Plan& plan,
                        const PassTensors& tensors, ScratchAllocator* scratch, Plan* ran) {
  return runner_.Run(handle, stream, plan, table_.table, table_.algos, tensors, scratch, ran);
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
