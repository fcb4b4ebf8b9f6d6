// MicroBatchRunner: one micro-batch's cuDNN calls (see micro_batch_runner.h).
#if GOOGLE_CUDA

#include "cc/engine/micro_batch_runner.h"

#include <cstdint>
#include <string>

#include "cc/engine/cuda_check.h"

namespace ucudnn {

Status MicroBatchRunner::Run(cudnnHandle_t handle, cudaStream_t stream, const MicroBatch& mb,
                             const CudnnAlgo& algo, int64_t offset, bool accumulate,
                             const void* a, const void* b, void* out,
                             const FusionPointers& fusion, void* workspace, void* padded) {
  const ConvParams& p = spec_.params;
  const Pass pass = spec_.pass;
  if (algo.graph()) {
    return RunGraph(handle, stream, mb, algo.engine, offset, accumulate, a, b, out, fusion,
                    workspace, padded);
  }
  if (p.fusion.statistics() || p.fusion.input_scale_bias()) {
    return Status::Internal("a legacy algorithm runs no statistics epilogue or input prologue");
  }
  const void* bias = fusion.bias;
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

Status MicroBatchRunner::RunGraph(cudnnHandle_t handle, cudaStream_t stream, const MicroBatch& mb,
                                  const GraphEngine& engine, int64_t offset, bool accumulate,
                                  const void* a, const void* b, void* out,
                                  const FusionPointers& fusion, void* workspace, void* padded) {
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
  for (const void* ptr : {x, w, y, fusion.bias, static_cast<const void*>(fusion.sum),
                          static_cast<const void*>(fusion.sum_of_squares), fusion.input_scale,
                          fusion.input_bias}) {
    if (reinterpret_cast<uintptr_t>(ptr) % alignment != 0) {
      return Status::Internal("a tensor of " + std::string(PassName(pass)) + " " +
                              p.ToString() + " is not aligned to " + std::to_string(alignment) +
                              " bytes, which cuDNN engine " + engine.Name() + " needs");
    }
  }
  UCUDNN_RETURN_IF_ERROR(plan->Execute(handle, x, w, y, workspace, fusion));
  if (pass == Pass::kBackwardData && asymmetric) {
    UCUDNN_RETURN_IF_ERROR(ops_.CopyPadded(stream, mb.size, padded,
                                           static_cast<char*>(out) + in_off,
                                           /*into_padded=*/false));
  }
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
