// CudnnKernel::Run: one path for every plan. The filter goes into cuDNN's
// layout (unless it is there already: XLA's custom calls), each micro-batch
// runs with its candidate (a legacy algorithm or a graph-API engine,
// RunMicroBatch), backward-filter micro-batches accumulate (in float32 for
// float16/bfloat16 where cuDNN allows), and the filter gradient goes back
// into TF's layout (or stays in cuDNN's). Nothing is synchronised.
#if GOOGLE_CUDA

#include "cc/engine/plan_execution.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "cc/engine/cuda_check.h"
#include "cc/engine/cudnn_kernel.h"
#include "cc/engine/executor.h"

namespace ucudnn {

int64_t FilterCopyBytes(const ConvParams& p, const PassTensors& t) {
  return t.filter_in_cudnn_layout ? 0 : p.filter_size() * DTypeSize(p.dtype);
}

Status AllocateFilter(const ConvParams& p, const PassTensors& t, ScratchAllocator* scratch,
                      PassScratch* ps) {
  const int64_t filter_bytes = FilterCopyBytes(p, t);
  if (filter_bytes == 0) return Status();
  ps->filter = scratch->Allocate(filter_bytes);
  if (ps->filter == nullptr) {
    return Status::ResourceExhausted("could not allocate " + std::to_string(filter_bytes) +
                                     " bytes for the filter in cuDNN layout");
  }
  return Status();
}

// The zeroed buffer of one explicitly padded micro-batch of up to `max_size`
// samples, when padding is asymmetric.
Status AllocatePadded(const ConvParams& p, bool asymmetric, int64_t max_size,
                             int64_t padded_sample_elems, cudaStream_t stream,
                             ScratchAllocator* scratch, PassScratch* ps) {
  if (asymmetric) {
    const int64_t bytes = max_size * padded_sample_elems * DTypeSize(p.dtype);
    ps->padded = scratch->Allocate(bytes);
    if (ps->padded == nullptr) {
      return Status::ResourceExhausted("could not allocate " + std::to_string(bytes) +
                                       " bytes for the explicitly padded micro-batch");
    }
    UCUDNN_CUDA_OK(cudaMemsetAsync(ps->padded, 0, bytes, stream));
  }
  return Status();
}

Status CudnnKernel::FilterOperands(cudnnHandle_t handle, const PassTensors& t,
                                   const PassScratch& ps, const void** b, void** out) {
  *b = t.b;
  *out = t.out;
  if (t.filter_in_cudnn_layout) return Status();
  if (pass_ == Pass::kBackwardFilter) {
    *out = ps.filter;
    return Status();
  }
  UCUDNN_RETURN_IF_ERROR(TransformFilter(handle, t.b, ps.filter, /*to_cudnn=*/true));
  *b = ps.filter;
  return Status();
}

Status CudnnKernel::TransformFilter(cudnnHandle_t handle, const void* src, void* dst,
                                    bool to_cudnn) {
  FilterDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetFilterDescriptors(&d));
  const float one = 1.0f, zero = 0.0f;
  if (to_cudnn) {
    UCUDNN_CUDNN_OK(cudnnTransformTensor(handle, &one, d->tf.d, src, &zero, d->cudnn.d, dst));
  } else {
    UCUDNN_CUDNN_OK(cudnnTransformTensor(handle, &one, d->cudnn.d, src, &zero, d->tf.d, dst));
  }
  return Status();
}

cudnnStatus_t CudnnKernel::AccumulateFloat(cudnnHandle_t handle, const void* part, float* sum,
                                           const void* zero, bool probe) {
  FilterDescriptors* d = nullptr;
  if (!GetFilterDescriptors(&d).ok()) return CUDNN_STATUS_INTERNAL_ERROR;
  const float one = 1.0f, none = 0.0f;
  // sum = 1 * part + 0 * zero + 1 * sum: T + T -> float32.
  const cudnnStatus_t added = cudnnOpTensor(handle, d->add.d, &one, d->cudnn.d, part, &none,
                                            d->zero_t.d, zero, &one, d->cudnn_float.d, sum);
  if (added != CUDNN_STATUS_SUCCESS || !probe) return added;
  // StoreFloatSum's float32 -> T, tried on one element of the zero region
  // (it writes a zero there), so that a refusal is known before any
  // micro-batch depends on it.
  void* probe_out = static_cast<char*>(const_cast<void*>(zero)) + kProbeOffset;
  return cudnnOpTensor(handle, d->add.d, &one, d->zero_float.d, zero, &none, d->zero_float.d,
                       zero, &none, d->zero_t.d, probe_out);
}

Status CudnnKernel::StoreFloatSum(cudnnHandle_t handle, cudaStream_t stream, const float* sum,
                                  const void* zero, void* out) {
  FilterDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetFilterDescriptors(&d));
  // `out` holds the last micro-batch's gradient: cleared first, so that none
  // of it (an inf, say) can reach the result however beta = 0 is applied.
  UCUDNN_CUDA_OK(cudaMemsetAsync(out, 0, params_.filter_size() * DTypeSize(params_.dtype),
                                 stream));
  const float one = 1.0f, none = 0.0f;
  UCUDNN_CUDNN_OK(cudnnOpTensor(handle, d->add.d, &one, d->cudnn_float.d, sum, &none,
                                d->zero_float.d, zero, &none, d->cudnn.d, out));
  return Status();
}

Status CudnnKernel::CopyPadded(cudaStream_t stream, int64_t size, const void* src, void* dst,
                               bool into_padded) {
  // Contiguous runs: a row of W * C elements (NHWC) or of W elements (NCHW);
  // H of them per image (NHWC) or per channel plane (NCHW).
  const ConvParams& p = params_;
  const int64_t elem = DTypeSize(p.dtype);
  const bool nhwc = p.layout == Layout::kNHWC;
  const int64_t run = (nhwc ? p.in_width * p.in_channels : p.in_width) * elem;
  const int64_t padded_pitch = (nhwc ? padded_w_ * p.in_channels : padded_w_) * elem;
  const int64_t planes = nhwc ? size : size * p.in_channels;
  cudaPitchedPtr packed = make_cudaPitchedPtr(const_cast<void*>(into_padded ? src : dst), run,
                                              run, p.in_height);
  cudaPitchedPtr padded = make_cudaPitchedPtr(const_cast<void*>(into_padded ? dst : src),
                                              padded_pitch, padded_pitch, padded_h_);
  const cudaPos interior =
      make_cudaPos(extra_left_ * (nhwc ? p.in_channels : 1) * elem, extra_top_, 0);
  cudaMemcpy3DParms copy = {};
  if (into_padded) {
    copy.srcPtr = packed;
    copy.dstPtr = padded;
    copy.dstPos = interior;
  } else {
    copy.srcPtr = padded;
    copy.srcPos = interior;
    copy.dstPtr = packed;
  }
  copy.extent = make_cudaExtent(run, p.in_height, planes);
  copy.kind = cudaMemcpyDeviceToDevice;
  UCUDNN_CUDA_OK(cudaMemcpy3DAsync(&copy, stream));
  return Status();
}

Status CudnnKernel::AddBias(cudnnHandle_t handle, int64_t size, int math_type, const void* bias,
                            void* y) {
  FilterDescriptors* f = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetFilterDescriptors(&f));
  ConvDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetDescriptors(size, math_type, &d));
  const float one = 1.0f;
  UCUDNN_CUDNN_OK(cudnnAddTensor(handle, &one, f->bias.d, bias, &one, d->y.d, y));
  if (params_.relu) UCUDNN_RETURN_IF_ERROR(f->relu.Apply(handle, d->y, y));
  return Status();
}

Status CudnnKernel::RunMicroBatch(cudnnHandle_t handle, cudaStream_t stream,
                                  const MicroBatch& mb, int64_t offset, bool accumulate,
                                  const void* a, const void* b, void* out, const void* bias,
                                  void* workspace, void* padded) {
  const ConvParams& p = params_;
  const CudnnAlgo& algo = algos_[mb.algo];
  if (algo.graph()) {
    return RunGraphMicroBatch(handle, stream, mb, algo.engine, offset, accumulate, a, b, out,
                              bias, workspace, padded);
  }
  ConvDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetDescriptors(mb.size, algo.math_type, &d));
  const int elem = DTypeSize(p.dtype);
  const int64_t in_off = offset * p.input_sample_size() * elem;
  const int64_t out_off = offset * p.output_sample_size() * elem;
  const bool asymmetric = padded != nullptr;
  const float one = 1.0f, zero = 0.0f;
  const size_t ws = mb.workspace_bytes;
  if (pass_ == Pass::kForward) {
    const void* x = static_cast<const char*>(a) + in_off;
    if (asymmetric) {
      UCUDNN_RETURN_IF_ERROR(CopyPadded(stream, mb.size, x, padded, /*into_padded=*/true));
      x = padded;
    }
    void* y = static_cast<char*>(out) + out_off;
    UCUDNN_CUDNN_OK(cudnnConvolutionForward(
        handle, &one, d->x.d, x, d->w.d, b, d->conv.d,
        static_cast<cudnnConvolutionFwdAlgo_t>(algo.algo), workspace, ws, &zero, d->y.d, y));
    if (p.bias) UCUDNN_RETURN_IF_ERROR(AddBias(handle, mb.size, algo.math_type, bias, y));
  } else if (pass_ == Pass::kBackwardData) {
    void* dx = asymmetric ? padded : static_cast<char*>(out) + in_off;
    UCUDNN_CUDNN_OK(cudnnConvolutionBackwardData(
        handle, &one, d->w.d, b, d->y.d, static_cast<const char*>(a) + out_off, d->conv.d,
        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo.algo), workspace, ws, &zero, d->x.d, dx));
    if (asymmetric) {
      UCUDNN_RETURN_IF_ERROR(CopyPadded(stream, mb.size, padded,
                                        static_cast<char*>(out) + in_off, /*into_padded=*/false));
    }
  } else {
    const void* x = static_cast<const char*>(a) + in_off;
    if (asymmetric) {
      UCUDNN_RETURN_IF_ERROR(CopyPadded(stream, mb.size, x, padded, /*into_padded=*/true));
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


Status CudnnKernel::RunGraphMicroBatch(cudnnHandle_t handle, cudaStream_t stream,
                                       const MicroBatch& mb, const GraphEngine& engine,
                                       int64_t offset, bool accumulate, const void* a,
                                       const void* b, void* out, const void* bias,
                                       void* workspace, void* padded) {
  const ConvParams& p = params_;
  const int64_t elem = DTypeSize(p.dtype);
  const int64_t in_off = offset * p.input_sample_size() * elem;
  const int64_t out_off = offset * p.output_sample_size() * elem;
  const bool asymmetric = padded != nullptr;
  const GraphPlan* plan = nullptr;
  UCUDNN_RETURN_IF_ERROR(GetGraphPlan(handle, mb.size, engine,
                                      pass_ == Pass::kBackwardFilter && accumulate, &plan));
  const void *x = nullptr, *w = b, *y = nullptr;
  if (pass_ == Pass::kBackwardData) {
    y = static_cast<const char*>(a) + out_off;
    x = asymmetric ? padded : static_cast<char*>(out) + in_off;
  } else {
    x = static_cast<const char*>(a) + in_off;
    if (asymmetric) {
      UCUDNN_RETURN_IF_ERROR(CopyPadded(stream, mb.size, x, padded, /*into_padded=*/true));
      x = padded;
    }
    if (pass_ == Pass::kForward) {
      y = static_cast<char*>(out) + out_off;
    } else {
      y = static_cast<const char*>(b) + out_off;
      w = out;
    }
  }
  // The bias (forward with one; nullptr else) starts at its buffer's base
  // at every micro-batch, and its graph tensor declares the same alignment.
  const int64_t alignment = GraphSpec(mb.size, accumulate, engine.transposed).alignment;
  for (const void* ptr : {x, w, y, bias}) {
    if (reinterpret_cast<uintptr_t>(ptr) % alignment != 0) {
      return Status::Internal("a tensor of " + std::string(PassName(pass_)) + " " +
                              p.ToString() + " is not aligned to " + std::to_string(alignment) +
                              " bytes, which cuDNN engine " + engine.Name() + " needs");
    }
  }
  UCUDNN_RETURN_IF_ERROR(plan->Execute(handle, x, w, y, workspace, bias));
  if (pass_ == Pass::kBackwardData && asymmetric) {
    UCUDNN_RETURN_IF_ERROR(CopyPadded(stream, mb.size, padded, static_cast<char*>(out) + in_off,
                                      /*into_padded=*/false));
  }
  return Status();
}

Status CudnnKernel::Run(CudnnHandle* handle, cudaStream_t stream, const Plan& plan,
                        const PassTensors& t, ScratchAllocator* scratch, Plan* ran) {
  // The filter's copy in cuDNN's layout comes first (none when the caller's
  // filter is in that layout); then the workspace: if the plan's does not
  // fit, take the fastest plan that does.
  PassScratch ps;
  UCUDNN_RETURN_IF_ERROR(AllocateFilter(params_, t, scratch, &ps));
  Plan chosen = plan;
  void* workspace = nullptr;
  while (true) {
    workspace =
        chosen.workspace_bytes > 0 ? scratch->AllocateWorkspace(chosen.workspace_bytes) : nullptr;
    if (workspace != nullptr || chosen.workspace_bytes == 0) break;
    Plan smaller = PlanWithin(chosen.workspace_bytes - 1);
    if (smaller.empty()) {
      return Status::ResourceExhausted(
          "could not allocate " + std::to_string(chosen.workspace_bytes) +
          " bytes of workspace and no benchmarked plan needs less");
    }
    chosen = smaller;
  }
  int64_t max_size = 0;
  for (const MicroBatch& mb : chosen.micro_batches) max_size = std::max(max_size, mb.size);
  const bool asymmetric = !params_.symmetric_padding();
  UCUDNN_RETURN_IF_ERROR(AllocatePadded(params_, asymmetric, max_size, padded_sample_elems(),
                                        stream, scratch, &ps));
  std::lock_guard<std::mutex> handle_lock(handle->mu);
  UCUDNN_CUDNN_OK(cudnnSetStream(handle->handle, stream));
  const void* b = nullptr;
  void* out = nullptr;
  UCUDNN_RETURN_IF_ERROR(FilterOperands(handle->handle, t, ps, &b, &out));
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
      chosen, pass_, [&](int64_t offset, const MicroBatch& mb, bool accumulate) -> Status {
        if (!float_sum) {
          return RunMicroBatch(handle->handle, stream, mb, offset, accumulate, t.a, b, out,
                               t.bias, workspace, ps.padded);
        }
        // This micro-batch's own gradient (beta = 0), added in float32.
        UCUDNN_RETURN_IF_ERROR(RunMicroBatch(handle->handle, stream, mb, offset,
                                             /*accumulate=*/false, t.a, b, out, t.bias,
                                             workspace, ps.padded));
        const bool probe = !accumulate && float_accumulation_.load() == 0;
        const cudnnStatus_t added = AccumulateFloat(handle->handle, out, sum, zero, probe);
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
                         DTypeName(params_.dtype), cudnnGetErrorString(added), PassName(pass_),
                         params_.ToString().c_str(), DTypeName(params_.dtype));
          }
          float_sum = false;
          return Status();
        }
        return Status::Internal(std::string("cudnnOpTensor (float32 accumulation) failed: ") +
                                cudnnGetErrorString(added));
      }));
  if (float_sum) UCUDNN_RETURN_IF_ERROR(StoreFloatSum(handle->handle, stream, sum, zero, out));
  if (pass_ == Pass::kBackwardFilter && !t.filter_in_cudnn_layout) {
    UCUDNN_RETURN_IF_ERROR(TransformFilter(handle->handle, ps.filter, t.out, /*to_cudnn=*/false));
  }
  *ran = chosen;
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
