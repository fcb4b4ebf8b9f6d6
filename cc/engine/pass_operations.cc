#if GOOGLE_CUDA

#include "cc/engine/pass_operations.h"

#include <string>

#include "driver_functions.h"
#include "cc/engine/cuda_check.h"

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

Status PassOperations::FilterOperands(cudnnHandle_t handle, const PassTensors& t,
                                      const PassScratch& ps, const void** b, void** out) {
  *b = t.b;
  *out = t.out;
  if (t.filter_in_cudnn_layout) return Status();
  if (spec_.pass == Pass::kBackwardFilter) {
    *out = ps.filter;
    return Status();
  }
  UCUDNN_RETURN_IF_ERROR(TransformFilter(handle, t.b, ps.filter, /*to_cudnn=*/true));
  *b = ps.filter;
  return Status();
}

Status PassOperations::TransformFilter(cudnnHandle_t handle, const void* src, void* dst,
                                       bool to_cudnn) {
  FilterDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(descriptors_->GetFilterDescriptors(&d));
  const float one = 1.0f, zero = 0.0f;
  if (to_cudnn) {
    UCUDNN_CUDNN_OK(cudnnTransformTensor(handle, &one, d->tf.d, src, &zero, d->cudnn.d, dst));
  } else {
    UCUDNN_CUDNN_OK(cudnnTransformTensor(handle, &one, d->cudnn.d, src, &zero, d->tf.d, dst));
  }
  return Status();
}

cudnnStatus_t PassOperations::AccumulateFloat(cudnnHandle_t handle, const void* part, float* sum,
                                              const void* zero, bool probe) {
  FilterDescriptors* d = nullptr;
  if (!descriptors_->GetFilterDescriptors(&d).ok()) return CUDNN_STATUS_INTERNAL_ERROR;
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

Status PassOperations::StoreFloatSum(cudnnHandle_t handle, cudaStream_t stream, const float* sum,
                                     const void* zero, void* out) {
  FilterDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(descriptors_->GetFilterDescriptors(&d));
  // `out` holds the last micro-batch's gradient: cleared first, so that none
  // of it (an inf, say) can reach the result however beta = 0 is applied.
  const ConvParams& p = spec_.params;
  UCUDNN_CUDA_OK(cudaMemsetAsync(out, 0, p.filter_size() * DTypeSize(p.dtype), stream));
  const float one = 1.0f, none = 0.0f;
  UCUDNN_CUDNN_OK(cudnnOpTensor(handle, d->add.d, &one, d->cudnn_float.d, sum, &none,
                                d->zero_float.d, zero, &none, d->cudnn.d, out));
  return Status();
}

Status PassOperations::CopyPadded(cudaStream_t stream, int64_t size, const void* src, void* dst,
                                  bool into_padded) {
  // Contiguous runs: a row of W * C elements (NHWC) or of W elements (NCHW);
  // H of them per image (NHWC) or per channel plane (NCHW).
  const ConvParams& p = spec_.params;
  const int64_t elem = DTypeSize(p.dtype);
  const bool nhwc = p.layout == Layout::kNHWC;
  const int64_t run = (nhwc ? p.in_width * p.in_channels : p.in_width) * elem;
  const int64_t padded_pitch =
      (nhwc ? geometry_.padded_w * p.in_channels : geometry_.padded_w) * elem;
  const int64_t planes = nhwc ? size : size * p.in_channels;
  cudaPitchedPtr packed = make_cudaPitchedPtr(const_cast<void*>(into_padded ? src : dst), run,
                                              run, p.in_height);
  cudaPitchedPtr padded = make_cudaPitchedPtr(const_cast<void*>(into_padded ? dst : src),
                                              padded_pitch, padded_pitch, geometry_.padded_h);
  const cudaPos interior = make_cudaPos(geometry_.extra_left * (nhwc ? p.in_channels : 1) * elem,
                                        geometry_.extra_top, 0);
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

Status PassOperations::AddBias(cudnnHandle_t handle, int64_t size, int math_type,
                               const void* bias, void* y) {
  FilterDescriptors* f = nullptr;
  UCUDNN_RETURN_IF_ERROR(descriptors_->GetFilterDescriptors(&f));
  ConvDescriptors* d = nullptr;
  UCUDNN_RETURN_IF_ERROR(descriptors_->GetDescriptors(size, math_type, &d));
  const float one = 1.0f;
  UCUDNN_CUDNN_OK(cudnnAddTensor(handle, &one, f->bias.d, bias, &one, d->y.d, y));
  if (spec_.params.fusion.relu()) UCUDNN_RETURN_IF_ERROR(f->relu.Apply(handle, d->y, y));
  return Status();
}

}  // namespace ucudnn

#endif  // GOOGLE_CUDA
