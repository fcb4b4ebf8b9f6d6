#if GOOGLE_CUDA

#include "cc/engine/plan_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "cc/engine/cuda_check.h"
#include "cc/engine/executor.h"
#include "cc/engine/knobs.h"

namespace ucudnn {
namespace {

// The workspace of *chosen from `scratch`; where it cannot be allocated, the
// fastest plan of `table` whose workspace can be (down to zero workspace)
// becomes *chosen. Returns: ResourceExhausted when no benchmarked plan needs
// less.
Status AllocateWorkspaceOrSmallerPlan(const PlanRunner& runner, const PerfTable& table,
                                      ScratchAllocator* scratch, Plan* chosen,
                                      void** workspace) {
  const ConvParams& params = runner.spec().params;
  while (true) {
    *workspace = chosen->workspace_bytes > 0
                     ? scratch->AllocateWorkspace(chosen->workspace_bytes)
                     : nullptr;
    if (*workspace != nullptr || chosen->workspace_bytes == 0) break;
    // The fastest plan of the table within less workspace, as Workspace
    // Reuse chooses it.
    Plan smaller = BestPlanWithAccumulator(table, params.batch, chosen->workspace_bytes - 1,
                                           runner.AccumulatorBytes());
    if (smaller.empty()) {
      return Status::ResourceExhausted(
          "could not allocate " + std::to_string(chosen->workspace_bytes) +
          " bytes of workspace and no benchmarked plan needs less");
    }
    *chosen = smaller;
  }
  return Status();
}

// Sets every byte of a convolution's two per-channel sums (`bytes` each)
// to `value`: 0 clears them, 0xFF fills them with NaN.
Status FillSums(float* sum, float* sum_of_squares, int64_t bytes, int value,
                cudaStream_t stream) {
  UCUDNN_CUDA_OK(cudaMemsetAsync(sum, value, bytes, stream));
  UCUDNN_CUDA_OK(cudaMemsetAsync(sum_of_squares, value, bytes, stream));
  return Status();
}

}  // namespace

Status StatisticsSums::Begin(cudaStream_t stream, int64_t channels, bool several,
                             const PassTensors& t, ScratchAllocator* scratch,
                             FusionPointers* fusion) {
  if (t.sum == nullptr || t.sum_of_squares == nullptr) {
    return Status::Internal("a statistics plan ran without its sums");
  }
  bytes_ = channels * static_cast<int64_t>(sizeof(float));
  if (!several) {
    fusion->sum = t.sum;
    fusion->sum_of_squares = t.sum_of_squares;
    return Status();
  }
  UCUDNN_RETURN_IF_ERROR(FillSums(t.sum, t.sum_of_squares, bytes_, 0, stream));
  // One micro-batch's two sums in one block.
  const int64_t stride = AlignedBytes(bytes_);
  partial_ = static_cast<float*>(scratch->Allocate(2 * stride));
  if (partial_ == nullptr) {
    return Status::ResourceExhausted("could not allocate " + std::to_string(2 * stride) +
                                     " bytes for a micro-batch's statistics");
  }
  partial_squares_ = reinterpret_cast<float*>(reinterpret_cast<char*>(partial_) + stride);
  fusion->sum = partial_;
  fusion->sum_of_squares = partial_squares_;
  UCUDNN_RETURN_IF_ERROR(desc_.SetBias(DType::kFloat, channels));
  return Status();
}

Status StatisticsSums::ClearPartial(cudaStream_t stream) {
  return FillSums(partial_, partial_squares_, bytes_, 0, stream);
}

Status StatisticsSums::AddPartial(cudnnHandle_t handle, const PassTensors& t) {
  const float one = 1.0f;
  UCUDNN_CUDNN_OK(cudnnAddTensor(handle, &one, desc_.d, partial_, &one, desc_.d, t.sum));
  UCUDNN_CUDNN_OK(
      cudnnAddTensor(handle, &one, desc_.d, partial_squares_, &one, desc_.d, t.sum_of_squares));
  return Status();
}

Status PlanRunner::RunWithStatistics(cudnnHandle_t handle, cudaStream_t stream,
                                     const MicroBatch& mb, const CudnnAlgo& algo,
                                     const PassTensors& t, const void* b, void* out,
                                     const FusionPointers& fusion, void* workspace,
                                     void* padded) {
  auto run = [&] {
    return RunMicroBatch(handle, stream, mb, algo, /*offset=*/0, /*accumulate=*/false, t.a, b,
                         out, fusion, workspace, padded);
  };
  const int64_t bytes = spec_.params.out_channels * static_cast<int64_t>(sizeof(float));
  auto clear_and_run = [&]() -> Status {
    UCUDNN_RETURN_IF_ERROR(FillSums(fusion.sum, fusion.sum_of_squares, bytes, 0, stream));
    return run();
  };
  {
    std::lock_guard<std::mutex> lock(stores_mu_);
    for (const auto& known : engine_stores_sums_) {
      if (known.first == algo) return known.second ? run() : clear_and_run();
    }
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  UCUDNN_CUDA_OK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return clear_and_run();
  UCUDNN_RETURN_IF_ERROR(FillSums(fusion.sum, fusion.sum_of_squares, bytes, 0xFF, stream));
  UCUDNN_RETURN_IF_ERROR(run());
  std::vector<float> sums(2 * spec_.params.out_channels);
  UCUDNN_CUDA_OK(cudaMemcpyAsync(sums.data(), fusion.sum, bytes, cudaMemcpyDeviceToHost, stream));
  UCUDNN_CUDA_OK(cudaMemcpyAsync(sums.data() + spec_.params.out_channels, fusion.sum_of_squares,
                                 bytes, cudaMemcpyDeviceToHost, stream));
  UCUDNN_CUDA_OK(cudaStreamSynchronize(stream));
  const bool stores =
      std::all_of(sums.begin(), sums.end(), [](float v) { return std::isfinite(v); });
  {
    std::lock_guard<std::mutex> lock(stores_mu_);
    engine_stores_sums_.emplace_back(algo, stores);
  }
  if (DebugOutput()) {
    std::fprintf(stderr, "tf_ucudnn: forward %s: statistics engine %s %s\n",
                 spec_.params.ToString().c_str(), CudnnAlgoName(spec_.pass, algo).c_str(),
                 stores ? "stores its sums (not cleared before its runs)"
                        : "adds into its sums (cleared before each run)");
  }
  return stores ? Status() : clear_and_run();
}

int64_t PlanRunner::AccumulatorBytes() const {
  const ConvParams& p = spec_.params;
  if (spec_.pass != Pass::kBackwardFilter || p.dtype == DType::kFloat ||
      float_accumulation_.load() < 0) {
    return 0;
  }
  return FloatAccumulatorBytes(p.filter_size());
}

Status PlanRunner::Run(CudnnHandle* handle, cudaStream_t stream, const Plan& plan,
                       const PerfTable& table, const std::vector<CudnnAlgo>& algos,
                       const PassTensors& t, ScratchAllocator* scratch, Plan* ran) {
  const ConvParams& params = spec_.params;
  const Pass pass = spec_.pass;
  // The filter's copy in cuDNN's layout comes first (none when the caller's
  // filter is in that layout); then the workspace: if the plan's does not
  // fit, take the fastest plan that does.
  PassScratch ps;
  UCUDNN_RETURN_IF_ERROR(AllocateFilter(params, t, scratch, &ps));
  Plan chosen = plan;
  void* workspace = nullptr;
  UCUDNN_RETURN_IF_ERROR(
      AllocateWorkspaceOrSmallerPlan(*this, table, scratch, &chosen, &workspace));
  int64_t max_size = 0;
  for (const MicroBatch& mb : chosen.micro_batches) max_size = std::max(max_size, mb.size);
  const bool asymmetric = !params.symmetric_padding();
  UCUDNN_RETURN_IF_ERROR(AllocatePadded(params, asymmetric, max_size,
                                        geometry_.padded_sample_elems, stream, scratch, &ps));
  std::lock_guard<std::mutex> handle_lock(handle->mu);
  UCUDNN_CUDNN_OK(cudnnSetStream(handle->handle, stream));
  const void* b = nullptr;
  void* out = nullptr;
  UCUDNN_RETURN_IF_ERROR(ops_.FilterOperands(handle->handle, t, ps, &b, &out));
  // Float32 accumulation (see AccumulatorBytes): the sum and the zero
  // region at the end of the plan's workspace, cleared on the stream.
  bool float_sum = chosen.accumulator_bytes > 0 && float_accumulation_.load() >= 0;
  float* sum = nullptr;
  const void* zero = nullptr;
  if (float_sum) {
    char* base = static_cast<char*>(workspace) + chosen.workspace_bytes - chosen.accumulator_bytes;
    sum = reinterpret_cast<float*>(base);
    zero = base + chosen.accumulator_bytes - kAccumulatorAlign;
    UCUDNN_CUDA_OK(cudaMemsetAsync(base, 0, chosen.accumulator_bytes, stream));
  }
  FusionPointers fusion = t.fusion();  // the sums: StatisticsSums's
  StatisticsSums sums;
  const bool one_statistics_run =
      params.fusion.statistics() && chosen.micro_batches.size() == 1;
  if (params.fusion.statistics()) {
    UCUDNN_RETURN_IF_ERROR(
        sums.Begin(stream, params.out_channels, !one_statistics_run, t, scratch, &fusion));
  }
  UCUDNN_RETURN_IF_ERROR(ExecutePlan(
      chosen, pass, [&](int64_t offset, const MicroBatch& mb, bool accumulate) -> Status {
        if (sums.partial()) UCUDNN_RETURN_IF_ERROR(sums.ClearPartial(stream));
        if (one_statistics_run) {
          return RunWithStatistics(handle->handle, stream, mb, algos[mb.algo], t, b, out, fusion,
                                   workspace, ps.padded);
        }
        if (!float_sum) {
          UCUDNN_RETURN_IF_ERROR(RunMicroBatch(handle->handle, stream, mb, algos[mb.algo],
                                               offset, accumulate, t.a, b, out, fusion,
                                               workspace, ps.padded));
          return sums.partial() ? sums.AddPartial(handle->handle, t) : Status();
        }
        // This micro-batch's own gradient (beta = 0), added in float32.
        UCUDNN_RETURN_IF_ERROR(RunMicroBatch(handle->handle, stream, mb, algos[mb.algo], offset,
                                             /*accumulate=*/false, t.a, b, out, fusion,
                                             workspace, ps.padded));
        const bool probe = !accumulate && float_accumulation_.load() == 0;
        const cudnnStatus_t added = ops_.AccumulateFloat(handle->handle, out, sum, zero, probe);
        if (added == CUDNN_STATUS_SUCCESS) {
          if (probe) float_accumulation_.store(1);
          return Status();
        }
        if (probe) {
          // cuDNN refuses the type mix: `out` holds this first micro-batch, and
          // the others add to it in the element type (beta = 1), as before.
          int unknown = 0;
          if (float_accumulation_.compare_exchange_strong(unknown, -1)) {
            std::fprintf(stderr,
                         "tf_ucudnn: cudnnOpTensor does not add %s into float32 here (%s); "
                         "%s %s accumulates its micro-batches in %s\n",
                         DTypeName(params.dtype), cudnnGetErrorString(added), PassName(pass),
                         params.ToString().c_str(), DTypeName(params.dtype));
          }
          float_sum = false;
          return Status();
        }
        return Status::Internal(std::string("cudnnOpTensor (float32 accumulation) failed: ") +
                                cudnnGetErrorString(added));
      }));
  if (float_sum) {
    UCUDNN_RETURN_IF_ERROR(ops_.StoreFloatSum(handle->handle, stream, sum, zero, out));
  }
  if (pass == Pass::kBackwardFilter && !t.filter_in_cudnn_layout) {
    UCUDNN_RETURN_IF_ERROR(
        ops_.TransformFilter(handle->handle, ps.filter, t.out, /*to_cudnn=*/false));
  }
  *ran = chosen;
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
