#include "cc/engine/conv_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "cc/engine/knobs.h"

#if GOOGLE_CUDA
#include "cc/engine/cuda_check.h"
#include "cc/engine/cudnn_descriptors.h"
#include "cc/engine/division_groups.h"
#include "cc/engine/statistics_reduction.h"
#endif

namespace ucudnn {

void LogPlan(const PlanRecord& r) {
  if (!DebugOutput()) return;
  // Runs of equal micro-batches: "8x32 ALGO_1/tensor-op" is 8 micro-batches of 32.
  std::ostringstream steps;
  for (size_t i = 0; i < r.micro_batches.size();) {
    size_t j = i;
    while (j < r.micro_batches.size() && r.micro_batches[j].size == r.micro_batches[i].size &&
           r.micro_batches[j].algo == r.micro_batches[i].algo) {
      ++j;
    }
    steps << (i == 0 ? "" : " + ") << (j - i) << "x" << r.micro_batches[i].size << " "
          << r.micro_batches[i].algo;
    i = j;
  }
  // Not measured on the CPU: no time is printed rather than "nan ms".
  char cost[96];
  if (r.time_ms == r.time_ms) {
    std::snprintf(cost, sizeof(cost), "workspace %lld bytes, %.3f ms",
                  static_cast<long long>(r.workspace_bytes), r.time_ms);
  } else {
    std::snprintf(cost, sizeof(cost), "workspace %lld bytes",
                  static_cast<long long>(r.workspace_bytes));
  }
  std::fprintf(stderr, "tf_ucudnn: %s %s %s: %s (%s)%s%s\n", r.device.c_str(), PassName(r.pass),
               r.params.ToString().c_str(), steps.str().c_str(), cost,
               r.note.empty() ? "" : "; ", r.note.c_str());
}

#if GOOGLE_CUDA

namespace {

KernelKey MakeKey(const ConvRequest& q) {
  KernelKey key;
  key.pass = q.pass;
  key.conv = q.params.Fields();
  key.device = q.device;
  key.knobs = q.knobs;
  // The graph search knobs change the plan only where graph engines are candidates.
  if (q.knobs.engines == EngineSet::kLegacy) key.knobs.graph = GraphSearchKnobs();
  // cuDNN 9 reaches its image-first-layer kernels (an image of at most 4
  // channels, as XLA pads an RGB one) through the legacy algorithms only, not
  // through the graph engines its heuristics propose: UCUDNN_ENGINES=auto
  // times both for such a convolution (ResNet-50's float16 stem on an H200,
  // N = 256: backward-filter plans 0.45 ms in one legacy call against 0.67 ms
  // in two; the forward 0.50 ms in 8 x 32 samples on the first-layer kernel
  // against engine 47's 0.83 in one, once the legacy times are the GPU's:
  // LegacyCandidates::Retime).
  if (q.knobs.engines == EngineSet::kAuto && q.params.groups == 1 &&
      q.params.in_channels <= kFirstLayerChannels) {
    key.knobs.engines = EngineSet::kAll;
  }
  // The statistics epilogue and the input prologue run on graph engines only
  // (legacy algorithms have neither).
  if (q.params.fusion.statistics() || q.params.fusion.input_scale_bias()) {
    key.knobs.engines = EngineSet::kGraph;
  }
  return key;
}

PlanRecord MakeRecord(const ConvRequest& q, const CudnnKernel& kernel, const Plan& plan) {
  PlanRecord r = MakePlanRecord(q.device_name, kernel.pass(), kernel.params(), q.knobs, plan,
                                [&kernel](const MicroBatch& mb) {
                                  return CudnnAlgoName(kernel.pass(), kernel.algos()[mb.algo]);
                                });
  if (q.knobs.total_workspace > 0) {
    r.note = "Workspace Division group of " + std::to_string(q.knobs.total_workspace) +
             " bytes: benchmarked within the whole budget, divided after a step";
  }
  return r;
}

// Logs once per kernel that it runs a smaller plan than planned: `level` "W"
// where the plan's workspace could not be allocated, "I" where
// workspace_limit=auto stepped down to what was free.
void LogStepDownOnce(const KernelKey& key, const char* level, const std::string& what) {
  static std::mutex mu;
  static auto* seen = new std::set<KernelKey>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen->insert(key).second) return;
  }
  std::fprintf(stderr, "%s tf_ucudnn: %s\n", level, what.c_str());
}

template <typename Int>
std::string JoinInts(const std::vector<Int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(values[i]);
  }
  return out;
}

// An empty convolution with a bias: every output element is the bias of its
// channel (a sum over nothing, plus the bias), or its ReLU.
Status FillWithBias(CudnnHandle* handle, cudaStream_t stream, const ConvParams& p,
                    const PassTensors& t) {
  const int64_t bytes = p.batch * p.output_sample_size() * DTypeSize(p.dtype);
  if (bytes == 0) return Status();
  TensorDesc y, bias;
  int64_t s[4];
  LayoutStrides(p.layout, p.out_channels, p.out_height, p.out_width, s);
  UCUDNN_RETURN_IF_ERROR(y.Set(p.dtype, p.batch, p.out_channels, p.out_height, p.out_width, s));
  UCUDNN_RETURN_IF_ERROR(bias.SetBias(p.dtype, p.out_channels));
  std::lock_guard<std::mutex> lock(handle->mu);
  UCUDNN_CUDNN_OK(cudnnSetStream(handle->handle, stream));
  UCUDNN_CUDA_OK(cudaMemsetAsync(t.out, 0, bytes, stream));
  const float one = 1.0f;
  UCUDNN_CUDNN_OK(cudnnAddTensor(handle->handle, &one, bias.d, t.bias, &one, y.d, t.out));
  if (p.fusion.relu()) UCUDNN_RETURN_IF_ERROR(ReluDesc().Apply(handle->handle, y, t.out));
  return Status();
}

// Fused kernels (an input prologue, a statistics epilogue) that run unfused
// from then on, without planning again: none of their engines planned
// (statistics in float16 on an H200: none for ResNet's first layer, 3 input
// channels, nor for 5 -> 6 channels), or the plain convolution and the
// reduction after it measured faster (UCUDNN_STATISTICS=timed, RunConvPass).
bool RunsUnfused(const KernelKey& key, bool mark) {
  static std::mutex mu;
  static auto* keys = new std::set<KernelKey>();
  std::lock_guard<std::mutex> lock(mu);
  return mark ? keys->insert(key).second : keys->count(key) > 0;
}

// Scratch of a pass run inside another: its ReleaseAll gives back what it
// allocated itself, not the outer pass's blocks (the prologue's result, which
// the inner pass reads).
class NestedScratch : public ScratchAllocator {
 public:
  explicit NestedScratch(ScratchAllocator* outer) : outer_(outer) {}
  void* Allocate(int64_t bytes) override { return Keep(outer_->Allocate(bytes)); }
  void* AllocateWorkspace(int64_t bytes) override {
    return Keep(outer_->AllocateWorkspace(bytes));
  }
  void ReleaseAll() override {
    for (void* block : blocks_) outer_->Release(block);
    blocks_.clear();
  }
  void Release(void* block) override {
    blocks_.erase(std::remove(blocks_.begin(), blocks_.end(), block), blocks_.end());
    outer_->Release(block);
  }
  FreeDeviceMemory FreeMemory() override { return outer_->FreeMemory(); }

 private:
  void* Keep(void* block) {
    if (block != nullptr) blocks_.push_back(block);
    return block;
  }
  ScratchAllocator* outer_;
  std::vector<void*> blocks_;
};

// The prologue unfused: relu(x * scale + bias) of the whole input into
// scratch (cudnnOpTensor, cudnnAddTensor, cudnnActivationForward, computing
// in float32), then the convolution and its epilogue on it.
Status RunPrologueUnfused(const ConvRequest& q, const PassTensors& tensors,
                          ScratchAllocator* scratch, const PeersProvider& peers,
                          CudnnHandle* handle) {
  const ConvParams& p = q.params;
  const int64_t bytes = p.batch * p.input_sample_size() * DTypeSize(p.dtype);
  void* prologue = scratch->Allocate(bytes);
  if (prologue == nullptr) {
    return Status::ResourceExhausted("could not allocate " + std::to_string(bytes) +
                                     " bytes for the input prologue's result");
  }
  {
    TensorDesc x, channels;
    int64_t s[4];
    LayoutStrides(p.layout, p.in_channels, p.in_height, p.in_width, s);
    UCUDNN_RETURN_IF_ERROR(x.Set(p.dtype, p.batch, p.in_channels, p.in_height, p.in_width, s));
    UCUDNN_RETURN_IF_ERROR(channels.SetBias(p.dtype, p.in_channels));
    OpTensorDesc mul;
    UCUDNN_CUDNN_OK(cudnnSetOpTensorDescriptor(mul.d, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT,
                                               CUDNN_NOT_PROPAGATE_NAN));
    const float one = 1.0f, zero = 0.0f;
    std::lock_guard<std::mutex> lock(handle->mu);
    UCUDNN_CUDNN_OK(cudnnSetStream(handle->handle, q.stream));
    UCUDNN_CUDNN_OK(cudnnOpTensor(handle->handle, mul.d, &one, x.d, tensors.a, &one, channels.d,
                                  tensors.prologue_scale, &zero, x.d, prologue));
    UCUDNN_CUDNN_OK(cudnnAddTensor(handle->handle, &one, channels.d, tensors.prologue_bias, &one,
                                   x.d, prologue));
    if (p.fusion.input_relu()) {
      UCUDNN_RETURN_IF_ERROR(ReluDesc().Apply(handle->handle, x, prologue));
    }
  }
  ConvRequest rest = q;
  rest.params.fusion.prologue = Prologue::kNone;
  PassTensors on_result = tensors;
  on_result.a = prologue;
  on_result.input_scale = on_result.input_bias = nullptr;
  on_result.prologue_scale = on_result.prologue_bias = nullptr;
  NestedScratch nested(scratch);
  return RunConvPass(rest, on_result, &nested, peers);
}

// The prologue's scale and bias in the convolution's type, from the front
// end's float32 (cudnnTransformTensor), into scratch that the rest of the
// pass keeps (NestedScratch); float32 ones are read in place.
Status WithTypedPrologue(const ConvRequest& q, const PassTensors& tensors,
                         ScratchAllocator* scratch, const PeersProvider& peers,
                         CudnnHandle* handle) {
  const ConvParams& p = q.params;
  PassTensors typed = tensors;
  if (p.dtype == DType::kFloat) {
    typed.prologue_scale = tensors.input_scale;
    typed.prologue_bias = tensors.input_bias;
    return RunConvPass(q, typed, scratch, peers);
  }
  const int64_t stride = AlignedBytes(p.in_channels * DTypeSize(p.dtype));
  char* block = static_cast<char*>(scratch->Allocate(2 * stride));
  if (block == nullptr) {
    return Status::ResourceExhausted("could not allocate " + std::to_string(2 * stride) +
                                     " bytes for the input prologue's scale and bias");
  }
  {
    TensorDesc from, to;
    UCUDNN_RETURN_IF_ERROR(from.SetBias(DType::kFloat, p.in_channels));
    UCUDNN_RETURN_IF_ERROR(to.SetBias(p.dtype, p.in_channels));
    const float one = 1.0f, zero = 0.0f;
    std::lock_guard<std::mutex> lock(handle->mu);
    UCUDNN_CUDNN_OK(cudnnSetStream(handle->handle, q.stream));
    UCUDNN_CUDNN_OK(cudnnTransformTensor(handle->handle, &one, from.d, tensors.input_scale,
                                         &zero, to.d, block));
    UCUDNN_CUDNN_OK(cudnnTransformTensor(handle->handle, &one, from.d, tensors.input_bias, &zero,
                                         to.d, block + stride));
  }
  typed.prologue_scale = block;
  typed.prologue_bias = block + stride;
  NestedScratch nested(scratch);
  return RunConvPass(q, typed, &nested, peers);
}

// The convolution of `q` without its statistics epilogue.
ConvRequest WithoutStatistics(const ConvRequest& q) {
  ConvRequest plain = q;
  plain.params.fusion.epilogue = Epilogue::kNone;
  return plain;
}

// The statistics unfused: the convolution's plan (with its prologue, if
// any), then the sums of its whole output (cudnnReduceTensor). With
// `reduce_ms`, the reduction then runs three times more between two events
// (EventPair::TimeRuns; each run's scratch given back after it) and
// *reduce_ms is their mean, or infinity where scratch ran out.
Status RunStatisticsUnfused(const ConvRequest& q, const PassTensors& tensors,
                            ScratchAllocator* scratch, const PeersProvider& peers,
                            CudnnHandle* handle, double* reduce_ms = nullptr) {
  PassTensors conv_tensors = tensors;
  conv_tensors.sum = conv_tensors.sum_of_squares = nullptr;
  UCUDNN_RETURN_IF_ERROR(RunConvPass(WithoutStatistics(q), conv_tensors, scratch, peers));
  std::lock_guard<std::mutex> lock(handle->mu);
  UCUDNN_CUDNN_OK(cudnnSetStream(handle->handle, q.stream));
  UCUDNN_RETURN_IF_ERROR(ReduceStatistics(handle->handle, q.params, tensors, scratch));
  if (reduce_ms == nullptr) return Status();
  EventPair events;
  Status reduced;
  auto run = [&] {
    NestedScratch nested(scratch);
    reduced = ReduceStatistics(handle->handle, q.params, tensors, &nested);
    nested.ReleaseAll();
    return reduced.ok();
  };
  UCUDNN_RETURN_IF_ERROR(events.TimeRuns(q.stream, 3, run, reduce_ms));
  if (reduced.code() == Status::Code::kResourceExhausted) {
    *reduce_ms = std::numeric_limits<double>::infinity();
    return Status();
  }
  return reduced;
}

}  // namespace

Status RunConvPass(const ConvRequest& q, const PassTensors& tensors, ScratchAllocator* scratch,
                   const PeersProvider& peers) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != q.device) cudaSetDevice(q.device);
  CudnnHandle* handle = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetCudnnHandle(q.device, q.stream, &handle));
  const std::string fusion_error = q.params.fusion.Check(q.pass, tensors.present());
  if (q.params.empty()) {
    if (!q.params.fusion.bias() || !fusion_error.empty()) {
      return Status::InvalidArgument("an empty convolution has nothing to run: " +
                                     q.params.ToString());
    }
    return FillWithBias(handle, q.stream, q.params, tensors);
  }
  if (!fusion_error.empty()) return Status::InvalidArgument(fusion_error);
  if (q.params.fusion.input_scale_bias() && tensors.prologue_scale == nullptr) {
    return WithTypedPrologue(q, tensors, scratch, peers, handle);
  }
  const KernelKey key = MakeKey(q);
  if (q.params.fusion.input_scale_bias()) {
    // An asymmetric padding's padded copy would go through the graph's
    // prologue, which must see the padding as zeros after it.
    const bool asymmetric = !q.params.symmetric_padding();
    if (asymmetric || RunsUnfused(key, /*mark=*/false)) {
      if (asymmetric) {
        LogStepDownOnce(key, "I",
                        std::string("forward ") + q.params.ToString() +
                            ": asymmetric padding; the input prologue runs before the "
                            "convolution, unfused");
      }
      return RunPrologueUnfused(q, tensors, scratch, peers, handle);
    }
  }
  if (StatisticsUnfused(q.params, q.knobs.allow_tf32)) {
    LogStepDownOnce(key, "I",
                    std::string("forward ") + q.params.ToString() +
                        ": the statistics are reduced after the convolution "
                        "(cudnnReduceTensor); cuDNN fuses them with TF32 only");
    return RunStatisticsUnfused(q, tensors, scratch, peers, handle);
  }
  if (q.params.fusion.statistics() && RunsUnfused(key, /*mark=*/false)) {
    return RunStatisticsUnfused(q, tensors, scratch, peers, handle);
  }
  std::shared_ptr<CudnnKernel> kernel = GetOrCreateKernel(key, q.params);
  // UCUDNN_STATISTICS, read until the kernel is planned or marked unfused
  // (a kernel with a prologue is not marked: marked, its prologue would run
  // before it instead).
  StatisticsMode statistics_mode = StatisticsMode::kFused;
  if (q.params.fusion.statistics() && !kernel->planned()) {
    UCUDNN_RETURN_IF_ERROR(ReadStatisticsMode(&statistics_mode));
    if (statistics_mode == StatisticsMode::kUnfused) {
      if (!q.params.fusion.input_scale_bias()) RunsUnfused(key, /*mark=*/true);
      return RunStatisticsUnfused(q, tensors, scratch, peers, handle);
    }
  }

  // workspace_limit=auto holds only without Workspace Division (whose
  // kernels are benchmarked within the group's total).
  const PlanningKnobs& knobs = q.knobs;
  const bool auto_limit = knobs.BenchmarkLimit() == kAutoWorkspaceLimit;
  bool choose_statistics = false;
  if (!kernel->planned()) {
    const auto start = std::chrono::steady_clock::now();
    int64_t limit = knobs.BenchmarkLimit();
    FreeDeviceMemory free_at_planning;
    if (auto_limit) {
      free_at_planning = scratch->FreeMemory();
      limit = AutoWorkspaceLimit(free_at_planning.available, free_at_planning.pool_limit);
    }
    std::vector<BenchmarkPeer> peer_list;
    if (!kernel->seeded() && peers) UCUDNN_RETURN_IF_ERROR(peers(&peer_list));
    bool planned_now = false;
    // A Workspace Division group's kernel keeps every size: its Pareto front
    // reaches down to the least workspace.
    const Status planning = kernel->EnsurePlanned(handle, q.stream, knobs.policy,
                                                  knobs.micro_batch_size, limit, tensors, scratch,
                                                  peer_list, /*small_sizes_where_limited=*/
                                                  knobs.total_workspace == 0, &planned_now);
    // Benchmark buffers go back before the plan's workspace is taken
    // (stream-ordered, so no synchronisation is needed).
    scratch->ReleaseAll();
    const bool prologue = q.params.fusion.input_scale_bias();
    if (!planning.ok() && (prologue || q.params.fusion.statistics())) {
      RunsUnfused(key, /*mark=*/true);
      LogStepDownOnce(key, "I",
                      std::string("forward ") + q.params.ToString() + ": no fused engine (" +
                          planning.message() + "); " +
                          (prologue ? "the input prologue runs before the convolution"
                                    : "the statistics are reduced after the convolution "
                                      "(cudnnReduceTensor)"));
      return prologue ? RunPrologueUnfused(q, tensors, scratch, peers, handle)
                      : RunStatisticsUnfused(q, tensors, scratch, peers, handle);
    }
    UCUDNN_RETURN_IF_ERROR(planning);
    choose_statistics = planned_now && statistics_mode == StatisticsMode::kTimed &&
                        q.params.fusion.statistics() && !prologue &&
                        knobs.total_workspace == 0;
    if (planned_now) {
      PlanRecord r = MakeRecord(q, *kernel, kernel->plan());
      r.workspace_limit = limit;
      if (auto_limit) {
        r.note = "workspace_limit=auto: planned within " + std::to_string(limit) + " bytes (" +
                 std::to_string(free_at_planning.available) + " of " +
                 std::to_string(free_at_planning.pool_limit) + " free)";
      }
      r.planning_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      std::string note;
      const std::vector<int> bench_devices = kernel->benchmark_devices();
      if (kernel->seeded()) {
        // The stored table of this convolution (the database, or another N).
        const int reused = kernel->reused_sizes(), fresh = kernel->benchmarked_sizes();
        note = "stored benchmark table: " + std::to_string(reused) + " of " +
               std::to_string(reused + fresh) + " sizes" +
               (fresh > 0 ? ", " + std::to_string(fresh) + " benchmarked" : "");
      } else if (bench_devices.size() > 1) {
        note = "benchmarked on GPUs " + JoinInts(bench_devices);
      }
      const std::set<int64_t> pressured = kernel->pressured_sizes();
      if (!pressured.empty()) {
        std::vector<int64_t> listed(pressured.begin(), pressured.end());
        note += std::string(note.empty() ? "" : "; ") +
                "benchmarked under memory pressure at sizes " + JoinInts(listed);
      }
      // Kernels of other N (and later processes, through the database) plan
      // from the sizes measured here.
      SeedKernelTable(key, kernel->table(), kernel->algos(), pressured, kernel->pruned_engines());
      if (!note.empty()) r.note = r.note.empty() ? note : r.note + "; " + note;
      LogPlan(r);
      RecordPlan(std::move(r));
    }
  }
  if (choose_statistics) {
    // The fused graph against the plain convolution and the reduction after
    // it (UCUDNN_STATISTICS=timed): the unfused pass runs first, and its
    // results stand if it is the faster; else the fused plan overwrites them.
    double reduce_ms = 0;
    UCUDNN_RETURN_IF_ERROR(RunStatisticsUnfused(q, tensors, scratch, peers, handle, &reduce_ms));
    const ConvRequest plain = WithoutStatistics(q);
    const double plain_ms = GetOrCreateKernel(MakeKey(plain), plain.params)->plan().time_ms;
    const double fused_ms = kernel->plan().time_ms;
    char times[160];
    std::snprintf(times, sizeof(times), "%.3f + %.3f ms against the fused graph's %.3f ms",
                  plain_ms, reduce_ms, fused_ms);
    if (plain_ms + reduce_ms >= fused_ms) {
      if (DebugOutput()) {
        std::fprintf(stderr, "tf_ucudnn: forward %s: the statistics stay fused: %s\n",
                     q.params.ToString().c_str(), times);
      }
    } else {
      RunsUnfused(key, /*mark=*/true);
      LogStepDownOnce(key, "I",
                      std::string("forward ") + q.params.ToString() +
                          ": the statistics are reduced after the convolution "
                          "(cudnnReduceTensor), measured faster: " + times);
      return Status();
    }
  }
  // A Workspace Division group's kernel runs its least-workspace plan until
  // the group is first divided (after one step): meanwhile its members
  // benchmark one at a time within the whole budget and run holding (next
  // to) no workspace, so the budget holds from the first step on.
  Plan plan = knobs.total_workspace > 0 && !kernel->divided() ? kernel->LeastWorkspacePlan()
                                                               : kernel->plan();
  if (auto_limit && plan.workspace_bytes > 0) {
    // The fastest planned plan whose workspace is free now (the filter's copy
    // in cuDNN's layout is allocated before it), rather than a failed
    // allocation: XLA's allocator retries a failed one before it gives up.
    const FreeDeviceMemory free = scratch->FreeMemory();
    const int64_t room = free.available - FilterCopyBytes(q.params, tensors);
    if (free.available >= 0 && plan.workspace_bytes > room) {
      const Plan fits = kernel->PlanFitting(std::max<int64_t>(room, 0));
      if (!fits.empty()) {
        LogStepDownOnce(key, "I",
                        std::string("workspace_limit=auto: ") + std::to_string(free.available) +
                            " bytes free for " + PassName(q.pass) + " " + q.params.ToString() +
                            "; running a plan that needs " + std::to_string(fits.workspace_bytes) +
                            " bytes instead of " + std::to_string(plan.workspace_bytes) +
                            " (logged once per kernel)");
        plan = fits;
      }
    }
  }
  Plan ran;
  UCUDNN_RETURN_IF_ERROR(kernel->Run(handle, q.stream, plan, tensors, scratch, &ran));
  if (ran.workspace_bytes != plan.workspace_bytes) {
    LogStepDownOnce(key, "W", "could not allocate " + std::to_string(plan.workspace_bytes) +
                              " bytes of workspace for " + PassName(q.pass) + " " +
                              q.params.ToString() + "; running a plan that needs " +
                              std::to_string(ran.workspace_bytes) + " bytes instead");
  }
  if (knobs.total_workspace > 0) NoteGroupRun(q.device, knobs.total_workspace, kernel.get());
  return Status();
}

#endif  // GOOGLE_CUDA

}  // namespace ucudnn
