#if GOOGLE_CUDA

#include "cc/engine/plan_runner.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include "cc/engine/cuda_check.h"
#include "cc/engine/executor.h"

namespace ucudnn {

int64_t PlanRunner::AccumulatorBytes() const {
  const ConvParams& p = spec_.params;
  if (spec_.pass != Pass::kBackwardFilter || p.dtype == DType::kFloat ||
      float_accumulation_.load() < 0) {
    return 0;
  }
  return FloatAccumulatorBytes(p.filter_size());
}

Status PlanRunner::RunMicroBatch(cudnnHandle_t handle, cudaStream_t stream, const MicroBatch& mb,
                                 const CudnnAlgo& algo, int64_t offset, bool accumulate,
                                 const void* a, const void* b, void* out, const void* bias,
                                 void* workspace, void* padded) {
  const ConvParams& p = spec_.params;
  const Pass pass = spec_.pass;
  if (algo.graph()) {
    return RunGraphMicroBatch(handle, stream, mb, algo.engine, offset, accumulate, a, b, out,
                              bias, workspace, padded);
  }
  ConvDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(descriptors_.GetDescriptors(mb.size, algo.math_type, &d));
  const int elem = DTypeSize(p.dtype);
  const int64_t in_off = offset * p.input_sample_size() * elem;
  const int64_t out_off = offset * p.output_sample_size() * elem;
  const bool asymmetric = padded != nullptr;
  const float one = 1.0f, zero = 0.0f;
  const size_t ws = mb.workspace_bytes;
  if (pass == Pass::kForward) {
    const void* x = static_cast<const char*>(a) + in_off;
    if (asymmetric) {
      UCUDNN_RETURN_IF_ERROR(ops_.CopyPadded(stream, mb.size, x, padded, /*into_padded=*/true));
      x = padded;
    }
    void* y = static_cast<char*>(out) + out_off;
    UCUDNN_CUDNN_OK(cudnnConvolutionForward(
        handle, &one, d->x.d, x, d->w.d, b, d->conv.d,
        static_cast<cudnnConvolutionFwdAlgo_t>(algo.algo), workspace, ws, &zero, d->y.d, y));
    if (p.fusion.bias()) {
      UCUDNN_RETURN_IF_ERROR(ops_.AddBias(handle, mb.size, algo.math_type, bias, y));
    }
  } else if (pass == Pass::kBackwardData) {
    void* dx = asymmetric ? padded : static_cast<char*>(out) + in_off;
    UCUDNN_CUDNN_OK(cudnnConvolutionBackwardData(
        handle, &one, d->w.d, b, d->y.d, static_cast<const char*>(a) + out_off, d->conv.d,
        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo.algo), workspace, ws, &zero, d->x.d, dx));
    if (asymmetric) {
      UCUDNN_RETURN_IF_ERROR(ops_.CopyPadded(stream, mb.size, padded,
                                        static_cast<char*>(out) + in_off, /*into_padded=*/false));
    }
  } else {
    const void* x = static_cast<const char*>(a) + in_off;
    if (asymmetric) {
      UCUDNN_RETURN_IF_ERROR(ops_.CopyPadded(stream, mb.size, x, padded, /*into_padded=*/true));
      x = padded;
    }
    // Every micro-batch writes the whole filter gradient: accumulate after the first.
    UCUDNN_CUDNN_OK(cudnnConvolutionBackwardFilter(
        handle, &one, d->x.d, x, d->y.d, static_cast<const char*>(b) + out_off, d->conv.d,
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo.algo), workspace, ws,
        accumulate ? &one : &zero, d->w.d, out));
  }
  return Status();
}


Status PlanRunner::RunGraphMicroBatch(cudnnHandle_t handle, cudaStream_t stream,
                                      const MicroBatch& mb, const GraphEngine& engine,
                                      int64_t offset, bool accumulate, const void* a,
                                      const void* b, void* out, const void* bias,
                                      void* workspace, void* padded) {
  const ConvParams& p = spec_.params;
  const Pass pass = spec_.pass;
  const int64_t elem = DTypeSize(p.dtype);
  const int64_t in_off = offset * p.input_sample_size() * elem;
  const int64_t out_off = offset * p.output_sample_size() * elem;
  const bool asymmetric = padded != nullptr;
  const GraphPlan* plan = nullptr;
  UCUDNN_RETURN_IF_ERROR(descriptors_.GetGraphPlan(
      handle, mb.size, engine, pass == Pass::kBackwardFilter && accumulate, &plan));
  const void *x = nullptr, *w = b, *y = nullptr;
  if (pass == Pass::kBackwardData) {
    y = static_cast<const char*>(a) + out_off;
    x = asymmetric ? padded : static_cast<char*>(out) + in_off;
  } else {
    x = static_cast<const char*>(a) + in_off;
    if (asymmetric) {
      UCUDNN_RETURN_IF_ERROR(ops_.CopyPadded(stream, mb.size, x, padded, /*into_padded=*/true));
      x = padded;
    }
    if (pass == Pass::kForward) {
      y = static_cast<char*>(out) + out_off;
    } else {
      y = static_cast<const char*>(b) + out_off;
      w = out;
    }
  }
  // The bias (forward with one; nullptr else) starts at its buffer's base
  // at every micro-batch, and its graph tensor declares the same alignment.
  const int64_t alignment =
      descriptors_.GraphSpec(mb.size, accumulate, engine.transposed).alignment;
  for (const void* ptr : {x, w, y, bias}) {
    if (reinterpret_cast<uintptr_t>(ptr) % alignment != 0) {
      return Status::Internal("a tensor of " + std::string(PassName(pass)) + " " +
                              p.ToString() + " is not aligned to " + std::to_string(alignment) +
                              " bytes, which cuDNN engine " + engine.Name() + " needs");
    }
  }
  UCUDNN_RETURN_IF_ERROR(plan->Execute(handle, x, w, y, workspace, bias));
  if (pass == Pass::kBackwardData && asymmetric) {
    UCUDNN_RETURN_IF_ERROR(ops_.CopyPadded(stream, mb.size, padded,
                                           static_cast<char*>(out) + in_off,
                                           /*into_padded=*/false));
  }
  return Status();
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
  while (true) {
    workspace =
        chosen.workspace_bytes > 0 ? scratch->AllocateWorkspace(chosen.workspace_bytes) : nullptr;
    if (workspace != nullptr || chosen.workspace_bytes == 0) break;
    // The fastest plan of the table within less workspace, as Workspace
    // Reuse chooses it.
    Plan smaller = BestPlanWithAccumulator(table, params.batch, chosen.workspace_bytes - 1,
                                           AccumulatorBytes());
    if (smaller.empty()) {
      return Status::ResourceExhausted(
          "could not allocate " + std::to_string(chosen.workspace_bytes) +
          " bytes of workspace and no benchmarked plan needs less");
    }
    chosen = smaller;
  }
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
  UCUDNN_RETURN_IF_ERROR(ExecutePlan(
      chosen, pass, [&](int64_t offset, const MicroBatch& mb, bool accumulate) -> Status {
        if (!float_sum) {
          return RunMicroBatch(handle->handle, stream, mb, algos[mb.algo], offset, accumulate,
                               t.a, b, out, t.bias, workspace, ps.padded);
        }
        // This micro-batch's own gradient (beta = 0), added in float32.
        UCUDNN_RETURN_IF_ERROR(RunMicroBatch(handle->handle, stream, mb, algos[mb.algo], offset,
                                             /*accumulate=*/false, t.a, b, out, t.bias,
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
