// One cuDNN kernel (a pass of one convolution on one device) as the kernel
// cache holds it: its benchmark table (a value the Autotuner makes, merged
// with a stored table it was seeded with), the plan chosen from that table
// (Workspace Reuse, a forced size, or Workspace Division's share of the
// Pareto front; CurrentPlan), and the PlanRunner that executes plans and owns
// its descriptor and graph-plan caches; a stored table it is seeded with
// (KernelSeed). Planning produces values (autotune.h, planner.h); execution
// consumes them (plan_runner.h).
// No TensorFlow includes: memory comes from the caller through
// ScratchAllocator (TF's allocator in the glue), work goes on its stream.
#ifndef TF_UCUDNN_ENGINE_CUDNN_KERNEL_H_
#define TF_UCUDNN_ENGINE_CUDNN_KERNEL_H_

#if GOOGLE_CUDA

#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include "cuda_runtime_api.h"
#include "cc/engine/benchmark_table.h"
#include "cc/engine/conv_params.h"
#include "cc/engine/cudnn_handles.h"
#include "cc/engine/current_plan.h"
#include "cc/engine/kernel_seed.h"
#include "cc/engine/kernel_spec.h"
#include "cc/engine/knobs.h"
#include "cc/engine/pass_buffers.h"
#include "cc/engine/plan_runner.h"
#include "cc/engine/planner.h"
#include "cc/engine/status.h"

namespace ucudnn {

// Thread-safe.
class CudnnKernel {
 public:
  // `engines` and `graph` as read when the kernel was created (knobs.h).
  CudnnKernel(Pass pass, const ConvParams& params, bool allow_tf32, bool deterministic,
              EngineSet engines = EngineSet::kAuto,
              const GraphSearchKnobs& graph = GraphSearchKnobs());

  // On the first call: benchmarks every micro-batch size the policy (or the
  // forced size) allows within `workspace_limit` bytes (Autotuner) and solves
  // Workspace Reuse on the table. Later calls return at once. *planned_now
  // says whether this call did it. `peers` (other GPUs of the same model)
  // benchmark a share of the sizes in parallel, each in its own thread, on
  // copies of the tensors. small_sizes_where_limited (a kernel planned for
  // itself, not forced and not in a Workspace Division group, whose Pareto
  // front needs the small sizes): see DeviceBenchmark::Run.
  Status EnsurePlanned(CudnnHandle* handle, cudaStream_t stream, BatchSizePolicy policy,
                       int64_t forced_micro_batch, int64_t workspace_limit,
                       const PassTensors& tensors, ScratchAllocator* scratch,
                       const std::vector<BenchmarkPeer>& peers, bool small_sizes_where_limited,
                       bool* planned_now);
  // True once planned (benchmarked or from the database).
  bool planned() const;
  // The plan runs use now (a copy: Workspace Division may replace it).
  Plan plan() const { return current_.plan(); }
  // Workspace Division: replans from the benchmark table with a new per-kernel
  // limit (no new benchmark). Reproduces the Pareto point whose workspace is
  // `workspace_limit`. Fails if the kernel has not been planned.
  Status Replan(int64_t workspace_limit);
  // The Pareto front of the benchmark table (empty before planning).
  std::vector<Plan> ParetoFront() const;
  // The plan of the front that needs the least workspace (empty before planning).
  Plan LeastWorkspacePlan() const;
  // The fastest plan of the benchmark table within `bytes` of workspace, as
  // Workspace Reuse chooses it; empty before planning or where none fits.
  Plan PlanFitting(int64_t bytes) const;
  // True once Replan has set a Workspace Division share.
  bool divided() const { return current_.divided(); }
  int64_t planned_limit() const { return current_.limit(); }
  // The stored benchmark table of this convolution (from the benchmark
  // database, or a kernel of another N): planning uses its sizes and
  // benchmarks only those it lacks (SizesToBenchmark), and again those in
  // `pressured` (measured under memory pressure); at a new size it leaves out
  // the graph engines `pruned` below it. Ignored once planned.
  void Seed(PerfTable table, std::vector<CudnnAlgo> algos, std::set<int64_t> pressured = {},
            PrunedEngines pruned = {});
  bool seeded() const;
  // Of the sizes the plan was made from: how many came from the seed, and
  // how many were benchmarked (0 and 0 before planning).
  int reused_sizes() const;
  int benchmarked_sizes() const;
  // The sizes of the table measured under memory pressure (BenchmarkTable).
  std::set<int64_t> pressured_sizes() const;
  // The graph engines pruned from larger sizes, with the size that pruned
  // them: by this kernel's benchmarking and its seed's.
  PrunedEngines pruned_engines() const;
  // CUDA ordinals of the GPUs that benchmarked this kernel (empty if seeded).
  std::vector<int> benchmark_devices() const;

  // Runs `plan` over the whole mini-batch (PlanRunner::Run). If its workspace
  // cannot be allocated, runs the fastest plan of the benchmark table that
  // can be (down to zero workspace). *ran is the plan that ran. The table's
  // sizes are those of the policy (or the forced size) it was planned with.
  Status Run(CudnnHandle* handle, cudaStream_t stream, const Plan& plan,
             const PassTensors& tensors, ScratchAllocator* scratch, Plan* ran);

  Pass pass() const { return spec_.pass; }
  const ConvParams& params() const { return spec_.params; }
  // The benchmark table and its candidates, fixed once planned.
  const PerfTable& table() const { return table_.table; }
  const std::vector<CudnnAlgo>& algos() const { return table_.algos; }
  // What executes this kernel's plans (its descriptors and graph plans).
  PlanRunner& runner() { return runner_; }

 private:
  // Plan choice from the table, the float32 accumulator of plans of several
  // micro-batches counted against the limit (bench_mu_ held or the table
  // fixed): Workspace Reuse within `limit`; the forced plan of micro-batches
  // of `max_size`; the Pareto front.
  Plan PlanWithin(int64_t limit) const;
  Plan ForcedPlanWithin(int64_t max_size, int64_t limit) const;
  std::vector<Plan> FrontWithAccumulator() const;

  const KernelSpec spec_;
  PlanRunner runner_;

  mutable std::mutex bench_mu_;  // held while planning; guards what follows up to current_
  bool benchmarked_ = false;
  KernelSeed seed_;
  // The table plans are chosen from (its table and algos fixed once planned).
  BenchmarkTable table_;
  int reused_sizes_ = 0;
  int benchmarked_sizes_ = 0;

  CurrentPlan current_;  // thread-safe on its own
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_CUDNN_KERNEL_H_
