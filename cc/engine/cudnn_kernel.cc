// CudnnKernel's plan state: construction, the plan chosen from the benchmark
// table (Workspace Reuse, forced plans, the Pareto front, each counting the
// float32 accumulator of divided backward-filter plans), database seeds, and
// Workspace Division's replanning; and the kernel's cached descriptors.
// Candidates and timing are in autotune.cc and graph_candidates.cc,
// execution in plan_execution.cc.
#if GOOGLE_CUDA

#include "cc/engine/cudnn_kernel.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <memory>
#include <mutex>
#include <string>

#include "cc/engine/cuda_check.h"

namespace ucudnn {

CudnnKernel::CudnnKernel(Pass pass, const ConvParams& params, bool allow_tf32,
                         bool deterministic, EngineSet engines, const GraphSearchKnobs& graph)
    : pass_(pass),
      params_(params),
      allow_tf32_(allow_tf32),
      deterministic_(deterministic),
      engines_(engines),
      graph_knobs_(graph) {
  sym_pad_h_ = std::min(params.pad_top, params.pad_bottom);
  sym_pad_w_ = std::min(params.pad_left, params.pad_right);
  extra_top_ = params.pad_top - sym_pad_h_;
  extra_left_ = params.pad_left - sym_pad_w_;
  padded_h_ = params.in_height + (params.pad_top + params.pad_bottom - 2 * sym_pad_h_);
  padded_w_ = params.in_width + (params.pad_left + params.pad_right - 2 * sym_pad_w_);
}

CudnnKernel::~CudnnKernel() = default;

// The descriptors of a kernel, made on first use.
std::string CudnnAlgoName(Pass pass, const CudnnAlgo& algo) {
  if (algo.graph()) return algo.engine.Name();
  return std::string(AlgoEnumName(pass, algo.algo)) + "/" + MathTypeName(algo.math_type);
}

Status CudnnKernel::GetDescriptors(int64_t size, int math_type, ConvDescriptors** out) {
  std::lock_guard<std::mutex> lock(mu_);  // callers hold the handle's mutex, not mu_
  auto key = std::make_pair(size, math_type);
  auto it = descriptors_.find(key);
  if (it != descriptors_.end()) {
    *out = it->second.get();
    return Status();
  }
  auto d = std::make_unique<ConvDescriptors>();
  const ConvParams& p = params_;
  int64_t s[4];
  LayoutStrides(p.layout, p.in_channels, padded_h_, padded_w_, s);
  UCUDNN_RETURN_IF_ERROR(d->x.Set(p.dtype, size, p.in_channels, padded_h_, padded_w_, s));
  LayoutStrides(p.layout, p.out_channels, p.out_height, p.out_width, s);
  UCUDNN_RETURN_IF_ERROR(
      d->y.Set(p.dtype, size, p.out_channels, p.out_height, p.out_width, s));
  UCUDNN_CUDNN_OK(cudnnSetFilter4dDescriptor(
      d->w.d, CudnnDataType(p.dtype), CudnnFormat(p.layout), static_cast<int>(p.out_channels),
      static_cast<int>(p.group_in_channels()), static_cast<int>(p.filter_height),
      static_cast<int>(p.filter_width)));
  // Half and bfloat16 accumulate in float, as TensorFlow does.
  UCUDNN_CUDNN_OK(cudnnSetConvolution2dDescriptor(
      d->conv.d, static_cast<int>(sym_pad_h_), static_cast<int>(sym_pad_w_),
      static_cast<int>(p.stride_h), static_cast<int>(p.stride_w),
      static_cast<int>(p.dilation_h), static_cast<int>(p.dilation_w),
      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  UCUDNN_CUDNN_OK(cudnnSetConvolutionGroupCount(d->conv.d, static_cast<int>(p.groups)));
  UCUDNN_CUDNN_OK(
      cudnnSetConvolutionMathType(d->conv.d, static_cast<cudnnMathType_t>(math_type)));
  *out = d.get();
  descriptors_[key] = std::move(d);
  return Status();
}

// The filter as TF stores it (HWIO) and as cuDNN reads it, both viewed as
// [K, C, R, S]; made once per kernel, since every run transforms the filter.
// For the float32 accumulation of backward-filter (AccumulatorBytes): the
// cuDNN-layout filter in float32, a one-element zero in T and in float32 (the
// B operand of cudnnOpTensor, broadcast and scaled by 0), and the ADD op.

Status CudnnKernel::GetFilterDescriptors(FilterDescriptors** out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (filter_descriptors_ == nullptr) {
    const ConvParams& p = params_;
    const int64_t k = p.out_channels, c = p.group_in_channels(), r = p.filter_height,
                  s = p.filter_width;
    const int64_t hwio[4] = {1, k, s * c * k, c * k};
    const int64_t one[4] = {1, 1, 1, 1};
    int64_t packed[4];
    LayoutStrides(p.layout, c, r, s, packed);
    auto made = std::make_unique<FilterDescriptors>();
    UCUDNN_RETURN_IF_ERROR(made->tf.Set(p.dtype, k, c, r, s, hwio));
    UCUDNN_RETURN_IF_ERROR(made->cudnn.Set(p.dtype, k, c, r, s, packed));
    UCUDNN_RETURN_IF_ERROR(made->cudnn_float.Set(DType::kFloat, k, c, r, s, packed));
    UCUDNN_RETURN_IF_ERROR(made->zero_t.Set(p.dtype, 1, 1, 1, 1, one));
    UCUDNN_RETURN_IF_ERROR(made->zero_float.Set(DType::kFloat, 1, 1, 1, 1, one));
    UCUDNN_CUDNN_OK(cudnnSetOpTensorDescriptor(made->add.d, CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT,
                                               CUDNN_PROPAGATE_NAN));
    UCUDNN_RETURN_IF_ERROR(made->bias.SetBias(p.dtype, k));
    filter_descriptors_ = std::move(made);
  }
  *out = filter_descriptors_.get();
  return Status();
}


int64_t CudnnKernel::AccumulatorBytes() const {
  if (pass_ != Pass::kBackwardFilter || params_.dtype == DType::kFloat ||
      float_accumulation_.load() < 0) {
    return 0;
  }
  return FloatAccumulatorBytes(params_.filter_size());
}

Plan CudnnKernel::PlanWithin(int64_t limit) const {
  return BestPlanWithAccumulator(table_, params_.batch, limit, AccumulatorBytes());
}

Plan CudnnKernel::ForcedPlanWithin(int64_t max_size, int64_t limit) const {
  return ForcedPlanWithAccumulator(table_, params_.batch, max_size, limit, AccumulatorBytes());
}

std::vector<Plan> CudnnKernel::FrontWithAccumulator() const {
  return ParetoFrontWithAccumulator(table_, params_.batch, AccumulatorBytes());
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
  if (params_.empty()) {
    // Front ends return the empty or zero result of a zero-size convolution
    // themselves (ConvParams::empty()); there is nothing to benchmark.
    return Status::InvalidArgument("zero-size convolution " + params_.ToString() +
                                   " reached the cuDNN engine");
  }
  const std::vector<int64_t> sizes =
      forced_micro_batch > 0 ? ForcedMicroBatchSizes(params_.batch, forced_micro_batch)
                             : MicroBatchSizes(policy, params_.batch);
  // The sizes the stored table of this convolution lacks (all without one).
  const bool small_rule = small_sizes_where_limited && forced_micro_batch == 0;
  // Sizes measured under memory pressure are measured again (with room now,
  // they replace the stored rows).
  const std::vector<int64_t> to_benchmark =
      seeded_ ? SizesToBenchmark(seed_roomy_, sizes, std::min(kMinGraphMicroBatch, params_.batch),
                                 small_rule && engines_ == EngineSet::kAuto)
              : sizes;
  // Rows of a failed earlier attempt go; Benchmark adds to empty tables.
  table_.clear();
  algos_.clear();
  {
    std::lock_guard<std::mutex> lock(pressured_mu_);
    pressured_.clear();
    pruned_.clear();
  }
  if (!to_benchmark.empty()) {
    UCUDNN_RETURN_IF_ERROR(Benchmark(handle, stream, to_benchmark, workspace_limit, t, scratch,
                                     peers, small_rule));
  }
  std::set<int64_t> measured;
  for (const auto& row : table_) measured.insert(row.first);
  if (seeded_) MergeTables(&table_, &algos_, seed_table_, seed_algos_);
  // Only the sizes this kernel's policy (or forced size) allows for its N.
  table_ = forced_micro_batch > 0 ? RestrictTable(table_, sizes)
                                  : RestrictTable(table_, policy, params_.batch);
  {
    std::lock_guard<std::mutex> lock(pressured_mu_);
    for (int64_t size : seed_pressured_) {
      if (!measured.count(size)) pressured_.insert(size);  // the stored row stays
    }
    for (auto it = pressured_.begin(); it != pressured_.end();) {
      it = table_.count(*it) ? std::next(it) : pressured_.erase(it);
    }
    MergePrunedEngines(&pruned_, seed_pruned_);
  }
  benchmarked_sizes_ = 0;
  for (const auto& row : table_) benchmarked_sizes_ += measured.count(row.first) ? 1 : 0;
  reused_sizes_ = static_cast<int>(table_.size()) - benchmarked_sizes_;
  const ConvParams& p = params_;
  Plan plan = forced_micro_batch > 0 ? ForcedPlanWithin(forced_micro_batch, workspace_limit)
                                     : PlanWithin(workspace_limit);
  if (plan.empty()) {
    return Status::Internal("no cuDNN algorithm ran for " + std::string(PassName(pass_)) + " " +
                            p.ToString() + " within a workspace limit of " +
                            std::to_string(workspace_limit) + " bytes");
  }
  {
    std::lock_guard<std::mutex> lock(plan_mu_);
    plan_ = std::move(plan);
    limit_ = workspace_limit;
  }
  benchmarked_ = true;
  *planned_now = true;
  return Status();
}

void CudnnKernel::Seed(PerfTable table, std::vector<CudnnAlgo> algos,
                       std::set<int64_t> pressured, PrunedEngines pruned) {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  if (benchmarked_) return;
  seed_table_ = std::move(table);
  seed_algos_ = std::move(algos);
  seed_pressured_ = std::move(pressured);
  seed_roomy_ = seed_table_;
  for (int64_t size : seed_pressured_) seed_roomy_.erase(size);
  seed_pruned_ = std::move(pruned);
  seeded_ = true;
}

bool CudnnKernel::planned() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return benchmarked_;
}

std::vector<int> CudnnKernel::benchmark_devices() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return benchmark_devices_;
}

bool CudnnKernel::seeded() const {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  return seeded_;
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
  std::lock_guard<std::mutex> lock(pressured_mu_);
  return pressured_;
}

PrunedEngines CudnnKernel::pruned_engines() const {
  std::lock_guard<std::mutex> lock(pressured_mu_);
  return pruned_;
}

Plan CudnnKernel::plan() const {
  std::lock_guard<std::mutex> lock(plan_mu_);
  return plan_;
}

int64_t CudnnKernel::planned_limit() const {
  std::lock_guard<std::mutex> lock(plan_mu_);
  return limit_;
}

Status CudnnKernel::Replan(int64_t workspace_limit) {
  std::lock_guard<std::mutex> bench_lock(bench_mu_);
  if (!benchmarked_) {
    return Status::InvalidArgument("the kernel has not been benchmarked yet: run it once first");
  }
  Plan plan = PlanWithin(workspace_limit);
  if (plan.empty()) {
    return Status::InvalidArgument("no benchmarked plan of " + params_.ToString() +
                                   " fits in " + std::to_string(workspace_limit) + " bytes");
  }
  std::lock_guard<std::mutex> lock(plan_mu_);
  plan_ = std::move(plan);
  limit_ = workspace_limit;
  divided_ = true;
  return Status();
}

bool CudnnKernel::divided() const {
  std::lock_guard<std::mutex> lock(plan_mu_);
  return divided_;
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

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
