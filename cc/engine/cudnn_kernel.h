// One cuDNN kernel (a pass of one convolution on one device): its benchmark
// table, its plan and what running it needs. The class is defined over one
// file per concept:
//   cudnn_kernel.cc      plan state: Workspace Reuse / forced plans / Pareto
//                        front from the table, seeds, Workspace Division replans
//   autotune.cc          candidates timed per micro-batch size (legacy Find,
//                        on this GPU and peers)
//   graph_candidates.cc  graph-API candidates: proposal, timing, pruning
//   plan_execution.cc    Run: one path for legacy and graph plans
//   cudnn_descriptors.cc descriptors of a size and of the filter
//   overhead.cc          execution-overhead measurement (bench --overhead)
// No TensorFlow includes: memory comes from the caller through
// ScratchAllocator (TF's allocator in the glue), work goes on its stream.
#ifndef TF_UCUDNN_ENGINE_CUDNN_KERNEL_H_
#define TF_UCUDNN_ENGINE_CUDNN_KERNEL_H_

#if GOOGLE_CUDA

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_runtime_api.h"
#include "driver_functions.h"
#include "cudnn.h"
#include "cc/engine/conv_params.h"
#include "cc/engine/cudnn_descriptors.h"
#include "cc/engine/cudnn_graph.h"
#include "cc/engine/cudnn_handles.h"
#include "cc/engine/knobs.h"
#include "cc/engine/pass_buffers.h"
#include "cc/engine/plan_execution.h"
#include "cc/engine/planner.h"
#include "cc/engine/status.h"

namespace ucudnn {

// The smallest micro-batch size benchmarked with graph-API engines when legacy
// algorithms are candidates too (UCUDNN_ENGINES=all, auto).
constexpr int64_t kMinGraphMicroBatch = 8;

// A candidate: a legacy algorithm (cuDNN's algorithm enum value and math
// type) or, when engine.id >= 0, a graph-API engine config.
struct CudnnAlgo {
  int algo = 0;
  int math_type = 0;
  bool deterministic = true;
  GraphEngine engine;
  bool graph() const { return engine.id >= 0; }
  bool operator==(const CudnnAlgo& o) const {
    return graph() ? o.graph() && engine == o.engine
                   : !o.graph() && algo == o.algo && math_type == o.math_type;
  }
};
std::string CudnnAlgoName(Pass pass, const CudnnAlgo& algo);

// One convolution kernel (pass + geometry + numerics) on one device: its
// benchmark table, its plan, and its cached descriptors. Thread-safe.
class CudnnKernel {
 public:
  // `engines` and `graph` as read when the kernel was created (knobs.h).
  CudnnKernel(Pass pass, const ConvParams& params, bool allow_tf32, bool deterministic,
              EngineSet engines = EngineSet::kAuto,
              const GraphSearchKnobs& graph = GraphSearchKnobs());
  ~CudnnKernel();

  // On the first call: benchmarks every micro-batch size the policy (or the
  // forced size) allows within `workspace_limit` bytes and solves Workspace
  // Reuse. Later calls return at once. *planned_now says whether this call did it.
  // `peers` (other GPUs of the same model) benchmark a share of the sizes in
  // parallel, each in its own thread, on copies of the tensors.
  // small_sizes_where_limited (a kernel planned for itself, not forced and
  // not in a Workspace Division group, whose Pareto front needs the small
  // sizes): see BenchmarkOn.
  Status EnsurePlanned(CudnnHandle* handle, cudaStream_t stream, BatchSizePolicy policy,
                       int64_t forced_micro_batch, int64_t workspace_limit,
                       const PassTensors& tensors, ScratchAllocator* scratch,
                       const std::vector<BenchmarkPeer>& peers, bool small_sizes_where_limited,
                       bool* planned_now);
  // True once planned (benchmarked or from the database).
  bool planned() const;
  // The plan runs use now (a copy: Workspace Division may replace it).
  Plan plan() const;
  // Workspace Division: replans from the benchmark table with a new per-kernel
  // limit (no new benchmark). Reproduces the Pareto point whose workspace is
  // `workspace_limit`. Fails if the kernel has not been planned.
  Status Replan(int64_t workspace_limit);
  // The Pareto front of the benchmark table (empty before planning).
  std::vector<Plan> ParetoFront() const;
  // The plan of the front that needs the least workspace (empty before planning).
  Plan LeastWorkspacePlan() const;
  // The fastest plan of the benchmark table within `bytes` of workspace, as
  // Workspace Reuse chooses it (a forced micro-batch size kept); empty before
  // planning or where none fits.
  Plan PlanFitting(int64_t bytes) const;
  // True once Replan has set a Workspace Division share.
  bool divided() const;
  int64_t planned_limit() const;
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
  // The sizes of the table measured under memory pressure: their search
  // workspace could not be allocated in full (less than their candidates
  // could use within the limit), so fast candidates may be missing.
  std::set<int64_t> pressured_sizes() const;
  // The graph engines pruned from larger sizes, with the size that pruned
  // them: by this kernel's benchmarking and its seed's.
  PrunedEngines pruned_engines() const;
  // CUDA ordinals of the GPUs that benchmarked this kernel (empty if seeded).
  std::vector<int> benchmark_devices() const;

  // Runs `plan` over the whole mini-batch. If its workspace cannot be
  // allocated, runs the fastest plan of the benchmark table that can be
  // (down to zero workspace). *ran is the plan that ran. The table's
  // sizes are those of the policy (or the forced size) it was planned with.
  Status Run(CudnnHandle* handle, cudaStream_t stream, const Plan& plan,
             const PassTensors& tensors, ScratchAllocator* scratch, Plan* ran);

  // What TimeOverhead measures, in ms per call: wall-clock from a synced stream
  // to a synced stream, and the host's time to enqueue the calls.
  struct OverheadTimes {
    double plan_ms = 0, direct_ms = 0, transform_ms = 0;
    double plan_host_ms = 0, direct_host_ms = 0;
  };
  // Execution overhead (the benchmark's --overhead): times `iters` calls of
  // Run with the current plan, which must be one micro-batch, against `iters`
  // direct cuDNN calls with the same algorithm, descriptors and workspace and
  // the filter already in cuDNN's layout. Wall-clock ms per call from a synced
  // stream to a synced stream, median of 5 repeats. Allocates its buffers with
  // cudaMalloc on `device` (the process must leave that memory free, e.g.
  // with TensorFlow's memory growth), on a stream of its own. transform_ms is
  // the filter transform alone that Run does on every call (into cuDNN's
  // layout; for backward-filter, the gradient back into TF's HWIO).
  Status TimeOverhead(int device, int iters, OverheadTimes* times);

  Pass pass() const { return pass_; }
  const ConvParams& params() const { return params_; }
  const PerfTable& table() const { return table_; }
  const std::vector<CudnnAlgo>& algos() const { return algos_; }

 private:
  // Benchmark results of one micro-batch size, before they join table_.
  struct Measured {
    CudnnAlgo algo;
    double time_ms;
    int64_t workspace_bytes;
  };
  using MeasuredSizes = std::map<int64_t, std::vector<Measured>>;
  Status GetDescriptors(int64_t size, int math_type, ConvDescriptors** out);
  int BenchmarkMathType() const;
  // Fills table_ and algos_ (empty: EnsurePlanned clears them) by
  // benchmarking every size, spread over this GPU and `peers` (bench_mu_
  // held); small_sizes_where_limited as in BenchmarkOn (on one GPU only).
  Status Benchmark(CudnnHandle* handle, cudaStream_t stream, const std::vector<int64_t>& sizes,
                   int64_t workspace_limit, const PassTensors& t, ScratchAllocator* scratch,
                   const std::vector<BenchmarkPeer>& peers, bool small_sizes_where_limited);
  // Benchmarks `sizes` on one GPU (the handle's) into *got. With
  // small_sizes_where_limited and UCUDNN_ENGINES=auto, the sizes below the
  // graph engines' (legacy only) are benchmarked only where the workspace
  // limit kept an engine out at a larger size or no engine ran there.
  Status BenchmarkOn(CudnnHandle* handle, cudaStream_t stream, const std::vector<int64_t>& sizes,
                     int64_t workspace_limit, const PassTensors& t, ScratchAllocator* scratch,
                     bool small_sizes_where_limited, MeasuredSizes* got);
  // Copies what `sizes` need of the tensors from this GPU to `peer`, then
  // benchmarks them there.
  Status BenchmarkOnPeer(int own_device, const BenchmarkPeer& peer,
                         const std::vector<int64_t>& sizes, int64_t workspace_limit,
                         const PassTensors& t, MeasuredSizes* got);
  // BenchmarkOnPeer's work once the peer is the current device.
  Status BenchmarkOnPeerDevice(int own_device, const BenchmarkPeer& peer,
                               const std::vector<int64_t>& sizes, int64_t workspace_limit,
                               const PassTensors& t, MeasuredSizes* got);
  // The most workspace any algorithm asks for at this size (0 if none answers).
  Status MaxWorkspaceNeeded(cudnnHandle_t handle, int64_t size, int64_t* bytes);
  // Elements of one sample of the explicitly padded input.
  int64_t padded_sample_elems() const { return params_.in_channels * padded_h_ * padded_w_; }
  // Mean ms of AddBias over `size` samples at `y` (the legacy candidates'
  // share of a forward pass with a bias and any ReLU, which cudnnFind does
  // not time).
  Status TimeAddBias(cudnnHandle_t handle, cudaStream_t stream, int64_t size, const void* bias,
                     void* y, double* ms);
  Status BenchmarkSize(cudnnHandle_t handle, int64_t size, int64_t workspace_limit,
                       const void* a, const void* b, void* out, void* workspace,
                       int64_t workspace_bytes, std::vector<Measured>* got);
  // The graph-API side of benchmarking one size: engines the heuristics
  // propose whose plans finalize within the limit (for backward-filter also
  // the accumulating plan), and their timing with CUDA events.
  struct GraphTrial {
    GraphCandidate candidate;
    const GraphPlan* plan;
  };
  // Engines in `pruned` are left out; `log` as in ProposeGraphEngines.
  // Host time goes to *costs; *over_limit counts the candidates whose plan
  // needs more workspace than `workspace_limit`. With `given`, those
  // candidates are tried instead of the heuristics' (a stored table's
  // neighbouring sizes: NeighbourCandidates).
  Status ProposeGraphTrials(cudnnHandle_t handle, int64_t size, int64_t workspace_limit,
                            const std::set<std::string>& pruned,
                            std::vector<GraphTrial>* trials, std::string* log,
                            GraphHostCosts* costs, int* over_limit,
                            const std::vector<GraphCandidate>* given = nullptr);
  // Appends the timed trials to *got (which holds the size's legacy results
  // under UCUDNN_ENGINES=all), adds to *pruned the engines dominated by
  // graph_knobs_.prune_factor, and counts the plan executions in *runs. With
  // `log`, appends a line per trial: its times and what became of it.
  Status TimeGraphTrials(cudnnHandle_t handle, cudaStream_t stream,
                         const std::vector<GraphTrial>& trials, const void* a, const void* b,
                         void* out, const void* bias, void* workspace, int64_t workspace_bytes,
                         std::vector<Measured>* got, std::set<std::string>* pruned, int* runs,
                         std::string* log);
  // Times the graph candidates of *got within kRetimeWindow of the fastest
  // again (screening.h, "Re-timing near the best"): kRetimeRounds rounds of
  // one run each, interleaved; each keeps the median. `trials` holds their
  // plans; operands as TimeGraphTrials'.
  Status RetimeNearBest(cudnnHandle_t handle, cudaStream_t stream,
                        const std::vector<GraphTrial>& trials, const void* a, const void* b,
                        void* out, const void* bias, void* workspace, int64_t workspace_bytes,
                        std::vector<Measured>* got, int* runs, std::string* log);
  // The pass's tensors in graph roles: forward (a, b, out) = (x, w, y);
  // backward-data (dy, w, dx); backward-filter (x, dy, dw).
  static void GraphRoles(Pass pass, const void* a, const void* b, const void* out,
                         const void** x, const void** w, const void** y);
  // "device pass dtype layout" (e.g. "0 forward float32 NHWC", "0 forward+bias
  // bfloat16 NHWC"): where graph
  // engines' loaded modules (TimeGraphTrials) and fallback lists
  // (ProposeGraphTrials) are shared between kernels.
  std::string KindPrefix(int device) const;
  // The graph spec of `size` samples (accumulate: backward-filter's beta = 1;
  // transposed: the graph computes in the other layout).
  ConvGraphSpec GraphSpec(int64_t size, bool accumulate, bool transposed) const;
  // The cached execution plan of an engine at a size on a handle, made on
  // first use.
  Status GetGraphPlan(cudnnHandle_t handle, int64_t size, const GraphEngine& engine,
                      bool accumulate, const GraphPlan** out, GraphHostCosts* costs = nullptr);
  // RunMicroBatch of a graph-API engine.
  Status RunGraphMicroBatch(cudnnHandle_t handle, cudaStream_t stream, const MicroBatch& mb,
                            const GraphEngine& engine, int64_t offset, bool accumulate,
                            const void* a, const void* b, void* out, const void* bias,
                            void* workspace, void* padded);
  // One micro-batch of `offset` samples in: its convolution, and the bias
  // (and ReLU) epilogue where the kernel has one (ConvParams::bias, relu).
  Status RunMicroBatch(cudnnHandle_t handle, cudaStream_t stream, const MicroBatch& mb,
                       int64_t offset, bool accumulate, const void* a, const void* b, void* out,
                       const void* bias, void* workspace, void* padded);
  // A legacy algorithm's forward output of `size` samples at `y` gets the
  // bias added (cudnnAddTensor; the descriptors of `math_type`), then the
  // ReLU where the epilogue has one (ConvParams::relu).
  Status AddBias(cudnnHandle_t handle, int64_t size, int math_type, const void* bias, void* y);
  // The filter operand (b) and the output as the pass's cuDNN calls take
  // them: the caller's when its filter is in cuDNN's layout; else ps.filter
  // (AllocateFilter) as the filter, transformed from t.b (forward,
  // backward-data), or as backward-filter's output (Run transforms it back
  // into t.out). The handle must be held, on the stream.
  Status FilterOperands(cudnnHandle_t handle, const PassTensors& t, const PassScratch& ps,
                        const void** b, void** out);
  // HWIO <-> cuDNN's filter layout (KCRS for NCHW, KRSC for NHWC).
  Status TransformFilter(cudnnHandle_t handle, const void* src, void* dst, bool to_cudnn);
  // The filter's descriptors (made on first use).
  Status GetFilterDescriptors(FilterDescriptors** out);

  // Float32 accumulation of a float16/bfloat16 backward-filter plan of several
  // micro-batches. cuDNN's beta = 1 would round every partial sum to the
  // element type (bfloat16: 8 significant bits), an error that grows with the
  // number of micro-batches; instead each micro-batch writes its gradient
  // (beta = 0) and cudnnOpTensor adds it into a float32 sum in the plan's
  // workspace, rounded to the element type once at the end.
  // Bytes of that accumulator (the float32 filter and a zero element), or 0
  // where none is needed (float32, other passes, or cuDNN refused the mixed
  // types here once).
  int64_t AccumulatorBytes() const;
  // The float32 accumulator starts this aligned within the plan's workspace;
  // its last kAccumulatorAlign bytes are zero (the zero element of OpTensor,
  // and the one-element destination of the probe at kProbeOffset).
 public:
  static constexpr int64_t kAccumulatorAlign = ucudnn::kAccumulatorAlign;  // planner.h
  static constexpr int64_t kProbeOffset = 128;

 private:
  // Workspace Reuse within `limit` bytes, counting the accumulator of plans of
  // several micro-batches against the limit (bench_mu_ held or the table fixed).
  Plan PlanWithin(int64_t limit) const;
  // ForcedPlan within `limit`, counting the accumulator where it fits (else the
  // forced plan accumulates in the element type).
  Plan ForcedPlanWithin(int64_t max_size, int64_t limit) const;
  // The Pareto front with accumulators counted.
  std::vector<Plan> FrontWithAccumulator() const;
  // Adds the float32 filter gradient of one micro-batch (`part`, cuDNN's filter
  // layout) to `sum`; with `probe`, also rounds the sum back into `part` (an
  // exact round trip at the first micro-batch) to learn that cuDNN takes both
  // type mixes. The raw status: a refusal falls back to accumulating in T.
  cudnnStatus_t AccumulateFloat(cudnnHandle_t handle, const void* part, float* sum,
                                const void* zero, bool probe);
  // The float32 sum rounded to the element type into `out` (cuDNN's layout).
  Status StoreFloatSum(cudnnHandle_t handle, cudaStream_t stream, const float* sum,
                       const void* zero, void* out);
  // Input micro-batch into / gradient out of the padded buffer (asymmetric
  // padding): one pitched 3-D copy on the stream.
  Status CopyPadded(cudaStream_t stream, int64_t size, const void* src, void* dst,
                    bool into_padded);

  const Pass pass_;
  const ConvParams params_;
  const bool allow_tf32_;
  const bool deterministic_;
  const EngineSet engines_;
  const GraphSearchKnobs graph_knobs_;
  // cuDNN sees symmetric padding; extra rows/columns are padded explicitly.
  int64_t sym_pad_h_, sym_pad_w_, extra_top_, extra_left_, padded_h_, padded_w_;

  mutable std::mutex bench_mu_;  // held while benchmarking; table_ and algos_ are fixed after
  bool benchmarked_ = false;
  bool seeded_ = false;
  std::set<int64_t> seed_pressured_;
  PrunedEngines seed_pruned_;
  // Written by the benchmarking threads (own GPU and peers) under pressured_mu_.
  std::set<int64_t> pressured_;
  PrunedEngines pruned_;
  mutable std::mutex pressured_mu_;
  int reused_sizes_ = 0;
  int benchmarked_sizes_ = 0;
  std::vector<int> benchmark_devices_;
  PerfTable seed_table_;
  // seed_table_ without the sizes in seed_pressured_: the rows measured with
  // room, which planning takes as they are (and new sizes their neighbours from).
  PerfTable seed_roomy_;
  std::vector<CudnnAlgo> seed_algos_;
  // Whether cuDNN takes cudnnOpTensor's T + T -> float and float -> T here:
  // 0 not yet known, 1 yes, -1 no (accumulate in T; AccumulatorBytes() is 0).
  std::atomic<int> float_accumulation_{0};
  mutable std::mutex plan_mu_;   // guards plan_, limit_ and divided_
  Plan plan_;
  int64_t limit_ = 0;
  bool divided_ = false;
  std::mutex mu_;        // guards descriptors_, filter_descriptors_ and graph_plans_
  PerfTable table_;
  std::vector<CudnnAlgo> algos_;
  std::map<std::pair<int64_t, int>, std::unique_ptr<ConvDescriptors>> descriptors_;
  std::unique_ptr<FilterDescriptors> filter_descriptors_;
  // (handle, size, engine name, accumulate) -> its finalized plan; failures
  // are kept as nullptr so that they are not rebuilt.
  std::map<std::tuple<cudnnHandle_t, int64_t, std::string, bool>, std::unique_ptr<GraphPlan>>
      graph_plans_;
};

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
#endif  // TF_UCUDNN_ENGINE_CUDNN_KERNEL_H_
